"""The dense leg: one vector per fact, a chunk scored as its best fact.

Vectors are kept as 8-bit codes in faiss's exhaustive scalar-quantizer scan, one scale for the
whole generation (the largest component maps to 127). A scan is bound by memory bandwidth:
half of float16's bytes scanned about twice as fast (10 against 20 ms at 180k facts), in a
quarter of float32's memory, and the cosine it gives is within 0.004 of the exact one for unit
vectors of this size (ADR 0013). Vectors are unit length, so the inner product is the cosine.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import faiss
import numpy as np
import numpy.typing as npt

from pimem_core.plugin import private_dir

#: Vectors encoded per step: a float32 copy of every vector at once would double the peak.
_SLICE = 16_384


@attrs.frozen
class DenseHits:
    """The best chunks for one query: chunk positions and their best fact's cosine."""

    positions: npt.NDArray[np.int64]
    scores: npt.NDArray[np.float32]


def scale_for(vectors: npt.NDArray[np.floating]) -> float:
    """The factor that maps the largest component of *vectors* to 127."""
    largest = float(np.abs(vectors).max()) if vectors.size else 0.0
    return 127.0 / largest if largest > 0 else 1.0


def quantize(vectors: npt.NDArray[np.floating], scale: float) -> npt.NDArray[np.int8]:
    """*vectors* as codes at *scale*, a slice at a time (no float copy of them all)."""
    codes: npt.NDArray[np.int8] = np.empty(vectors.shape, np.int8)
    for start in range(0, len(vectors), _SLICE):
        part = np.rint(np.asarray(vectors[start : start + _SLICE], np.float32) * scale)
        codes[start : start + _SLICE] = np.clip(part, -127, 127)
    return codes


class FactIndex:
    """Fact vectors and the chunk each belongs to; rebuilt, never edited in place."""

    def __init__(
        self, codes: npt.NDArray[np.int8], scale: float, owners: npt.NDArray[np.int32]
    ) -> None:
        self.owners = owners
        self.scale = scale
        self.dimension = int(codes.shape[1]) if codes.ndim == 2 else 0
        self._index: faiss.IndexScalarQuantizer | None = None
        if len(owners):
            # "direct signed" keeps each component as the byte code + 128: the codes are
            # handed over as they are, with no float copy and no encoding.
            index = faiss.IndexScalarQuantizer(
                self.dimension,
                faiss.ScalarQuantizer.QT_8bit_direct_signed,
                faiss.METRIC_INNER_PRODUCT,
            )
            stored = np.ascontiguousarray(codes, np.int8).view(np.uint8) ^ np.uint8(0x80)
            faiss.copy_array_to_vector(stored.ravel(), index.codes)
            index.ntotal = len(codes)
            self._index = index  # the only copy of the vectors

    @classmethod
    def of(cls, vectors: npt.NDArray[np.floating], owners: npt.NDArray[np.int32]) -> FactIndex:
        """An index of float *vectors*, encoded at the scale they need."""
        scale = scale_for(vectors)
        return cls(quantize(vectors, scale), scale, owners)

    def vectors(self, start: int, end: int) -> npt.NDArray[np.float32]:
        """Facts *start* to *end* (exclusive), as stored (8-bit precision)."""
        if self._index is None or end <= start:
            return np.zeros((0, self.dimension), np.float32)
        found: npt.NDArray[np.float32] = self._index.reconstruct_n(start, end - start)
        return found / np.float32(self.scale)

    def gather(self, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        """The facts numbered *ids*, as stored."""
        if self._index is None or not len(ids):
            return np.zeros((0, self.dimension), np.float32)
        found: npt.NDArray[np.float32] = self._index.reconstruct_batch(ids)
        return found / np.float32(self.scale)

    def rounded(self, vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """*vectors* as this index would store them (the overlay scores as a fold would)."""
        if self._index is None:
            return vectors
        return quantize(vectors, self.scale).astype(np.float32) / np.float32(self.scale)

    def search(self, query: npt.NDArray[np.float32], depth: int) -> DenseHits:
        """The *depth* best chunks by their best fact."""
        if self._index is None:
            return DenseHits(np.zeros(0, np.int64), np.zeros(0, np.float32))
        # One scan thread, set in the searching thread (OpenMP's setting is per thread): a
        # second one waits for a core the embedder holds, then spins and slows the next query's
        # embedding (measured: 6.0 against 3.5 ms).
        faiss.omp_set_num_threads(1)
        # Chunks have a few facts each: three times as many facts give *depth* chunks.
        facts = min(len(self.owners), depth * 3)
        # faiss truncates the query to integers as it truncates the vectors: it is given as
        # codes of its own scale, and the inner product divided by both scales.
        query_scale = scale_for(query)
        codes = quantize(query.reshape(1, -1), query_scale).astype(np.float32)
        scores, found = self._index.search(codes, facts)
        scores = scores / np.float32(self.scale * query_scale)
        kept = found[0] >= 0
        owners = self.owners[found[0][kept]]
        # faiss returns facts best first: a chunk's first occurrence is its best fact.
        _, first = np.unique(owners, return_index=True)
        first.sort()
        first = first[:depth]
        return DenseHits(
            owners[first].astype(np.int64),
            scores[0][kept][first].astype(np.float32),
        )

    def codes(self) -> npt.NDArray[np.int8]:
        if self._index is None:
            return np.zeros((0, self.dimension), np.int8)
        stored = faiss.vector_to_array(self._index.codes) ^ np.uint8(0x80)
        codes: npt.NDArray[np.int8] = stored.view(np.int8).reshape(-1, self.dimension)
        return codes

    def save(self, directory: Path) -> None:
        private_dir(directory)
        np.save(directory / "facts.npy", self.codes())
        np.save(directory / "owners.npy", self.owners)
        np.save(directory / "scale.npy", np.array([self.scale], np.float64))

    @classmethod
    def load(cls, directory: Path) -> FactIndex:
        codes = np.load(directory / "facts.npy")
        owners = np.load(directory / "owners.npy")
        if codes.dtype == np.float16:  # saved before vectors were 8-bit
            return cls.of(codes, owners)
        if codes.dtype != np.int8:
            raise ValueError(f"fact vectors of an unknown type ({codes.dtype})")
        return cls(codes, float(np.load(directory / "scale.npy")[0]), owners)
