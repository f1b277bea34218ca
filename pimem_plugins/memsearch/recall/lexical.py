"""The lexical leg: BM25 over the chunks' clean text, with bm25s (ADR 0013).

Length normalisation is kept low (``b``): entries are short and similar in length, and a long
entry is long because it holds several facts, not because it repeats a word.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import bm25s
import numpy as np
import numpy.typing as npt

from pimem_core.plugin import private_dir

K1 = 0.9
B = 0.25


class LexicalIndex:
    """BM25 over a fixed list of documents (token lists); rebuilt, never edited in place."""

    def __init__(
        self,
        retriever: bm25s.BM25 | None,
        document_frequency: dict[str, int],
        size: int,
        average_length: float,
    ) -> None:
        self._retriever = retriever
        self._df = document_frequency
        self.size = size
        self._average_length = average_length or 1.0

    @classmethod
    def build(cls, documents: Sequence[Sequence[str]]) -> LexicalIndex:
        df: Counter[str] = Counter()
        for document in documents:
            df.update(set(document))
        if not df:
            return cls(None, {}, len(documents), 0.0)
        retriever = bm25s.BM25(k1=K1, b=B)
        # An empty document still takes its position, so positions stay those of the chunks.
        retriever.index([list(document) for document in documents], show_progress=False)
        average = sum(len(document) for document in documents) / max(1, len(documents))
        return cls(retriever, dict(df), len(documents), average)

    def idf(self, token: str) -> float:
        """BM25's (Lucene) inverse document frequency; a word no document has weighs most."""
        n, df = max(1, self.size), self._df.get(token, 0)
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def scores(self, query: Sequence[str]) -> npt.NDArray[np.float64]:
        """BM25 of every document for *query* (0 for a document with none of its words)."""
        known = [token for token in query if token in self._df]
        if self._retriever is None or not known or self.size == 0:
            return np.zeros(self.size, np.float64)
        return np.asarray(self._retriever.get_scores(known), np.float64)

    def score_documents(
        self, query: Sequence[str], documents: Sequence[Sequence[str]]
    ) -> list[float]:
        """BM25 of documents outside the index (written since it was built), against the
        index's statistics: the same formula, so their scores sit among the indexed ones."""
        weights = {token: self.idf(token) for token in set(query)}
        scores = []
        for document in documents:
            counts = Counter(document)
            norm = K1 * (1 - B + B * len(document) / self._average_length)
            scores.append(
                sum(
                    weights[token] * counts[token] * (K1 + 1) / (counts[token] + norm)
                    for token in weights
                    if counts[token]
                )
            )
        return scores

    def save(self, directory: Path) -> None:
        private_dir(directory)
        if self._retriever is not None:
            self._retriever.save(str(directory / "bm25"), show_progress=False)
        (directory / "lexical.json").write_text(
            json.dumps({"df": self._df, "size": self.size, "average": self._average_length}),
            encoding="utf-8",
        )

    @classmethod
    def load(cls, directory: Path) -> LexicalIndex:
        meta = json.loads((directory / "lexical.json").read_text(encoding="utf-8"))
        retriever = None
        if (directory / "bm25").is_dir():
            retriever = bm25s.BM25.load(str(directory / "bm25"), show_progress=False)
        return cls(retriever, meta["df"], int(meta["size"]), float(meta["average"]))
