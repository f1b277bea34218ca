"""Forgetting by date and time: address validation, CLI errors, JSON output and concurrent appends."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import pytest

from pimem_core.day_file import list_entries
from pimem_core.errors import StoreError
from pimem_core.types import Anchor, DayAddress, Entry
from pimem_plugins import markdown_store

from conftest import make_pimem, run_cli

T = TypeVar("T")

A1 = "<!-- session:s1 turn:t1 transcript:/home/user/a.jsonl -->"
A2 = "<!-- session:s1 turn:t2 transcript:/home/user/a.jsonl -->"
A3 = "<!-- session:s2 turn:t3 transcript:/home/user/b.jsonl -->"
D = (
    f"\n## Session 22:41\n\n### 22:41\n{A1}\n- decided to use redis for the hot cache\n\n"
    f"### 22:55\n{A2}\n- dropped the varnish layer\n\n\n"
    f"## Session 23:10\n\n### 23:10\n{A3}\n- fixed the login redirect bug\n\n"
)
TWINS = (
    "\n## Session 09:00\n\n### 09:00\n<!-- session:a turn:1 transcript:/a -->\n- from a\n\n"
    "\n## Session 09:00\n\n### 09:00\n<!-- session:b turn:2 transcript:/b -->\n- from b\n\n"
)
LATE = "\n## Session 23:30\n\n### 23:30\n<!-- session:s3 turn:t9 transcript:/c -->\n- late news\n\n"


@pytest.fixture
def day(repo: Path) -> Path:
    file = repo / ".memsearch" / "memory" / "2026-08-13.md"
    file.parent.mkdir(parents=True)
    file.write_text(D)
    return file


def forget(repo: Path, date: str, time: str) -> None:
    pimem = make_pimem()
    pimem.forget_entry(pimem.resolve_scope(repo), DayAddress.parse(date, time))


def assert_untouched(file: Path, text: str = D) -> None:
    assert file.read_bytes() == text.encode()
    assert sorted(p.name for p in file.parent.iterdir()) == [file.name]


# -- TC-32 through the API -----------------------------------------------------------------------


@pytest.mark.parametrize("value", ["yesterday", "2026-8-13", "13-08-2026", "2026-08-13T10"])
def test_bad_date_is_refused(repo: Path, day: Path, value: str) -> None:
    with pytest.raises(StoreError, match="YYYY-MM-DD") as caught:
        forget(repo, value, "22:55")
    assert value in str(caught.value)
    assert_untouched(day)


def test_non_calendar_date_is_refused(repo: Path, day: Path) -> None:
    with pytest.raises(StoreError, match="2026-02-30") as caught:
        forget(repo, "2026-02-30", "22:55")
    assert "calendar" in str(caught.value)
    assert_untouched(day)


@pytest.mark.parametrize("value", ["10pm", "24:00", "9:12", "09:60", "22:55:00", ""])
def test_bad_time_is_refused(repo: Path, day: Path, value: str) -> None:
    with pytest.raises(StoreError, match="HH:MM"):
        forget(repo, "2026-08-13", value)
    assert_untouched(day)


def test_no_entry_at_that_time(repo: Path, day: Path) -> None:
    with pytest.raises(StoreError) as caught:
        forget(repo, "2026-08-13", "09:12")
    message = str(caught.value)
    assert "no memory entry at 09:12" in message
    assert str(day) in message
    assert_untouched(day)


def test_two_entries_at_the_same_time_are_ambiguous(repo: Path, day: Path) -> None:
    day.write_text(TWINS)
    with pytest.raises(StoreError) as caught:
        forget(repo, "2026-08-13", "09:00")
    message = str(caught.value)
    assert "ambiguous" in message
    assert "09:00" in message
    assert str(day) in message
    assert "by its chunk_hash" in message  # the way that works, and where to find it
    assert "memory_search" in message
    assert_untouched(day, TWINS)


def test_no_file_for_that_date(repo: Path, day: Path) -> None:
    missing = day.parent / "2026-08-12.md"
    with pytest.raises(StoreError) as caught:
        forget(repo, "2026-08-12", "22:55")
    message = str(caught.value)
    assert "2026-08-12" in message
    assert str(missing) in message
    assert not missing.exists()
    assert_untouched(day)


def test_no_store_at_all(repo: Path) -> None:
    with pytest.raises(StoreError, match="no daily memory file"):
        forget(repo, "2026-08-13", "22:55")
    assert not (repo / ".memsearch").exists()


def test_non_utf8_file_is_refused_and_left_alone(repo: Path, day: Path) -> None:
    day.write_bytes(b"### 22:55\n\xff\n")
    with pytest.raises(StoreError, match="UTF-8"):
        forget(repo, "2026-08-13", "22:55")
    assert day.read_bytes() == b"### 22:55\n\xff\n"


# -- TC-32 through the CLI -----------------------------------------------------------------------


def cli_forget(repo: Path, date: str, time: str, *extra: str) -> tuple[int, str, str]:
    result = run_cli("forget", "--date", date, "--time", time, "--cwd", str(repo), *extra)
    return result.code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("date", "time", "words"),
    [
        ("yesterday", "22:55", ["YYYY-MM-DD", "yesterday"]),
        ("2026-02-30", "22:55", ["2026-02-30"]),
        ("2026-08-13", "10pm", ["HH:MM", "10pm"]),
        ("2026-08-13", "24:00", ["HH:MM", "24:00"]),
        ("2026-08-13", "09:12", ["no memory entry at 09:12"]),
        ("2026-08-12", "22:55", ["2026-08-12", "2026-08-12.md"]),
    ],
)
def test_cli_errors_are_one_line_without_traceback(
    repo: Path, day: Path, date: str, time: str, words: list[str]
) -> None:
    code, stdout, stderr = cli_forget(repo, date, time)
    assert code == 1
    assert stdout == ""
    lines = stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("pimem: error:")
    assert "Traceback" not in stderr
    for word in words:
        assert word in lines[0]
    assert_untouched(day)


def test_cli_ambiguous_is_one_line(repo: Path, day: Path) -> None:
    day.write_text(TWINS)
    code, _, stderr = cli_forget(repo, "2026-08-13", "09:00")
    assert code == 1
    assert len(stderr.splitlines()) == 1
    assert stderr.startswith("pimem: error:")
    assert "ambiguous" in stderr
    assert_untouched(day, TWINS)


def test_cli_json_output(repo: Path, day: Path) -> None:
    code, stdout, stderr = cli_forget(repo, "2026-08-13", "22:55", "--json")
    assert code == 0, stderr
    assert json.loads(stdout) == {
        "file": str(day),
        "removed": f"### 22:55\n{A2}\n- dropped the varnish layer",
        "deleted": False,
        "kind": "entry",
    }
    assert "- dropped the varnish layer" not in day.read_text()


def test_cli_json_output_when_the_file_is_deleted(repo: Path, day: Path) -> None:
    day.write_text(f"\n## Session 22:41\n\n### 22:41\n{A1}\n- only\n\n")
    code, stdout, _ = cli_forget(repo, "2026-08-13", "22:41", "--json")
    assert code == 0
    assert json.loads(stdout) == {
        "file": str(day),
        "removed": f"### 22:41\n{A1}\n- only",
        "deleted": True,
        "kind": "entry",
    }
    assert not day.exists()


def test_cli_text_output_shows_the_removed_entry(repo: Path, day: Path) -> None:
    code, stdout, _ = cli_forget(repo, "2026-08-13", "22:55")
    assert code == 0
    assert str(day) in stdout
    assert f"### 22:55\n{A2}\n- dropped the varnish layer" in stdout


# -- concurrent appends during a rewrite -----------------------------------------------------------


def append(file: Path, text: str) -> None:
    fd = os.open(file, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def forget_2255(text: str) -> tuple[str, str]:
    (found,) = [entry for entry in list_entries(text) if entry.time == "22:55"]
    return found.removed_from(text), found.text


def test_an_append_during_the_edit_survives(day: Path) -> None:
    calls: list[str] = []

    def edit(text: str) -> tuple[str, str]:
        calls.append(text)
        if len(calls) == 1:
            append(day, LATE)
        return forget_2255(text)

    removed = markdown_store._rewrite(day, edit)
    assert len(calls) == 2
    assert calls[1] == D + LATE
    text = day.read_text()
    assert text == forget_2255(D + LATE)[0]
    assert "- late news" in text
    assert "- dropped the varnish layer" not in text
    assert removed == f"### 22:55\n{A2}\n- dropped the varnish layer"
    assert sorted(p.name for p in day.parent.iterdir()) == [day.name]


def test_an_append_between_the_check_and_the_swap_is_carried_over(
    day: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_replace = os.replace
    appended: list[bool] = []

    def replace_after_a_late_append(src: str, dst: Path) -> None:
        if not appended:
            append(day, LATE)  # lands on the old file, which is about to be swapped out
            appended.append(True)
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_after_a_late_append)
    markdown_store._rewrite(day, forget_2255)
    monkeypatch.undo()
    text = day.read_text()
    assert text.endswith(LATE)
    assert "- dropped the varnish layer" not in text
    assert "- late news" in text


def test_a_file_that_keeps_changing_is_left_alone(day: Path) -> None:
    def edit(text: str) -> tuple[str, str]:
        append(day, "- more\n")
        return forget_2255(text)

    with pytest.raises(StoreError, match="changing"):
        markdown_store._rewrite(day, edit)
    text = day.read_text()
    assert "- dropped the varnish layer" in text
    assert text.startswith(D)
    assert sorted(p.name for p in day.parent.iterdir()) == [day.name]


def test_an_edit_that_refuses_changes_nothing(day: Path) -> None:
    def edit(text: str) -> tuple[str, str]:
        raise StoreError("refused")

    with pytest.raises(StoreError, match="refused"):
        markdown_store._rewrite(day, edit)
    assert_untouched(day)


def test_deleting_the_file_keeps_a_late_append(day: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    single = f"\n## Session 22:41\n\n### 22:41\n{A1}\n- only\n\n"
    day.write_text(single)
    real_unlink = os.unlink

    def unlink_after_a_late_append(path: Path) -> None:
        if Path(path) == day:
            append(day, LATE)
        real_unlink(path)

    monkeypatch.setattr(os, "unlink", unlink_after_a_late_append)

    def forget_only(text: str) -> tuple[str, str]:
        (found,) = list_entries(text)
        return found.removed_from(text), found.text

    markdown_store._rewrite(day, forget_only)
    monkeypatch.undo()
    assert day.read_text() == LATE


def test_forgetting_the_last_entry_keeps_the_blank_line_before_the_next_append(
    repo: Path,
) -> None:
    pimem = make_pimem()
    scope = pimem.resolve_scope(repo)
    for turn, minute in (("t1", 41), ("t2", 55)):
        anchor = Anchor(session="s1", turn=turn, transcript="/t")
        at = datetime(2026, 8, 13, 22, minute)
        pimem.append_entry(scope, Entry(anchor=anchor, content=f"- {turn}", written_at=at))
    pimem.forget_entry(scope, DayAddress.parse("2026-08-13", "22:55"))
    anchor = Anchor(session="s1", turn="t3", transcript="/t")
    pimem.append_entry(
        scope, Entry(anchor=anchor, content="- t3", written_at=datetime(2026, 8, 13, 23, 0))
    )
    text = (repo / ".memsearch/memory/2026-08-13.md").read_text()
    assert "- t1\n\n### 23:00\n" in text
    assert [entry.time for entry in list_entries(text)] == ["22:41", "23:00"]


def test_two_forgets_at_once_both_take_effect(day: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def forget(time: str) -> None:
        def edit(text: str) -> tuple[str, str]:
            (found,) = [entry for entry in list_entries(text) if entry.time == time]
            return found.removed_from(text), found.text

        markdown_store._rewrite(day, edit)

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(forget, ["22:41", "22:55"]))
    assert [entry.time for entry in list_entries(day.read_text())] == ["23:10"]


def test_a_same_size_edit_in_place_is_noticed(day: Path) -> None:
    calls: list[str] = []

    def edit(text: str) -> tuple[str, str]:
        calls.append(text)
        if len(calls) == 1:  # someone rewrites a bullet in place, keeping the length
            day.write_text(text.replace("redis", "REDIS"))
        return forget_2255(text)

    markdown_store._rewrite(day, edit)
    assert len(calls) == 2
    assert "- decided to use REDIS for the hot cache" in day.read_text()


def test_a_day_file_deleted_after_the_check_is_reported_as_missing(
    repo: Path, day: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_rewrite = markdown_store._rewrite

    def rewrite_after_another_forget(path: Path, edit: Callable[[str], tuple[str, T]]) -> T:
        day.unlink()
        return real_rewrite(path, edit)

    monkeypatch.setattr(markdown_store, "_rewrite", rewrite_after_another_forget)
    with pytest.raises(StoreError, match="no daily memory file for 2026-08-13"):
        forget(repo, "2026-08-13", "22:55")
    assert not day.exists()


def test_a_day_forget_reports_an_entry(repo: Path, day: Path) -> None:
    pimem = make_pimem()
    redaction = pimem.forget_entry(
        pimem.resolve_scope(repo), DayAddress.parse("2026-08-13", "22:55")
    )
    assert redaction.kind == "entry"
    assert redaction.removed == f"### 22:55\n{A2}\n- dropped the varnish layer"
