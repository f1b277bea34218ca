"""Ranking on the read model: both legs' scores fused per query, and a relevance in [0, 1].

Fusion is on per-query standardised scores (z-scores over each leg's candidates), not ranks:
a chunk far ahead in one leg keeps its lead, which rank fusion throws away. The relevance is a
logistic function of two things that do not depend on the collection: the best fact's cosine
and the share of the query's rare words the chunk holds (ADR 0013 says how it was fitted).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import attrs
import numpy as np

from pimem_core.types import LegScore, SearchHit
from pimem_plugins.memsearch.recall.read_model import Candidate
from pimem_plugins.memsearch.recall.text import clean_text, tokens

#: Candidates each leg contributes to the fusion.
DEPTH = 100
#: Weight of the dense leg in the fusion; the lexical leg has the rest.
DENSE_WEIGHT = 0.8


@attrs.frozen(kw_only=True)
class Relevance:
    """``sigmoid(cosine * cosine_weight + coverage * coverage_weight + bias)``."""

    cosine_weight: float
    coverage_weight: float
    bias: float

    def __call__(self, cosine: float, coverage: float) -> float:
        z = self.cosine_weight * cosine + self.coverage_weight * coverage + self.bias
        return 1 / (1 + math.exp(-z))


#: Fitted on the 1,000-entry world of the quality benchmark (seed 0); reported on others.
RELEVANCE = Relevance(cosine_weight=62.1, coverage_weight=9.38, bias=-28.2)
#: Below this relevance a hit is probably not about the query (auto-context's floor).
RELEVANCE_THRESHOLD = 0.30


def coverage(query_tokens: Sequence[str], content: str, idf: Callable[[str], float]) -> float:
    """The share of the query's IDF weight found in *content*'s words."""
    wanted = set(query_tokens)
    if not wanted:
        return 0.0
    have = set(tokens(clean_text(content)))
    total = sum(idf(token) for token in wanted)
    return sum(idf(token) for token in wanted & have) / total if total else 0.0


def _standardised(values: Sequence[float | None]) -> list[float]:
    """z-scores of the values present; a missing value scores as the leg's lowest."""
    present = [v for v in values if v is not None]
    if not present:
        return [0.0] * len(values)
    floor = min(present)
    filled = np.array([floor if v is None else v for v in values], np.float64)
    spread = float(np.std(filled))
    if spread == 0:
        return [0.0] * len(values)
    standardised: list[float] = ((filled - float(np.mean(filled))) / spread).tolist()
    return standardised


def rank(
    candidates: Sequence[Candidate],
    query_tokens: Sequence[str],
    top_k: int,
    idf: Callable[[str], float],
    *,
    relevance: Relevance = RELEVANCE,
    dense_weight: float = DENSE_WEIGHT,
) -> tuple[SearchHit, ...]:
    """The *top_k* best candidates as hits, each text once, scored by relevance."""
    if not candidates:
        return ()
    dense = _standardised([c.dense for c in candidates])
    lexical = _standardised([c.lexical for c in candidates])
    fused = [
        dense_weight * d + (1 - dense_weight) * lex for d, lex in zip(dense, lexical, strict=True)
    ]
    order = sorted(range(len(candidates)), key=lambda i: -fused[i])
    hits: list[SearchHit] = []
    seen: set[str] = set()
    for place, i in enumerate(order, 1):
        candidate = candidates[i]
        text = clean_text(candidate.record.content)
        if text in seen:
            continue  # the same text under another anchor: the agent reads it once
        seen.add(text)
        record = candidate.record
        cosine = candidate.dense or 0.0
        score = relevance(cosine, coverage(query_tokens, record.content, idf))
        hits.append(
            SearchHit(
                chunk_hash=record.chunk_hash,
                content=record.content,
                source=record.source,
                heading=record.heading,
                heading_level=record.heading_level,
                start_line=record.start_line,
                # memsearch's end_line counts the blank lines after the text; a hit names the
                # text's own last line, as expand does.
                end_line=max(
                    record.start_line,
                    min(record.end_line, record.start_line + record.content.count("\n")),
                ),
                score=score,
                score_kind="relevance",
                legs=(
                    LegScore(name="dense", rank=candidate.dense_rank, score=candidate.dense),
                    LegScore(name="lexical", rank=candidate.lexical_rank, score=candidate.lexical),
                    LegScore(name="fused", rank=place, score=fused[i]),
                ),
            )
        )
        if len(hits) == top_k:
            break
    return tuple(hits)
