"""The benchmark's bookkeeping for pimem's own ranker: worlds and seeds, the off-topic queries,
and the issue's latency and auto-context targets, judged from results alone (no search)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.__main__ import keep_other_sizes, parse
from bench.auto_context_run import targets as auto_context_targets
from bench.latency import ranker_checks
from bench.quality.offtopic import OFF_TOPIC
from bench.quality.run import FULL, QUICK, Plan
from bench.quality.vocabulary import ABSENT


def test_the_full_run_measures_two_sizes_of_seed_0_and_10k_of_seed_1() -> None:
    assert FULL.worlds == ((1_000, 0), (10_000, 0), (10_000, 1))
    assert QUICK.worlds == ((1_000, 0),)


@pytest.mark.parametrize(
    ("sizes", "seeds", "worlds"),
    [
        (None, None, FULL.worlds),
        ((10_000,), None, ((10_000, 0),)),
        (None, (1,), ((1_000, 1), (10_000, 1))),
        ((1_000, 10_000), (0, 1), ((1_000, 0), (10_000, 0), (1_000, 1), (10_000, 1))),
    ],
)
def test_sizes_and_seeds_choose_the_worlds(
    sizes: tuple[int, ...] | None, seeds: tuple[int, ...] | None, worlds: tuple[Any, ...]
) -> None:
    assert FULL.choose(sizes, seeds).worlds == worlds


def test_seeds_are_parsed_and_refused_with_what_is_allowed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert parse(["--seeds", "1,0,1"]).seeds == (0, 1)
    with pytest.raises(SystemExit):
        parse(["--seeds", "one"])
    assert "seeds are generator seeds like 0,1" in capsys.readouterr().err


def test_at_least_fifty_distinct_off_topic_queries_none_about_software() -> None:
    texts = [text for _, text in OFF_TOPIC]
    assert len(set(texts)) == len(texts) >= 50
    assert len({subject for subject, _ in OFF_TOPIC}) >= 10
    coding = {"code", "bug", "deploy", "api", "database", "test", "server", "build"}
    assert not any(set(text.lower().split()) & coding for text in texts)
    # The no-answer queries are another set: coding subjects no session touched.
    assert not set(texts) & {text for subject in ABSENT for text in subject}


def _quality(worlds: list[tuple[int, int]], *, started: str, fmt: int = 2) -> dict[str, Any]:
    items = [{"size": size, "seed": seed, "value": started} for size, seed in worlds]
    return {
        "meta": {
            "command": "python -m bench --only quality",
            "started_at": started,
            "duration_s": 60.0,
            "quick": False,
            "format": fmt,
            "seeds": sorted({seed for _, seed in worlds}),
        },
        "raw": items,
        "summaries": [dict(item) for item in items],
        "targets": [],
    }


def test_a_quality_run_of_one_world_keeps_the_other_worlds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import bench.__main__ as main

    monkeypatch.setattr(main, "_targets", lambda part, results: [])
    before = _quality([(1_000, 0), (10_000, 0), (10_000, 1)], started="earlier")
    fresh = _quality([(10_000, 1)], started="now")
    merged = keep_other_sizes("quality", fresh, before)
    assert [(item["size"], item["seed"], item["value"]) for item in merged["raw"]] == [
        (1_000, 0, "earlier"),
        (10_000, 0, "earlier"),
        (10_000, 1, "now"),
    ]
    assert [run["worlds"] for run in merged["meta"]["runs"]] == [
        [[1_000, 0], [10_000, 0]],
        [[10_000, 1]],
    ]


def test_results_of_another_layout_are_never_combined() -> None:
    before = _quality([(1_000, 0)], started="earlier", fmt=1)
    merged = keep_other_sizes("quality", _quality([(10_000, 0)], started="now"), before)
    assert [item["size"] for item in merged["raw"]] == [10_000]


def _stats(p50: float, p95: float) -> dict[str, float]:
    return {"n": 100, "p50": p50, "p95": p95, "mean": p50, "min": p50, "max": p95}


def _latency_size(chunks: int, **overrides: Any) -> dict[str, Any]:
    size: dict[str, Any] = {
        "chunks": chunks,
        "pimem": _stats(6.0, 7.0),
        "busy": _stats(6.5, 10.5),
        "speedup_memsearch_p50": 14.0,
        "read_model": {
            "mb_per_100k": 190.0,
            "probe": {"rss_growth_mb": 38.0},
            "first_result": _stats(1_400.0, 1_500.0),
            "backfill": {
                "origin": "collection",
                "pending_at_end": 0,
                "cache_saved": True,
                "answered": 300,
                "backfill_s": 95.0,
            },
        },
    }
    return size | overrides


def test_the_ranker_latency_targets_are_judged_at_twenty_thousand() -> None:
    checks = {check["target"]: check for check in ranker_checks(_latency_size(20_000))}
    assert checks["pimem's search p50 <= 10 ms"]["met"]
    assert checks["pimem's search p95 <= 1.5x its p50"]["met"]
    # 10.5 ms at p95 against 6.5 ms at p50: 1.6x.
    assert not checks["pimem's search p95 <= 1.5x its p50, the other core busy"]["met"]
    assert checks[">= 10x faster than memsearch's hybrid search (p50, same run)"]["met"]
    assert checks["read-model memory <= 250 MB per 100k entries"]["met"]
    first = "process start to first result <= 1 s (`pimem search`, read model cached; median)"
    assert not checks[first]["met"]
    backfill = next(check for target, check in checks.items() if "backfilled" in target)
    assert backfill["met"]
    assert backfill["detail"] == "300 searches answered during it"
    assert checks["read-model memory <= 250 MB per 100k entries"]["detail"] == "38 MB at 20,000"
    # At 2,000 entries only the backfill has a target: a read model's fixed cost dominates there.
    assert len(ranker_checks(_latency_size(2_000))) == 1


def test_a_backfill_that_never_finished_misses() -> None:
    size = _latency_size(2_000)
    size["read_model"]["backfill"]["pending_at_end"] = 12
    (backfill,) = ranker_checks(size)
    assert not backfill["met"]


def _relevance(served: int, injected: int) -> dict[str, Any]:
    def judged(floor: float, served: int, injected: int) -> dict[str, Any]:
        return {
            "floor": floor,
            "answerable_prompts_served": served,
            "answerable_prompts": 50,
            "no_answer_prompts_injected": injected,
            "no_answer_prompts": 50,
            "irrelevant_injection_rate": injected / 50,
        }

    return {
        "relevance_floor": judged(0.3, served, injected),
        "rank_fusion_floor": judged(0.5, 13, 3),
        "similarity_floor": judged(0.5, 16, 0),
    }


def _auto_context_size(chunks: int, **overrides: Any) -> dict[str, Any]:
    size: dict[str, Any] = {
        "chunks": chunks,
        "warm": _stats(6.0, 9.0),
        "spaced": _stats(7.0, 12.0),
        "within_cap": 1.0,
        "skipped": 0,
        "spaced_skipped": 0,
        "rss_mb": 400.0,
        "warm_after_s": 3.5,
        "relevance": _relevance(35, 1),
    }
    return size | overrides


def test_auto_context_targets_with_the_relevance_floor() -> None:
    checks = {
        check["target"]: check
        for check in auto_context_targets([_auto_context_size(20_000, spaced_skipped=1)])
    }
    served = checks["relevance floor 0.3: answerable prompts given their entry >= 40%"]
    assert served["met"]
    assert served["measured"] == 0.7
    assert "rank fusion >= 0.5: 13, cosine >= 0.5: 16 of 50" in served["detail"]
    assert checks["relevance floor 0.3: no-answer prompts injected <= 2%"]["met"]
    # A prompt answered without a search is no latency: the target is missed, not flattered.
    spaced = "auto-context p95 <= 25 ms, prompts 1.5 s apart, every prompt searched"
    assert not checks[spaced]["met"]
    assert checks["a bridge warm within 5 s of its spawn"]["met"]


def test_auto_context_at_two_thousand_wants_sixty_percent() -> None:
    (served,) = [
        check
        for check in auto_context_targets([_auto_context_size(2_000)])
        if "answerable" in check["target"]
    ]
    assert served["target"].endswith(">= 60%")
    assert served["met"]


def test_the_plan_of_a_quick_run_is_small() -> None:
    assert isinstance(QUICK, Plan)
    assert QUICK.per_style < FULL.per_style
