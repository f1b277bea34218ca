"""Scores as a best-first list shows them: relevance that never rises down the list, two
decimals rounded down, and ties that say so.

A ranker orders hits by one thing (pimem's by fused legs, a reranker by its model) and may
give each a relevance computed from another (the best fact's cosine and the words held), so a
list could read 1.00, 0.35, 0.99. A reader takes that as a contradiction, and an agent trusts
the 0.99 it should have read third; the order is what the ranker stands behind, so the score
follows it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs

from pimem_core.types import LegScore, SearchHit

#: The leg a lowered hit keeps its own relevance in.
OWN_RELEVANCE = "relevance"


def never_rising(hits: Sequence[SearchHit]) -> tuple[SearchHit, ...]:
    """*hits*, best first, each relevance-scored hit at most as relevant as the one above it.

    A lowered hit keeps its own relevance as a ``relevance`` leg (ranked by it among the
    relevance-scored *hits*), for ``--explain`` and the JSON. Hits scored otherwise pass
    unchanged: rank fusion and a reranker's scores only order.
    """
    scored = [i for i, hit in enumerate(hits) if hit.score_kind == "relevance"]
    # Stable: equal relevance ranks in list order.
    own_rank = {i: place for place, i in enumerate(sorted(scored, key=lambda i: -hits[i].score), 1)}
    shown: list[SearchHit] = []
    ceiling: float | None = None
    for i, hit in enumerate(hits):
        if hit.score_kind != "relevance":
            shown.append(hit)
            continue
        if ceiling is not None and hit.score > ceiling:
            own = LegScore(name=OWN_RELEVANCE, rank=own_rank[i], score=hit.score)
            hit = attrs.evolve(hit, score=ceiling, legs=(*hit.legs, own))
        shown.append(hit)
        ceiling = hit.score
    return tuple(shown)


def shown_score(score: float) -> str:
    """*score* as a list shows it: two decimals, rounded down, so a hit never reads as reaching
    a score it does not (0.297 is 0.29, below the threshold of 0.30, as the notice says)."""
    # The epsilon keeps 0.29 (28.999... hundredths in binary) at 0.29.
    return f"{math.floor(score * 100 + 1e-9) / 100:.2f}"


def ties(hits: Sequence[SearchHit]) -> list[int | None]:
    """For each hit of a best-first list, the number of the first hit it is tied with (the same
    kind of score, shown alike), ``None`` when it is not tied with the one above. Tied hits
    keep the order their ranker gave them."""
    found: list[int | None] = []
    for number, hit in enumerate(hits, 1):
        above = hits[number - 2] if number > 1 else None
        same = (
            above is not None
            and above.score_kind == hit.score_kind
            and shown_score(above.score) == shown_score(hit.score)
        )
        found.append((found[-1] or number - 1) if same else None)
    return found


def own_relevance(hit: SearchHit) -> float:
    """The relevance *hit* had before a list lowered it to the one above (``never_rising``)."""
    own = next((leg.score for leg in hit.legs if leg.name == OWN_RELEVANCE), None)
    return hit.score if own is None else own
