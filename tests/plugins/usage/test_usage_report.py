"""The usage report, from hand-written record files and day files: the counts, the shares of
recalls and injections used, a torn line, the span, the entries no recall reached and their
share of the snapshot's budget, memory written but never recalled."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from pimem_plugins import snapshot
from pimem_plugins.usage.report import (
    SNAPSHOT_BUDGET,
    Records,
    StoreEntry,
    build_report,
    read_records,
    store_entries,
    summary_line,
)

TODAY = date(2026, 8, 13)
A = {"day": "2026-08-12", "time": "09:14", "chars": 200}
B = {"day": "2026-08-12", "time": "10:00", "chars": 300}
C = {"day": "2026-07-01", "time": "08:00", "chars": 1000}


def line(kind: str, session: str = "aaaaaaaaaaaa", **more: object) -> str:
    at = "2026-08-13T09:00:00+02:00"
    return json.dumps({"v": 1, "at": at, "session": session, "kind": kind, **more})


def write_day(usage_dir: Path, day: str, *lines: str, torn: str = "") -> None:
    usage_dir.mkdir(parents=True, exist_ok=True)
    (usage_dir / f"{day}.jsonl").write_text("".join(f"{x}\n" for x in lines) + torn)


STORE = (
    StoreEntry(day="2026-07-01", time="08:00", chars=1000),
    StoreEntry(day="2026-08-12", time="09:14", chars=200),
    StoreEntry(day="2026-08-12", time="10:00", chars=300),
    StoreEntry(day="2026-08-13", time="11:00", chars=50),
)


@pytest.fixture
def usage_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "usage" / "ms_project_0123abcd"
    write_day(
        directory,
        "2026-07-20",  # outside --since 7d, inside --days 30
        line("session", project="/p"),
        line("search", query="old", hits=[C], top=0.4),
    )
    write_day(
        directory,
        "2026-08-12",
        line("session", project="/p"),
        line("snapshot", entries=[A, B]),
        line("search", query="redis", hits=[A, B], top=0.8),
        line("search", query="nothing", hits=[], top=None),
        line("expand", entry=A),
        line("used", entry=A, via="expand", evidence="quoted", term="redis"),
        line("injection", entries=[B]),
        line("capture", entries=[A]),
        line("capture", skipped="small-talk"),
    )
    write_day(
        directory,
        "2026-08-13",
        line("session", session="bbbbbbbbbbbb", project="/p"),
        line("search", session="bbbbbbbbbbbb", query="tabs", hits=[A], top=0.5),
        # Another session's use does not make this session's recall used.
        line("used", session="cccccccccccc", entry=A, via="search", evidence="x", term="y"),
        line("write", session="bbbbbbbbbbbb", entries=[{"day": "2026-08-13", "time": "11:00"}]),
        line("used", session="bbbbbbbbbbbb", entry=B, via="snapshot", evidence="x", term="z"),
        line("truncated", session="bbbbbbbbbbbb"),
        torn='{"v": 1, "at": "2026-08-13T10:',
    )
    return directory


def test_the_counts_and_shares_of_a_week(usage_dir: Path) -> None:
    since = date(2026, 8, 7)
    records = read_records(usage_dir, date(2026, 7, 15), TODAY)
    report = build_report(records, STORE, today=TODAY, since=since, days=30)
    assert report.record_since == date(2026, 7, 20)
    counts = report.counts
    assert counts.skipped_lines == 1  # the torn last line
    # aaaa..., bbbb... and the session that used A (its session line is before the week).
    assert (counts.sessions, counts.recalls, counts.recalls_empty) == (3, 3, 1)
    assert (counts.expands, counts.injections, counts.captures) == (1, 1, 1)
    assert (counts.captures_skipped, counts.writes, counts.snapshots) == (1, 1, 1)
    assert (counts.uses, counts.truncated) == (3, 1)
    assert report.uses_by_way == {"expand": 1, "search": 1, "snapshot": 1}
    # One of three recalls was used (through the expand); the injection of B was not.
    assert counts.recalls_used == 1
    assert report.recall_share == pytest.approx(1 / 3)
    assert (counts.injections_used, report.injection_share) == (0, 0.0)
    assert report.per_day[-2:] == ((date(2026, 8, 12), 2, 1), (date(2026, 8, 13), 1, 2))
    assert len(report.per_day) == 7
    top = [(e.day, e.time, e.recalls, e.used) for e in report.top_recalled]
    # A: two searches and an expand; B: a search and an injection. C's search is before --since.
    assert top == [("2026-08-12", "09:14", 3, 2), ("2026-08-12", "10:00", 2, 1)]


def test_never_recalled_lists_sizes_and_the_snapshot_share(usage_dir: Path) -> None:
    records = read_records(usage_dir, date(2026, 7, 1), TODAY)
    report = build_report(records, STORE, today=TODAY, since=date(2026, 8, 7), days=30)
    # C was recalled on 07-20, within 30 days; the 11:00 entry nothing recalled.
    assert [(e.day, e.time, e.chars) for e in report.never_recalled] == [
        ("2026-08-13", "11:00", 50)
    ]
    assert report.snapshot_share == 0.0
    narrow = build_report(records, STORE, today=TODAY, since=date(2026, 8, 7), days=20)
    assert [e.chars for e in narrow.never_recalled] == [1000, 50]  # largest first
    assert narrow.never_recalled_chars == 1050
    # With nothing but the snapshot recorded, its's 500 chars are all never recalled.
    shown_only = Records(
        lines=tuple(
            (day, value) for day, value in records.lines if value["kind"] in ("snapshot", "session")
        )
    )
    quiet = build_report(shown_only, STORE, today=TODAY, since=date(2026, 8, 7), days=30)
    assert quiet.snapshot_share == pytest.approx(500 / SNAPSHOT_BUDGET)


def test_memory_written_but_never_recalled(usage_dir: Path) -> None:
    records = read_records(usage_dir, date(2026, 7, 1), TODAY)
    report = build_report(records, STORE, today=TODAY, since=date(2026, 8, 7), days=30)
    # A was captured, then recalled on the 13th; the 11:00 entry was written and left alone.
    assert [(e.day, e.time, e.chars) for e in report.written_unrecalled] == [
        ("2026-08-13", "11:00", 50)
    ]


def test_since_leaves_out_the_days_before(usage_dir: Path) -> None:
    records = read_records(usage_dir, date(2026, 7, 1), TODAY)
    month = build_report(records, STORE, today=TODAY, since=date(2026, 7, 15), days=30)
    today = build_report(records, STORE, today=TODAY, since=TODAY, days=30)
    assert (month.counts.sessions, month.counts.recalls) == (3, 4)
    assert (today.counts.sessions, today.counts.recalls, today.counts.captures) == (2, 1, 0)
    assert today.counts.recalls_used == 0
    assert today.per_day == ((TODAY, 1, 2),)


def test_no_record_says_so(tmp_path: Path) -> None:
    records = read_records(tmp_path / "nothing", date(2026, 7, 1), TODAY)
    report = build_report(records, STORE, today=TODAY, since=date(2026, 7, 15), days=30)
    assert report.record_since is None
    assert len(report.never_recalled) == 4
    assert summary_line(report) == "usage: nothing recorded yet"


def test_the_summary_line(usage_dir: Path) -> None:
    records = read_records(usage_dir, date(2026, 7, 1), TODAY)
    report = build_report(records, STORE, today=TODAY, since=date(2026, 8, 7), days=30)
    assert summary_line(report) == (
        "usage (7 days): 3 sessions, 3 recalls (33% used), 1 injections (0% used), "
        "1 captures; 1 entries never recalled in 30 days"
    )


def test_store_entries_are_sized_from_day_files() -> None:
    text = (
        "## Session 09:00\n\n### 09:14\n<!-- session:s1 turn:t1 transcript:/t -->\n"
        "- chose redis\n\n### 10:00\n- tabs\n"
    )
    entries = store_entries([("2026-08-12", text)])
    assert [(e.time, e.chars) for e in entries] == [
        ("09:14", len("### 09:14\n<!-- session:s1 turn:t1 transcript:/t -->\n- chose redis")),
        ("10:00", len("### 10:00\n- tabs")),
    ]


def test_the_budget_is_the_snapshot_plugins() -> None:
    assert SNAPSHOT_BUDGET == snapshot.TODAY_BUDGET + snapshot.YESTERDAY_BUDGET
