"""How long the host waits on ``settled``: capture must stay off the agent's path.

A session with the bundled plugins and a distiller that takes as long as a small model call
(200 ms, on a thread of its own) settles exchange after exchange; each ``settled`` call is
timed, and so is the time until its entry is on disk.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.latency import memsearch_index, summarize
from pimem_core import Pimem, hookimpl
from pimem_core.paths import PimemPaths
from pimem_core.runtime.session import Session, SessionInfo
from pimem_core.service_values import IndexReport
from pimem_core.services import MemoryIndex, PendingWork, SimilaritySearch, Warming
from pimem_core.types import (
    BackendCall,
    BranchEntry,
    Distillation,
    DistillRequest,
    SearchHit,
    SearchQuery,
    Section,
    StatusSection,
)

DISTILL_SECONDS = 0.2
SETTLED_P95_MS = 5.0


class _Unindexed:
    """The index the session opened, with indexing left out; everything else is its own."""

    def __init__(self, index: MemoryIndex) -> None:
        self._index = index

    def index(self, reason: str, files: tuple[Path, ...], call: BackendCall) -> IndexReport:
        return IndexReport(indexed_chunks=0)

    def search(self, query: SearchQuery, call: BackendCall) -> tuple[SearchHit, ...]:
        return self._index.search(query, call)

    def expand(self, chunk_hash: str, call: BackendCall) -> Section:
        return self._index.expand(chunk_hash, call)

    def similar(self, text: str, top_k: int) -> Sequence[tuple[SearchHit, float]]:
        assert isinstance(self._index, SimilaritySearch)
        return self._index.similar(text, top_k)

    def warm(self) -> None:
        if isinstance(self._index, Warming):
            self._index.warm()

    def pending_operations(self) -> int:
        return self._index.pending_operations() if isinstance(self._index, PendingWork) else 0

    def status(self) -> Iterable[StatusSection]:
        return self._index.status()


class _NoIndex:
    """Indexing is measured elsewhere; here it would only compete for the two cores."""

    @hookimpl(wrapper=True)
    def pimem_open_index(self) -> Generator[None, MemoryIndex | None, MemoryIndex | None]:
        index = yield
        return None if index is None else _Unindexed(index)


class _ModelLikeDistiller:
    """Sleeps like a remote model call, then answers with one bullet."""

    @hookimpl(tryfirst=True)
    def pimem_distill_exchange(self, request: DistillRequest) -> Distillation:
        time.sleep(DISTILL_SECONDS)
        ask = request.exchange.messages[0].text
        return Distillation(text=f"- the user asked {ask}", distiller="bench", used_model=False)


def _exchange(n: int) -> list[BranchEntry]:
    return [
        BranchEntry(id=f"u{n}", kind="message", role="user", text=f"question number {n}"),
        BranchEntry(id=f"a{n}", kind="message", role="assistant", text=f"answer number {n}"),
    ]


def measure_settled(
    exchanges: int,
    log: Callable[[str], None],
    *,
    repo: Path | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Time ``Session.settled`` over *exchanges* settles, and the background time to disk.

    Without *repo*, in an empty repository with indexing left out; with one, in that project,
    with its store indexed after every capture as in a session (the day files written are
    listed, for the caller to take out again). *now* fixes the session's clock, so the
    entries land in a day file of their own.
    """
    with tempfile.TemporaryDirectory(prefix="pimem-bench-capture-") as scratch:
        root = Path(scratch)
        skip_index = repo is None
        if repo is None:
            repo = root / "repo"
            (repo / ".git").mkdir(parents=True)
        memory = repo / ".memsearch" / "memory"
        existing = set(memory.glob("*.md"))
        env = {**os.environ, "PIMEM_DISTILL_BUDGET": "0"}
        if now is not None:
            env["PIMEM_NOW"] = now.isoformat(timespec="minutes")
        pimem = Pimem.from_env(env)
        pimem.pm.add_plugin(_ModelLikeDistiller(), "bench-distiller")
        if skip_index:
            pimem.pm.add_plugin(_NoIndex(), "bench-no-index")
        session = Session(pimem, paths=PimemPaths.from_env({"PIMEM_HOME": str(root / "pimem")}))
        session.start(SessionInfo(session_id="bench", cwd=repo, transcript=root / "s.jsonl"))
        branch: list[BranchEntry] = []
        settle_ms: list[float] = []
        for n in range(exchanges):
            branch = [*branch, *_exchange(n)]
            started = time.perf_counter()
            session.settled(leaf=f"a{n}", branch=branch)
            settle_ms.append((time.perf_counter() - started) * 1000)
        queued_at = time.perf_counter()
        report = session.shutdown(cap=exchanges * DISTILL_SECONDS * 4 + 10)
        drained_s = time.perf_counter() - queued_at
        if not skip_index and session.scope is not None:
            # The session's engine is its own: close the database it leased now, before the
            # caller's engine opens it (closing a Milvus Lite client stops the database for
            # every client of the process).
            index = memsearch_index(pimem, session.scope)
            index.queue.run("release", index.engine.release)
        day_files = sorted(set(memory.glob("*.md")) - existing)
        entries = sum(text.count("### ") for text in (f.read_text() for f in day_files))
        log(f"settled: {exchanges} exchanges, {entries} entries written")
        return {
            "exchanges": exchanges,
            "entries_written": entries,
            "distill_seconds": DISTILL_SECONDS,
            "settled_ms": summarize(settle_ms),
            "settled_samples_ms": settle_ms,
            "drain_seconds": drained_s,
            "captured_in_time": report.captured_in_time,
            "day_files": [str(path) for path in day_files],
        }


def target(capture: dict[str, Any]) -> dict[str, Any]:
    """The capture issue's target: the host waits at most 5 ms (p95) on ``settled``."""
    p95 = float(capture["settled_ms"]["p95"])
    return {
        "target": f"settled returns <= {SETTLED_P95_MS:g} ms (p95)",
        "chunks": None,
        "measured": p95,
        "unit": "ms",
        "met": p95 <= SETTLED_P95_MS and capture["entries_written"] == capture["exchanges"],
    }
