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

from collections.abc import Iterable, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Protocol, runtime_checkable

from pimem_core.types import (
    BackendCall,
    BranchEntry,
    ChunkAddress,
    CompactResult,
    DayAddress,
    Entry,
    IndexHealth,
    IndexReport,
    Redaction,
    SearchHit,
    SearchQuery,
    Section,
    SkillCandidate,
    StatusSection,
    Transcript,
    TranscriptRequest,
)

__all__ = ["MemoryIndex", "MemoryStore", "SkillCatalog", "TranscriptReader"]


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
    """The search index over one scope's memory store (its collection)."""

    def index(self, reason: str, files: tuple[Path, ...], call: BackendCall) -> IndexReport:
        """Bring the collection up to date: *files* when given (after a write), else the whole
        store (which also drops the chunks of files that no longer exist)."""
        ...

    def search(self, query: SearchQuery, call: BackendCall) -> tuple[SearchHit, ...]:
        """L1 recall: the best chunks for *query*, best first."""
        ...

    def expand(self, chunk_hash: str, call: BackendCall) -> Section:
        """L2 recall: the whole section behind *chunk_hash*, with its session anchor."""
        ...

    def compact(self, call: BackendCall) -> CompactResult:
        """Condense the store into a summary; the facade appends it through the store."""
        ...

    def similar(self, text: str, top_k: int) -> Sequence[tuple[SearchHit, float]]:
        """The chunks closest in meaning to *text*, each with the score auto-context filters
        on: the hit's relevance when its ``score_kind`` is ``relevance``, else its cosine
        similarity to *text*.

        Per-prompt recall (auto-context) calls it against a deadline of its own: keep it to
        one search with a warm model.
        """
        ...

    def warm(self) -> None:
        """Load what the first :meth:`similar` would (the model, the collection); may block."""
        ...

    def pending_operations(self) -> int:
        """Operations queued or running ahead of a search now (0: a search would not wait).
        Per-prompt recall skips a prompt rather than wait in line."""
        ...

    def health(self) -> IndexHealth:
        """What is known about the collection without opening the database."""
        ...

    def status(self) -> Iterable[StatusSection]:
        """The index's sections of ``pimem status`` (backend, health, chunk count); problems
        are lines, never raised."""
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
