"""The usage record's writer: the bytes on disk, private modes, the day's bound, torn lines."""

from __future__ import annotations

import json
import os
import stat
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from pimem_core.types import Scope
from pimem_core.usage_events import Given, ShownEntry, UsageEvent
from pimem_plugins.usage import UsagePlugin, records_of
from pimem_plugins.usage.record import DAY_LIMIT, append, read_records, status_line

AT = datetime(2026, 12, 6, 9, 30, 5, tzinfo=timezone(timedelta(hours=1)))
SESSION = "3f2c9b1e-8d4a-4f6b-9c0d-1a2b3c4d5e6f"
HIT = ShownEntry(day="2026-12-05", time="14:02", text="- chose Redis for `session_cache`")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PIMEM_HOME", str(tmp_path / "ph"))
    return tmp_path / "ph"


def scope(tmp_path: Path) -> Scope:
    return Scope.for_project(tmp_path / "repo")


def test_a_search_is_one_line_with_the_fixed_fields(home: Path, tmp_path: Path) -> None:
    event = UsageEvent(
        kind="search", session=SESSION, at=AT, query="redis cache", entries=(HIT,), top=0.82
    )
    UsagePlugin().pimem_observe_usage(scope(tmp_path), event)
    target = scope(tmp_path)
    day_file = home / "state" / "usage" / target.collection / "2026-12-06.jsonl"
    raw = day_file.read_bytes()
    assert raw.endswith(b"\n")
    assert raw.count(b"\n") == 1
    assert json.loads(raw) == {
        "v": 1,
        "at": "2026-12-06T09:30:05+01:00",
        "session": __import__("hashlib").sha256(SESSION.encode()).hexdigest()[:12],
        "kind": "search",
        "query": "redis cache",
        "hits": [{"day": "2026-12-05", "time": "14:02", "chars": len(HIT.text)}],
        "top": 0.82,
    }
    assert SESSION not in raw.decode()  # the record names a session by a digest only
    assert stat.S_IMODE(day_file.stat().st_mode) == 0o600
    for directory in (day_file.parent, day_file.parent.parent, home / "state"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_the_query_is_cut_to_200_characters(home: Path, tmp_path: Path) -> None:
    event = UsageEvent(kind="search", session="s", at=AT, query="q" * 500)
    (line,) = records_of(event)
    assert line["query"] == "q" * 200


def test_a_day_file_stops_at_its_bound_with_one_truncated_line(tmp_path: Path) -> None:
    path = tmp_path / "usage" / "c" / "2026-12-06.jsonl"
    line = {"v": 1, "at": AT.isoformat(), "session": "abc", "kind": "search", "query": "x" * 190}
    for _ in range(2000):
        append(path, [line])
    size = path.stat().st_size
    assert DAY_LIMIT - 300 < size < DAY_LIMIT + 200
    kinds = [record["kind"] for record in read_records(path)]
    assert kinds.count("truncated") == 1
    assert kinds[-1] == "truncated"
    append(path, [line])
    assert path.stat().st_size == size  # nothing more that day


def test_a_torn_last_line_is_skipped_and_does_not_spoil_the_next(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    good = {"v": 1, "at": AT.isoformat(), "session": "abc", "kind": "session", "project": "/p"}
    append(path, [good])
    with path.open("ab") as file:  # a crash in the middle of a write
        file.write(b'{"v": 1, "at": "2026-12-06T09:31:00+01:00", "sess')
    assert list(read_records(path)) == [good]
    append(path, [good])
    assert list(read_records(path)) == [good, good]


def test_a_line_never_reaches_4_kb(tmp_path: Path) -> None:
    many = tuple(ShownEntry(day="2026-12-05", time="14:02", text="x") for _ in range(400))
    (line,) = records_of(UsageEvent(kind="snapshot", session="s", at=AT, entries=many))
    path = tmp_path / "d.jsonl"
    append(path, [line])
    assert 0 < path.stat().st_size < 4096
    assert next(iter(read_records(path)))["entries"]


def test_a_settle_with_a_use_writes_a_used_line_and_status_counts_it(tmp_path: Path) -> None:
    event = UsageEvent(
        kind="settled",
        session="s",
        at=AT,
        given=(Given(via="search", entry=HIT),),
        prompt="what cache do we use?",
        answer="I read `session_cache` and kept Redis.",
    )
    (line,) = records_of(event)
    assert {k: line[k] for k in ("kind", "via", "evidence", "term")} == {
        "kind": "used",
        "via": "search",
        "evidence": "identifier",
        "term": "session_cache",
    }
    assert line["entry"] == {"day": "2026-12-05", "time": "14:02", "chars": len(HIT.text)}
    append(tmp_path / "2026-12-06.jsonl", [line])
    assert status_line(tmp_path, "2026-12-06").endswith("1 used")


def test_the_files_are_no_one_elses(home: Path, tmp_path: Path) -> None:
    os.umask(0o000)
    try:
        event = UsageEvent(kind="session", session="s", at=AT, project=str(tmp_path))
        UsagePlugin().pimem_observe_usage(scope(tmp_path), event)
    finally:
        os.umask(0o022)
    for path in (home / "state").rglob("*"):
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path
