"""A day file git left conflicted (no .gitattributes, both clones wrote on the same day), on
real memsearch, Milvus Lite and the offline model: status warns, no marker line is ever
returned by search or expand (pimem's ranker, memsearch's, and after another agent indexed the
file markers and all), a write and a capture made meanwhile are not lost, compaction refuses,
and ``pimem git resolve`` leaves every entry once."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from pimem_core import Pimem, hookimpl
from pimem_core.errors import PimemError
from pimem_core.paths import PimemPaths
from pimem_core.runtime.session import Session, SessionInfo
from pimem_core.types import (
    Anchor,
    BranchEntry,
    DayAddress,
    Distillation,
    DistillRequest,
    Entry,
    Scope,
    SearchQuery,
)

from conftest import make_pimem, run_cli

DAY = "2026-08-13"
MARKER = re.compile(r"^(<{7}|={7}|>{7}|\|{7})", re.MULTILINE)
FACTS = {
    "base": "- the team keeps Postgres as the source of truth for billing",
    "alice": "- alice chose Redis with five minute TTLs for the hot cache",
    "bob": "- bob fixed the login redirect loop by escaping the return URL",
    "write": "- the nightly export job moved to 02:00 UTC to avoid the backup window",
    "capture": "- the user asked about flaky CI and the agent pinned pytest-xdist to 3.5",
}
QUERIES = {
    "base": "where is billing data kept",
    "alice": "which cache did alice choose",
    "bob": "how was the login loop fixed",
    "write": "when does the nightly export run",
    "capture": "why was CI flaky",
}


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        check=check,
        capture_output=True,
        text=True,
    )


def entry(session: str, time: str, text: str) -> Entry:
    anchor = Anchor(session=session, turn=f"{session}-{time}", transcript=f"/t/{session}.jsonl")
    return Entry(anchor=anchor, content=text, written_at=datetime.fromisoformat(f"{DAY}T{time}"))


class Distiller:
    """Distils every exchange into the capture's fact."""

    @hookimpl(tryfirst=True)
    def pimem_distill_exchange(self, request: DistillRequest) -> Distillation:
        return Distillation(text=FACTS["capture"], distiller="test", used_model=True)


@pytest.fixture
def conflicted(memsearch_home: Path, tmp_path: Path) -> tuple[Pimem, Scope]:
    """Bob's clone after a pull whose text merge left the day file conflicted."""
    env = {"PIMEM_GIT_UNION_MERGE": "off", "PIMEM_DB_LINGER_MS": "0"}
    git(tmp_path, "init", "--quiet", "--bare", "--initial-branch=main", "origin.git")
    sides = {}
    for name in ("alice", "bob"):
        git(tmp_path, "clone", "--quiet", "origin.git", name)
        git(tmp_path / name, "checkout", "--quiet", "-B", "main")
        pimem = make_pimem(env)
        sides[name] = (pimem, pimem.resolve_scope(tmp_path / name))
    (alice, alice_scope), (bob, bob_scope) = sides["alice"], sides["bob"]
    alice.append_entry(alice_scope, entry("s0", "09:00", FACTS["base"]))
    git(tmp_path / "alice", "add", "-A")
    git(tmp_path / "alice", "commit", "--quiet", "-m", "base")
    git(tmp_path / "alice", "push", "--quiet", "origin", "main")
    git(tmp_path / "bob", "pull", "--quiet", "origin", "main")
    alice.append_entry(alice_scope, entry("sa", "10:00", FACTS["alice"]))
    bob.append_entry(bob_scope, entry("sb", "10:05", FACTS["bob"]))
    for name in ("alice", "bob"):
        git(tmp_path / name, "commit", "--quiet", "-am", name)
    git(tmp_path / "alice", "push", "--quiet", "origin", "main")
    pulled = git(tmp_path / "bob", "pull", "--no-rebase", "origin", "main", check=False)
    assert pulled.returncode != 0
    assert not (tmp_path / "bob" / ".gitattributes").exists()
    text = (bob_scope.memory_dir / f"{DAY}.md").read_text()
    assert MARKER.search(text), text
    return bob, bob_scope


def capture_one(pimem: Pimem, scope: Scope, tmp_path: Path) -> None:
    pimem.pm.add_plugin(Distiller(), "test-distiller")
    session = Session(pimem, paths=PimemPaths.from_env({"PIMEM_HOME": str(tmp_path / "state")}))
    session.start(
        SessionInfo(session_id="sc", cwd=scope.repository_dir, transcript=tmp_path / "sc.jsonl")
    )
    branch = [
        BranchEntry(id="u1", kind="message", role="user", text="why is CI flaky?"),
        BranchEntry(
            id="a1",
            kind="message",
            role="assistant",
            text="pinned pytest-xdist",
            tool_calls=("edit(path=pyproject.toml, …)",),  # work, not an answer from memory
        ),
    ]
    session.settled(leaf="a1", branch=branch)
    report = session.shutdown(cap=60)
    assert report.captured_in_time


