"""Forgetting through an indexed chunk: padded windows, twins, the store's edge and compact blocks.

Sections are built by hand the way memsearch's ``expand`` answers them, so no index is needed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from pimem_core.errors import StoreError
from pimem_core.service_values import Redaction
from pimem_core.types import Anchor, ChunkAddress, Section
from pimem_plugins import markdown_store

from conftest import make_pimem

T = TypeVar("T")
HASH = "0123456789abcdef"
A1 = "<!-- session:s1 turn:t1 transcript:/home/user/a.jsonl -->"
A2 = "<!-- session:s1 turn:t2 transcript:/home/user/a.jsonl -->"
A3 = "<!-- session:s2 turn:t3 transcript:/home/user/b.jsonl -->"
E1 = f"### 22:41\n{A1}\n- decided to use redis for the hot cache"
E2 = f"### 22:55\n{A2}\n- dropped the varnish layer"
E3 = f"### 23:10\n{A3}\n- fixed the login redirect bug"
# Lines (1-based): 2 ## Session 22:41, 4 ### 22:41, 8 ### 22:55, 13 ## Session 23:10, 15 ### 23:10.
D = f"\n## Session 22:41\n\n{E1}\n\n{E2}\n\n\n## Session 23:10\n\n{E3}\n\n"

TA = "### 09:00\n<!-- session:a turn:1 transcript:/a -->\n- from a"
TB = "### 09:00\n<!-- session:b turn:2 transcript:/b -->\n- from b"
# Lines: 2 ## Session, 4 ### 09:00 (a), 9 ## Session, 11 ### 09:00 (b).
TWINS = f"\n## Session 09:00\n\n{TA}\n\n\n## Session 09:00\n\n{TB}\n\n"

ENTRY_0900 = "### 09:00\n<!-- session:s1 turn:t1 transcript:/a -->\n- before compaction"
ENTRY_0930 = "### 09:30\n<!-- session:s1 turn:t2 transcript:/a -->\n- after compaction"
BLOCK = "## Memory Compact 09:12\n\n- summary line\n\n### Decisions\n\n- use redis"
# Lines: 5 ### 09:00, 11 ## Memory Compact 09:12, 15 ### Decisions, 17 - use redis, 19 ### 09:30.
COMPACTED = f"# 2026-08-13\n\n## Session 09:00\n\n{ENTRY_0900}\n\n\n\n{BLOCK}\n\n{ENTRY_0930}\n\n"


@pytest.fixture
def memory(repo: Path) -> Path:
    directory = repo / ".memsearch" / "memory"
    directory.mkdir(parents=True)
    return directory


def write_day(memory: Path, text: str, day: str = "2026-08-13") -> Path:
    file = memory / f"{day}.md"
    file.write_text(text)
    return file


def section(
    source: Path | str,
    heading: str,
    start_line: int,
    end_line: int,
    anchor: Anchor | None = None,
) -> Section:
    return Section(
        chunk_hash=HASH,
        source=str(source),
        heading=heading,
        start_line=start_line,
        end_line=end_line,
        content="(whatever expand read)",
        anchor=anchor,
    )


def forget(repo: Path, found: Section) -> Redaction:
    pimem = make_pimem()
    return pimem.forget_entry(pimem.resolve_scope(repo), ChunkAddress(section=found))


def refused(repo: Path, found: Section) -> str:
    with pytest.raises(StoreError) as caught:
        forget(repo, found)
    return str(caught.value)


def assert_untouched(file: Path, text: str) -> None:
    assert file.read_bytes() == text.encode()
    assert sorted(p.name for p in file.parent.iterdir()) == [file.name]


# -- entries -----------------------------------------------------------------------------------


def test_a_padded_window_reaching_into_neighbours_picks_the_entry_with_the_heading(
    repo: Path, memory: Path
) -> None:
    file = write_day(memory, D)
    redaction = forget(
        repo,
        section(
            file, "22:55", 2, 16, Anchor(session="s1", turn="t2", transcript="/home/user/a.jsonl")
        ),
    )
    assert redaction == Redaction(file=file, removed=E2, deleted=False, kind="entry")
    assert file.read_text() == f"\n## Session 22:41\n\n{E1}\n\n## Session 23:10\n\n{E3}\n\n"


def test_an_unanchored_chunk_is_found_by_heading_and_window(repo: Path, memory: Path) -> None:
    file = write_day(memory, D)
    redaction = forget(repo, section(file, "23:10", 13, 19))
    assert redaction.removed == E3
    assert file.read_text() == f"\n## Session 22:41\n\n{E1}\n\n{E2}\n\n"


def test_the_window_picks_between_entries_at_the_same_time(repo: Path, memory: Path) -> None:
    file = write_day(memory, TWINS)
    redaction = forget(repo, section(file, "09:00", 9, 14))
    assert redaction.removed == TB
    assert file.read_text() == f"\n## Session 09:00\n\n{TA}\n\n"


@pytest.mark.parametrize(("anchor", "removed", "kept"), [("a 1", TA, TB), ("b 2", TB, TA)])
def test_twins_are_told_apart_by_the_anchor(
    repo: Path, memory: Path, anchor: str, removed: str, kept: str
) -> None:
    file = write_day(memory, TWINS)
    session, turn = anchor.split()
    found = section(file, "09:00", 1, 14, Anchor(session=session, turn=turn, transcript="/x"))
    redaction = forget(repo, found)
    assert redaction.removed == removed
    text = file.read_text()
    assert removed not in text
    assert kept in text


def test_an_anchor_matches_whole_ids_only(repo: Path, memory: Path) -> None:
    text = "### 09:00\n<!-- session:s turn:1 transcript:/a -->\n- one\n\n"
    text += "### 09:00\n<!-- session:s turn:10 transcript:/a -->\n- ten\n\n"
    file = write_day(memory, text)
    found = section(file, "09:00", 1, 8, Anchor(session="s", turn="1", transcript="/a"))
    assert (
        forget(repo, found).removed == "### 09:00\n<!-- session:s turn:1 transcript:/a -->\n- one"
    )


def test_twins_without_an_anchor_are_ambiguous(repo: Path, memory: Path) -> None:
    file = write_day(memory, TWINS)
    message = refused(repo, section(file, "09:00", 1, 14))
    for word in ("ambiguous", HASH, "2 entries", "09:00", str(file), "by hand"):
        assert word in message
    assert_untouched(file, TWINS)


def test_an_anchor_matching_no_entry_does_not_resolve(repo: Path, memory: Path) -> None:
    file = write_day(memory, TWINS)
    found = section(file, "09:00", 1, 14, Anchor(session="c", turn="3", transcript="/c"))
    message = refused(repo, found)
    assert "does not resolve to a memory entry or compact block" in message
    assert str(file) in message
    assert_untouched(file, TWINS)


def test_a_session_heading_chunk_does_not_resolve(repo: Path, memory: Path) -> None:
    file = write_day(memory, D)
    message = refused(repo, section(file, "Session 22:41", 2, 12))
    assert "does not resolve to a memory entry or compact block" in message
    assert HASH in message
    assert str(file) in message
    assert_untouched(file, D)


def test_an_entry_outside_the_window_does_not_resolve(repo: Path, memory: Path) -> None:
    file = write_day(memory, D)
    message = refused(repo, section(file, "23:10", 1, 12))
    assert "does not resolve" in message
    assert_untouched(file, D)


def test_forgetting_the_only_entry_deletes_the_file(repo: Path, memory: Path) -> None:
    file = write_day(memory, f"\n## Session 22:41\n\n{E1}\n\n")
    redaction = forget(repo, section(file, "22:41", 2, 6))
    assert redaction == Redaction(file=file, removed=E1, deleted=True, kind="entry")
    assert list(memory.iterdir()) == []


# -- where the chunk lives -----------------------------------------------------------------------


def test_a_relative_source_is_resolved_against_the_scope_dir(repo: Path, memory: Path) -> None:
    file = write_day(memory, D)
    redaction = forget(repo, section(".memsearch/memory/2026-08-13.md", "22:55", 8, 10))
    assert redaction.file == file
    assert redaction.removed == E2


def test_a_source_outside_the_store_is_refused(repo: Path, memory: Path) -> None:
    file = write_day(memory, D)
    readme = repo / "README.md"
    readme.write_text("### 22:55\n- not a memory\n")
    message = refused(repo, section(readme, "22:55", 1, 2))
    assert "outside the memory store" in message
    assert HASH in message
    assert str(readme) in message
    assert readme.read_text() == "### 22:55\n- not a memory\n"
    assert_untouched(file, D)


@pytest.mark.parametrize(
    "source", ["../README.md", ".memsearch/memory/../../README.md", ".memsearch/memory", "."]
)
def test_a_relative_source_escaping_the_store_is_refused(
    repo: Path, memory: Path, source: str
) -> None:
    (repo / "README.md").write_text("### 22:55\n- x\n")
    file = write_day(memory, D)
    message = refused(repo, section(source, "22:55", 1, 2))
    assert "outside the memory store" in message
    assert source in message
    assert_untouched(file, D)


def test_a_source_with_a_nul_is_refused_not_a_crash(repo: Path, memory: Path) -> None:
    # Found by the reliability suite: the path functions raised ValueError, not StoreError.
    file = write_day(memory, D)
    message = refused(repo, section(".memsearch/memory/2026-08-13.md\x00x", "22:55", 8, 10))
    assert "names no file" in message
    assert_untouched(file, D)


def test_a_symbolic_link_out_of_the_store_is_refused(
    repo: Path, memory: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere.md"
    elsewhere.write_text(D)
    link = memory / "2026-08-13.md"
    link.symlink_to(elsewhere)
    message = refused(repo, section(link, "22:55", 8, 10))
    assert "outside the memory store" in message
    assert elsewhere.read_text() == D
    assert link.is_symlink()


def test_a_store_reached_through_a_symbolic_link_is_inside(
    repo: Path, memory: Path, tmp_path: Path
) -> None:
    file = write_day(memory, D)
    alias = tmp_path / "alias"
    alias.symlink_to(repo)
    redaction = forget(repo, section(alias / ".memsearch/memory/2026-08-13.md", "22:55", 8, 10))
    assert redaction.removed == E2
    assert E2 not in file.read_text()


def test_a_missing_day_file_is_refused(repo: Path, memory: Path) -> None:
    file = write_day(memory, D)
    gone = memory / "2026-08-12.md"
    message = refused(repo, section(gone, "22:55", 8, 10))
    assert "no longer exists" in message
    assert "reindex" in message
    assert HASH in message
    assert str(gone) in message
    assert not gone.exists()
    assert_untouched(file, D)


def test_a_missing_store_is_refused(repo: Path) -> None:
    source = repo / ".memsearch" / "memory" / "2026-08-13.md"
    assert "no longer exists" in refused(repo, section(source, "22:55", 8, 10))
    assert not (repo / ".memsearch").exists()


# -- compact blocks ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("heading", "start", "end"),
    [("Decisions", 15, 19), ("Memory Compact 09:12", 11, 14), ("Decisions", 17, 30)],
)
def test_a_chunk_of_a_compact_block_removes_the_whole_block(
    repo: Path, memory: Path, heading: str, start: int, end: int
) -> None:
    file = write_day(memory, COMPACTED)
    redaction = forget(repo, section(file, heading, start, end))
    assert redaction == Redaction(file=file, removed=BLOCK, deleted=False, kind="compact block")
    assert file.read_text() == (
        f"# 2026-08-13\n\n## Session 09:00\n\n{ENTRY_0900}\n\n\n\n{ENTRY_0930}\n\n"
    )


def test_a_block_ends_before_a_bare_entry_heading(repo: Path, memory: Path) -> None:
    text = f"\n## Session 09:00\n\n{ENTRY_0900}\n\n\n\n## Memory Compact\n\n- summary\n{ENTRY_0930}\n\n"
    file = write_day(memory, text)
    redaction = forget(repo, section(file, "Memory Compact", 9, 14))
    assert redaction.removed == "## Memory Compact\n\n- summary"
    result = file.read_text()
    assert result == f"\n## Session 09:00\n\n{ENTRY_0900}\n\n\n\n{ENTRY_0930}\n\n"
    assert f"{ENTRY_0930}\n\n".encode() in file.read_bytes()


def test_an_entry_inside_the_window_wins_over_the_block(repo: Path, memory: Path) -> None:
    file = write_day(memory, COMPACTED)
    redaction = forget(repo, section(file, "09:30", 11, 21))
    assert redaction.kind == "entry"
    assert redaction.removed == ENTRY_0930
    assert BLOCK in file.read_text()


def two_blocks() -> str:
    return (
        "# 2026-08-13\n\n## Memory Compact 08:00\n\n- first\n\n### Decisions\n\n- a\n\n\n"
        "## Memory Compact 20:00\n\n- second\n\n### Decisions\n\n- b\n"
    )


def test_a_window_over_two_matching_blocks_is_ambiguous(repo: Path, memory: Path) -> None:
    file = write_day(memory, two_blocks())
    message = refused(repo, section(file, "Decisions", 7, 16))
    for word in ("ambiguous", HASH, "2 compact blocks", str(file)):
        assert word in message
    assert_untouched(file, two_blocks())


def test_the_window_picks_one_of_two_blocks(repo: Path, memory: Path) -> None:
    file = write_day(memory, two_blocks())
    redaction = forget(repo, section(file, "Decisions", 16, 18))
    assert redaction.removed == "## Memory Compact 20:00\n\n- second\n\n### Decisions\n\n- b"
    assert file.read_text() == (
        "# 2026-08-13\n\n## Memory Compact 08:00\n\n- first\n\n### Decisions\n\n- a\n\n"
    )


def test_a_stale_window_no_longer_overlapping_the_block_does_not_resolve(
    repo: Path, memory: Path
) -> None:
    file = write_day(memory, COMPACTED)
    message = refused(repo, section(file, "Decisions", 1, 9))
    assert "does not resolve to a memory entry or compact block" in message
    assert_untouched(file, COMPACTED)


def test_a_heading_not_in_the_block_does_not_resolve(repo: Path, memory: Path) -> None:
    file = write_day(memory, COMPACTED)
    assert "does not resolve" in refused(repo, section(file, "Open questions", 11, 17))
    assert_untouched(file, COMPACTED)


def test_a_file_of_a_date_title_and_a_block_is_deleted(repo: Path, memory: Path) -> None:
    text = "# 2026-08-13\n\n\n## Memory Compact\n\n- summary\n"
    file = write_day(memory, text)
    redaction = forget(repo, section(file, "Memory Compact", 4, 6))
    assert redaction == Redaction(
        file=file, removed="## Memory Compact\n\n- summary", deleted=True, kind="compact block"
    )
    assert list(memory.iterdir()) == []


def test_a_hand_written_title_keeps_the_file(repo: Path, memory: Path) -> None:
    file = write_day(memory, "# TODO notes\n\n## Memory Compact 09:12\n\n- summary\n")
    redaction = forget(repo, section(file, "Memory Compact 09:12", 3, 5))
    assert not redaction.deleted
    assert file.read_text() == "# TODO notes\n"


# -- races ------------------------------------------------------------------------------------


def test_a_file_deleted_after_validation_is_reported_as_gone(
    repo: Path, memory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = write_day(memory, D)
    real_rewrite = markdown_store._rewrite

    def rewrite_after_another_forget(path: Path, edit: Callable[[str], tuple[str, T]]) -> T:
        file.unlink()
        return real_rewrite(path, edit)

    monkeypatch.setattr(markdown_store, "_rewrite", rewrite_after_another_forget)
    message = refused(repo, section(file, "22:55", 8, 10))
    assert "no longer exists" in message
    assert list(memory.iterdir()) == []
