"""How chunks enter the read model: from a day file read again (what changed in it), or from
the collection's rows as an index run left them."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from attrs import evolve

from pimem_core.plugin import (
    DayText,
    SearchHit,
)
from pimem_plugins.memsearch.recall.cache import Stamp
from pimem_plugins.memsearch.recall.encoding import embed_facts
from pimem_plugins.memsearch.recall.generation import ChunkRecord, Generation
from pimem_plugins.memsearch.recall.read_model import Candidate, ReadModel
from pimem_plugins.memsearch.recall.store_files import StoreFiles

#: Characters of chunks a search embeds before it answers, of the hits it would show that have
#: no vector yet (about a tenth of a second on two cores); at least one chunk's.
LEADER_CHARS = 2_000
#: Candidates a search embeds for their words alone, beside its hits: an entry the query names
#: (a write just made) competes by its meaning; more cost a search's time while indexing runs
#: (as many as the hits took searches' p95 from 240 to 370 ms on the real stores).
LEADERS_BY_WORDS = 2
#: One day file's change: its path, its new stat, its chunks not in the model, and the keys of
#: its chunks gone from it.
Change = tuple[str, Stamp | None, list[ChunkRecord], set[str]]


def changes(
    files: StoreFiles, records: dict[str, ChunkRecord], todo: Sequence[str]
) -> list[Change]:
    """What reading each of *todo* again changes in a model holding *records*."""
    by_source: dict[str, set[str]] = {}
    for key, record in records.items():
        by_source.setdefault(record.source, set()).add(key)
    planned: list[Change] = []
    for source in todo:
        stamp, chunks = files.chunks(Path(source))
        if chunks is None:  # unreadable: left as it was
            planned.append((source, stamp, [], set()))
            continue
        expected = {chunk.chunk_hash for chunk in chunks}
        new = [chunk for chunk in chunks if chunk.chunk_hash not in records]
        planned.append((source, stamp, new, by_source.get(source, set()) - expected))
    return planned


def of_rows(rows: list[dict[str, Any]], files: StoreFiles) -> tuple[Generation, dict[str, Stamp]]:
    """A generation of the collection's *rows* (their chunk vectors, facts still to embed), and
    the stamps of the store's files in it: unknown, so that each file is compared with the
    collection's chunks once."""
    entries = [(record_of(row, facts_ready=False), vector_of(row)) for row in rows]
    store = files.directory()
    stamps: dict[str, Stamp] = {
        record.source: (-1, -1) for record, _ in entries if os.path.dirname(record.source) == store
    }
    return Generation.build(entries), stamps


def embed_leaders(
    model: ReadModel,
    encode: Callable[[list[str]], npt.NDArray[np.float32]],
    candidates: Sequence[Candidate],
    hits: Sequence[SearchHit],
) -> bool:
    """Embed the facts of the candidates with no vector yet that matter most: those among the
    *hits*, then the ``LEADERS_BY_WORDS`` best of the rest by their words, at most
    ``LEADER_CHARS`` of them (one at least); whether any were."""
    bare = {c.record.chunk_hash: c for c in candidates if not c.embedded}
    shown = [bare.pop(hit.chunk_hash) for hit in hits if hit.chunk_hash in bare]
    by_words = sorted(bare.values(), key=lambda c: -c.lexical)[:LEADERS_BY_WORDS]
    leaders = [ready(c.record) for c in within([*shown, *by_words], LEADER_CHARS)]
    if not leaders:
        return False
    vectors = embed_facts(encode, leaders)
    model.apply(pair for pair in zip(leaders, vectors, strict=True) if pair[0].chunk_hash in model)
    return True


def within(candidates: Sequence[Candidate], budget: int) -> list[Candidate]:
    """The first of *candidates* whose chunks hold at most *budget* characters (one at least)."""
    kept: list[Candidate] = []
    size = 0
    for candidate in candidates:
        size += len(candidate.record.content)
        if kept and size > budget:
            break
        kept.append(candidate)
    return kept


def take_in(
    model: ReadModel, stamps: dict[str, Stamp], sources: Sequence[str], rows: list[dict[str, Any]]
) -> None:
    """*sources*' chunks as an index run left them in the collection (*rows*), into *model*:
    new chunks by their chunk vector, their facts to embed later; chunks gone, dropped."""
    records = model.records()
    wanted = set(sources)
    kept = {str(row["chunk_hash"]) for row in rows}
    model.apply(
        (
            (record_of(row, facts_ready=False), vector_of(row))
            for row in rows
            if str(row["chunk_hash"]) not in records  # a chunk with its facts stays
        ),
        (key for key, record in records.items() if record.source in wanted and key not in kept),
    )
    # Unknown stats: the next refresh compares each file with these chunks once (it then
    # embeds nothing), as after a load from the collection.
    for source in wanted:
        stamps[source] = (-1, -1)


def record_of(row: dict[str, Any], *, facts_ready: bool) -> ChunkRecord:
    return ChunkRecord(
        chunk_hash=str(row["chunk_hash"]),
        # Another agent may have indexed a conflicted file markers and all.
        content=DayText(str(row["content"])).without_marker_lines(),
        source=str(row["source"]),
        heading=str(row.get("heading", "")),
        heading_level=int(row.get("heading_level", 0)),
        start_line=int(row["start_line"]),
        end_line=int(row["end_line"]),
        facts_ready=facts_ready,
    )


def ready(record: ChunkRecord) -> ChunkRecord:
    return evolve(record, facts_ready=True)


def vector_of(row: dict[str, Any]) -> npt.NDArray[np.float32]:
    return np.asarray(row["embedding"], np.float32).reshape(1, -1)