def all_hits(pimem: Pimem, scope: Scope) -> list[str]:
    texts = []
    for query in QUERIES.values():
        texts += [
            hit.content for hit in pimem.search_memory(scope, SearchQuery(text=query, top_k=10))
        ]
    return texts


def test_a_conflicted_day_file_never_becomes_memory_and_loses_nothing(
    conflicted: tuple[Pimem, Scope], tmp_path: Path
) -> None:
    pimem, scope = conflicted
    clone = scope.repository_dir
    day = scope.memory_dir / f"{DAY}.md"

    # A write made meanwhile goes below the markers, and says so.
    result = run_cli("write", FACTS["write"], "--session", "sw", "--turn", "w1",
                     "--transcript", "/t/sw.jsonl", "--cwd", str(clone), "--json")  # fmt: skip
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["conflicted"] is True
    result = run_cli("write", "- a second write", "--session", "sw", "--turn", "w2",
                     "--transcript", "/t/sw.jsonl", "--cwd", str(clone),
                     env={"PIMEM_NOW": f"{DAY}T23:00"})  # fmt: skip
    assert "Note: the entry went below the markers: unresolved git conflict markers in" in (
        result.stdout
    )
    assert "pimem git resolve" in result.stdout
    # A forget in the conflicted file takes its entry and leaves the markers.
    markers = MARKER.findall(day.read_text())
    pimem.forget_entry(scope, DayAddress.parse(DAY, "23:00"))
    assert MARKER.findall(day.read_text()) == markers
    # And a capture.
    capture_one(pimem, scope, tmp_path)
    text = day.read_text()
    assert MARKER.search(text)
    for fact in FACTS.values():
        assert text.count(fact) == 1, fact

    # Status names the file and how to resolve it.
    status = run_cli("status", "--cwd", str(clone))
    assert status.code == 0, status.stderr
    assert f"conflicts: unresolved git conflict markers in {DAY}.md" in status.stdout
    assert "resolve: `pimem git resolve`" in status.stdout
    assert "git checkout --ours/--theirs" in status.stdout
    as_json = json.loads(run_cli("status", "--cwd", str(clone), "--json").stdout)
    assert as_json["conflicts"]["files"] == [str(day)]

    # Search: every side's entry, and no marker line, from pimem's ranker and memsearch's.
    pimem.index_memory(scope, "test")
    for ranker in (pimem, make_pimem({"PIMEM_RANKER": "memsearch", "PIMEM_DB_LINGER_MS": "0"})):
        for name, query in QUERIES.items():
            hits = ranker.search_memory(scope, SearchQuery(text=query, top_k=3))
            assert any(FACTS[name] in hit.content for hit in hits), (name, hits)
        for hit in (hit for q in QUERIES.values() for hit in ranker.search_memory(
                scope, SearchQuery(text=q, top_k=10))):  # fmt: skip
            assert not MARKER.search(hit.content), hit.content
            assert not MARKER.search(ranker.expand_chunk(scope, hit.chunk_hash).content)

    # Memory compaction refuses the store while it holds the file.
    with pytest.raises(PimemError, match=f"memory compaction refused: .*{DAY}.md"):
        pimem.compact_memory(scope)

    # Resolved: every entry once, the file clean.
    resolved = run_cli("git", "resolve", "--cwd", str(clone))
    assert resolved.code == 0, resolved.stderr
    text = day.read_text()
    assert not MARKER.search(text)
    for fact in FACTS.values():
        assert text.count(fact) == 1, fact
    assert "a second write" not in text
    assert "conflicts:" not in run_cli("status", "--cwd", str(clone)).stdout


def test_another_agents_index_of_the_markers_never_reaches_pimems_search(
    conflicted: tuple[Pimem, Scope], memsearch_home: Path
) -> None:
    pimem, scope = conflicted
    # memsearch's own command line, as the other agents of the mesh run it: markers and all.
    memsearch = Path(sys.executable).with_name("memsearch")
    done = subprocess.run(
        [str(memsearch), "index", str(scope.memory_dir), "--collection", scope.collection],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    # A fresh process's read model starts from the collection those chunks are in.
    fresh = make_pimem({"PIMEM_DB_LINGER_MS": "0"})
    assert not any(MARKER.search(text) for text in all_hits(fresh, scope))
    memsearch_ranker = make_pimem({"PIMEM_RANKER": "memsearch", "PIMEM_DB_LINGER_MS": "0"})
    assert not any(MARKER.search(text) for text in all_hits(memsearch_ranker, scope))
    assert not any(MARKER.search(text) for text in all_hits(pimem, scope))
