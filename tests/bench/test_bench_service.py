"""The memory service's benchmark section: its targets and its page, from fixed results (no
service, no store)."""

from __future__ import annotations

import copy
import os
import subprocess
import time
from typing import Any

from bench import service_report
from bench.__main__ import parse
from bench.latency import summarize
from bench.service import tree


def stats(*samples: float) -> dict[str, float]:
    return summarize(samples)


def processes(root: int, *rss_mb: float) -> list[dict[str, int]]:
    return [
        {"pid": root + n, "root": root, "VmRSS": int(mb * 1024), "VmHWM": int(mb * 1200)}
        for n, mb in enumerate(rss_mb)
    ]


def results(*, quick: bool = False) -> dict[str, Any]:
    search = {
        "warm": [60.0, 62.0, 70.0],
        "in_process": [1400.0, 1450.0, 1500.0],
        "memsearch": [3000.0, 3100.0, 3300.0],
        "cold": [1500.0, 1520.0, 1600.0],
    }
    service_rows = processes(100, 420.0, 90.0) + [
        row for root in (200, 300, 400, 500) for row in processes(root, 20.0)
    ]
    return {
        "size": 20_000,
        "plan": {
            "size": 20_000,
            "rounds": 3,
            "sessions": 4,
            "writes": 2,
            "cli_calls": 3,
            "leak_warmup": 500,
            "leak_ops": 10_000,
            "reconnects": 3,
            "judge_leak": not quick,
        },
        "store": {"root": "store-20000", "index": {}, "reused": True},
        "search": {
            "samples_ms": search,
            "summary": {kind: stats(*values) for kind, values in search.items()},
        },
        "memory": {
            "service": {
                "sessions": 4,
                "service_pid": 100,
                "processes": service_rows,
                "rss_mb": 590.0,
                "hwm_mb": 700.0,
                "peak_total_mb": 610.0,
            },
            "in_process": {
                "sessions": 1,
                "service_pid": None,
                "processes": processes(600, 400.0, 90.0),
                "rss_mb": 490.0,
                "hwm_mb": 560.0,
                "peak_total_mb": 500.0,
            },
        },
        "leak": {
            "ops": 10_000,
            "warmup_ops": 500,
            "ops_s": 900.0,
            "counts": {"search": 5500, "write": 1000, "status": 1500},
            "mean_ms": {"search": 20.0, "write": 300.0, "status": 5.0},
            "before_mb": 500.0,
            "after_mb": 515.0,
            "hwm_mb": 530.0,
            "growth": 0.03,
        },
        "reconnect": {"samples_ms": [600.0, 700.0, 800.0], "summary": stats(600, 700, 800)},
        "meta": {"quick": quick, "started_at": "2026-12-01T10:00:00+00:00", "duration_s": 1200},
    }


def judged(found: dict[str, Any]) -> dict[str, bool]:
    return {check["target"].split(":")[0][:40]: check["met"] for check in found["targets"]}


def test_every_target_met() -> None:
    found = results()
    checks = service_report.targets(found)
    assert len(checks) == 6
    assert all(check["met"] for check in checks), checks
    speedup = next(check for check in checks if "faster than" in check["target"])
    assert speedup["measured"] == 3100.0 / 62.0
    ratio = next(check for check in checks if "RSS of one session" in check["target"])
    assert ratio["measured"] == 590.0 / 490.0


def test_each_target_missed_on_its_own() -> None:
    slow = copy.deepcopy(results())
    slow["search"]["summary"]["warm"]["p50"] = 151.0
    missed = [c["target"] for c in service_report.targets(slow) if not c["met"]]
    assert missed == ["`pimem search` through the warm service: p50 <= 150 ms"]

    near = copy.deepcopy(results())
    near["search"]["summary"]["memsearch"]["p50"] = 9.9 * 62.0
    missed = [c["target"] for c in service_report.targets(near) if not c["met"]]
    assert len(missed) == 1
    assert "faster than" in missed[0]

    cold = copy.deepcopy(results())
    # In process 1450 ms: 10 % (145 ms) is the larger margin.
    cold["search"]["summary"]["cold"]["p50"] = 1450.0 + 145.0
    assert all(c["met"] for c in service_report.targets(cold))
    cold["search"]["summary"]["cold"]["p50"] = 1450.0 + 146.0
    missed = [c["target"] for c in service_report.targets(cold) if not c["met"]]
    assert len(missed) == 1
    assert missed[0].startswith("cold service")

    heavy = copy.deepcopy(results())
    heavy["memory"]["service"]["rss_mb"] = 1.31 * 490.0
    missed = [c["target"] for c in service_report.targets(heavy) if not c["met"]]
    assert len(missed) == 1
    assert "RSS" in missed[0]

    leaky = copy.deepcopy(results())
    leaky["leak"]["growth"] = 0.051
    missed = [c["target"] for c in service_report.targets(leaky) if not c["met"]]
    assert len(missed) == 1
    assert "grows" in missed[0]

    late = copy.deepcopy(results())
    late["reconnect"]["summary"]["p50"] = 1001.0
    missed = [c["target"] for c in service_report.targets(late) if not c["met"]]
    assert len(missed) == 1
    assert "SIGKILL" in missed[0]


def test_the_cold_margin_is_the_larger_of_ten_percent_and_100_ms() -> None:
    assert service_report.cold_allowance_ms(500.0) == 100.0
    assert service_report.cold_allowance_ms(2000.0) == 200.0


def test_a_quick_run_judges_no_leak() -> None:
    found = results(quick=True)
    found["leak"]["growth"] = 0.5
    checks = service_report.targets(found)
    assert not [check for check in checks if "grows" in check["target"]]
    assert all(check["met"] for check in checks)
    page = service_report.render({**found, "targets": checks}, "plots")
    assert "too few requests to judge a leak" in page


