"""Ranking metrics for one relevant item per query, and the other pure helpers of the benchmark.

Every query has exactly one gold chunk, so recall@k is "the gold is in the top k", reciprocal
rank is 1/rank within the top 10 (MRR@10), and NDCG@10 is 1/log2(rank + 1) (the ideal DCG is 1).
"""

from __future__ import annotations

import bisect
import math
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

CUTOFF = 10


def rank_of(ranking: Sequence[str], gold: str) -> int | None:
    """The 1-based rank of *gold* in *ranking*, or ``None`` when it is not there."""
    for rank, item in enumerate(ranking, 1):
        if item == gold:
            return rank
    return None


@dataclass(frozen=True)
class Scores:
    n: int
    r1: float
    r5: float
    r10: float
    mrr: float
    ndcg10: float

    def to_json(self) -> dict[str, float]:
        return asdict(self)


def score(ranks: Iterable[int | None], cutoff: int = CUTOFF) -> Scores:
    """R@1/5/10, MRR@cutoff and NDCG@cutoff over queries whose gold ranked *ranks* (``None``:
    not retrieved)."""
    seen = [rank if rank is not None and rank <= cutoff else None for rank in ranks]
    if not seen:
        return Scores(n=0, r1=0.0, r5=0.0, r10=0.0, mrr=0.0, ndcg10=0.0)

    def recall(k: int) -> float:
        return sum(1 for rank in seen if rank is not None and rank <= k) / len(seen)

    return Scores(
        n=len(seen),
        r1=recall(1),
        r5=recall(5),
        r10=recall(10),
        mrr=statistics.fmean(0.0 if rank is None else 1 / rank for rank in seen),
        ndcg10=statistics.fmean(0.0 if rank is None else 1 / math.log2(rank + 1) for rank in seen),
    )


_WORD = re.compile(r"[a-z0-9_.+-]+")
#: Words too common to count as shared content between a query and an entry.
STOP_WORDS = frozenset(
    (
        "a", "an", "the", "and", "or", "of", "in", "on", "at", "to", "for", "from", "by", "with",
        "without", "as", "is", "are", "was", "were", "be", "been", "it", "its", "this", "that",
        "these", "those", "what", "which", "who", "whom", "why", "how", "when", "where", "did",
        "do", "does", "done", "we", "us", "our", "you", "your", "i", "me", "my", "now", "then",
        "than", "once", "while", "into", "over", "under", "up", "down", "out", "off", "again",
        "there", "not", "no", "any", "all", "some", "each", "every", "one", "two", "end", "got",
        "get", "has", "have", "had", "use", "uses", "used",
    )
)  # fmt: skip


def content_words(text: str) -> set[str]:
    words = (word.strip(".-+") for word in _WORD.findall(text.lower()))
    return {word for word in words if len(word) > 1 and word not in STOP_WORDS}


def lexical_overlap(query: str, document: str) -> float:
    """The share of the query's content words that the document contains: how much a query
    copies its gold entry (keyword queries a lot, paraphrases little)."""
    words = content_words(query)
    if not words:
        return 0.0
    return len(words & content_words(document)) / len(words)


def share(flags: Iterable[bool]) -> float:
    values = list(flags)
    return sum(values) / len(values) if values else 0.0


def auc(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    """The chance that a positive scores above a negative, ties counting half (the area under
    the ROC curve, as the Mann-Whitney statistic); ``None`` without both kinds."""
    if not positives or not negatives:
        return None
    ordered = sorted(negatives)
    total = 0.0
    for value in positives:
        below = bisect.bisect_left(ordered, value)
        total += below + (bisect.bisect_right(ordered, value) - below) / 2
    return total / (len(positives) * len(negatives))
