"""A third-party index of the four methods every index has serves every door.

The index is a real distribution (a ``dist-info`` on ``PYTHONPATH``), chosen by name with
``PIMEM_USE``, and reached as users reach pimem: the command line in process, ``pimem serve``,
and the memory service. It offers no similarity search, so auto-context says it is off.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from pimem_core.testing import ask_pimem_serve

from conftest import CLOCK, Result, make_distribution, run_cli

GREP_INDEX = '''
"""An index that greps the day files: the four methods every index has, nothing more."""
import hashlib

from pimem_core.plugin import (
    DayText, IndexReport, NoMemoryYet, PimemError, SearchHit, Section, StatusSection, hookimpl,
)


class GrepIndex:
    def __init__(self, scope):
        self.scope = scope

    def _chunks(self):
        for day in sorted(self.scope.memory_dir.glob("*.md")):
            for entry in DayText(day.read_text(encoding="utf-8")).entries():
                yield SearchHit(
                    chunk_hash=hashlib.sha256(entry.text.encode()).hexdigest()[:16],
                    content=entry.text, source=str(day), heading=entry.time, heading_level=3,
                    start_line=entry.start + 1, end_line=entry.start + entry.text.count("\\n") + 1,
                    score=1.0, score_kind="similarity",
                )

    def index(self, reason, files, call):
        return IndexReport(indexed_chunks=0, total_files=len(list(self._chunks())))

    def search(self, query, call):
        chunks = list(self._chunks())
        if not chunks:
            raise NoMemoryYet("nothing to grep yet")
        words = query.text.lower().split()
        return tuple(c for c in chunks if any(w in c.content.lower() for w in words))[: query.top_k]

    def expand(self, chunk_hash, call):
        for hit in self._chunks():
            if hit.chunk_hash == chunk_hash:
                return Section(
                    chunk_hash=chunk_hash, source=hit.source, heading=hit.heading,
                    start_line=hit.start_line, end_line=hit.end_line, content=hit.content,
                )
        raise PimemError(f"no chunk {chunk_hash}")

    def status(self):
        return (StatusSection(name="backend", rank=10, lines=("backend: grep",)),)


@hookimpl
def pimem_open_index(scope):
    return GrepIndex(scope)
'''

ENTRY = "- the team picked PostgreSQL for the ledger"


def install(tmp_path: Path, env: dict[str, str]) -> dict[str, str]:
    site = make_distribution(
        tmp_path / "site",
        "pimem-grep-index",
        {"grep-index": "pimem_grep"},
        {"pimem_grep": GREP_INDEX},
    )
    return {
        **env,
        "PYTHONPATH": str(site),
        "PIMEM_USE": "open_index:grep-index",
        "PI_MEMSEARCH_AUTO_CONTEXT": "on",
    }


def ok(result: Result) -> str:
    assert result.code == 0, result.stderr
    return result.stdout


def write(env: dict[str, str], repo: Path) -> None:
    ok(run_cli("write", ENTRY, "--cwd", str(repo), "--session", "s1", "--turn", "t1",
               "--transcript", "/t/s1.jsonl", env=env))  # fmt: skip


def chunk_of_the_entry(repo: Path) -> str:
    (day,) = (repo / ".memsearch" / "memory").glob("*.md")
    text = day.read_text()
    entry = text[text.index("### ") :].rstrip("\n")
    return hashlib.sha256(entry.encode()).hexdigest()[:16]


def walk_the_command_line(env: dict[str, str], repo: Path) -> None:
    cwd = ("--cwd", str(repo))
    write(env, repo)
    hits = json.loads(ok(run_cli("search", "PostgreSQL", "--json", *cwd, env=env)))
    assert [hit["chunk_hash"] for hit in hits] == [chunk_of_the_entry(repo)]
    shown = json.loads(ok(run_cli("expand", hits[0]["chunk_hash"], "--json", *cwd, env=env)))
    assert ENTRY in shown["content"]
    status = ok(run_cli("status", *cwd, env=env))
    assert "backend: grep" in status
    assert "auto-context: off: the index (GrepIndex) offers no similarity search" in status
    ok(run_cli("forget", "--chunk", hits[0]["chunk_hash"], *cwd, env=env))
    assert not list((repo / ".memsearch" / "memory").glob("*.md"))


def test_the_command_line_in_process(tmp_path: Path, repo: Path) -> None:
    walk_the_command_line(install(tmp_path, {"PIMEM_SERVICE": "off"}), repo)


def test_the_memory_service(tmp_path: Path, repo: Path, service_env: dict[str, str]) -> None:
    env = install(tmp_path, service_env)
    walk_the_command_line(env, repo)
    running = json.loads(ok(run_cli("service", "status", "--json", env=env)))
    assert running["running"], "the commands were answered in process, not by the service"


def test_pimem_serve(tmp_path: Path, repo: Path) -> None:
    env = install(tmp_path, {"PIMEM_SERVICE": "off"})
    write(env, repo)
    requests = [
        {"id": 1, "method": "session.start", "params": {
            "session_id": "s2", "cwd": str(repo), "transcript": str(tmp_path / "s2.jsonl")}},
        {"id": 2, "method": "memory.search", "params": {"query": "PostgreSQL"}},
        {"id": 3, "method": "memory.expand", "params": {"chunk_hash": chunk_of_the_entry(repo)}},
        {"id": 4, "method": "memory.status", "params": {}},
        {"id": 5, "method": "session.shutdown", "params": {}},
    ]  # fmt: skip
    answers = ask_pimem_serve(requests, env={**os.environ, "PIMEM_NOW": CLOCK, **env})
    assert all("result" in answers[n] for n in range(1, 6)), answers
    assert ENTRY in answers[2]["result"]["text"]
    assert ENTRY in answers[3]["result"]["text"]
    assert "offers no similarity search" in answers[4]["result"]["text"]