def test_the_section_renders_from_the_json_alone() -> None:
    found = results()
    page = service_report.render({**found, "targets": service_report.targets(found)}, "plots")
    assert page.startswith("# The memory service")
    assert "| through the service, running (warm) | 62.0 ms |" in page
    assert "| `memsearch search` (the CLI) | 3.10 s |" in page
    assert "service 420 + 90" not in page  # the service's tree is one figure
    assert "service 510 MB, relays 20 + 20 + 20 + 20 MB" in page
    assert "bridge 490 MB" in page
    assert "| 500 + 10,000 | 500 MB | 515 MB | +3.0% |" in page
    assert "[service.json](plots/service/service.json)" in page
    assert "1.20x the 490 MB of one session" in page


def test_service_is_a_part() -> None:
    assert parse(["--only", "service"]).only == ("service",)


def test_a_quick_run_measures_the_service_only_when_asked() -> None:
    assert "service" in parse([]).only
    assert "service" not in parse(["--quick"]).only
    assert parse(["--quick", "--only", "service"]).only == ("service",)


def test_real_pi_sessions_are_judged_and_shown_beside_the_scripted_ones() -> None:
    found = results()
    found["memory_pi"] = {
        "pi": "1.6",
        "service": {"sessions": 4, "rss_mb": 424.0, "pi_rss_mb": 612.0},
        "in_process": {"sessions": 1, "rss_mb": 355.0, "pi_rss_mb": 150.0},
    }
    checks = service_report.targets(found)
    (real,) = [check for check in checks if "real pi sessions" in check["target"]]
    assert real["met"]
    assert real["measured"] == 424.0 / 355.0
    page = service_report.render({**found, "targets": checks}, "plots")
    assert "| 4 pi sessions through one service | 424 MB | 612 MB | 1.19x |" in page
    found["memory_pi"]["service"]["rss_mb"] = 1.31 * 355.0
    assert not next(c for c in service_report.targets(found) if "real pi" in c["target"])["met"]


def entries(kind: str, idle_mb: float) -> dict[str, Any]:
    return {
        "entries": 1_000,
        "chunks": 1_208 if kind == "long" else 1_000,
        "median_chars": 912 if kind == "long" else 216,
        "over_1400": 0.097 if kind == "long" else 0.0,
        "longest_chars": 20_732 if kind == "long" else 508,
        "index_s": 40.0,
        "facts_s": 90.0,
        "started_mb": 160.0,
        "indexed_mb": idle_mb + 50,
        "facts_mb": idle_mb + 20,
        "idle_mb": idle_mb,
        "hwm_mb": idle_mb + 300,
        "idle_s": 30.0,
    }


def with_long_entries(*, quick: bool = False) -> dict[str, Any]:
    found = results(quick=quick)
    found["plan"] |= {"session_entries": 250, "idle_s": 30.0, "judge_entries": not quick}
    found["status"] = {"samples_ms": [70.0, 72.0, 90.0], "summary": stats(70.0, 72.0, 90.0)}
    found["memory_long"] = copy.deepcopy(found["memory"])
    found["memory_long"]["service"]["rss_mb"] = 600.0
    found["entries"] = {"short": entries("short", 400.0), "long": entries("long", 480.0)}
    return found


def test_status_and_long_entries_are_judged_and_shown() -> None:
    found = with_long_entries()
    checks = service_report.targets(found)
    assert len(checks) == 9
    assert all(check["met"] for check in checks), checks
    assert checks[1]["target"] == "`pimem status` through the warm service: p50 <= 100 ms"
    (apart,) = [check for check in checks if "long entries and 30 s idle" in check["target"]]
    assert apart["measured"] == 80.0
    page = service_report.render({**found, "targets": checks}, "plots")
    assert "| through the service, running (warm) | 72.0 ms |" in page
    assert "## Memory after long entries" in page
    assert "| 1,000 long | 912 / 10% / 20,732 | 1,208 | 160 MB |" in page
    assert "+80 MB after the long entries beside the" in page
    assert "On long entries, 4 sessions through one service held 600 MB, 1.22x" in page

    slow = copy.deepcopy(found)
    slow["status"]["summary"]["p50"] = 101.0
    missed = [c["target"] for c in service_report.targets(slow) if not c["met"]]
    assert missed == ["`pimem status` through the warm service: p50 <= 100 ms"]

    heavy = copy.deepcopy(found)
    heavy["entries"]["long"]["idle_mb"] = 501.0
    missed = [c["target"] for c in service_report.targets(heavy) if not c["met"]]
    assert len(missed) == 1
    assert "above that after 1,000 short ones" in missed[0]

    crowded = copy.deepcopy(found)
    crowded["memory_long"]["service"]["rss_mb"] = 1.31 * 490.0
    missed = [c["target"] for c in service_report.targets(crowded) if not c["met"]]
    assert len(missed) == 1
    assert "on 250 long entries each" in missed[0]


def test_a_quick_run_judges_no_memory_after_long_entries() -> None:
    found = with_long_entries(quick=True)
    found["entries"]["long"]["idle_mb"] = 900.0
    checks = service_report.targets(found)
    assert not [check for check in checks if "long entries and" in check["target"]]
    page = service_report.render({**found, "targets": checks}, "plots")
    assert "too few entries to judge the memory they leave" in page


def test_a_fork_about_to_run_another_command_is_not_counted_twice() -> None:
    forked = os.fork()
    if forked == 0:  # still this process's command: its pages are its parent's
        time.sleep(2)
        os._exit(0)
    other = subprocess.Popen(["sleep", "2"])
    try:
        found = tree(os.getpid())
        assert other.pid in found
        assert forked not in found
    finally:
        os.waitpid(forked, 0)
        other.wait()
