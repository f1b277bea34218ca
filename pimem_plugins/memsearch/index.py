"""The default index: memsearch's collection, opened as a :class:`~pimem_core.services.MemoryIndex`.

The ``memsearch-index`` plugin owns one engine and one backend queue, for its plugin manager
(one host or session): every index it opens, for any scope, runs on that queue, so operations
never overlap (Milvus Lite lets one client at a time use a database) and a database held by
another process is waited out with backoff. Without a usable memsearch the store still takes
writes; search, expand and compact answer with install instructions.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

import attrs

from pimem_core.plugin import (
    BackendCall,
    CollectionMissing,
    CompactResult,
    DayAddress,
    IndexReport,
    MemoryIndex,
    NoMemoryYet,
    PimemError,
    Scope,
    SearchHit,
    SearchQuery,
    Section,
    Settings,
    SettingSpec,
    StatusSection,
    StoreChange,
    hookimpl,
)
from pimem_plugins.memsearch.catch_up import CATCH_UP_MS, CatchUp, catch_up, milliseconds
from pimem_plugins.memsearch.chunks import CHUNK_HASH, section_of
from pimem_plugins.memsearch.config import configured_settings
from pimem_plugins.memsearch.engine import MemsearchEngine
from pimem_plugins.memsearch.errors import (
    DatabaseFailed,
    DatabaseLocked,
    database_failure,
    is_contention,
    no_memory_yet,
    rebuild_instructions,
)
from pimem_plugins.memsearch.index_status import status_sections
from pimem_plugins.memsearch.ledger import DayFile
from pimem_plugins.memsearch.work_queue import BackendQueue
from pimem_plugins.shared.layout import has_memory_files

if TYPE_CHECKING:
    from pimem_plugins.memsearch.recall.service import Recall

# The read model (numpy, faiss, bm25s and scipy: a quarter of a second) is imported when a
# search first needs it, so a bridge answers session.start before any of it is loaded.

T = TypeVar("T")
log = logging.getLogger(__name__)


DEFAULT_DB_LINGER_MS = 1_000
#: How long the memory database stays open after a call (0 closes it after every call); other
#: processes wait for it at most this long (ADR 0006).
DB_LINGER_MS = milliseconds(
    "db_linger_ms",
    "PIMEM_DB_LINGER_MS",
    DEFAULT_DB_LINGER_MS,
    "milliseconds the memory database stays open after a call (0: close at once)",
)


Ranker = Literal["pimem", "memsearch"]


#: Who ranks search hits: pimem's read model (default) or memsearch's own hybrid search, the
#: baseline every benchmark compares against (ADR 0013).
RANKER: SettingSpec[Ranker] = SettingSpec.choice(
    plugin="memsearch-index",
    name="ranker",
    env="PIMEM_RANKER",
    values=("pimem", "memsearch"),
    default="pimem",
    help="who ranks search hits: pimem (its read model) or memsearch (its hybrid search)",
)


class MemsearchIndex:
    """The ``memsearch-index`` plugin: one engine and one queue, an index opened per scope,
    and one read model per collection for pimem's ranker."""

    def __init__(self) -> None:
        self.queue = BackendQueue()
        self.engine = MemsearchEngine(self.queue)
        self._recalls: dict[tuple[str, str], Recall] = {}
        self._recalls_lock = threading.Lock()

    @staticmethod
    @hookimpl
    def pimem_declare_settings() -> tuple[SettingSpec[Any], ...]:
        return (DB_LINGER_MS, RANKER, CATCH_UP_MS, *configured_settings())

    @hookimpl(trylast=True)
    def pimem_open_index(self, scope: Scope, settings: Settings) -> MemoryIndex:
        self.engine.linger = DB_LINGER_MS.read(settings) / 1000
        ranks = RANKER.read(settings) == "pimem"
        # Only a process that lives on indexes behind the requests: a one-shot command would
        # exit in the middle of an index run (in process, the CLI's searches read the files,
        # and a session's start or `pimem index` indexes them).
        behind = settings.service
        return MemsearchMemoryIndex(
            scope, self.engine, (lambda: self._recall(scope, behind)) if ranks else None
        )

    @hookimpl
    def pimem_observe_change(self, scope: Scope, change: StoreChange) -> None:
        # A session's own write is searchable by its next search, without waiting for the
        # index run: the read model takes the file's new chunks in the background, and a
        # search waits for them.
        recall = self._recalls.get((str(scope.memory_dir), scope.collection))
        if recall is not None and recall.loaded:
            recall.note_written([str(change.file.resolve())])
        # This process's index runs take the file in (a session's indexer, the forget command);
        # its searches need not index it first.
        ledger = self.engine.index_runs.ledger_if_open(scope)
        if ledger is not None:
            ledger.hold(change.file)

    def _recall(self, scope: Scope, index_behind: bool) -> Recall:
        key = (str(scope.memory_dir), scope.collection)
        with self._recalls_lock:  # one read model per collection, whichever thread asks first
            if key not in self._recalls:
                self._recalls[key] = open_recall(scope, self.engine, index_behind=index_behind)
            return self._recalls[key]


