"""Team memory through git: after a pull, a teammate's memory is searchable with no manual
``pimem index``, in both clones, from the shell and in a running session: pimem's ranker reads
the day files themselves, and memsearch's ranker indexes them first. Real git, the real CLI and
``pimem serve`` on memsearch, Milvus Lite and the offline model."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import cast

import pytest
from bridge import Bridge

from pimem_core.scope import Scope
from pimem_core.types import Anchor, Entry
from pimem_plugins.memsearch.offline_model import OfflineModel
from pimem_plugins.memsearch.recall.service import INLINE_CHUNKS

from conftest import Result, make_pimem, run_cli

MEMSEARCH = str(Path(sys.executable).with_name("memsearch"))
GIT = {
    "GIT_AUTHOR_NAME": "pimem tests",
    "GIT_AUTHOR_EMAIL": "tests@pimem.invalid",
    "GIT_COMMITTER_NAME": "pimem tests",
    "GIT_COMMITTER_EMAIL": "tests@pimem.invalid",
}
CAUGHT_UP = "indexed {} new or changed since the last index run, before searching"
#: What a search says while part of the store is ranked by its words alone.
BY_WORDS = re.compile(
    r"ranked \d+ of \d+ chunks by meaning, the rest by their words; indexing in the background"
)
#: memsearch's ranker, which indexes what changed before it searches.
MEMSEARCH_RANKED = {"PIMEM_RANKER": "memsearch"}
ELSEWHERE = "The session's transcript is not on this machine"


def caught_up(files: str) -> str:
    """The line a search prints on stderr when it indexed *files* first."""
    return f"pimem: {CAUGHT_UP.format(files)}\n"


@pytest.fixture
def env(memsearch_home: Path, offline_model: OfflineModel) -> dict[str, str]:
    return {"HOME": str(memsearch_home), **offline_model.environment(), "PIMEM_DB_LINGER_MS": "0"}


def git(clone: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=clone,
        env={**os.environ, **GIT},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout


def pimem(env: dict[str, str], clone: Path, *args: str, day: str = "2026-08-13") -> Result:
    return run_cli(*args, "--cwd", str(clone), env={**env, "PIMEM_NOW": f"{day}T10:00"})


def ok(result: Result) -> str:
    assert result.code == 0, result.stderr
    return result.stdout


def write(env: dict[str, str], clone: Path, content: str, *, day: str, session: str) -> None:
    """An entry as an agent of *clone*'s owner writes it: anchored to a transcript on their
    machine, which the other clone's machine does not have."""
    ok(
        pimem(
            env,
            clone,
            "write",
            content,
            "--session",
            session,
            "--turn",
            "t1",
            "--transcript",
            f"/home/{session.split('-')[0]}/.pi/sessions/{session}.jsonl",
            day=day,
        )
    )


def write_day(env: dict[str, str], clone: Path, day: str, facts: list[str]) -> None:
    """A busy day of alice's, one entry a minute, written through pimem's store in process."""
    pimem = make_pimem(env)
    scope = pimem.resolve_scope(clone)
    transcript = "/home/alice/.pi/sessions/alice-2.jsonl"
    for minute, fact in enumerate(facts):
        entry = Entry(
            anchor=Anchor(session="alice-2", turn=f"t{minute}", transcript=transcript),
            content=fact,
            written_at=datetime.fromisoformat(f"{day}T09:00") + timedelta(minutes=minute),
        )
        pimem.append_entry(scope, entry)


def commit(clone: Path, message: str) -> None:
    git(clone, "add", ".memsearch/memory")
    git(clone, "commit", "-q", "-m", message)


def search(env: dict[str, str], clone: Path, query: str) -> tuple[str, list[dict[str, object]]]:
    """What a search printed on stderr, and its hits."""
    result = pimem(env, clone, "search", query, "-k", "10", "--json")
    return result.stderr, json.loads(ok(result))


def contents(hits: list[dict[str, object]]) -> str:
    return "\n".join(str(hit["content"]) for hit in hits)


def day_files(clone: Path) -> dict[str, bytes]:
    memory = clone / ".memsearch" / "memory"
    return {file.name: file.read_bytes() for file in sorted(memory.glob("*.md"))}


