"""Concurrent writers on one daily memory file: nothing lost, nothing interleaved."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from conftest import CLOCK, run_cli

WORKERS = 8
ENTRIES = 200
# Long entries make a torn or interleaved write likely to show if appends were not atomic.
PADDING = "x" * 600

WORKER = """
import sys, time
from pathlib import Path
from pimem_core import Pimem
from pimem_core.types import Anchor, Entry

worker, count, repo, go = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
pimem = Pimem.from_env()
scope = pimem.resolve_scope(repo)
while not go.exists():
    time.sleep(0.005)
for i in range(count):
    anchor = Anchor(session=f"session-{worker}", turn=f"turn-{worker}-{i}", transcript=f"/t/{worker}.jsonl")
    content = f"- worker {worker} wrote entry {i} {sys.argv[5]}"
    pimem.append_entry(scope, Entry(anchor=anchor, content=content, written_at=pimem.settings.now()))
"""


def block(worker: int, i: int) -> str:
    return (
        f"### 22:41\n<!-- session:session-{worker} turn:turn-{worker}-{i} "
        f"transcript:/t/{worker}.jsonl -->\n- worker {worker} wrote entry {i} {PADDING}\n\n"
    )


def test_eight_sessions_appending_at_once_lose_and_interleave_nothing(
    repo: Path, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    env = {**os.environ, "PIMEM_NOW": CLOCK}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(w), str(ENTRIES), str(repo), str(go), PADDING],
            env=env,
        )
        for w in range(WORKERS)
    ]
    go.touch()
    assert [worker.wait(timeout=300) for worker in workers] == [0] * WORKERS

    text = (repo / ".memsearch" / "memory" / "2026-08-13.md").read_text()
    for w in range(WORKERS):
        for i in range(ENTRIES):
            assert text.count(block(w, i)) == 1, f"entry {i} of worker {w} is missing or torn"
    # Each session ran in one process, so each has exactly one heading: no race can double it.
    assert text.count("\n## Session 22:41\n\n") == WORKERS
    expected = WORKERS * len("\n## Session 22:41\n\n") + sum(
        len(block(w, i)) for w in range(WORKERS) for i in range(ENTRIES)
    )
    assert len(text) == expected


def test_one_session_in_two_processes_may_only_duplicate_its_heading(repo: Path) -> None:
    def writer(process: int) -> list[int]:
        return [
            run_cli(
                "write",
                f"- process {process} entry {i}",
                "--cwd",
                str(repo),
                "--session",
                "shared",
                "--turn",
                f"p{process}-{i}",
                "--transcript",
                "/t.jsonl",
            ).code
            for i in range(10)
        ]

    with ThreadPoolExecutor(2) as pool:
        codes = [code for codes in pool.map(writer, range(2)) for code in codes]
    assert codes == [0] * 20

    text = (repo / ".memsearch" / "memory" / "2026-08-13.md").read_text()
    for process in range(2):
        for i in range(10):
            entry = (
                f"### 22:41\n<!-- session:shared turn:p{process}-{i} transcript:/t.jsonl -->\n"
                f"- process {process} entry {i}\n\n"
            )
            assert text.count(entry) == 1
    # A fresh process seeds its heading decision by reading the file; only two first writes
    # racing each other can both miss the other's heading.
    assert 1 <= text.count("## Session 22:41") <= 2
