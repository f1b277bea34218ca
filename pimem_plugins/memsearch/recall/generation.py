"""A generation of the read model: an immutable set of chunks, both legs' indexes built over
them, and each chunk's neighbours.

A generation knows each chunk's *neighbours*: the entries before and after it in the same
daily file and session. A search scores a chunk's context (its neighbours' scores beside its
own) from them, and the generation measures how much neighbours share a subject in this store
(its *context share*, ADR 0018).
"""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Sequence

import attrs
import numpy as np
import numpy.typing as npt

from pimem_plugins.memsearch.recall.dense import FactIndex, quantize, scale_for
from pimem_plugins.memsearch.recall.lexical import LexicalIndex
from pimem_plugins.memsearch.recall.text import lexical_words

#: Neighbours on each side that make a chunk's context.
REACH = 2
#: Pairs sampled to measure how much neighbours share a subject (ADR 0018).
COHERENCE_PAIRS = 2_000
#: Neighbour coherence (the mean cosine of neighbours' first facts above that of any two
#: chunks') at which the context legs start to count, and the span over which they reach their
#: full weight: 0.01 to 0.03 on generated coding memory, 0.10 to 0.18 on recorded conversations.
COHERENCE_FLOOR = 0.03
COHERENCE_SPAN = 0.07
_SESSION = re.compile(r"<!--\s*session:(\S+)")


@attrs.frozen(kw_only=True)
class ChunkRecord:
    """One chunk as the collection holds it (memsearch's fields and chunk hash)."""

    chunk_hash: str
    content: str
    # Interned: a day file's chunks share one string (megabytes at 100k chunks).
    source: str = attrs.field(converter=sys.intern)
    heading: str = attrs.field(converter=sys.intern)
    heading_level: int
    start_line: int
    end_line: int
    #: Whether the chunk's vectors are one per fact (else the collection's one chunk vector,
    #: until the facts are embedded in the background).
    facts_ready: bool


