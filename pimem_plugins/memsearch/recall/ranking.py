"""Ranking on the read model: four legs' scores fused per query, and a relevance in [0, 1].

The legs are dense and lexical, each on the chunk itself and on its context (the chunk with
its neighbours). Fusion is on per-query standardised scores (z-scores over the candidates), not
ranks: a chunk far ahead in one leg keeps its lead, which rank fusion throws away. How much the
context legs count is the store's context share (ADR 0018): none where neighbouring entries
are about unrelated things, the most where an entry is one turn of a conversation.

The relevance is a logistic function of two things that do not depend on the collection: the
best fact's cosine and the share of the query's rare words the chunk holds (ADR 0013 says how it
was fitted).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import attrs
import numpy as np
import numpy.typing as npt

from pimem_core.plugin import LegScore, SearchHit, never_rising
from pimem_plugins.memsearch.chunks import text_end_line
from pimem_plugins.memsearch.recall.read_model import Candidate
from pimem_plugins.memsearch.recall.text import clean_text, tokens
from pimem_plugins.shared.hollow import is_hollow

#: Candidates each leg contributes to the fusion.
DEPTH = 100


@attrs.frozen
class Weights:
    """Each leg's weight in the fusion."""

    dense: float
    lexical: float
    dense_context: float
    lexical_context: float

    def mixed(self, other: Weights, share: float) -> Weights:
        """These weights moved *share* (0 to 1) of the way to *other*."""
        return Weights(
            *(
                (1 - share) * mine + share * theirs
                for mine, theirs in zip(attrs.astuple(self), attrs.astuple(other), strict=True)
            )
        )


#: Where neighbouring entries are unrelated (context share 0): the entry alone.
ALONE = Weights(dense=0.75, lexical=0.25, dense_context=0.0, lexical_context=0.0)
#: Where an entry is a turn of a conversation (context share 1).
IN_CONTEXT = Weights(dense=0.3, lexical=0.2, dense_context=0.3, lexical_context=0.2)


def weights_for(context_share: float) -> Weights:
    return ALONE.mixed(IN_CONTEXT, context_share)


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


def coverage(query_tokens: Sequence[str], content: str, idf: Callable[[str], float]) -> float:
    """The share of the query's IDF weight found in *content*'s words."""
    wanted = set(query_tokens)
    if not wanted:
        return 0.0
    have = set(tokens(clean_text(content)))
    total = sum(idf(token) for token in wanted)
    return sum(idf(token) for token in wanted & have) / total if total else 0.0


def _standardised(values: Sequence[float] | npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """z-scores of *values* (all 0 when they are all equal, or none)."""
    found = np.asarray(values, np.float64)
    if not len(found):  # no candidate embedded yet: numpy would warn of an empty slice
        return found
    spread = float(np.std(found))
    if spread == 0:
        return np.zeros(len(found))
    standardised: npt.NDArray[np.float64] = (found - float(np.mean(found))) / spread
    return standardised


def rank(
    candidates: Sequence[Candidate],
    query_tokens: Sequence[str],
    top_k: int,
    idf: Callable[[str], float],
    *,
    weights: Weights = ALONE,
    relevance: Relevance = RELEVANCE,
) -> tuple[SearchHit, ...]:
    """The *top_k* best candidates as hits, each text once, scored by relevance."""
    if not candidates:
        return ()
    legs = [candidate.legs() for candidate in candidates]
    # A hit explains itself with the legs that counted (the own ones always).
    counted = [leg for leg, weight in attrs.asdict(weights).items() if weight or "_" not in leg]
    fused = np.zeros(len(candidates))
    # A chunk taken in by its words alone (not embedded yet) has no dense score: it sits at
    # the embedded candidates' mean in the dense legs, and the lexical ones decide.
    embedded = np.array([candidate.embedded for candidate in candidates], bool)
    for leg in counted:
        values = np.array([scores[leg] for scores in legs], np.float64)
        if leg.startswith("dense"):
            standardised = np.zeros(len(candidates))
            standardised[embedded] = _standardised(values[embedded])
        else:
            standardised = _standardised(values)
        fused += getattr(weights, leg) * standardised
    # A hollow entry (a failure marker, a bare heading) goes below every other one, however
    # well its words match: it holds nothing to recall.
    hollow = [is_hollow(candidate.record.content) for candidate in candidates]
    order = sorted(range(len(candidates)), key=lambda i: (hollow[i], -fused[i]))
    hits: list[SearchHit] = []
    seen: set[str] = set()
    for place, i in enumerate(order, 1):
        candidate = candidates[i]
        text = clean_text(candidate.record.content)
        if text in seen:
            continue  # the same text under another anchor: the agent reads it once
        seen.add(text)
        record = candidate.record
        score = relevance(candidate.dense, coverage(query_tokens, record.content, idf))
        hits.append(
            SearchHit(
                chunk_hash=record.chunk_hash,
                content=record.content,
                source=record.source,
                heading=record.heading,
                heading_level=record.heading_level,
                start_line=record.start_line,
                end_line=text_end_line(record.start_line, record.end_line, record.content),
                score=score,
                score_kind="relevance",
                legs=(
                    *(
                        LegScore(name=leg, rank=candidate.ranks[leg], score=legs[i][leg])
                        for leg in counted
                    ),
                    LegScore(name="fused", rank=place, score=float(fused[i])),
                ),
            )
        )
        if len(hits) == top_k:
            break
    # Relevance is not what ordered them: a hit below never reads higher than one above.
    return never_rising(hits)
