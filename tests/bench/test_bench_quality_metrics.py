"""The quality benchmark's arithmetic: rankings, targets, abstention and the page (no search)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from bench.quality.metrics import auc, lexical_overlap, rank_of, score
from bench.quality.report import render
from bench.quality.run import check_turn
from bench.quality.sessions import SessionFile
from bench.quality.summary import abstention, score_table, summarize_size, targets
from pimem_core.service_values import Transcript, TranscriptTurn


def test_rank_is_one_based_and_none_when_missing() -> None:
    assert rank_of(["a", "b", "c"], "b") == 2
    assert rank_of(["a", "b"], "z") is None
    assert rank_of([], "a") is None


def test_scores_on_toy_rankings() -> None:
    scores = score([1, 3, None, 10, 11])
    assert scores.n == 5
    assert scores.r1 == pytest.approx(1 / 5)
    assert scores.r5 == pytest.approx(2 / 5)
    assert scores.r10 == pytest.approx(3 / 5)
    # Rank 11 is past the cutoff: it counts as not retrieved.
    assert scores.mrr == pytest.approx((1 + 1 / 3 + 1 / 10) / 5)
    assert scores.ndcg10 == pytest.approx((1 + 1 / math.log2(4) + 1 / math.log2(11)) / 5)


def test_a_cutoff_of_five_scores_mrr_at_five() -> None:
    scores = score([2, 6], cutoff=5)
    assert scores.mrr == pytest.approx(0.25)
    assert scores.r10 == pytest.approx(0.5)


def test_no_queries_score_zero() -> None:
    assert score([]).n == 0
    assert score([]).mrr == 0.0


def test_lexical_overlap_counts_content_words() -> None:
    assert lexical_overlap("the deadlock in billing", "a deadlock in billing code") == 1.0
    assert lexical_overlap("why did it hang", "a deadlock in billing") == 0.0
    assert lexical_overlap("pydantic 2.5.0 upgrade", "upgraded pydantic to 2.5.0") == pytest.approx(
        2 / 3
    )
    assert lexical_overlap("the of and", "anything") == 0.0


def _session(live: set[str], abandoned: set[str]) -> SessionFile:
    return SessionFile(
        path=Path("/s.jsonl"),
        session="s",
        lines=(),
        live=frozenset(live),
        abandoned=frozenset(abandoned),
        branched=True,
    )


def _transcript(*turns: tuple[str, bool]) -> Transcript:
    return Transcript(
        path=Path("/s.jsonl"),
        turns=tuple(
            TranscriptTurn(role="assistant", time="09:00", body=body, target=target)
            for body, target in turns
        ),
    )


def test_turn_check_wants_the_marked_gold_and_only_live_turns() -> None:
    session = _session({"q", "gold", "next"}, {"tried"})
    assert check_turn(_transcript(("q", False), ("gold", True)), "gold", session).exact
    wrong = check_turn(_transcript(("q", True), ("gold", False)), "gold", session)
    assert not wrong.exact
    assert not wrong.target_ok
    leaked = check_turn(_transcript(("tried", False), ("gold", True)), "gold", session)
    assert not leaked.exact
    assert leaked.abandoned == 1
    assert leaked.foreign == 1


def _record(style: str, ranks: dict[str, int | None], **extra: Any) -> dict[str, Any]:
    ranks = {"memsearch": ranks["pimem"], **ranks}
    return {
        "group": "project",
        "style": style,
        "kind": "bug",
        "near_duplicates": 2,
        "ranks": {"pimem_k5": ranks["pimem"], "memsearch_k5": ranks["memsearch"], **ranks},
        "top": {
            "pimem": {"score": 0.9, "right": ranks["pimem"] == 1},
            "memsearch": {"score": 1.0, "right": ranks["memsearch"] == 1},
        },
        "overlap": 0.5,
        "recall": [],
        "similarity_recall": [],
        "hybrid_recall": [],
        **extra,
    }


def _quiet(group: str, pimem: float, memsearch: float, **extra: Any) -> dict[str, Any]:
    """A no-answer or off-topic query's record: nothing is right, only the top scores count."""
    return {
        "group": group,
        "style": "offtopic" if group == "offtopic" else "keyword",
        "kind": "none",
        "ranks": dict.fromkeys(("pimem", "memsearch", "dense", "bm25"), None),
        "top": {
            "pimem": {"score": pimem, "right": False},
            "memsearch": {"score": memsearch, "right": False},
        },
        "recall": [],
        "similarity_recall": [],
        "hybrid_recall": [],
        **extra,
    }