class OpensIndexes(Protocol):
    """What opens a scope's index: pimem's facade (``Pimem.index``)."""

    def index(self, scope: Scope) -> MemoryIndex: ...


class MemsearchMemoryIndex:
    """*scope*'s memsearch collection."""

    @classmethod
    def opened_by(cls, pimem: OpensIndexes, scope: Scope) -> MemsearchMemoryIndex:
        """*scope*'s index as *pimem* opened it, for code that reaches into its engine and queue
        (benchmarks, reliability runs); a ``PimemError`` when another plugin's index answered."""
        index = pimem.index(scope)
        if not isinstance(index, cls):
            raise PimemError(
                f"memsearch's index was expected, but {type(index).__name__} answered "
                "pimem_open_index"
            )
        return index

    def __init__(
        self,
        scope: Scope,
        engine: MemsearchEngine,
        open_recall: Callable[[], Recall] | None = None,
    ) -> None:
        self.scope = scope
        self.engine = engine
        self._open_recall = open_recall

    @functools.cached_property
    def recall(self) -> Recall | None:
        """pimem's ranker on the collection's read model; ``None``: memsearch ranks. Opened on
        first use: a session that never searches never imports it."""
        return None if self._open_recall is None else self._open_recall()

    @property
    def queue(self) -> BackendQueue:
        return self.engine.queue

    def rebuild_advice(self, said: str) -> str:
        """How to rebuild the collection, or reach its server, after the database said *said*."""
        try:
            uri = self.engine.describe(self.scope)["milvus_uri"]
        except PimemError:
            uri = "the database named by milvus.uri in memsearch's configuration"
        return rebuild_instructions(uri, self.scope.collection, said)

    def _run(
        self, label: str, operation: Callable[[], T], call: BackendCall, timeout_ms: int | None
    ) -> T:
        try:
            return self.queue.run(
                label,
                operation,
                is_contention=is_contention,
                on_wait=call.on_wait,
                timeout=None if timeout_ms is None else timeout_ms / 1000,
            )
        except Exception as error:
            if is_contention(error):
                raise DatabaseLocked(
                    f"memory {label} failed: another process kept the Milvus Lite database open "
                    "through every retry (about 4 s). Another agent is probably indexing; retry "
                    "in a moment, or point memsearch at a Milvus server (milvus.uri) to share it."
                ) from None
            said = database_failure(error)
            if said is not None:  # memsearch lets the database's own exception through
                raise DatabaseFailed(
                    f"memory {label} failed: the memory database could not be used ({said}). "
                    + self.rebuild_advice(said)
                ) from None
            raise

    def index(self, reason: str, files: tuple[Path, ...], call: BackendCall) -> IndexReport:
        scope, engine = self.scope, self.engine
        if not scope.memory_dir.is_dir() or (not files and not has_memory_files(scope.memory_dir)):
            # Nothing to index: no collection is created for an empty store (a forget that
            # deleted the last file names it in *files*, and its chunks are dropped).
            return IndexReport(indexed_chunks=0, total_files=0)
        report = self._run(
            "index", lambda: engine.index_runs.index(scope, files, call.progress), call, None
        )
        self._complete(call)
        return report

    def search(self, query: SearchQuery, call: BackendCall) -> tuple[SearchHit, ...]:
        if not has_memory_files(self.scope.memory_dir):
            raise no_memory_yet(self.scope)  # before the embedder loads: there is nothing to search
        recall = self.recall
        if recall is not None:
            # pimem's ranker reads the day files themselves: it never waits for an index run,
            # and its worker indexes what the collection is behind on (ADR 0026).
            hits = recall.search(query.text, query.top_k)
            ranked, held = recall.meaning()
            if ranked < held and call.on_notice is not None:
                call.on_notice(
                    f"ranked {ranked} of {held} chunks by meaning, the rest by their words; "
                    "indexing in the background"
                )
            return hits
        if call.read_only:
            return self._search(query, call)  # another project's store: nothing is indexed
        return self._caught_up(lambda: self._search(query, call), call, first=True)

    def _search(self, query: SearchQuery, call: BackendCall) -> tuple[SearchHit, ...]:
        scope, engine = self.scope, self.engine
        return self._run(
            "search",
            lambda: engine.reads.search(
                scope, query.text, query.top_k, bootstrap=not call.read_only
            ),
            call,
            call.settings.search_timeout_ms,
        )

    def expand(self, chunk_hash: str, call: BackendCall) -> Section:
        scope, engine = self.scope, self.engine
        recall = self.recall
        if recall is not None and recall.loaded:
            # A chunk written since the last index run is in the read model, not yet in the
            # collection; the section is read from the file either way.
            record = recall.record(chunk_hash)
            if record is not None:
                return section_of(chunk_hash, attrs.asdict(record))
        if CHUNK_HASH.fullmatch(chunk_hash) and not has_memory_files(scope.memory_dir):
            raise no_memory_yet(scope)  # a malformed hash is refused first, by the engine

        def expand() -> Section:
            return self._run(
                "expand",
                lambda: engine.reads.expand(scope, chunk_hash, bootstrap=not call.read_only),
                call,
                call.settings.search_timeout_ms,
            )

        if call.read_only:
            return expand()
        # An expand pays for a catch-up only when there is no collection to look in.
        return self._caught_up(expand, call, first=False)

    def _caught_up(self, operation: Callable[[], T], call: BackendCall, *, first: bool) -> T:
        """*operation* (a search, an expand) on a collection that holds the day files as they
        are: those that changed since this machine last indexed them are indexed *first*
        (else only when the collection turns out to be missing). A collection missing though
        the ledger vouched for every file (its database was moved aside or reset) gets the
        ledger cleared and every file indexed again, once."""
        done = self._catch_up(call) if first else None
        try:
            result = operation()
        except NoMemoryYet:
            raise
        except CollectionMissing:
            if done is None:
                done = self._catch_up(call)
            if not done.reached and done.error is None:
                self.engine.index_runs.ledger(self.scope).clear()
                done = self._catch_up(call)
            if done.error is not None:
                raise CollectionMissing(
                    f"collection {self.scope.collection} was never indexed on this machine, "
                    f"and indexing {self.scope.memory_dir} first failed: {done.error}"
                ) from None
            result = operation()
        # Told once the answer is sure: an operation that fails says why itself.
        if done is not None and done.notice is not None:
            (call.on_notice or log.info)(done.notice)
        return result

    def catch_up(self, call: BackendCall) -> IndexReport:
        """A session's start: the day files that changed since this machine last indexed them,
        all of them; no database is opened when none did."""
        pending = tuple(self.engine.index_runs.ledger(self.scope).changed())
        if not pending:
            return IndexReport(indexed_chunks=0, total_files=0)
        return self._index_outstanding(pending, None, call)[1]

    def _catch_up(self, call: BackendCall) -> CatchUp:
        """Index the day files that changed since this machine last indexed them, within the
        catch-up budget."""
        return catch_up(
            self.engine.index_runs.ledger(self.scope),
            CATCH_UP_MS.read(call.settings) / 1000,
            lambda files, budget: self._index_outstanding(files, budget, call),
        )

    def _index_outstanding(
        self, files: tuple[DayFile, ...], budget: float | None, call: BackendCall
    ) -> tuple[int, IndexReport]:
        """Index those of *files* still outstanding once the run's turn comes (within *budget*
        seconds, at least one file): how many were, and the run's report."""
        scope, engine = self.scope, self.engine
        ledger = engine.index_runs.ledger(scope)

        def index() -> tuple[int, IndexReport]:
            # Another run may have taken some in while this one waited in the queue.
            left = ledger.outstanding(files)
            if not left:
                return 0, IndexReport(indexed_chunks=0)
            paths = tuple(Path(day.path) for day in left)
            report = engine.index_runs.index(scope, paths, None, budget=budget)
            failed = {failure.path for failure in report.failed_files}
            taken = [p for p in map(str, paths[: report.total_files]) if p not in failed]
            self._adopt(taken)
            if self.recall is not None:
                self.recall.complete(taken)
            return len(left), report

        return self._run("index", index, call, None)

    def _complete(self, call: BackendCall) -> None:
        """What pimem's ranker needs of what the run indexed, computed before it returns."""
        recall = self.recall
        if recall is not None:
            self._run("index", recall.complete, call, None)

    def _adopt(self, sources: list[str]) -> None:
        """Hand pimem's read model what a catch-up just indexed, as the collection holds it:
        it follows the files, and would otherwise embed a pulled day's facts before finding
        it (a few chunks at a time)."""
        recall = self.recall
        if recall is None or not sources:
            return
        # Milvus's string literals, as memsearch escapes them.
        quoted = (source.replace("\\", "\\\\").replace('"', '\\"') for source in sources)
        listed = ", ".join(f'"{source}"' for source in quoted)
        recall.adopt(sources, self.engine.reads.rows(self.scope, f"source in [{listed}]"))

    def compact(
        self, call: BackendCall, only: Collection[DayAddress] | None = None
    ) -> CompactResult:
        scope, engine = self.scope, self.engine
        if scope.memory_dir.name != "memory":
            # memsearch appends the summary to <output dir>/memory/<date>.md.
            raise PimemError(
                f'memory compaction needs a store directory named "memory": the summary would '
                f"land in {scope.memory_dir.parent / 'memory'}, outside the store "
                f"{scope.memory_dir} it summarizes, shared with its siblings"
            )
        summary = self._run(
            "memory compaction",
            lambda: engine.reads.compact(scope, call.scrub, only),
            call,
            call.settings.compact_timeout_ms,
        )
        return CompactResult(summary=summary.strip() or None)

    def similar(self, text: str, top_k: int) -> Sequence[tuple[SearchHit, float]]:
        recall = self.recall
        if recall is not None:
            if not has_memory_files(self.scope.memory_dir):
                return ()
            return recall.similar(text, top_k)
        return self.queue.run(
            "similarity search",
            lambda: self.engine.reads.recall(self.scope, text, top_k),
            is_contention=is_contention,
        )

    def warm(self) -> None:
        recall = self.recall
        if recall is not None:
            if has_memory_files(self.scope.memory_dir):
                recall.search("warm-up", 1)  # loads it from its cache or the day files
            return
        self.queue.run("warm-up", lambda: self.engine.warm(self.scope), is_contention=is_contention)

    def pending_operations(self) -> int:
        recall = self.recall
        if recall is not None and recall.loaded:
            return 0  # searches run on the read model: they wait behind nothing in the queue
        return self.queue.pending

    def status(self) -> Iterator[StatusSection]:
        return status_sections(self)


def open_recall(scope: Scope, engine: MemsearchEngine, *, index_behind: bool = False) -> Recall:
    """A read model of *scope*'s collection on *engine*; nothing is loaded until a search.
    With *index_behind*, its worker indexes the day files the collection is behind on."""
    from pimem_plugins.memsearch.collection import EngineCollection
    from pimem_plugins.memsearch.recall.service import Recall

    return Recall(scope, EngineCollection(scope, engine, index_behind=index_behind))
