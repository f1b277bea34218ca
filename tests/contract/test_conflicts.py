"""git's conflict markers in a daily memory file: which lines they are, and memory without them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pimem_core import conflicts
from pimem_core.conflicts import (
    ConflictScans,
    blank_conflicts,
    conflicted_files,
    describe_conflicted,
    file_is_conflicted,
    is_conflicted,
    marker_lines,
    without_conflicts,
    without_marker_lines,
)

BASE = "\n## Session 09:00\n\n### 09:00\n<!-- session:s0 turn:t1 transcript:/t -->\n- base\n\n"
ALICE = "### 10:00\n<!-- session:sa turn:t2 transcript:/t -->\n- alice\n"
BOB = "### 10:05\n<!-- session:sb turn:t3 transcript:/t -->\n- bob\n"
MERGE_STYLE = f"{BASE}<<<<<<< HEAD\n{ALICE}=======\n{BOB}>>>>>>> origin/main\n"
DIFF3_STYLE = (
    f"{BASE}<<<<<<< HEAD\n{ALICE}||||||| merged common ancestors\n"
    "### 09:30\n<!-- session:s0 turn:t9 transcript:/t -->\n- forgotten\n"
    f"=======\n{BOB}>>>>>>> origin/main\n"
)


def test_a_file_with_a_region_is_conflicted() -> None:
    assert is_conflicted(MERGE_STYLE)
    assert is_conflicted(DIFF3_STYLE)
    assert not is_conflicted(BASE + ALICE)


def test_a_lone_separator_or_a_longer_run_is_not_a_marker() -> None:
    text = f"{ALICE}=======\n- <<<<<<< quoted in a bullet\n<<<<<<<< eight\n"
    assert not is_conflicted(text)
    assert marker_lines(text) == []
    assert blank_conflicts(text) == text
    assert without_conflicts(text) == text


def test_half_resolved_files_still_count() -> None:
    # Someone deleted the opening marker and forgot the rest.
    text = f"{BASE}{ALICE}=======\n{BOB}>>>>>>> origin/main\n"
    assert is_conflicted(text)
    assert without_conflicts(text) == f"{BASE}{ALICE}{BOB}"


def test_without_conflicts_keeps_both_sides_as_a_union_resolution_does() -> None:
    assert without_conflicts(MERGE_STYLE) == f"{BASE}{ALICE}{BOB}"


def test_diff3s_ancestor_part_is_not_memory() -> None:
    # The ancestor's lines are what neither side has now: an entry one side forgot.
    assert without_conflicts(DIFF3_STYLE) == f"{BASE}{ALICE}{BOB}"
    assert "forgotten" not in blank_conflicts(DIFF3_STYLE)


def test_blanking_keeps_every_line_where_it_was() -> None:
    for text in (MERGE_STYLE, DIFF3_STYLE):
        blank = blank_conflicts(text)
        before, after = text.split("\n"), blank.split("\n")
        assert len(before) == len(after)
        gone = set(marker_lines(text))
        for number, (old, new) in enumerate(zip(before, after, strict=True)):
            assert new == ("" if number in gone else old)
        assert not is_conflicted(blank)
        assert "=======" not in blank


def test_a_chunk_loses_every_line_shaped_like_a_marker() -> None:
    chunk = f"{BOB}>>>>>>> origin/main\n=======\n||||||| base"
    assert without_marker_lines(chunk) == BOB.rstrip("\n")
    assert without_marker_lines(ALICE) == ALICE


def test_conflicted_files_are_found_by_name_in_the_store(tmp_path: Path) -> None:
    (tmp_path / "2026-08-13.md").write_text(MERGE_STYLE)
    (tmp_path / "2026-08-12.md").write_text(BASE)
    (tmp_path / ".2026-08-11.md.tmp").write_text(MERGE_STYLE)  # a forget's staged file
    (tmp_path / "notes.txt").write_text(MERGE_STYLE)
    (tmp_path / "2026-08-10.md").write_text(DIFF3_STYLE.replace("\n", "\r\n"))
    assert conflicted_files(tmp_path) == [tmp_path / "2026-08-10.md", tmp_path / "2026-08-13.md"]
    assert conflicted_files(tmp_path / "missing") == []
    assert not file_is_conflicted(tmp_path / "2026-08-12.md")


def test_a_scan_again_reads_only_the_files_that_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for day in range(10, 14):
        (tmp_path / f"2026-08-{day}.md").write_text(BASE)
    read: list[str] = []
    check = conflicts.file_is_conflicted

    def counted(file: Path) -> bool:
        read.append(file.name)
        return check(file)

    monkeypatch.setattr(conflicts, "file_is_conflicted", counted)
    scans = ConflictScans()
    assert scans.conflicted_files(tmp_path) == []
    assert len(read) == 4
    read.clear()
    assert scans.conflicted_files(tmp_path) == []
    assert read == []  # nothing changed: nothing read
    (tmp_path / "2026-08-13.md").write_text(MERGE_STYLE)  # git left markers
    (tmp_path / "2026-08-10.md").unlink()
    assert scans.conflicted_files(tmp_path) == [tmp_path / "2026-08-13.md"]
    assert read == ["2026-08-13.md"]
    read.clear()
    (tmp_path / "2026-08-13.md").write_text(BASE)  # resolved, its time set back: its size tells
    stamp = (tmp_path / "2026-08-12.md").stat()
    os.utime(tmp_path / "2026-08-13.md", ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert scans.conflicted_files(tmp_path) == []
    assert read == ["2026-08-13.md"]


def test_a_run_of_seven_that_is_no_marker_line_is_no_conflict(tmp_path: Path) -> None:
    file = tmp_path / "2026-08-13.md"
    file.write_text(BASE + "- the arrow >>>>>>> points right\n")
    assert not file_is_conflicted(file)
    file.write_text(BASE + ">>>>>>> theirs\n")
    assert file_is_conflicted(file)  # a close without an open still marks the file


def test_the_advice_names_the_files_and_a_resolution_that_keeps_both_sides() -> None:
    advice = describe_conflicted([Path("/s/2026-08-13.md")])
    assert "/s/2026-08-13.md" in advice
    assert "keep both sides" in advice
    assert "--ours/--theirs" in advice


@pytest.mark.parametrize("text", [MERGE_STYLE, DIFF3_STYLE])
def test_every_side_line_survives(text: str) -> None:
    kept = without_conflicts(text)
    for line in (*ALICE.split("\n"), *BOB.split("\n"), *BASE.split("\n")):
        assert line in kept.split("\n")


def test_crlf_ends_are_markers_too() -> None:
    crlf = MERGE_STYLE.replace("\n", "\r\n")
    assert without_conflicts(crlf) == f"{BASE}{ALICE}{BOB}".replace("\n", "\r\n")
    assert not is_conflicted(blank_conflicts(crlf))