class Generation:
    """An immutable set of chunks with both legs' indexes built over it."""

    def __init__(
        self,
        records: Sequence[ChunkRecord],
        dense: FactIndex,
        lexical: LexicalIndex,
    ) -> None:
        self.records = tuple(records)
        self.dense = dense
        self.lexical = lexical
        self.positions = {record.chunk_hash: i for i, record in enumerate(self.records)}
        #: Chunks ranked by their chunk vector alone, their facts not embedded yet.
        self.without_facts = sum(1 for record in self.records if not record.facts_ready)
        # Facts are stored chunk by chunk: chunk i owns facts [starts[i], starts[i + 1]).
        counts = np.bincount(dense.owners, minlength=len(self.records))
        self.starts: npt.NDArray[np.int64] = np.concatenate([[0], np.cumsum(counts)]).astype(
            np.int64
        )
        self.previous, self.next = _neighbours(self.records)
        #: How much the context legs count in this store, from 0 to 1 (ADR 0018).
        self.context_share = _context_share(self)

    @classmethod
    def build(
        cls,
        entries: Sequence[tuple[ChunkRecord, npt.NDArray[np.float32]]],
        lexical: LexicalIndex | None = None,
    ) -> Generation:
        """A generation of *entries* (record, its vectors); *lexical* reuses an index built
        over the same records in the same order (only vectors changed)."""
        records = [record for record, _ in entries]
        # A chunk taken in by its words has no vectors, but their dimension all the same.
        dimension = next((vectors.shape[1] for _, vectors in entries if vectors.ndim == 2), 0)
        groups = [vectors.reshape(-1, dimension) for _, vectors in entries]
        owners = np.repeat(np.arange(len(groups), dtype=np.int32), [len(g) for g in groups])
        # Encoded chunk by chunk into one array: no float copy of every vector at once.
        scale = max((scale_for(group) for group in groups if group.size), default=1.0)
        codes = np.empty((len(owners), dimension), np.int8)
        start = 0
        for group in groups:
            codes[start : start + len(group)] = quantize(group, scale)
            start += len(group)
        if lexical is None:
            lexical = LexicalIndex.build([lexical_words(r.content, r.source) for r in records])
        return cls(records, FactIndex(codes, scale, owners), lexical)

    def vectors(self, position: int) -> npt.NDArray[np.float32]:
        start, end = int(self.starts[position]), int(self.starts[position + 1])
        return self.dense.vectors(start, end)

    def entries(self) -> list[tuple[ChunkRecord, npt.NDArray[np.float32]]]:
        return [(record, self.vectors(i)) for i, record in enumerate(self.records)]

    def around(self, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """*positions* and their neighbours up to ``REACH`` away, each once, in order."""
        found = [positions]
        for links in (self.previous, self.next):
            at = positions
            for _ in range(REACH):
                at = links[at]
                at = at[at >= 0]
                found.append(at)
        return np.unique(np.concatenate(found))

    def context_sum(self, values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Each chunk's value plus its neighbours' (up to ``REACH`` away), for every chunk."""
        total = values.copy()
        for links in (self.previous, self.next):
            at = np.arange(len(values))
            for _ in range(REACH):
                linked = at >= 0
                at[linked] = links[at[linked]]
                reached = at >= 0
                total[reached] += values[at[reached]]
        return total

    def context_mean(
        self, positions: npt.NDArray[np.int64], values: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.float64]:
        """The mean of *values* over each of *positions* and its neighbours (every one of
        them must hold a value)."""
        total = values[positions].copy()
        count = np.ones(len(positions))
        for links in (self.previous, self.next):
            at = positions.copy()
            for _ in range(REACH):
                linked = at >= 0
                at[linked] = links[at[linked]]
                reached = at >= 0
                total[reached] += values[at[reached]]
                count[reached] += 1
        mean: npt.NDArray[np.float64] = total / count
        return mean

    def best_cosines(
        self, positions: npt.NDArray[np.int64], query: npt.NDArray[np.float32]
    ) -> npt.NDArray[np.float64]:
        """Each chunk's best fact cosine with *query* (0 for a chunk without vectors)."""
        starts, ends = self.starts[positions], self.starts[positions + 1]
        counts = ends - starts
        found = np.zeros(len(positions))
        if not counts.sum():
            return found
        # Every fact of the chunks, chunk after chunk: fact j of a chunk is its start + j.
        offsets = np.cumsum(counts) - counts
        ids = np.repeat(starts - offsets, counts) + np.arange(int(counts.sum()))
        cosines = self.dense.gather(ids.astype(np.int64)) @ query
        having = counts > 0
        found[having] = np.maximum.reduceat(cosines, offsets[having])
        return found


def _session(content: str) -> str | None:
    match = _SESSION.search(content)
    return None if match is None else match.group(1)


def _neighbours(
    records: Sequence[ChunkRecord],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """For each chunk, the one before and the one after it among the chunks of its session in
    the same daily file (-1: none); other sessions' entries between them do not count. Chunks
    without a session anchor are the neighbours of one another."""
    previous = np.full(len(records), -1, np.int64)
    following = np.full(len(records), -1, np.int64)
    sessions = [_session(record.content) for record in records]
    order = sorted(
        range(len(records)),
        key=lambda i: (records[i].source, sessions[i] or "", records[i].start_line),
    )
    for a, b in itertools.pairwise(order):
        if records[a].source == records[b].source and sessions[a] == sessions[b]:
            following[a], previous[b] = b, a
    return previous, following


def _context_share(generation: Generation) -> float:
    """How much the context legs count in *generation*, from how much more alike neighbours
    are than any two chunks (each chunk by its first fact, on a fixed sample of pairs)."""
    # Only chunks with vectors have a first fact (one taken in by its words has none yet).
    having = generation.starts[1:] > generation.starts[:-1]
    following = generation.next
    linked = np.flatnonzero(having & (following >= 0) & having[np.maximum(following, 0)])
    embedded = np.flatnonzero(having)
    size = len(generation.records)
    if len(linked) == 0 or len(embedded) < 3:
        return 0.0
    firsts = linked[:: max(1, len(linked) // COHERENCE_PAIRS)][:COHERENCE_PAIRS]
    spread = np.random.default_rng(size)
    left = embedded[spread.integers(0, len(embedded), COHERENCE_PAIRS)]
    right = embedded[spread.integers(0, len(embedded), COHERENCE_PAIRS)]
    apart = left != right

    def mean_cosine(a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]) -> float:
        x = generation.dense.gather(generation.starts[a])
        y = generation.dense.gather(generation.starts[b])
        return float(np.mean(np.sum(x * y, axis=1)))

    coherence = mean_cosine(firsts, generation.next[firsts]) - mean_cosine(
        left[apart], right[apart]
    )
    return float(np.clip((coherence - COHERENCE_FLOOR) / COHERENCE_SPAN, 0.0, 1.0))
