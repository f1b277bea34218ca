"""The test kit's in-memory index: a whole :class:`~pimem_core.services.MemoryIndex` with no
database and no model, and the plugin that opens it (part of :mod:`pimem_core.testing`)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path

import attrs

from pimem_core.day_file import list_compact_blocks, list_entries
from pimem_core.errors import NoMemoryYet, PimemError
from pimem_core.hookspecs import hookimpl
from pimem_core.service_values import IndexReport
from pimem_core.services import MemoryIndex, MemoryStore
from pimem_core.types import (
    Anchor,
    BackendCall,
    Scope,
    SearchHit,
    SearchQuery,
    Section,
    StatusSection,
)

_WORD = re.compile(r"\w+")


class InMemoryIndex:
    """A whole :class:`~pimem_core.services.MemoryIndex` over one scope, held in memory: the
    four methods every index has, and nothing else (no model, no similarity search).

    Each entry of a day file (and each compaction block) is a chunk, read with pimem's one
    day-file reader; a hit's score, a stand-in for a similarity, is the share of the query's
    words the chunk holds (``score_kind="similarity"``). ``operations`` records each call by name.
    :class:`SimilarInMemoryIndex` adds the optional capabilities auto-context uses.
    """

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.chunks: dict[str, SearchHit] = {}
        self.operations: list[str] = []

    def index(self, reason: str, files: tuple[Path, ...], call: BackendCall) -> IndexReport:
        self.operations.append("index")
        days = sorted(self.scope.memory_dir.glob("*.md")) if self.scope.memory_dir.is_dir() else []
        self.chunks = {hit.chunk_hash: hit for day in days for hit in _chunks(day)}
        return IndexReport(indexed_chunks=len(self.chunks), total_files=len(days))

    def search(self, query: SearchQuery, call: BackendCall) -> tuple[SearchHit, ...]:
        self.operations.append("search")
        if not self.chunks:
            raise NoMemoryYet(f"no memory yet in {self.scope.memory_dir}; write something first")
        return tuple(hit for hit, _ in self._ranked(query.text, query.top_k))

    def expand(self, chunk_hash: str, call: BackendCall) -> Section:
        self.operations.append("expand")
        hit = self.chunks.get(chunk_hash)
        if hit is None:
            raise PimemError(f"chunk {chunk_hash} is not in the in-memory index")
        return Section(
            chunk_hash=chunk_hash,
            source=hit.source,
            heading=hit.heading,
            start_line=hit.start_line,
            end_line=hit.end_line,
            content=hit.content,
            anchor=Anchor.parse(hit.content),
        )

    def status(self) -> tuple[StatusSection, ...]:
        self.operations.append("status")
        return (
            StatusSection(
                name="backend",
                rank=10,
                lines=(f"backend: in-memory index ({len(self.chunks)} chunks)",),
                data={"available": True, "chunks": len(self.chunks)},
            ),
        )

    def _ranked(self, text: str, top_k: int) -> tuple[tuple[SearchHit, float], ...]:
        words = set(_WORD.findall(text.lower()))
        scored = []
        for hit in self.chunks.values():
            share = len(words & set(_WORD.findall(hit.content.lower()))) / max(1, len(words))
            if share > 0:
                scored.append((attrs.evolve(hit, score=share, score_kind="similarity"), share))
        scored.sort(key=lambda pair: (-pair[1], pair[0].source, pair[0].start_line))
        return tuple(scored[:top_k])


class SimilarInMemoryIndex(InMemoryIndex):
    """:class:`InMemoryIndex` with the capabilities per-prompt recall uses
    (:class:`~pimem_core.services.SimilaritySearch`, :class:`~pimem_core.services.Warming`):
    the same word-overlap score, recorded as ``"similar"`` and ``"warm"``."""

    def similar(self, text: str, top_k: int) -> Sequence[tuple[SearchHit, float]]:
        self.operations.append("similar")
        return self._ranked(text, top_k)

    def warm(self) -> None:
        self.operations.append("warm")


def _chunks(day: Path) -> list[SearchHit]:
    """The chunks of one day file: its entries and compaction blocks."""
    text = day.read_text(encoding="utf-8")
    places = [(entry.start, entry.text, entry.time) for entry in list_entries(text)]
    places += [(block.start, block.text, block.headings[0]) for block in list_compact_blocks(text)]
    return [
        SearchHit(
            chunk_hash=hashlib.sha256(body.encode()).hexdigest()[:16],
            content=body,
            source=str(day),
            heading=heading,
            heading_level=len(body) - len(body.lstrip("#")),
            start_line=start + 1,
            end_line=start + body.count("\n") + 1,
            score=0.0,
            score_kind="similarity",
        )
        for start, body, heading in sorted(places)
    ]


class InMemoryIndexPlugin:
    """Opens an :class:`InMemoryIndex` per scope (a :class:`SimilarInMemoryIndex` with
    ``similar=True``), before any installed index; ``indexes`` keeps each one, by collection,
    for the test to look into."""

    def __init__(self, *, similar: bool = False) -> None:
        self.indexes: dict[str, InMemoryIndex] = {}
        self._kind = SimilarInMemoryIndex if similar else InMemoryIndex

    @hookimpl(tryfirst=True)
    def pimem_open_index(self, scope: Scope, store: MemoryStore) -> MemoryIndex:
        return self.indexes.setdefault(scope.collection, self._kind(scope))
