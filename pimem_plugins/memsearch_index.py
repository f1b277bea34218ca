"""The default indexing plugin: index, L1 search, L2 expand, compaction and status on memsearch.

Every operation goes through the process's backend queue, so operations never overlap and a
database held by another process is waited out with backoff. Without a usable memsearch the
store still takes writes; search, expand and compact answer with install instructions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from pimem_core import SettingSpec, hookimpl
from pimem_core.backend import process_queue
from pimem_core.errors import PimemError
from pimem_core.settings import parse_milliseconds
from pimem_core.types import (
    BackendCall,
    CompactResult,
    IndexReport,
    Scope,
    SearchHit,
    SearchQuery,
    Section,
    StatusSection,
)
from pimem_plugins.layout import has_memory_files
from pimem_plugins.memsearch_engine import (
    CHUNK_HASH,
    DatabaseFailed,
    DatabaseLocked,
    database_failure,
    install_instructions,
    is_contention,
    no_memory_yet,
    rebuild_instructions,
    shared_engine,
)

T = TypeVar("T")


DEFAULT_DB_LINGER_MS = 1_000
#: How long the memory database stays open after a call (0 closes it after every call); other
#: processes wait for it at most this long (ADR 0006).
DB_LINGER_MS = SettingSpec(
    plugin="memsearch-index",
    name="db_linger_ms",
    env="PIMEM_DB_LINGER_MS",
    parse=parse_milliseconds("PIMEM_DB_LINGER_MS", DEFAULT_DB_LINGER_MS, allow_zero=True),
    default=DEFAULT_DB_LINGER_MS,
    help="milliseconds the memory database stays open after a call (0: close at once)",
)


def _rebuild(scope: Scope) -> str:
    try:
        uri = shared_engine().describe(scope)["milvus_uri"]
    except PimemError:
        uri = "the database named by milvus.uri in memsearch's configuration"
    return rebuild_instructions(uri, scope.collection)


def _run(
    label: str, operation: Callable[[], T], call: BackendCall, timeout_ms: int | None, scope: Scope
) -> T:
    shared_engine().linger = DB_LINGER_MS.read(call.settings) / 1000
    try:
        return process_queue().run(
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
                "through every retry (about 4 s). Another agent is probably indexing; retry in a "
                "moment, or point memsearch at a Milvus server (milvus.uri) to share it."
            ) from None
        said = database_failure(error)
        if said is not None:  # memsearch lets the database's own exception through
            raise DatabaseFailed(
                f"memory {label} failed: the memory database could not be used ({said}). "
                + _rebuild(scope)
            ) from None
        raise


class MemsearchIndex:
    """Indexing hooks on the shared in-process memsearch engine."""

    @staticmethod
    @hookimpl
    def pimem_declare_settings() -> tuple[SettingSpec[int]]:
        return (DB_LINGER_MS,)

    @hookimpl(trylast=True)
    def pimem_index_memory(
        self, scope: Scope, files: tuple[Path, ...], call: BackendCall
    ) -> IndexReport:
        if not scope.memory_dir.is_dir() or (not files and not has_memory_files(scope.memory_dir)):
            # Nothing to index: no collection is created for an empty store (a forget that
            # deleted the last file names it in *files*, and its chunks are dropped).
            return IndexReport(indexed_chunks=0, total_files=0)
        engine = shared_engine()
        return _run("index", lambda: engine.index(scope, files, call.progress), call, None, scope)

    @hookimpl(trylast=True)
    def pimem_search_memory(
        self, scope: Scope, query: SearchQuery, call: BackendCall
    ) -> tuple[SearchHit, ...]:
        if not has_memory_files(scope.memory_dir):
            raise no_memory_yet(scope)  # before the embedder loads: there is nothing to search
        engine = shared_engine()
        return _run(
            "search",
            lambda: engine.search(scope, query.text, query.top_k, bootstrap=not call.read_only),
            call,
            call.settings.search_timeout_ms,
            scope,
        )

    @hookimpl(trylast=True)
    def pimem_expand_chunk(self, scope: Scope, chunk_hash: str, call: BackendCall) -> Section:
        if CHUNK_HASH.fullmatch(chunk_hash) and not has_memory_files(scope.memory_dir):
            raise no_memory_yet(scope)  # a malformed hash is refused first, by the engine
        engine = shared_engine()
        return _run(
            "expand",
            lambda: engine.expand(scope, chunk_hash, bootstrap=not call.read_only),
            call,
            call.settings.search_timeout_ms,
            scope,
        )

    @hookimpl(trylast=True)
    def pimem_compact_memory(self, scope: Scope, call: BackendCall) -> CompactResult:
        if scope.memory_dir.name != "memory":
            # memsearch appends the summary to <output dir>/memory/<date>.md.
            raise PimemError(
                f'memory compaction needs a store directory named "memory": the summary would '
                f"land in {scope.memory_dir.parent / 'memory'}, outside the store "
                f"{scope.memory_dir} it summarizes, shared with its siblings"
            )
        engine = shared_engine()
        summary = _run(
            "memory compaction",
            lambda: engine.compact(scope, call.scrub),
            call,
            call.settings.compact_timeout_ms,
            scope,
        )
        return CompactResult(summary=summary.strip() or None)

    @hookimpl
    def pimem_collect_status(self, scope: Scope) -> Iterator[StatusSection]:
        engine = shared_engine()
        availability = engine.availability()
        if availability.reason is not None:
            yield StatusSection(
                name="backend",
                rank=10,
                lines=(
                    f"backend: unavailable ({availability.reason})",
                    install_instructions(availability.reason),
                ),
                data={"available": False, "reason": availability.reason},
            )
            return
        try:
            described = process_queue().run(
                "status", lambda: engine.describe(scope), is_contention=is_contention
            )
        except PimemError as error:
            described = {"error": str(error)}
        yield StatusSection(
            name="backend",
            rank=10,
            lines=(
                f"backend: available (memsearch {availability.version}, in-process)",
                *(f"{key}: {value}" for key, value in described.items()),
            ),
            data={"available": True, "version": availability.version, **described},
        )
        yield StatusSection(
            name="bootstrap",
            rank=30,
            lines=(f"bootstrap: {engine.bootstrap_note}",),
            data={"note": engine.bootstrap_note},
        )
        try:
            count = process_queue().run(
                "stats", lambda: engine.count(scope), is_contention=is_contention
            )
        except Exception as error:  # noqa: BLE001 - reported: status must always answer
            said = database_failure(error)
            lines: tuple[str, ...] = (f"indexed chunks: unavailable ({said or error})",)
            if said is not None and not is_contention(error):
                lines += (f"the memory database could not be used. {_rebuild(scope)}",)
            yield StatusSection(
                name="chunks",
                rank=60,
                lines=lines,
                data={"indexed_chunks": None, "error": str(error)},
            )
            return
        if count is not None:
            line = f"indexed chunks: {count}"
        elif has_memory_files(scope.memory_dir):
            line = "indexed chunks: 0 (collection not created yet; `pimem index` builds it)"
        else:
            line = "indexed chunks: 0 (no memory yet; write or capture something first)"
        yield StatusSection(name="chunks", rank=60, lines=(line,), data={"indexed_chunks": count})