FLOORS = {"pimem_relevance": 0.3, "pimem_similarity": 0.5, "memsearch_score": 0.5}


def test_auc_is_the_chance_a_positive_outscores_a_negative() -> None:
    assert auc([0.9, 0.8], [0.1, 0.2]) == 1.0
    assert auc([0.1], [0.9]) == 0.0
    assert auc([0.5], [0.5]) == 0.5  # a tie counts half
    assert auc([0.9, 0.4], [0.5]) == 0.5
    assert auc([], [0.1]) is None


def test_abstention_counts_what_each_floor_lets_through() -> None:
    records = [
        _quiet(
            "none",
            0.1,
            1.0,
            recall=[{"score": 0.2, "gold": False}],
            similarity_recall=[{"score": 0.6, "gold": False}],
            hybrid_recall=[{"score": 1.0, "gold": False}],
        ),
        _quiet(
            "offtopic",
            0.0,
            0.4,
            recall=[{"score": 0.01, "gold": False}],
            similarity_recall=[{"score": 0.1, "gold": False}],
            hybrid_recall=[{"score": 0.4, "gold": False}],
        ),
        _record(
            "keyword",
            {"pimem": 1, "dense": 1, "bm25": 1},
            recall=[{"score": 0.7, "gold": True}],
            similarity_recall=[{"score": 0.4, "gold": True}],
            hybrid_recall=[{"score": 1.0, "gold": True}],
        ),
        _record(
            "keyword",
            {"pimem": 1, "dense": 1, "bm25": 1},
            recall=[{"score": 0.6, "gold": False}],
            similarity_recall=[{"score": 0.6, "gold": False}],
            hybrid_recall=[{"score": 0.9, "gold": False}],
        ),
    ]
    table = abstention(records, FLOORS)
    assert table["n_no_answer"] == 2  # no-answer and off-topic together
    assert table["pimem"]["abstained"] == 1.0
    assert table["pimem_similarity"]["abstained"] == 0.5
    assert table["memsearch"]["abstained"] == 0.5
    assert table["pimem"]["gold_injected"] == 0.5
    assert table["pimem"]["only_wrong_injected"] == 0.5
    assert table["pimem_similarity"]["gold_injected"] == 0.0


def test_the_score_table_cuts_each_ranker_at_its_own_threshold() -> None:
    records = [
        _record("keyword", {"pimem": 1, "memsearch": 2, "dense": 1, "bm25": 1}),
        _record("question", {"pimem": 3, "memsearch": 1, "dense": 1, "bm25": 1}),
        _quiet("none", 0.35, 0.5),
        _quiet("none", 0.1, 0.99),
        _quiet("offtopic", 0.01, 1.0),
    ]
    table = score_table(records, 0.3)
    ours, theirs = table["pimem"], table["memsearch"]
    assert ours["n"] == {"right": 1, "wrong": 1, "none": 2, "offtopic": 1}
    assert ours["none_below"] == 0.5
    assert ours["offtopic_above_count"] == 0
    assert ours["right_above"] == 1.0
    assert ours["auc"] == 1.0  # the right top hit's 0.9 beats 0.35, 0.1 and 0.01
    assert theirs["threshold"] == 0.5
    assert theirs["none_below"] == 0.0  # 0.5 is not below 0.5
    assert theirs["offtopic_above_count"] == 1
    assert theirs["groups"]["right"] == [1.0]


def _result(
    ranks: dict[str, dict[str, int | None]], l3_exact: int = 4, size: int = 10_000
) -> dict[str, Any]:
    records = [_record(style, value) for style, value in ranks.items()]
    records += [_quiet("none", 0.1, 0.5) for _ in range(20)]
    records += [_quiet("offtopic", 0.01, 0.5) for _ in range(50)]
    records.append(
        {
            "group": "cross",
            "style": "keyword",
            "kind": "bug",
            "rank": 2,
            "label_ok": True,
            "top_label_ok": False,
        }
    )
    tally = {
        "checked": 4,
        "exact": l3_exact,
        "target_wrong": 0,
        "foreign_turns": 0,
        "abandoned_turns": 0,
    }
    l3 = {**tally, "in_branched_sessions": tally, "in_forks": tally}
    return {
        "size": size,
        "seed": 1,
        "entries": {"atlas-api": size},
        "sessions": {"files": 3, "branched": 1, "forks": 1},
        "records": records,
        "l2": {"project": {"checked": 3, "correct": 3}, "cross": {"checked": 1, "correct": 1}},
        "l3_chain": l3,
        "l3_sweep": l3,
        "secrets": {
            "secrets": 2,
            "in_memory_files": 0,
            "in_search_results": 0,
            "in_transcripts": 2,
        },
        "index": {"chunks": 10, "seconds": 1.0, "chunks_per_s": 10.0},
        "index_reused": False,
        "timings": {"generate_s": 1.0, "queries_s": 2.0, "l2_l3_s": 3.0},
        "floors": FLOORS,
    }


