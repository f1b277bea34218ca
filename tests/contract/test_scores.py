"""Scores that read right: relevance never rises down a best-first list, ties say so, scores
are shown rounded down, and a list none of whose hits reaches the threshold tells "nothing
close" from "a close match in other words"."""

from __future__ import annotations

import json
from pathlib import Path

import attrs

from pimem_core.render import (
    CLOSE_COSINE,
    hit_to_json,
    none_relevant,
    render_cross_repo,
    render_hits,
)
from pimem_core.scores import never_rising, shown_score, ties
from pimem_core.testing import read_hits
from pimem_core.types import CrossRepoResult, LegScore, ScoreKind, SearchHit
from pimem_plugins.cross_repo import merge_hits

DAY_FILE = "/home/user/repo/.memsearch/memory/2026-08-13.md"


def hit(
    number: int,
    score: float,
    *,
    kind: ScoreKind = "relevance",
    cosine: float | None = None,
    legs: tuple[LegScore, ...] = (),
) -> SearchHit:
    dense = () if cosine is None else (LegScore(name="dense", rank=number, score=cosine),)
    return SearchHit(
        chunk_hash=f"{number:016x}",
        content=f"### 10:0{number}\n- fact number {number}",
        source=DAY_FILE,
        heading=f"10:0{number}",
        heading_level=3,
        start_line=number,
        end_line=number + 1,
        score=score,
        score_kind=kind,
        legs=(*dense, *legs),
    )


def scores(hits: tuple[SearchHit, ...]) -> list[float]:
    return [found.score for found in hits]


# -- never rising ------------------------------------------------------------------------------


def test_a_hit_below_is_never_more_relevant_than_the_one_above() -> None:
    """The issue's list, 1.00, 0.35, 0.99, 1.00, reads 1.00, 0.35, 0.35, 0.35: the order is the
    ranker's, and the lowered hits keep their own relevance as a leg ranked by it."""
    listed = never_rising([hit(1, 1.0), hit(2, 0.35), hit(3, 0.99), hit(4, 1.0)])
    assert scores(listed) == [1.0, 0.35, 0.35, 0.35]
    assert [found.chunk_hash[-1] for found in listed] == ["1", "2", "3", "4"]
    assert listed[0].legs == listed[1].legs == ()
    assert listed[2].legs == (LegScore(name="relevance", rank=3, score=0.99),)
    # Equal relevance ranks in list order: hit 1 before hit 4.
    assert listed[3].legs == (LegScore(name="relevance", rank=2, score=1.0),)


def test_a_list_that_never_rises_is_left_as_it_is() -> None:
    listed = (hit(1, 0.9), hit(2, 0.9), hit(3, 0.2))
    assert never_rising(listed) == listed
    assert never_rising(()) == ()


def test_scores_that_only_order_are_not_touched() -> None:
    """Rank fusion and a reranker's scores say nothing beyond the order: left alone."""
    listed = (hit(1, 0.5, kind="rank_fusion"), hit(2, 0.9, kind="rank_fusion"))
    assert never_rising(listed) == listed


def test_the_json_carries_the_shown_relevance_and_the_own_one_as_a_leg() -> None:
    data = hit_to_json(never_rising([hit(1, 0.5), hit(2, 0.75)])[1])
    assert data["score"] == 0.5
    assert data["legs"] == [{"name": "relevance", "rank": 1, "score": 0.75}]
    json.dumps(data)


def test_a_cross_repo_merge_is_best_first_and_keeps_the_search_order_in_a_tie(
    tmp_path: Path,
) -> None:
    alpha, beta = tmp_path / "alpha", tmp_path / "beta"
    merged = merge_hits(
        [(alpha, (hit(1, 0.9), hit(2, 0.4))), (beta, (hit(3, 0.95), hit(4, 0.4)))], top_k=4
    )
    assert scores(merged) == [0.95, 0.9, 0.4, 0.4]
    assert [found.project for found in merged] == [beta, alpha, alpha, beta]


# -- shown scores and ties ---------------------------------------------------------------------


def test_a_score_is_shown_rounded_down_to_two_decimals() -> None:
    assert [shown_score(value) for value in (0.297, 0.29, 0.3, 0.99996, 1.0, 0.0)] == [
        "0.29",
        "0.29",
        "0.30",
        "0.99",
        "1.00",
        "0.00",
    ]