@pytest.fixture
def alice(tmp_path: Path, env: dict[str, str]) -> Path:
    """Alice's clone, with one day of her memory committed."""
    clone = tmp_path / "alice"
    clone.mkdir()
    git(clone, "init", "-q", "-b", "main")
    write(env, clone, "- chose Redis for the hot cache", day="2026-08-12", session="alice-1")
    write(env, clone, "- the ledger lives in Postgres", day="2026-08-12", session="alice-1")
    commit(clone, "alice: memory of 2026-08-12")
    return clone


def clone_of(alice: Path, name: str) -> Path:
    clone = alice.parent / name
    git(alice.parent, "clone", "-q", str(alice), name)
    return clone


def test_after_a_pull_both_clones_find_each_others_memory_without_an_index_run(
    env: dict[str, str], alice: Path
) -> None:
    bob = clone_of(alice, "bob")
    # A fresh clone: its collection was never built on this machine. The first search reads
    # the day files git brought (two chunks: embedded before it answers) and finds alice's
    # memory, with nothing to say.
    said, hits = search(env, bob, "which cache did we choose")
    assert said == ""
    assert "chose Redis for the hot cache" in contents(hits)
    assert {hit["source"] for hit in hits} == {str(bob / ".memsearch/memory/2026-08-12.md")}
    assert search(env, bob, "which cache did we choose")[0] == ""  # nothing changed since

    # Each writes a day of memory and commits it; each pulls the other's.
    write(env, alice, "- deploys go blue-green on Fridays", day="2026-08-14", session="alice-2")
    commit(alice, "alice: memory of 2026-08-14")
    write(env, bob, "- the login loop came from a stale cookie domain", day="2026-08-13",
          session="bob-1")  # fmt: skip
    commit(bob, "bob: memory of 2026-08-13")
    git(bob, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main")
    git(alice, "pull", "-q", "--no-rebase", "--no-edit", str(bob), "main")

    # bob: his own write (never indexed: `pimem write` only appends) and alice's pulled day.
    said, hits = search(env, bob, "how do we deploy")
    assert said == ""
    assert "deploys go blue-green on Fridays" in contents(hits)
    # alice: every file, as she never searched before, bob's pulled day among them.
    said, hits = search(env, alice, "why did the login loop")
    assert said == ""
    assert "the login loop came from a stale cookie domain" in contents(hits)
    for clone in (alice, bob):
        said, hits = search(env, clone, "cache deploy login ledger")
        assert said == ""
        assert all(
            fact in contents(hits)
            for fact in ("Redis", "Postgres", "blue-green", "stale cookie domain")
        )

    # Mesh parity: an index run (here `pimem index`; the memory service's worker runs the same
    # behind the requests) goes through memsearch into each clone's own collection (the
    # memsearch command finds the pulled entry there), and no day file was touched: both
    # clones hold the same bytes and git sees no change.
    ok(pimem(env, bob, "index"))
    found = subprocess.run(
        [
            MEMSEARCH,
            "search",
            "blue-green Fridays",
            "-c",
            Scope.derive_collection(bob),
            "--json-output",
        ],
        cwd=bob,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert "deploys go blue-green on Fridays" in json.loads(found.stdout)[0]["content"]
    assert day_files(alice) == day_files(bob)
    assert len(day_files(bob)) == 3
    for clone in (alice, bob):
        assert git(clone, "status", "--porcelain", "--", ".memsearch/memory") == ""


def test_a_teammates_anchor_reads_as_recorded_on_another_machine(
    env: dict[str, str], alice: Path
) -> None:
    bob = clone_of(alice, "bob")
    _, hits = search(env, bob, "which cache did we choose")
    best = next(hit for hit in hits if "Redis" in str(hit["content"]))
    text = ok(pimem(env, bob, "expand", str(best["chunk_hash"])))
    transcript = "/home/alice/.pi/sessions/alice-1.jsonl"
    assert text.endswith(
        "the entry above is all that was kept of it.\n"
        "session: alice-1 | turn: t1\ntranscript: alice-1.jsonl (written elsewhere)\n"
    )
    assert ELSEWHERE in text
    section = json.loads(ok(pimem(env, bob, "expand", str(best["chunk_hash"]), "--json")))
    assert section["anchor"]["transcript"] == transcript
    assert section["transcript_on_this_machine"] is False

    # L3 answers that the entry is all there is: exit 0, no error.
    read = run_cli("transcript", transcript, "--turn", "t1", env=env)
    assert (read.code, read.stderr) == (0, "")
    assert read.stdout.startswith(f"The transcript {transcript} is not on this machine")
    data = json.loads(ok(run_cli("transcript", transcript, "--json", env=env)))
    assert data == {"path": transcript, "turns": [], "on_this_machine": False}


def wait_for_the_start_catch_up(clone: Path) -> None:
    """Until the session's catch-up index run has recorded its state (a fresh clone: every day
    file is new to this machine), so that what follows is this test's doing alone."""
    state = clone / ".memsearch" / ".index-state.json"
    memory = clone / ".memsearch" / "memory"
    days = sorted(str(day) for day in memory.glob("*.md"))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if state.exists():
            recorded = json.loads(state.read_text())
            if recorded["status"] == "ok" and sorted(recorded["paths"]) == days:
                return
        time.sleep(0.05)
    raise AssertionError("the session's catch-up index run never finished")


def test_a_running_session_finds_a_pulled_day_on_its_next_search(
    env: dict[str, str], alice: Path
) -> None:
    bob = clone_of(alice, "bob")
    bridge = Bridge(env)
    try:
        started = bridge.call("session.start", session_id="bob-2", cwd=str(bob), transcript=None)
        assert "result" in started, started
        wait_for_the_start_catch_up(bob)
        before = bridge.call("memory.search", query="which cache did we choose")["result"]
        assert "chose Redis" in contents(before["hits"])

        # A whole day of alice's: more chunks than the read model embeds before a search.
        write_day(env, alice, "2026-08-14", [f"- service {n} moved to port {9000 + n}" for n in
                  range(INLINE_CHUNKS)] + ["- deploys go blue-green on Fridays"])  # fmt: skip
        commit(alice, "alice: memory of 2026-08-14")
        git(bob, "pull", "-q", "--no-rebase", "origin", "main")

        after = bridge.call("memory.search", query="how do we deploy on Fridays")["result"]
        notice, _, listed = after["text"].partition("\n\n")
        assert BY_WORDS.fullmatch(notice), notice
        # The chunks not embedded yet that share no word with the query are not among them.
        assert re.match(r"[1-5] memory chunk\(s\), best first", listed)
        best = after["hits"][0]
        assert "deploys go blue-green on Fridays" in str(best["content"])
        section = bridge.call("memory.expand", chunk_hash=best["chunk_hash"])["result"]
        assert ELSEWHERE in section["text"]
        transcript = section["section"]["anchor"]["transcript"]
        read = bridge.call("memory.transcript", transcript_path=transcript, turn="t1")["result"]
        assert (read["turns"], read["on_this_machine"]) == ([], False)
        # Once the worker embedded the pulled day, nothing changed, and nothing is said.
        deadline = time.monotonic() + 60
        while True:
            again = bridge.call("memory.search", query="how do we deploy on Fridays")["result"]
            if again["text"].startswith("5 memory chunk(s), best first"):
                break
            assert time.monotonic() < deadline, again["text"]
            time.sleep(0.2)
        assert "deploys go blue-green on Fridays" in str(again["hits"][0]["content"])
    finally:
        bridge.close()


def test_a_pulled_day_is_found_by_the_next_search_however_many_entries_it_holds(
    env: dict[str, str], alice: Path
) -> None:
    """bob's read model is cached from his first search; the pulled day has more chunks than
    a search embeds before it answers, and the next search finds its entries all the same: it
    takes them in by their words, says so, and embeds its best candidates before it ranks."""
    bob = clone_of(alice, "bob")
    search(env, bob, "which cache did we choose")
    facts = [f"- service {n} moved to port {9000 + n}" for n in range(INLINE_CHUNKS)]
    write_day(env, alice, "2026-08-14", [*facts, "- deploys go blue-green on Fridays"])
    commit(alice, "alice: memory of 2026-08-14")
    git(bob, "pull", "-q", "--no-rebase", "origin", "main")
    said, hits = search(env, bob, "how do we deploy on Fridays")
    assert BY_WORDS.fullmatch(said.removeprefix("pimem: ").rstrip("\n")), said
    assert "deploys go blue-green on Fridays" in str(hits[0]["content"])
    # The first hit was ranked by its meaning: its facts were embedded before it was shown.
    legs = {str(leg["name"]): leg["score"] for leg in cast(list[dict[str, float]], hits[0]["legs"])}
    assert legs["dense"] > 0
    said, hits = search(env, bob, "which port did service 7 move to")
    assert "service 7 moved to port 9007" in str(hits[0]["content"])


def test_a_search_indexes_as_much_as_its_budget_allows_and_the_next_goes_on(
    env: dict[str, str], alice: Path
) -> None:
    """memsearch's ranker searches the collection: with no time to spare
    (``PIMEM_CATCH_UP_MS=0``) each search indexes one day file, the newest first, and says how
    many are left."""
    for day in ("2026-08-13", "2026-08-14"):
        write(env, alice, f"- the release of {day} shipped", day=day, session="alice-2")
    commit(alice, "alice: two more days")
    bob = clone_of(alice, "bob")
    hurried = {**env, **MEMSEARCH_RANKED, "PIMEM_CATCH_UP_MS": "0"}
    said = [search(hurried, bob, "which release shipped")[0] for _ in range(4)]
    assert said == [
        "pimem: indexed 1 of 3 daily memory files new or changed since the last index run, "
        "before searching; a search spends at most 0 s on it: the next one indexes more, or "
        "`pimem index` indexes them all now\n",
        "pimem: indexed 1 of 2 daily memory files new or changed since the last index run, "
        "before searching; a search spends at most 0 s on it: the next one indexes more, or "
        "`pimem index` indexes them all now\n",
        caught_up("1 daily memory file"),
        "",
    ]
    status = json.loads(ok(pimem(env, bob, "status", "--json")))
    assert status["chunks"]["indexed_chunks"] == 4


def test_a_collection_gone_though_the_ledger_vouched_for_it_is_built_again(
    env: dict[str, str], alice: Path
) -> None:
    """The database was reset behind pimem's back: the search finds the collection missing,
    forgets what the ledger said and indexes every day file again, once."""
    memsearch_ranked = {**env, **MEMSEARCH_RANKED}
    assert search(memsearch_ranked, alice, "which cache")[0] == caught_up("1 daily memory file")
    subprocess.run(
        [MEMSEARCH, "reset", "--yes", "-c", Scope.derive_collection(alice)],
        cwd=alice,
        env={**os.environ, **env},
        capture_output=True,
        check=True,
        timeout=60,
    )
    said, hits = search(memsearch_ranked, alice, "which cache")
    assert said == caught_up("1 daily memory file")
    assert "chose Redis" in contents(hits)


def test_a_catch_up_that_cannot_index_fails_the_search_in_one_line(
    env: dict[str, str], alice: Path
) -> None:
    """No model to embed with: the first search in a fresh clone cannot build the collection,
    and says why in one line (not that the search used what the index holds)."""
    bob = clone_of(alice, "bob")
    config = Path(env["HOME"]) / ".memsearch" / "config.toml"
    config.write_text(config.read_text().replace("local/all-MiniLM-L6-v2", "local/not-here"))
    result = pimem(env, bob, "search", "which cache")
    assert result.code == 1
    assert result.stderr.startswith("pimem: error: ")
    assert "local/not-here" in result.stderr
    assert result.stderr.count("\n") == 1


def test_a_session_start_indexes_only_what_changed_and_nothing_when_nothing_did(
    env: dict[str, str], alice: Path
) -> None:
    ok(pimem(env, alice, "index"))
    state = alice / ".memsearch" / ".index-state.json"
    indexed = state.read_bytes()

    def session(number: int) -> None:
        bridge = Bridge(env)
        try:
            started = bridge.call(
                "session.start", session_id=f"alice-s{number}", cwd=str(alice), transcript=None
            )
            assert "result" in started, started
            # The shutdown waits for the session's index runs, its start's catch-up included.
            assert bridge.call("session.shutdown")["result"]["indexed_in_time"] is True
        finally:
            bridge.close()

    # Up to date: the start runs no index (memsearch's state of the last run stays as it was).
    session(1)
    assert state.read_bytes() == indexed
    # Another agent appended to a day while no session ran: the next start indexes that file.
    day = alice / ".memsearch" / "memory" / "2026-08-12.md"
    with day.open("a", encoding="utf-8") as stream:
        stream.write(
            "\n### 12:00\n<!-- session:other turn:o1 transcript:/elsewhere/o.jsonl -->\n"
            "- the agent switched the queue from RabbitMQ to NATS JetStream\n"
        )
    session(2)
    recorded = json.loads(state.read_text())
    assert (recorded["status"], recorded["paths"]) == ("ok", [str(day.resolve())])
    assert "NATS" in contents(search(env, alice, "which message queue do we use")[1])
