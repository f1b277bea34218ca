"""What reads a conflicted day file sees both sides and no marker; what would write a summary
into one, or merge from one, refuses."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from pimem_core import Pimem
from pimem_core.errors import StoreError
from pimem_core.runtime.store_today import store_today_status

from conftest import make_pimem, run_cli

ANCHOR = "<!-- session:{} turn:t transcript:/t -->"
DIFF3 = (
    f"\n## Session 09:00\n\n### 09:00\n{ANCHOR.format('s0')}\n- base\n\n"
    f"<<<<<<< HEAD\n### 10:00\n{ANCHOR.format('sa')}\n- alice\n\n"
    f"||||||| merged common ancestors\n### 09:30\n{ANCHOR.format('s0')}\n- forgotten\n\n"
    f"=======\n### 10:05\n{ANCHOR.format('sb')}\n- bob\n\n>>>>>>> origin/main\n"
)


@pytest.fixture
def conflicted(repo: Path) -> tuple[Pimem, Path]:
    pimem = make_pimem()
    day = pimem.resolve_scope(repo).memory_dir / "2026-08-13.md"
    day.parent.mkdir(parents=True)
    day.write_text(DIFF3)
    return pimem, day


def test_the_snapshot_shows_both_sides_and_no_marker(conflicted: tuple[Pimem, Path]) -> None:
    pimem, _ = conflicted
    snapshot = pimem.build_snapshot(pimem.resolve_scope(conflicted[1].parent))
    assert snapshot is not None
    for side in ("- base", "- alice", "- bob"):
        assert side in snapshot
    for gone in ("<<<<<<<", "|||||||", "=======", ">>>>>>>", "- forgotten"):
        assert gone not in snapshot


def test_today_counts_the_sides_not_the_ancestor(
    conflicted: tuple[Pimem, Path], repo: Path
) -> None:
    pimem, _ = conflicted
    section = store_today_status(pimem, pimem.resolve_scope(repo))
    assert (section.data["entries"], section.data["sessions"]) == (3, 3)


def test_a_compaction_summary_is_not_appended_to_a_conflicted_file(
    conflicted: tuple[Pimem, Path], repo: Path
) -> None:
    pimem, day = conflicted
    store = pimem.store(pimem.resolve_scope(repo))
    with pytest.raises(StoreError, match="memory compaction refused: unresolved git conflict"):
        store.append_compaction("- a summary", datetime(2026, 8, 13, 23, 0))
    assert day.read_text() == DIFF3


def test_the_merge_driver_refuses_a_version_with_markers_and_leaves_ours_alone(
    tmp_path: Path,
) -> None:
    base, ours, theirs = (tmp_path / name for name in ("base", "ours", "theirs"))
    base.write_text("")
    ours.write_text(DIFF3)
    theirs.write_text(f"### 11:00\n{ANCHOR.format('sc')}\n- carol\n")
    result = run_cli("git", "merge-day-files", str(base), str(ours), str(theirs))
    assert result.code == 1
    assert "the ours version already holds git conflict markers" in result.stderr
    assert ours.read_text() == DIFF3
    with pytest.raises(StoreError):
        make_pimem().merge_day_file("", DIFF3, "")


def test_the_merge_driver_replaces_ours_with_the_merge(tmp_path: Path) -> None:
    base, ours, theirs = (tmp_path / name for name in ("base", "ours", "theirs"))
    alice = f"### 10:00\n{ANCHOR.format('sa')}\n- alice\n\n"
    bob = f"### 10:00\n{ANCHOR.format('sb')}\n- bob\n\n"
    base.write_text("")
    ours.write_text(alice)
    theirs.write_text(bob)
    result = run_cli("git", "merge-day-files", str(base), str(ours), str(theirs))
    assert result.code == 0, result.stderr
    assert (result.stdout, ours.read_text()) == ("", alice + bob)