def test_hits_shown_with_the_same_score_say_which_hit_they_are_tied_with() -> None:
    """Three hits that all read 0.99 are in the ranker's order, and say so; the first of them
    is the one the others are tied with."""
    listed = [hit(1, 0.999991), hit(2, 0.99994), hit(3, 0.9912), hit(4, 0.428), hit(5, 0.421)]
    assert ties(listed) == [None, 1, 1, None, 4]
    text = render_hits("which cache", listed)
    lines = [line for line in text.splitlines() if line[:3] in {f"{n}. " for n in range(1, 6)}]
    assert lines == [
        f"1. 2026-08-13 10:01 | relevance 0.99 | chunk {1:016x}",
        f"2. 2026-08-13 10:02 | relevance 0.99 (tied with 1) | chunk {2:016x}",
        f"3. 2026-08-13 10:03 | relevance 0.99 (tied with 1) | chunk {3:016x}",
        f"4. 2026-08-13 10:04 | relevance 0.42 | chunk {4:016x}",
        f"5. 2026-08-13 10:05 | relevance 0.42 (tied with 4) | chunk {5:016x}",
    ]
    # The test kit reads the tie mark with the rest of the line.
    shown = read_hits(text)
    assert [found.chunk_hash for found in shown] == [f"{n:016x}" for n in range(1, 6)]
    assert [found.tied_with for found in shown] == [None, 1, 1, None, 4]
    assert [found.score for found in shown] == [0.99, 0.99, 0.99, 0.42, 0.42]


def test_scores_of_different_kinds_are_never_tied(tmp_path: Path) -> None:
    listed = (hit(1, 1.0, kind="rank_fusion"), hit(2, 1.0))
    assert ties(listed) == [None, None]
    result = CrossRepoResult(hits=listed, searched=(tmp_path,))
    assert "tied" not in render_cross_repo("q", result)


# -- the all-below-threshold notice --------------------------------------------------------------


def test_far_from_everything_memory_probably_holds_nothing() -> None:
    listed = [hit(1, 0.04, cosine=0.21), hit(2, 0.01, cosine=0.18)]
    assert none_relevant("the kubernetes ingress config", listed) == (
        "No hit reaches the relevance threshold of 0.30 (the best scores 0.04): memory probably "
        'holds nothing about "the kubernetes ingress config". The nearest chunks follow; do not '
        "answer from them unless their text plainly does."
    )


def test_a_paraphrase_close_in_meaning_at_rank_1_is_not_called_nothing() -> None:
    """A right entry in other words: its cosine is high, its words few, its relevance 0.00."""
    listed = [hit(1, 0.003, cosine=0.36), hit(2, 0.001, cosine=0.22)]
    notice = none_relevant("how do we stop two shifts from overlapping", listed)
    assert notice == (
        "No hit reaches the relevance threshold of 0.30 (the best scores 0.00), but memory holds "
        'a close match to "how do we stop two shifts from overlapping", perhaps in other words: '
        "hit 1 (cosine 0.36 to the query). Read it before you say memory has nothing, and "
        "answer from it only if the text plainly does."
    )
    assert "probably holds nothing" not in render_hits("q", listed)


def test_every_close_hit_is_named_and_a_lowered_one_by_its_own_relevance() -> None:
    """A hit the list lowered below the threshold reaches it on its own: it is named too."""
    listed = never_rising(
        [hit(1, 0.2, cosine=0.41), hit(2, 0.01, cosine=0.1), hit(3, 0.97, cosine=0.3)]
    )
    notice = none_relevant("q", listed)
    assert notice is not None
    assert (
        ', but memory holds a close match to "q", perhaps in other words: hit 1 (cosine '
        "0.41 to the query) and hit 3 (relevance 0.97 on its own). Read them before you say "
        "memory has nothing, and answer from them only if the text plainly does."
    ) in notice


def test_the_cut_is_inclusive_and_hits_without_a_dense_leg_are_not_close() -> None:
    assert "close match" in (none_relevant("q", [hit(1, 0.1, cosine=CLOSE_COSINE)]) or "")
    below = none_relevant("q", [hit(1, 0.1, cosine=CLOSE_COSINE - 0.01), hit(2, 0.05)])
    assert "probably holds nothing" in (below or "")
    no_dense = hit(1, 0.1, legs=(LegScore(name="dense", rank=None, score=None),))
    assert "probably holds nothing" in (none_relevant("q", [no_dense]) or "")


def test_a_list_that_reaches_the_threshold_has_no_notice() -> None:
    assert none_relevant("q", [hit(1, 0.31, cosine=0.5)]) is None
    assert (
        none_relevant("q", [attrs.evolve(hit(1, 0.1, cosine=0.6), score_kind="rank_fusion")])
        is None
    )
