"""The memsearch index's sections of ``pimem status``: the backend and its configuration, the
zero-config bootstrap, the collection's chunks and who ranks the hits."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

from pimem_core.plugin import PimemError, Scope, StatusSection
from pimem_plugins.memsearch.errors import database_failure, install_instructions, is_contention
from pimem_plugins.shared.index_state import index_status_sections
from pimem_plugins.shared.layout import has_memory_files

if TYPE_CHECKING:
    from pimem_plugins.memsearch.engine import MemsearchEngine
    from pimem_plugins.memsearch.recall.service import Recall
    from pimem_plugins.memsearch.work_queue import BackendQueue


class Reporting(Protocol):
    """What the status sections read of an open index (the memsearch index is one)."""

    scope: Scope
    engine: MemsearchEngine

    @property
    def recall(self) -> Recall | None: ...

    @property
    def queue(self) -> BackendQueue: ...

    def rebuild_advice(self, said: str) -> str: ...


def status_sections(index: Reporting) -> Iterator[StatusSection]:
    """The index's sections of ``pimem status``, each looked up as it is reached."""
    scope, engine = index.scope, index.engine
    availability = engine.availability()
    if availability.reason is not None:
        yield StatusSection(
            name="backend",
            rank=8,  # a problem: with the health sections
            lines=(
                f"backend: unavailable ({availability.reason})",
                install_instructions(availability.reason),
            ),
            data={"available": False, "reason": availability.reason},
        )
        yield from index_status_sections(scope)  # the state file is read without memsearch
        return
    try:
        described = index.queue.run(
            "status", lambda: engine.describe(scope), is_contention=is_contention
        )
    except PimemError as error:
        described = {"error": str(error)}
    yield StatusSection(
        name="backend",
        rank=60,
        lines=(
            f"backend: available (memsearch {availability.version}, in-process)",
            *(f"{key}: {value}" for key, value in described.items()),
        ),
        data={"available": True, "version": availability.version, **described},
    )
    yield StatusSection(
        name="bootstrap",
        rank=61,
        lines=(f"bootstrap: {engine.bootstrap_note}",),
        data={"note": engine.bootstrap_note},
    )
    yield from index_status_sections(scope)
    yield _chunks_section(index)
    yield _ranker_section(index)


def _ranker_section(index: Reporting) -> StatusSection:
    recall = index.recall
    if recall is None:
        return StatusSection(
            name="ranker",
            rank=63,
            lines=("ranker: memsearch's hybrid search (PIMEM_RANKER=memsearch)",),
            data={"ranker": "memsearch"},
        )
    if not recall.loaded:
        line = "ranker: pimem (read model not loaded in this process yet)"
        data: dict[str, object] = {"ranker": "pimem", "loaded": False}
    else:
        chunks, pending = len(recall.model), recall.pending_facts()
        by_meaning, _ = recall.meaning()
        line = f"ranker: pimem (read model of {chunks} chunks, loaded from {recall.origin}"
        if by_meaning < chunks:
            line += (
                f"; {by_meaning} ranked by meaning, the rest by their words until the "
                "background embeds them)"
            )
        else:
            line += f"; {pending} still ranked by their chunk vector)" if pending else ")"
        data = {
            "ranker": "pimem",
            "loaded": True,
            "chunks": chunks,
            "origin": recall.origin,
            "facts_pending": pending,
            "ranked_by_meaning": by_meaning,
        }
    return StatusSection(name="ranker", rank=63, lines=(line,), data=data)


def _chunks_section(index: Reporting) -> StatusSection:
    scope, engine = index.scope, index.engine
    try:
        count = index.queue.run(
            "stats", lambda: engine.reads.count(scope), is_contention=is_contention
        )
    except Exception as error:  # noqa: BLE001 - reported: status must always answer
        said = database_failure(error)
        lines: tuple[str, ...] = (f"indexed chunks: unavailable ({said or error})",)
        if said is not None and not is_contention(error):
            lines += (f"the memory database could not be used. {index.rebuild_advice(said)}",)
        return StatusSection(
            name="chunks",
            rank=31,
            lines=lines,
            data={"indexed_chunks": None, "error": str(error)},
        )
    if count is not None:
        line = f"indexed chunks: {count}"
    elif has_memory_files(scope.memory_dir):
        line = "indexed chunks: 0 (collection not created yet; `pimem index` builds it)"
    else:
        line = "indexed chunks: 0 (no memory yet; write or capture something first)"
    return StatusSection(name="chunks", rank=31, lines=(line,), data={"indexed_chunks": count})
