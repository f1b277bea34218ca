"""The quality benchmark's arithmetic: rankings, targets, abstention and the page (no search)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from bench.quality.metrics import lexical_overlap, rank_of, score
from bench.quality.report import render
from bench.quality.run import check_turn
from bench.quality.sessions import SessionFile
from bench.quality.summary import abstention, summarize_size, targets
from pimem_core.types import Transcript, TranscriptTurn


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
    return {
        "group": "project",
        "style": style,
        "kind": "bug",
        "near_duplicates": 2,
        "ranks": {"pimem_k5": ranks["pimem"], **ranks},
        "overlap": 0.5,
        "recall": [],
        "hybrid_recall": [],
        **extra,
    }


FLOORS = {"pimem_similarity": 0.5, "memsearch_score": 0.5}


def test_abstention_counts_what_each_floor_lets_through() -> None:
    records = [
        {
            "group": "none",
            "recall": [{"similarity": 0.2, "gold": False}],
            "hybrid_recall": [{"score": 1.0, "gold": False}],
        },
        {
            "group": "none",
            "recall": [{"similarity": 0.1, "gold": False}],
            "hybrid_recall": [{"score": 0.4, "gold": False}],
        },
        _record(
            "keyword",
            {"pimem": 1, "dense": 1, "bm25": 1},
            recall=[{"similarity": 0.7, "gold": True}],
            hybrid_recall=[{"score": 1.0, "gold": True}],
        ),
        _record(
            "keyword",
            {"pimem": 1, "dense": 1, "bm25": 1},
            recall=[{"similarity": 0.6, "gold": False}],
            hybrid_recall=[{"score": 0.9, "gold": False}],
        ),
    ]
    table = abstention(records, FLOORS)
    assert table["pimem"]["abstained"] == 1.0
    assert table["memsearch"]["abstained"] == 0.5
    assert table["pimem"]["gold_injected"] == 0.5
    assert table["pimem"]["only_wrong_injected"] == 0.5
    assert table["top_similarity"]["no_answer"] == [0.2, 0.1]


def _result(ranks: dict[str, dict[str, int | None]], l3_exact: int = 4) -> dict[str, Any]:
    records = [_record(style, value) for style, value in ranks.items()]
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
        "size": 10_000,
        "entries": {"atlas-api": 10_000},
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
                "keyword": {"pimem": 1, "dense": 1, "bm25": 1},
                "paraphrase": {"pimem": 2, "dense": 7, "bm25": None},
                "question": {"pimem": 1, "dense": 3, "bm25": 6},
            },
            l3_exact=3,
        )
    )
    checks = {check["target"]: check for check in targets([summary])}
    assert checks["hybrid R@5 >= 0.90 on paraphrase queries"]["met"]
    assert not checks["hybrid MRR >= 0.75 on paraphrase queries"]["met"]  # 1/2
    # A tie is not a win: hybrid has to beat both.
    assert not checks["hybrid beats dense and BM25 on R@5 (keyword)"]["met"]
    assert checks["hybrid beats dense and BM25 on R@5 (paraphrase)"]["met"]
    assert not checks["L3 turn exactness 100% (every anchor)"]["met"]
    assert checks["L3 turn exactness 100% (every anchor)"]["measured"] == "3/4"
    assert all(check["at_target_size"] for check in checks.values())


def test_the_page_renders_from_the_results_alone() -> None:
    summary = summarize_size(
        _result(
            {
                "keyword": {"pimem": 1, "dense": 2, "bm25": 1},
                "paraphrase": {"pimem": 1, "dense": 7, "bm25": None},
                "question": {"pimem": 1, "dense": 3, "bm25": 6},
            }
        )
    )
    results = {
        "meta": {
            "command": "python -m bench --only quality",
            "started_at": "2026-01-01T00:00:00+00:00",
            "duration_s": 60.0,
            "seed": 0,
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
    assert "| hybrid R@5 >= 0.90 on paraphrase queries | 10,000 | 1.000 | **met** |" in page
    # Ties at the top are no win: the page says so; a met target gets no note.
    assert "- **keyword**: hybrid R@5 1.000 ties with dense alone" in page
    assert "- **paraphrase**" not in page
    assert "MRR" in page
    assert "| paraphrase | 1-2 | 1 | 1.000 | 0.000 | 0.000 |" in page
    assert "![" not in page
