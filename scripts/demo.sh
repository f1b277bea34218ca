#!/usr/bin/env bash
# A walk-through of pimem on a throw-away project: write, snapshot, index, recall, forget.
# memsearch runs with a home of its own here (config and database), using the offline model,
# so nothing of the user's ~/.memsearch is read or changed and no network is needed.
set -euo pipefail

project=$(mktemp -d)
trap 'rm -rf "$project"' EXIT
mkdir -p "$project/repo/.git" "$project/repo/src" "$project/home/.memsearch"
repo="$project/repo"
transcript="$project/session.jsonl"

model=$(pimem model install-offline --json)
field() { python3 -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$model" "$1"; }
export HOME="$project/home" HF_HOME="$(field hf_home)" HF_HUB_OFFLINE=1
# Each step below fixes its own clock (PIMEM_NOW), which one warm memory service could not share.
export PIMEM_SERVICE=off
cat > "$HOME/.memsearch/config.toml" <<TOML
[embedding]
provider = "$(field provider)"
model = "$(field model)"

[milvus]
uri = "$project/milvus.db"
TOML

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }
# The entry goes in on stdin: other local users can read a command line while it runs.
write() {
    local args=(--cwd "$repo/src" --session demo-session --turn "$3" --transcript "$transcript")
    printf '\n\033[1m$ echo "%s" | pimem write - %s\033[0m\n' "$2" "${args[*]}"
    printf '%s\n' "$2" | PIMEM_NOW="2026-08-13T$1" pimem write - "${args[@]}"
}

step pimem scope --cwd "$repo/src"
write 22:41 "- the user and the agent chose Redis for the hot cache, with 5 minute TTLs" a1b2c3d4
write 22:55 "- the agent fixed the login redirect loop by escaping the return URL" e5f6a7b8
write 23:05 "- the user prefers pytest fixtures to unittest setUp methods" c9d0e1f2
printf '\n--- %s ---\n' "$repo/.memsearch/memory/2026-08-13.md"
cat "$repo/.memsearch/memory/2026-08-13.md"
PIMEM_NOW=2026-08-13T23:10 step pimem snapshot --cwd "$repo"
echo
step pimem index --cwd "$repo"
step pimem search "why did the login keep redirecting" -k 2 --cwd "$repo"
chunk=$(pimem search "which cache did we pick" -k 1 --json --cwd "$repo" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["chunk_hash"])')
step pimem expand "$chunk" --cwd "$repo"
step pimem forget --chunk "$chunk" --cwd "$repo"
step pimem index --cwd "$repo"
step pimem search "which cache did we pick" -k 2 --cwd "$repo"
step pimem status --cwd "$repo"
step pimem plugins
