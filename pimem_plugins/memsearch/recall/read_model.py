"""The read model: a collection's chunks, their fact vectors and a lexical index, in memory.

Built in *generations* (:mod:`.generation`): a generation is immutable (its faiss scan and bm25s
index are rebuilt, never edited), and the changes since it was built sit in a small overlay that
every search scores alongside it. A search reads one generation and the overlay under a lock held
for microseconds; rebuilding happens off the search path and swaps the generation in whole. A
chunk of the overlay has no neighbours until it is folded.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

import attrs
import numpy as np
import numpy.typing as npt

from pimem_plugins.memsearch.recall.generation import ChunkRecord, Generation
from pimem_plugins.memsearch.recall.text import lexical_words

#: Changes the overlay holds before they are folded into a new generation.
OVERLAY_LIMIT = 256


@attrs.frozen(kw_only=True)
class Candidate:
    """A chunk a search found, with what each leg said of it and its rank among the
    candidates in that leg (``None`` for a lexical leg that found none of the query's words)."""

    record: ChunkRecord
    #: The best fact's cosine with the query.
    dense: float
    #: BM25 of the chunk's words (0: none of the query's).
    lexical: float
    #: The mean best-fact cosine of the chunk and its neighbours.
    dense_context: float
    #: The BM25 of the chunk and its neighbours, summed.
    lexical_context: float
    ranks: dict[str, int | None] = attrs.field(eq=False)
    #: Whether the chunk has a vector yet (else it was taken in by its words alone, and its
    #: dense scores mean nothing until the worker embeds it).
    embedded: bool = True

    def legs(self) -> dict[str, float]:
        return {
            "dense": self.dense,
            "lexical": self.lexical,
            "dense_context": self.dense_context,
            "lexical_context": self.lexical_context,
        }


@attrs.frozen
class _Pending:
    record: ChunkRecord
    vectors: npt.NDArray[np.float32]
    tokens: tuple[str, ...]


class ReadModel:
    """One collection's read model: a generation plus the changes made since it was built."""

    def __init__(self, generation: Generation | None = None) -> None:
        self._generation = generation or Generation.build([])
        self._added: dict[str, _Pending] = {}
        self._removed: set[str] = set()
        self._lock = threading.Lock()
        self._folding = threading.Lock()
        self._stacked: (
            tuple[list[_Pending], npt.NDArray[np.float32], list[int], set[str]] | None
        ) = None

    # -- reading -------------------------------------------------------------------------

    def __len__(self) -> int:
        # Counted from the overlay: a status must not walk every chunk (20,000 in a service).
        with self._lock:
            generation, added, removed = self._generation, self._added, self._removed
            hidden = sum(1 for key in removed | added.keys() if key in generation.positions)
            return len(generation.positions) - hidden + len(added)

    def without_facts(self) -> int:
        """Chunks ranked by their chunk vector alone (their facts not embedded yet)."""
        with self._lock:
            generation, added, removed = self._generation, self._added, self._removed
            hidden = sum(
                1
                for key in removed | added.keys()
                if key in generation.positions
                and not generation.records[generation.positions[key]].facts_ready
            )
            waiting = sum(1 for pending in added.values() if not pending.record.facts_ready)
            return generation.without_facts - hidden + waiting

    def waits_for_facts(self, chunk_hash: str) -> bool:
        """Whether the chunk is in the model without its facts' vectors."""
        with self._lock:
            pending = self._added.get(chunk_hash)
            if pending is not None:
                return not pending.record.facts_ready
            at = self._generation.positions.get(chunk_hash)
            if at is None or chunk_hash in self._removed:
                return False
            return not self._generation.records[at].facts_ready

    def without_vectors(self) -> int:
        """Chunks taken in by their words alone, not embedded yet."""
        with self._lock:
            generation, added, removed = self._generation, self._added, self._removed
            starts = generation.starts
            bare = starts[1:] == starts[:-1]
            hidden = sum(
                1
                for key in removed | added.keys()
                if key in generation.positions and bare[generation.positions[key]]
            )
            waiting = sum(1 for pending in added.values() if not len(pending.vectors))
            return int(bare.sum()) - hidden + waiting

    def __contains__(self, chunk_hash: object) -> bool:
        with self._lock:
            if chunk_hash in self._added:
                return True
            return chunk_hash in self._generation.positions and chunk_hash not in self._removed

    def records(self) -> dict[str, ChunkRecord]:
        """Every chunk now in the model, by chunk hash."""
        with self._lock:
            generation, added, removed = self._generation, dict(self._added), set(self._removed)
        found = {
            record.chunk_hash: record
            for record in generation.records
            if record.chunk_hash not in removed
        }
        found.update({key: pending.record for key, pending in added.items()})
        return found

    def entries(self) -> list[tuple[ChunkRecord, npt.NDArray[np.float32]]]:
        """Every chunk with its vectors (for the cache and the next generation)."""
        with self._lock:
            generation, added, removed = self._generation, dict(self._added), set(self._removed)
        entries = [
            (record, generation.vectors(i))
            for i, record in enumerate(generation.records)
            if record.chunk_hash not in removed and record.chunk_hash not in added
        ]
        entries += [(pending.record, pending.vectors) for pending in added.values()]
        return entries

    def overlay(self) -> tuple[list[tuple[ChunkRecord, npt.NDArray[np.float32]]], list[str]]:
        """The changes since the generation: chunks added or changed, and chunks removed."""
        with self._lock:
            added = [(p.record, p.vectors) for p in self._added.values()]
            return added, sorted(self._removed)

    def generation(self) -> Generation:
        with self._lock:
            return self._generation

    def overlay_size(self) -> int:
        with self._lock:
            return len(self._added) + len(self._removed)

    def candidates(
        self, query_vector: npt.NDArray[np.float32], query_tokens: Sequence[str], depth: int
    ) -> tuple[list[Candidate], float]:
        """The chunks any leg ranks among its *depth* best, each with every leg's score, and
        the context share of the generation they were scored on.

        The pool: the dense leg's best chunks, the best of both lexical legs (BM25 is scored
        for every chunk at once, and a context's sum from it), and the overlay's chunks. The
        dense context is left out where the store's context share is 0 (it would not count)."""
        with self._lock:
            generation = self._generation
            hidden = self._removed | self._added.keys()
            removed = set(self._removed)
            pending, pending_vectors, pending_owner, retexted = self._stack()
        positions = generation.positions
        in_context = generation.context_share > 0
        unseen = np.zeros(len(generation.records), bool)
        unseen[[positions[key] for key in hidden if key in positions]] = True
        # A chunk whose vectors changed but not its text keeps its words in the generation.
        lexical = generation.lexical.scores(query_tokens)
        lexical[[positions[key] for key in removed | retexted if key in positions]] = 0.0
        dense = generation.dense.search(query_vector, depth + len(hidden))
        seeds = dense.positions[~unseen[dense.positions]]
        # The best lexical contexts join the pool in every store (where the context legs do
        # not count, the entries whose neighbours hold the query's words still compete).
        lexical_context = generation.context_sum(lexical)
        pool = [seeds, _best(lexical, depth), _best(lexical_context, depth)]
        pooled = np.unique(np.concatenate(pool))
        pooled = pooled[~unseen[pooled]]
        best = np.full(len(pending), -1.0, np.float32)
        if pending:
            np.maximum.at(best, pending_owner, pending_vectors @ query_vector)
        # Overlay chunks whose text the generation has (only their vectors changed) keep its
        # words and neighbours, and score with their new vectors.
        placed = {
            i: positions[item.record.chunk_hash]
            for i, item in enumerate(pending)
            if item.record.chunk_hash in positions and item.record.chunk_hash not in retexted
        }
        places = np.array(sorted(placed.values()), np.int64)
        scored = np.union1d(pooled, places)
        # The cosine of every chunk scored and of its neighbours (a context's mean needs them).
        needed = generation.around(scored) if in_context else scored
        cosine = np.zeros(len(generation.records))
        cosine[needed] = generation.best_cosines(needed, query_vector)
        for i, place in placed.items():
            cosine[place] = best[i]
        dense_context = generation.context_mean(scored, cosine) if in_context else cosine[scored]
        context_of = dict(zip(scored.tolist(), dense_context.tolist(), strict=True))
        records = [generation.records[p] for p in pooled.tolist()]
        rows = [(cosine[p], lexical[p], context_of[p], lexical_context[p]) for p in pooled.tolist()]
        having = generation.starts[1:] > generation.starts[:-1]
        embedded = [bool(having[p]) for p in pooled.tolist()]
        words = generation.lexical.score_documents(query_tokens, [item.tokens for item in pending])
        for i, item in enumerate(pending):
            records.append(item.record)
            embedded.append(len(item.vectors) > 0)
            at = placed.get(i)
            if at is None:  # new: no neighbours until the overlay is folded
                rows.append((float(best[i]), words[i], float(best[i]), words[i]))
            else:
                rows.append((best[i], lexical[at], context_of[at], lexical_context[at]))
        return _ranked(records, np.array(rows, np.float64).reshape(-1, 4), embedded, depth), (
            generation.context_share
        )

    def idf(self, token: str) -> float:
        return self.generation().lexical.idf(token)

    # -- changing --------------------------------------------------------------------------

    def apply(
        self,
        upserts: Iterable[tuple[ChunkRecord, npt.NDArray[np.float32]]] = (),
        removals: Iterable[str] = (),
    ) -> None:
        """Make *upserts* searchable and *removals* unsearchable, from the next search on."""
        # Rounded as the generation stores them: a chunk scores the same before and after the
        # overlay is folded, in this process and in the next one that loads the cache.
        dense = self.generation().dense
        staged = [
            _Pending(
                record,
                dense.rounded(np.asarray(vectors, np.float32)),
                tuple(lexical_words(record.content, record.source)),
            )
            for record, vectors in upserts
        ]
        with self._lock:
            for key in removals:
                self._added.pop(key, None)
                if key in self._generation.positions:
                    self._removed.add(key)
            for item in staged:
                self._added[item.record.chunk_hash] = item
                self._removed.discard(item.record.chunk_hash)
            self._stacked = None

    def needs_folding(self) -> bool:
        """Whether the overlay outgrew what a search scores cheaply beside the generation:
        a few hundred chunks, or a twentieth of the generation (folding costs its size)."""
        with self._lock:
            size, limit = len(self._added) + len(self._removed), len(self._generation.records)
        return size >= max(OVERLAY_LIMIT, limit // 20)

    def fold(self) -> None:
        """Build a generation with the overlay in it and swap it in; the changes made while it
        was built stay in the overlay. Runs off the search path (it takes seconds at 100k)."""
        with self._folding:
            with self._lock:
                base, added, removed = self._generation, dict(self._added), set(self._removed)
            if not added and not removed:
                return
            entries = [
                (record, base.vectors(i))
                for i, record in enumerate(base.records)
                if record.chunk_hash not in removed and record.chunk_hash not in added
            ]
            entries += [(p.record, p.vectors) for p in added.values()]
            same_text = not removed and all(
                key in base.positions
                and base.records[base.positions[key]].content == p.record.content
                for key, p in added.items()
            )
            if same_text:  # only vectors changed: keep the lexical index, and the order
                order = {key: i for i, key in enumerate(base.positions)}
                entries.sort(key=lambda entry: order[entry[0].chunk_hash])
            fresh = Generation.build(entries, base.lexical if same_text else None)
            with self._lock:
                self._generation = fresh
                for key, item in added.items():
                    if self._added.get(key) is item:
                        del self._added[key]
                self._removed -= removed
                self._removed = {key for key in self._removed if key in fresh.positions}
                self._stacked = None

    def replace(self, generation: Generation) -> None:
        with self._lock:
            self._generation = generation
            self._added.clear()
            self._removed.clear()
            self._stacked = None

    def _stack(self) -> tuple[list[_Pending], npt.NDArray[np.float32], list[int], set[str]]:
        """The overlay's vectors as one matrix, and the chunks whose text the generation does
        not have (kept until the overlay or the generation changes); under the lock."""
        if self._stacked is None:
            pending = list(self._added.values())
            if pending:
                matrix = np.concatenate([p.vectors for p in pending]).astype(np.float32)
                owner = [i for i, p in enumerate(pending) for _ in range(len(p.vectors))]
            else:
                matrix, owner = np.zeros((0, 1), np.float32), []
            records, positions = self._generation.records, self._generation.positions
            retexted = {
                p.record.chunk_hash
                for p in pending
                if p.record.chunk_hash not in positions
                or records[positions[p.record.chunk_hash]].content != p.record.content
            }
            self._stacked = (pending, matrix, owner, retexted)
        return self._stacked


def _best(values: npt.NDArray[np.float64], depth: int) -> npt.NDArray[np.int64]:
    """The positions of the *depth* highest positive *values*."""
    scored = np.flatnonzero(values > 0)
    if len(scored) > depth:
        scored = scored[np.argpartition(-values[scored], depth - 1)[:depth]]
    return scored.astype(np.int64)


_LEGS = ("dense", "lexical", "dense_context", "lexical_context")


def _ranked(
    records: Sequence[ChunkRecord],
    scores: npt.NDArray[np.float64],
    embedded: Sequence[bool],
    depth: int,
) -> list[Candidate]:
    """The pooled chunks (*scores*: a row per chunk, a column per leg of ``_LEGS``) some leg
    ranks among its *depth* best, with their rank in each leg (a lexical leg gives no rank to a
    chunk with none of the query's words)."""
    ranks = np.zeros(scores.shape, np.int64)
    for column, leg in enumerate(_LEGS):
        order = np.argsort(-scores[:, column], kind="stable")
        ranks[order, column] = np.arange(1, len(order) + 1)
        if leg.startswith("lexical"):
            ranks[scores[:, column] <= 0, column] = 0
    # A chunk with no vector yet has no place in the dense legs.
    bare = ~np.asarray(embedded, bool)
    ranks[bare, 0] = ranks[bare, 2] = 0
    kept = ((ranks > 0) & (ranks <= depth)).any(axis=1)
    return [
        Candidate(
            record=records[i],
            dense=float(scores[i, 0]),
            lexical=float(scores[i, 1]),
            dense_context=float(scores[i, 2]),
            lexical_context=float(scores[i, 3]),
            ranks={leg: int(ranks[i, c]) or None for c, leg in enumerate(_LEGS)},
            embedded=embedded[i],
        )
        for i in np.flatnonzero(kept).tolist()
    ]
