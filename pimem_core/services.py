"""The backends pimem runs on, as typed services.

A plugin provides a backend whole: a factory hook (``pimem_open_store``, ``pimem_open_index``,
``pimem_open_transcript``, ``pimem_open_skills``) returns an object with every method of one
of these protocols, bound to the scope (or transcript) it was opened for. mypy checks the
returned object against the protocol where the factory is annotated with it, so a backend is
never half replaced and its methods are typed.

The facade (:class:`pimem_core.api.Pimem`) opens each service once per scope and hands it to the
plugins that need it (auto-context gets the index, the snapshot the store), so no plugin reaches
for another plugin's module. Every change a store makes is announced by the facade through
``pimem_observe_change``, whichever store plugin made it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Protocol, runtime_checkable

from pimem_core.service_values import (
    CompactResult,
    IndexReport,
    Redaction,
    SkillCandidate,
    Transcript,
    TranscriptRequest,
)
from pimem_core.types import (
    BackendCall,
    BranchEntry,
    ChunkAddress,
    DayAddress,
    Entry,
    SearchHit,
    SearchQuery,
    Section,
    StatusSection,
)

__all__ = [
    "Compacting",
    "MemoryIndex",
    "MemoryStore",
    "PendingWork",
    "SimilaritySearch",
    "SkillCatalog",
    "TranscriptReader",
    "Warming",
]


@runtime_checkable
class MemoryStore(Protocol):
    """The markdown memory store of one scope: the source of truth."""

    def append_entry(self, entry: Entry) -> Path:
        """Append *entry* to today's daily memory file; return the file written."""
        ...

    def forget_entry(self, address: DayAddress | ChunkAddress) -> Redaction:
        """Remove exactly one entry (or compact block), leaving every other byte as it was.

        Raise :class:`~pimem_core.errors.StoreError` when the address matches nothing or more
        than one thing; nothing may change then.
        """
        ...

    def read_day(self, day: date) -> str | None:
        """The daily memory file's text for *day*, or ``None`` when there is none."""
        ...

    def append_compaction(self, summary: str, now: datetime) -> Path:
        """Append a compaction's *summary* as memsearch's ``## Memory Compact HH:MM`` block."""
        ...


@runtime_checkable
class MemoryIndex(Protocol):
    """The search index over one scope's memory store (its collection): what every index does.

    An index may offer more, each an optional capability below (:class:`SimilaritySearch`,
    :class:`Warming`, :class:`PendingWork`, :class:`CatchingUp`, :class:`Compacting`): a
    caller checks for it with ``isinstance`` when it needs it and does without when it is
    missing.
    """

    def index(self, reason: str, files: tuple[Path, ...], call: BackendCall) -> IndexReport:
        """Bring the index up to date with the store: *files* when given (after a write), else
        the whole store (which also drops what it holds of files that no longer exist)."""
        ...

    def search(self, query: SearchQuery, call: BackendCall) -> tuple[SearchHit, ...]:
        """L1 recall: the best chunks for *query*, best first, at most ``query.top_k``.

        A hit's ``score`` means what its ``score_kind`` says (:data:`~pimem_core.types.ScoreKind`):
        ``relevance``, calibrated from 0 to 1, with 0.30 the documented threshold of "probably
        about this" (docs/recall.md); ``similarity``, the cosine similarity of query and chunk;
        ``rank_fusion`` and ``reranker``, an order among this search's hits and nothing more.
        Raise :class:`~pimem_core.errors.NoMemoryYet` when there is nothing to search.
        """
        ...

    def expand(self, chunk_hash: str, call: BackendCall) -> Section:
        """L2 recall: the whole section behind *chunk_hash*, with its session anchor."""
        ...

    def status(self) -> Iterable[StatusSection]:
        """The index's sections of ``pimem status`` (backend, health, chunk count); problems
        are lines, never raised."""
        ...


@runtime_checkable
class SimilaritySearch(Protocol):
    """An index capability: per-prompt recall (auto-context) without waiting in line."""

    def similar(self, text: str, top_k: int) -> Sequence[tuple[SearchHit, float]]:
        """The chunks closest in meaning to *text*, each with the score auto-context filters
        on: the hit's relevance when its ``score_kind`` is ``relevance``, else its cosine
        similarity to *text* (the meanings of :meth:`MemoryIndex.search`).

        Auto-context calls it against a deadline of its own: keep it to one search with a warm
        model.
        """
        ...


@runtime_checkable
class Warming(Protocol):
    """An index capability: load ahead what the first search or similarity search needs."""

    def warm(self) -> None:
        """Load the model, the collection...; may block (callers run it on a thread)."""
        ...


@runtime_checkable
class PendingWork(Protocol):
    """An index capability: tell how much work a search would wait behind."""

    def pending_operations(self) -> int:
        """Operations queued or running ahead of a search now (0: a search would not wait).
        Auto-context skips a prompt rather than wait in line."""
        ...


@runtime_checkable
class CatchingUp(Protocol):
    """An index capability: take in only what changed in the store since the index last did."""

    def catch_up(self, call: BackendCall) -> IndexReport:
        """Index the files new, changed or removed since the index last took the store in, and
        nothing when none are: a host session's start asks for this (an index without it gets a
        whole-store :meth:`MemoryIndex.index`), so starting a session on an index that is up to
        date costs no database work."""
        ...


@runtime_checkable
class Compacting(Protocol):
    """An index capability: condense the store into a summary (``pimem compact``)."""

    def compact(
        self, call: BackendCall, only: Collection[DayAddress] | None = None
    ) -> CompactResult:
        """The summary of the store, or of the entries *only* names; the facade appends it
        through the store."""
        ...


@runtime_checkable
class TranscriptReader(Protocol):
    """One agent transcript file, in a format its plugin reads."""

    def read_branch(self, leaf: str | None) -> tuple[BranchEntry, ...]:
        """The branch ending at entry *leaf* (``None``: the current leaf), root first."""
        ...

    def read_transcript(self, request: TranscriptRequest) -> Transcript:
        """L3 recall: the turns around an anchored entry."""
        ...


@runtime_checkable
class SkillCatalog(Protocol):
    """The skill candidates drafted for one scope."""

    def list_candidates(self) -> tuple[SkillCandidate, ...]:
        """Every candidate, by name; drafts only: listing never installs."""
        ...

    def install_candidate(self, name: str, destination: Path) -> tuple[Path, ...]:
        """Copy candidate *name* into the skills directory *destination*, on request only.

        Raise :class:`~pimem_core.errors.StoreError` when no candidate has that name.
        """
        ...
