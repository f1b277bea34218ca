"""The benchmark page is rendered from the parts' JSON alone, and judges the targets from it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import pages, scaling_report
from bench.__main__ import parse
from bench.latency import summarize
from bench.scaling import summarize_size

MACHINE = {
    "cpu": "test cpu",
    "cpu_flags": ["avx2"],
    "logical_cpus": 2,
    "usable_cpus": 2,
    "ram_gb": 4.0,
    "os": "Linux",
    "python": "3.11",
    "packages": {"memsearch": "0.4.23"},
}


READ_MODEL = {
    "probe": {"chunks": 1_000, "facts": 1_800, "load_s": 0.03, "rss_growth_mb": 8.0},
    "startup": {
        "python": 0.1,
        "import": 0.3,
        "open": 0.1,
        "embedder": 0.4,
        "read_model": 0.05,
        "first_search": 0.01,
        "whole": 0.96,
    },
    "first_result": {"samples_ms": [900.0, 950.0]},
}


def raw_size(size: int, *, search_ms: float = 20.0, skipped: int = 0) -> dict[str, Any]:
    """One size's raw record, as ``bench.scaling.measure_size`` writes it."""
    return {
        "size": size,
        "entries": size * 13 // 10,
        "chunks": size * 13 // 10,
        "synthetic": False,
        "index_at_build": {"chunks_per_s": 20.0},
        "read_model_ready": {"origin": "cache", "chunks": size, "ready_s": 0.1},
        "search": {
            "pimem_ms": [search_ms, search_ms * 1.5],
            "busy_ms": [search_ms, search_ms * 1.2],
            "breakdown_ms": {"check": [1.0], "embed": [4.0], "legs": [1.0], "fuse": [0.2]},
            "paired_pimem_ms": [search_ms, search_ms],
            "memsearch_ms": [search_ms * 10, search_ms * 10],
            "cli_ms": [1500.0, 1600.0],
            "rss_mb": {"current_mb": 500.0, "peak_mb": 600.0},
            "cli_peak_rss_mb": 380.0,
            "hashes": ["0123456789abcdef"],
        },
        "read_model": READ_MODEL,
        "expand": {"pimem_ms": [4.0], "cli_ms": [1000.0]},
        "transcript": {"pimem_ms": [1.0], "cli_ms": [700.0]},
        "snapshot": {"pimem_ms": [0.2], "chars": 5000},
        "index": {"entries": 100, "pimem_chunks_per_s": 150.0, "cli_chunks_per_s": 30.0},
        "append": {
            "pimem_ms": [60.0, 70.0],
            "cli_file_ms": [3000.0],
            "cli_store_ms": [3300.0],
            "found": True,
            "index_pimem_ms": [40.0, 45.0],
            "index_cli_file_ms": [2500.0],
            "index_cli_store_ms": [2800.0],
        },
        "capture": {
            "settled_ms": summarize([0.01, 0.02]),
            "entries_written": 30,
            "exchanges": 30,
        },
        "bridge": {
            "ready_ms": 40.0,
            "session_started_ms": 270.0,
            "warm_after_s": 2.0,
            "samples_ms": [15.0, 18.0],
            "within_cap": 1.0,
            "skipped_budget": skipped,
            "rss_mb": 450.0,
            "peak_rss_mb": 480.0,
        },
    }


def synthetic_size(size: int, *, search_ms: float = 8.0) -> dict[str, Any]:
    """A partly synthetic size's raw record: no collection, so no CLI, index or bridge."""
    return {
        "size": size,
        "entries": size * 13 // 10,
        "chunks": size,
        "synthetic": True,
        "index_at_build": {"chunks": size, "facts": 2 * size, "distinct_facts": size,
                           "embedding_s": 600.0, "facts_per_s": 300.0, "seconds": 700.0},
        "read_model_ready": {"origin": "cache", "chunks": size, "ready_s": 0.2},
        "search": {
            "pimem_ms": [search_ms, search_ms * 1.2],
            "busy_ms": [search_ms, search_ms * 1.6],
            "paired_pimem_ms": [],
            "memsearch_ms": [],
            "cli_ms": [],
            "rss_mb": {"current_mb": 700.0, "peak_mb": 800.0},
            "cli_peak_rss_mb": None,
            "hashes": ["0123456789abcdef"],
        },
        "expand": {"pimem_ms": [1.0], "cli_ms": []},
        "transcript": {"pimem_ms": [1.0], "cli_ms": [700.0]},
        "snapshot": {"pimem_ms": [0.2], "chars": 5000},
        "read_model": READ_MODEL
        | {"probe": {"chunks": size, "facts": 2 * size, "load_s": 0.2, "rss_growth_mb": 190.0}},
    }  # fmt: skip


def scaling_results(*sizes: dict[str, Any]) -> dict[str, Any]:
    summaries = [summarize_size(size) for size in sizes]
    return {
        "plan": {
            "seed": 0,
            "searches": 2,
            "warmup": 1,
            "cli_calls": 2,
            "transcripts": 1,
            "snapshots": 1,
            "batch": 100,
            "appends": 2,
            "cli_appends": 1,
            "settles": 30,
            "prompts": 2,
            "first_results": 2,
        },
        "raw": list(sizes),
        "summary": summaries,
        "targets": scaling_report.targets(summaries),
        "meta": {
            "command": "python -m bench --only scaling",
            "started_at": "2026-01-01T00:00:00+00:00",
            "duration_s": 120.0,
            "quick": False,
            "format": 2,
            "machine": MACHINE,
        },
    }


