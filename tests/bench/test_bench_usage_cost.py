"""The usage part's statistics and page, on made-up samples and record lines (no pi)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.usage_cost import (
    NEGLIGIBLE_MS,
    abba,
    median_difference,
    record_bytes,
    summarize_usage,
    targets,
    unmeasurable,
)
from bench.usage_cost_report import render


def test_the_same_sample_on_both_sides_differs_by_nothing() -> None:
    sample = [1.0, 1.2, 1.1, 3.5, 0.9, 1.0, 1.4, 1.3]
    compared = median_difference(sample, list(reversed(sample)), resamples=2000)
    assert compared["difference"] == 0
    assert compared["low"] <= 0 <= compared["high"]
    assert unmeasurable(compared)


def test_a_shift_shows_in_the_difference_and_its_interval_leaves_out_zero() -> None:
    off = [10.0 + 0.1 * (i % 7) for i in range(60)]
    on = [value + 2.0 for value in off]
    compared = median_difference(on, off, resamples=2000)
    assert compared["difference"] == pytest.approx(2.0)
    assert 1.5 < compared["low"] <= compared["difference"] <= compared["high"] < 2.5
    assert not unmeasurable(compared)


def test_the_interval_is_the_same_for_the_same_seed() -> None:
    on, off = [1.0, 2.0, 3.0, 4.0, 9.0], [1.5, 2.5, 2.0, 8.0, 0.5]
    assert median_difference(on, off, seed=3) == median_difference(on, off, seed=3)


def test_an_empty_sample_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one value"):
        median_difference([], [1.0])


@pytest.mark.parametrize(
    ("difference", "low", "high", "expected"),
    [
        (0.2, -0.1, 0.6, True),  # the interval contains 0
        (NEGLIGIBLE_MS / 2, 0.1, 0.4, True),  # above 0, but under the negligible bound
        (2.0, 1.0, 3.0, False),
        (-2.0, -3.0, -1.0, True),  # faster with the record: costs nothing
    ],
)
def test_a_cost_is_measurable_only_above_zero_and_the_negligible_bound(
    difference: float, low: float, high: float, expected: bool
) -> None:
    assert unmeasurable({"difference": difference, "low": low, "high": high}) is expected


def test_pairs_alternate_which_variant_goes_first_in_abba_order() -> None:
    order = abba(8)
    assert order[:4] == [("on", "off"), ("off", "on"), ("off", "on"), ("on", "off")]
    firsts = [first for first, _ in order]
    assert firsts.count("on") == firsts.count("off") == 4
    assert all({first, second} == {"on", "off"} for first, second in order)


def test_record_bytes_counts_each_line_with_its_newline_by_kind() -> None:
    lines = [
        json.dumps({"kind": "search", "query": "cache"}),
        json.dumps({"kind": "search", "query": "café"}),
        "",
        json.dumps({"kind": "session"}),
    ]
    sizes = record_bytes(lines)
    assert sizes == {
        "search": len(lines[0]) + 1 + len(lines[1].encode()) + 1,
        "session": len(lines[3]) + 1,
    }


def _raw(record_on: dict[str, int], exchanges: int = 4) -> dict[str, Any]:
    steady = [1.0, 1.1, 0.9, 1.0, 1.2, 1.0]
    return {
        "line": "1.6",
        "plan": {"pairs": exchanges - 1, "think_s": 0.3, "store_entries": 100, "seed": 0},
        "samples": {
            "on": {"before_agent_start": steady, "memory_search": [s + 5 for s in steady]},
            "off": {"before_agent_start": steady, "memory_search": steady},
        },
        "exchanges": exchanges,
        "record_bytes": {"on": record_on, "off": {}},
        "contention": 0.5,
        "load": {"before": [1.0, 1.0, 1.0], "after": [2.0, 1.0, 1.0]},
        "meta": {"quick": True, "started_at": "2026-12-06T10:00:00+00:00", "duration_s": 60.0},
    }


def test_targets_judge_each_step_and_the_bytes_per_exchange() -> None:
    raw = _raw({"search": 3000, "session": 200})
    summary = summarize_usage(raw)
    assert summary["bytes_per_exchange"] == 800
    checks = {check["target"].split(" (")[0]: check for check in targets(raw, summary)}
    before = checks["the usage record adds no measurable time to before_agent_start"]
    search = checks["the usage record adds no measurable time to a memory_search call"]
    assert before["met"]
    assert not search["met"]
    assert search["measured"].startswith("+5.00 ms")
    assert checks["the usage record takes <= 1 KB per exchange on disk"]["met"]
    too_big = _raw({"search": 5000})
    assert not targets(too_big, summarize_usage(too_big))[-1]["met"]


def test_the_page_shows_both_variants_the_difference_and_the_bytes() -> None:
    raw = _raw({"search": 3000, "session": 200})
    page = render({**raw, "summary": summarize_usage(raw)})
    assert "| `memory_search` call | 6.00 ms" in page
    assert "+5.00 ms" in page
    assert "| all | 3,200 | 800 |" in page
    assert "| none measurable |" in page  # before_agent_start: the same on both sides
    assert "| **measurable** |" in page  # the search: 5 ms slower with the record
    assert "**Caution:**" in page  # half the CPUs taken by others
