#!/usr/bin/env bash
# A walk-through of the pimem CLI on a throw-away project: write, snapshot, scope, forget.
set -euo pipefail

project=$(mktemp -d)
trap 'rm -rf "$project"' EXIT
mkdir -p "$project/.git" "$project/src"
export PIMEM_NOW=2026-08-13T22:41
transcript="$project/session.jsonl"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

step pimem scope --cwd "$project/src"
step pimem write "- the user and the agent chose Redis for the hot cache, with 5 minute TTLs" \
    --cwd "$project/src" --session demo-session --turn a1b2c3d4 --transcript "$transcript"
PIMEM_NOW=2026-08-13T22:55 step pimem write "- the agent fixed the login redirect loop by escaping the return URL" \
    --cwd "$project/src" --session demo-session --turn e5f6a7b8 --transcript "$transcript"
printf '\n--- %s ---\n' "$project/.memsearch/memory/2026-08-13.md"
cat "$project/.memsearch/memory/2026-08-13.md"
step pimem snapshot --cwd "$project"
echo
step pimem forget --cwd "$project" --date 2026-08-13 --time 22:41
printf '\n--- %s ---\n' "$project/.memsearch/memory/2026-08-13.md"
cat "$project/.memsearch/memory/2026-08-13.md"
step pimem plugins