def test_the_earlier_targets_are_judged_at_ten_thousand_entries() -> None:
    results = scaling_results(raw_size(1_000), raw_size(10_000, search_ms=50.0, skipped=1))
    checks = {check["target"]: check for check in results["targets"]}
    assert {check["chunks"] for check in checks.values()} == {10_000}
    assert not checks["warm search p50 <= 40 ms"]["met"]
    assert checks[">= 50x faster per search than the CLI (p50)"]["measured"] == 1550.0 / 62.5
    assert checks["appended entry searchable <= 300 ms (p50)"]["met"]
    assert checks["settled returns <= 5 ms (p95)"]["met"]
    # A prompt answered without a search is no latency: the target is missed, not flattered.
    assert not checks["auto-context p95 <= 120 ms (warm)"]["met"]
    assert checks["bridge RSS with auto-context on <= 700 MB"]["met"]


def test_a_partly_synthetic_size_is_judged_on_what_it_measures(tmp_path: Path) -> None:
    results = scaling_results(raw_size(10_000), synthetic_size(100_000))
    checks = {check["target"]: check for check in results["targets"] if check["chunks"] == 100_000}
    label = " (partly synthetic read model)"
    assert checks[f"pimem's search p50 <= 20 ms{label}"]["met"]
    assert checks[f"pimem's search p95 <= 1.5x its p50{label}"]["met"]
    # 8 and 12.8 ms with the other core busy: p95 12.6 ms, 1.2x the p50 of 10.4 ms.
    assert checks[f"pimem's search p95 <= 1.5x its p50, the other core busy{label}"]["met"]
    assert checks[f"read-model memory <= 250 MB per 100k entries{label}"]["measured"] == 190.0
    page = scaling_report.render(results, "benchmarks/scaling")
    assert "**Partly synthetic:** 100,000 entries." in page
    assert "| 100,000 (partly synthetic) | search | 8.8 ms | 9.5 ms | - | - |" in page
    assert "| 10,000 | 1.0 ms | 4.0 ms | 1.0 ms | 0.2 ms | 6.2 ms | 25.0 ms |" in page
    scaling_report.plot(results["summary"], tmp_path)  # sizes without a CLI are left out


def test_the_page_is_rendered_from_the_json_in_out(tmp_path: Path) -> None:
    results = scaling_results(raw_size(1_000), raw_size(10_000))
    path = pages.raw_path(tmp_path, "scaling")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(results))
    loaded = pages.load(tmp_path)
    assert list(loaded) == ["scaling"]
    page = pages.render_page(loaded, "benchmarks").splitlines()
    assert page[0] == "# Benchmarks"
    assert "## Cost against store size" in page
    assert "### How these were measured" in page
    assert "| Cost against store size | warm search p50 <= 40 ms | 10,000 | 25.0 ms | met |" in page
    assert "| 10,000 | search | 25.0 ms | 29.5 ms | 1,550 ms | 62x |" in page
    assert (
        "| 10,000 | search, memsearch's hybrid (interleaved with pimem's 20.0 ms) | 200 ms | 200 ms"
        " |  | 10x slower |" in page
    )
    assert "| 10,000 | index one new entry | 42.5 ms | 44.8 ms | 2,500 ms | 59x |" in page
    assert (
        "![Search, expand and append against store size](benchmarks/scaling/scaling-latency.png)"
        in page
    )


def test_headings_move_down_outside_code_blocks() -> None:
    markdown = "# Title\ntext\n```sh\n# a shell comment\n```\n## Part"
    assert pages._demote(markdown) == "## Title\ntext\n```sh\n# a shell comment\n```\n### Part"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--only", "speed"],
            "parts are a comma-separated choice of latency, pi, quality, locomo, scaling",
        ),
        (["--sizes", "10"], "every size needs at least 100 entries"),
    ],
)
def test_bad_arguments_are_refused_with_what_is_allowed(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parse(argv)
    assert message in capsys.readouterr().err


def test_a_run_of_some_sizes_keeps_the_others_measured_before() -> None:
    from bench.__main__ import keep_other_sizes

    before = scaling_results(raw_size(1_000, search_ms=10.0), raw_size(10_000, search_ms=90.0))
    fresh = scaling_results(raw_size(10_000, search_ms=30.0))
    fresh["meta"]["started_at"] = "2026-01-02T00:00:00+00:00"
    merged = keep_other_sizes("scaling", fresh, before)
    assert [size["size"] for size in merged["raw"]] == [1_000, 10_000]
    assert [size["search"]["pimem_ms"][0] for size in merged["raw"]] == [10.0, 30.0]
    assert [run["sizes"] for run in merged["meta"]["runs"]] == [[1_000], [10_000]]
    # Targets are judged again on what was kept and what was measured.
    (search,) = [c for c in merged["targets"] if c["target"] == "warm search p50 <= 40 ms"]
    assert search["met"]


def test_a_quick_run_is_never_combined() -> None:
    from bench.__main__ import keep_other_sizes

    before = scaling_results(raw_size(1_000))
    before["meta"]["quick"] = True
    merged = keep_other_sizes("scaling", scaling_results(raw_size(10_000)), before)
    assert [size["size"] for size in merged["raw"]] == [10_000]


def test_published_results_say_nothing_of_this_machines_paths() -> None:
    workdir = "/srv/bench-stores"
    results = {"latency": {"meta": {"command": f"python -m bench --workdir {workdir}"}}}
    places = pages.local_paths(results)
    raw = json.dumps({"store": f"{workdir}/store-2000", "home": f"{Path.home()}/.cache"})
    assert json.loads(pages.portable(raw, places)) == {
        "store": f"{pages.PUBLISHED_WORKDIR}/store-2000",
        "home": "~/.cache",
    }
    assert pages.portable(results["latency"]["meta"]["command"], places) == (
        f"python -m bench --workdir {pages.PUBLISHED_WORKDIR}"
    )