def test_targets_say_met_and_missed_with_the_numbers() -> None:
    summary = summarize_size(
        _result(
            {
                "keyword": {"pimem": 1, "memsearch": 1, "dense": 1, "bm25": 1},
                "paraphrase": {"pimem": 2, "memsearch": 6, "dense": 7, "bm25": None},
                "question": {"pimem": 1, "memsearch": 3, "dense": 3, "bm25": 6},
            },
            l3_exact=3,
        )
    )
    checks = {check["target"]: check for check in targets([summary])}
    # A tie is no lead of 0.05.
    assert not checks["R@5 >= memsearch's + 0.05 (keyword)"]["met"]
    assert checks["R@5 >= memsearch's + 0.05 (paraphrase)"]["met"]
    assert checks["MRR >= memsearch's + 0.05 (question)"]["met"]
    assert checks["all styles R@5 >= 0.72"]["met"]
    assert checks["all styles MRR >= 0.58"]["met"]  # (1 + 1/2 + 1) / 3
    assert checks["paraphrase R@5 >= 0.38"]["met"]
    assert checks["never below memsearch's (R@5 and MRR, every style)"]["met"]
    assert checks["no-answer queries below the relevance threshold 0.3 >= 95%"]["met"]
    assert checks["every off-topic query below the relevance threshold 0.3"]["met"]
    assert checks["right top hits at or above the relevance threshold 0.3 >= 97%"]["met"]
    assert not checks["L3 turn exactness 100% (every anchor)"]["met"]
    assert checks["L3 turn exactness 100% (every anchor)"]["measured"] == "3/4"
    assert all(check["at_target_size"] and check["seed"] == 1 for check in checks.values())


def test_below_the_baseline_is_named_at_every_size() -> None:
    summary = summarize_size(
        _result(
            {
                "keyword": {"pimem": 2, "memsearch": 1, "dense": 1, "bm25": 1},
                "paraphrase": {"pimem": 1, "memsearch": 1, "dense": 1, "bm25": 1},
                "question": {"pimem": 1, "memsearch": 1, "dense": 1, "bm25": 1},
            },
            size=1_000,
        )
    )
    checks = {check["target"]: check for check in targets([summary])}
    below = checks["never below memsearch's (R@5 and MRR, every style)"]
    assert not below["met"]
    assert "keyword MRR 0.500 < 1.000" in below["measured"]
    # The 10,000-entry targets are not judged at 1,000 entries.
    assert "all styles R@5 >= 0.72" not in checks
    assert not below["at_target_size"]


def test_the_page_renders_from_the_results_alone() -> None:
    summary = summarize_size(
        _result(
            {
                "keyword": {"pimem": 1, "memsearch": 2, "dense": 2, "bm25": 1},
                "paraphrase": {"pimem": 1, "memsearch": 7, "dense": 7, "bm25": None},
                "question": {"pimem": 1, "memsearch": 3, "dense": 3, "bm25": 6},
            }
        )
    )
    results = {
        "meta": {
            "command": "python -m bench --only quality",
            "started_at": "2026-01-01T00:00:00+00:00",
            "duration_s": 60.0,
            "seeds": [1],
            "machine": {
                "cpu": "test cpu",
                "usable_cpus": 2,
                "ram_gb": 4.0,
                "python": "3.11",
                "packages": {"memsearch": "0.4.23"},
            },
        },
        "summaries": [summary],
        "targets": targets([summary]),
        "plots": [],
    }
    page = render(results, "benchmarks/quality")
    assert page.startswith("# Retrieval quality\n")
    assert "**Settings were chosen on these worlds and LoCoMo's development conversations" in page
    assert "| paraphrase R@5 >= 0.38 | 10,000, seed 1 | 1.000 (memsearch 0.000) | **met** |" in page
    assert (
        "| 10,000 entries, seed 1 | paraphrase | 1.000 | 0.000 | +1.000 | 1.000 | 0.143 | +0.857 |"
        in page
    )
    assert "| paraphrase | 1-2 | 1 | 1.000 | 0.000 | 0.000 | 0.000 |" in page
    assert "![" not in page
