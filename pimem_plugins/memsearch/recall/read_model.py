"""The read model: a collection's chunks, their fact vectors and a lexical index, in memory.

Built in *generations*: a generation is immutable (its faiss scan and bm25s index are rebuilt,
never edited), and the changes since it was built sit in a small overlay that every search
scores alongside it. A search reads one generation and the overlay under a lock held for
microseconds; rebuilding happens off the search path and swaps the generation in whole.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable, Mapping, Sequence

import attrs
import numpy as np
import numpy.typing as npt

from pimem_plugins.memsearch.recall.dense import FactIndex, quantize, scale_for
from pimem_plugins.memsearch.recall.lexical import LexicalIndex
from pimem_plugins.memsearch.recall.text import clean_text, tokens

#: Changes the overlay holds before they are folded into a new generation.
OVERLAY_LIMIT = 256


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


@attrs.frozen
class Candidate:
    """A chunk a search found, with what each leg said (``None``: not among its candidates)."""

    record: ChunkRecord
    dense: float | None
    dense_rank: int | None
    lexical: float | None
    lexical_rank: int | None


@attrs.frozen
class _Pending:
    record: ChunkRecord
    vectors: npt.NDArray[np.float32]
    tokens: tuple[str, ...]


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

    @classmethod
    def build(
        cls,
        entries: Sequence[tuple[ChunkRecord, npt.NDArray[np.float32]]],
        lexical: LexicalIndex | None = None,
    ) -> Generation:
        """A generation of *entries* (record, its vectors); *lexical* reuses an index built
        over the same records in the same order (only vectors changed)."""
        records = [record for record, _ in entries]
        dimension = next((vectors.shape[1] for _, vectors in entries if vectors.size), 0)
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
            lexical = LexicalIndex.build([tokens(clean_text(r.content)) for r in records])
        return cls(records, FactIndex(codes, scale, owners), lexical)

    def vectors(self, position: int) -> npt.NDArray[np.float32]:
        start, end = int(self.starts[position]), int(self.starts[position + 1])
        return self.dense.vectors(start, end)

    def entries(self) -> list[tuple[ChunkRecord, npt.NDArray[np.float32]]]:
        return [(record, self.vectors(i)) for i, record in enumerate(self.records)]

    def best_cosines(self, positions: Sequence[int], query: npt.NDArray[np.float32]) -> list[float]:
        """Each chunk's best fact cosine with *query* (0 for a chunk without vectors)."""
        starts, ends = self.starts[list(positions)], self.starts[[p + 1 for p in positions]]
        ids = np.concatenate(
            [np.arange(a, b) for a, b in zip(starts, ends, strict=True)] or [np.zeros(0, np.int64)]
        )
        cosines = self.dense.gather(ids.astype(np.int64)) @ query
        found, offset = [], 0
        for count in (ends - starts).tolist():
            found.append(float(cosines[offset : offset + count].max()) if count else 0.0)
            offset += count
        return found


EMPTY = Generation.build([])


class ReadModel:
    """One collection's read model: a generation plus the changes made since it was built."""

    def __init__(self, generation: Generation = EMPTY) -> None:
        self._generation = generation
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
    ) -> list[Candidate]:
        """The chunks either leg ranks among its *depth* best, with both legs' scores: a
        chunk the dense leg missed gets its exact cosine; one the lexical leg missed, none."""
        with self._lock:
            generation = self._generation
            hidden = self._removed | self._added.keys()
            pending, pending_vectors, pending_owner, retexted = self._stack()
        # A chunk whose vectors changed but not its text keeps its place in the lexical index.
        hidden_text = self._removed | retexted
        dense = generation.dense.search(query_vector, depth + len(hidden))
        lexical = generation.lexical.search(query_tokens, depth + len(hidden_text))
        found: dict[str, dict[str, float]] = {}

        def note(key: str, leg: str, score: float) -> None:
            found.setdefault(key, {})[leg] = score

        for position, score in zip(dense.positions.tolist(), dense.scores.tolist(), strict=True):
            key = generation.records[position].chunk_hash
            if key not in hidden:
                note(key, "dense", score)
        for position, score in zip(
            lexical.positions.tolist(), lexical.scores.tolist(), strict=True
        ):
            key = generation.records[position].chunk_hash
            if key not in hidden_text:
                note(key, "lexical", score)
        if pending:
            cosines = pending_vectors @ query_vector
            best = np.full(len(pending), -1.0, np.float32)
            np.maximum.at(best, pending_owner, cosines)
            for item, cosine in zip(pending, best.tolist(), strict=True):
                note(item.record.chunk_hash, "dense", cosine)
            texts = [p for p in pending if p.record.chunk_hash in retexted]
            lexical_scores = generation.lexical.score_documents(
                query_tokens, [p.tokens for p in texts]
            )
            for item, bm25 in zip(texts, lexical_scores, strict=True):
                if bm25 > 0:
                    note(item.record.chunk_hash, "lexical", bm25)
        ranked = {leg: _ranks(found, leg, depth) for leg in ("dense", "lexical")}
        by_key = {p.record.chunk_hash: p for p in pending}
        kept = {
            key: legs
            for key, legs in found.items()
            # beyond the depth of both legs once the overlay took its place
            if key in ranked["dense"] or key in ranked["lexical"]
        }
        # A chunk the dense leg's depth missed gets its cosine from its stored vectors.
        missed = [key for key, legs in kept.items() if "dense" not in legs and key not in by_key]
        positions = [generation.positions[key] for key in missed]
        for key, cosine in zip(
            missed, generation.best_cosines(positions, query_vector), strict=True
        ):
            kept[key]["dense_missed"] = cosine
        candidates = []
        for key, legs in kept.items():
            record = (
                by_key[key].record
                if key in by_key
                else generation.records[generation.positions[key]]
            )
            if "dense" in legs:
                cosine = legs["dense"]
            elif "dense_missed" in legs:
                cosine = legs["dense_missed"]
            else:
                vectors = by_key[key].vectors
                cosine = float(np.max(vectors @ query_vector)) if len(vectors) else 0.0
            lexical_score = legs.get("lexical")
            candidates.append(
                Candidate(
                    record=record,
                    dense=float(cosine),
                    dense_rank=ranked["dense"].get(key),
                    lexical=None if lexical_score is None else float(lexical_score),
                    lexical_rank=ranked["lexical"].get(key),
                )
            )
        return candidates

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
                tuple(tokens(clean_text(record.content))),
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


def _ranks(found: Mapping[str, Mapping[str, float]], leg: str, depth: int) -> dict[str, int]:
    scored = sorted(
        ((legs[leg], key) for key, legs in found.items() if leg in legs),
        key=lambda item: -item[0],
    )
    return {key: rank for rank, (_, key) in enumerate(scored[:depth], 1)}
