"""The dense leg: one vector per fact, a chunk scored as its best fact.

Vectors are kept as float16 in faiss's exhaustive scalar-quantizer scan: half the memory of
float32 and faster than numpy on float16 (ADR 0013). Vectors are unit length, so the inner
product is the cosine.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import faiss
import numpy as np
import numpy.typing as npt


@attrs.frozen
class DenseHits:
    """The best chunks for one query: chunk positions and their best fact's cosine."""

    positions: npt.NDArray[np.int64]
    scores: npt.NDArray[np.float32]


class FactIndex:
    """Fact vectors and the chunk each belongs to; rebuilt, never edited in place."""

    def __init__(self, vectors: npt.NDArray[np.float16], owners: npt.NDArray[np.int32]) -> None:
        self.owners = owners
        self.dimension = int(vectors.shape[1]) if vectors.ndim == 2 else 0
        self._index: faiss.Index | None = None
        if len(owners):
            # One scan thread: a second one waits for a core the embedder or another agent
            # holds, and one search is a few milliseconds of memory bandwidth (measured: 17 ms
            # against 32 ms at 180,000 facts on a busy 2-core machine).
            faiss.omp_set_num_threads(1)
            index = faiss.IndexScalarQuantizer(
                self.dimension, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT
            )
            # Added in slices: a float32 copy of every vector at once would double the peak.
            for start in range(0, len(vectors), 16_384):
                index.add(np.ascontiguousarray(vectors[start : start + 16_384], np.float32))
            self._index = index  # the only copy of the vectors: faiss keeps them as float16

    def vectors(self, start: int, end: int) -> npt.NDArray[np.float32]:
        """Facts *start* to *end* (exclusive), as stored (float16 precision)."""
        if self._index is None or end <= start:
            return np.zeros((0, self.dimension), np.float32)
        found: npt.NDArray[np.float32] = self._index.reconstruct_n(start, end - start)
        return found

    def search(self, query: npt.NDArray[np.float32], depth: int) -> DenseHits:
        """The *depth* best chunks by their best fact."""
        if self._index is None:
            return DenseHits(np.zeros(0, np.int64), np.zeros(0, np.float32))
        # Chunks have a few facts each: three times as many facts give *depth* chunks.
        facts = min(len(self.owners), depth * 3)
        scores, found = self._index.search(query.reshape(1, -1).astype(np.float32), facts)
        best: dict[int, float] = {}
        for fact, score in zip(found[0].tolist(), scores[0].tolist(), strict=True):
            if fact < 0:
                continue
            owner = int(self.owners[fact])
            if owner not in best:  # faiss returns facts best first
                best[owner] = score
        chosen = list(best.items())[:depth]
        return DenseHits(
            np.array([position for position, _ in chosen], np.int64),
            np.array([score for _, score in chosen], np.float32),
        )

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        np.save(directory / "facts.npy", self.vectors(0, len(self.owners)).astype(np.float16))
        np.save(directory / "owners.npy", self.owners)

    @classmethod
    def load(cls, directory: Path) -> FactIndex:
        return cls(np.load(directory / "facts.npy"), np.load(directory / "owners.npy"))
