"""Daily memory files merged block by block: what git's merge driver for them does."""

from __future__ import annotations

import re
from datetime import datetime

import pytest

from pimem_core.types import Anchor, Entry
from pimem_plugins.shared.day_merge import merge_day_file, split_blocks
from pimem_plugins.shared.entry_format import format_entry


def entry(session: str, turn: str, time: str, text: str, *, heading: bool = False) -> str:
    written = datetime.fromisoformat(f"2026-08-13T{time}")
    anchor = Anchor(session=session, turn=turn, transcript=f"/t/{session}.jsonl")
    return format_entry(
        Entry(anchor=anchor, content=text, written_at=written), session_heading=heading
    )


BASE = entry("s0", "t1", "09:00", "- base one", heading=True) + entry(
    "s0", "t2", "09:30", "- base two"
)
ALICE = entry("sa", "t3", "10:00", "- alice", heading=True)
BOB = entry("sb", "t4", "10:02", "- bob", heading=True)
COMPACT = "\n\n## Memory Compact 11:00\n\n- a summary\n\n### Decisions\n- kept Redis\n"


@pytest.mark.parametrize(
    "text",
    [
        "",
        BASE,
        BASE + ALICE + COMPACT,
        "# 2026-08-13\n" + COMPACT + ALICE,
        "free text first\n\n" + BASE + "no newline at the end",
        BASE.replace("\n", "\r\n"),
    ],
)
def test_blocks_give_the_text_back(text: str) -> None:
    split = split_blocks(text)
    assert "".join(block.lead + block.body for block in split.blocks) + split.tail == text


def test_a_compact_block_keeps_its_sub_headings_and_ends_at_an_entry() -> None:
    blocks = split_blocks(BASE + COMPACT + entry("s0", "t9", "11:05", "- after")).blocks
    bodies = [block.body.split("\n", 1)[0] for block in blocks]
    assert bodies == [
        "## Session 09:00",
        "### 09:00",
        "### 09:30",
        "## Memory Compact 11:00",
        "### 11:05",
    ]
    assert "### Decisions" in blocks[3].body


def test_both_sides_appending_keep_every_entry_in_the_entry_shape() -> None:
    merged = merge_day_file(BASE, BASE + ALICE, BASE + BOB)
    assert merged == BASE + ALICE + BOB


def test_entries_of_the_same_minute_stay_two_entries() -> None:
    alice = entry("sa", "t3", "10:00", "- alice", heading=True)
    bob = entry("sb", "t4", "10:00", "- bob", heading=True)
    merged = merge_day_file(BASE, BASE + alice, BASE + bob)
    # One `## Session 10:00` heading (the same line on both sides), both entries whole.
    assert merged == BASE + alice + entry("sb", "t4", "10:00", "- bob")
    assert merged.count("### 10:00\n<!--") == 2


def test_a_forget_stays_forgotten_next_to_the_other_sides_append() -> None:
    forgotten = entry("s0", "t1", "09:00", "- base one", heading=True)
    merged = merge_day_file(BASE, forgotten, BASE + BOB)
    assert merged == forgotten + BOB
    assert merge_day_file(BASE, BASE + BOB, forgotten) == forgotten + BOB


def test_a_session_heading_goes_with_its_last_entry_only() -> None:
    base = entry("s0", "t1", "09:00", "- only entry", heading=True)
    # Their side forgot the only entry, and with it the heading; ours added another session.
    merged = merge_day_file(base, base + ALICE, "")
    assert merged == ALICE
    # Ours continued that session under the heading: the heading stays with our entry.
    more = entry("s0", "t5", "10:30", "- more")
    assert merge_day_file(base, base + more, "") == "\n## Session 09:00\n\n" + more


def test_the_same_entry_on_both_sides_is_kept_once() -> None:
    assert merge_day_file(BASE, BASE + ALICE, BASE + ALICE) == BASE + ALICE


def test_both_sides_creating_the_file_keep_both() -> None:
    assert merge_day_file("", ALICE, BOB) == ALICE + BOB


def blank_runs_as_one(text: str) -> str:
    return re.sub(r"\n{3,}", "\n\n", text)


def test_a_compaction_against_an_append_keeps_both() -> None:
    merged = merge_day_file(BASE, BASE + COMPACT, BASE + BOB)
    # A block keeps the blank lines it had on its side: two here, where appending has one.
    assert blank_runs_as_one(merged) == blank_runs_as_one(BASE + COMPACT + BOB)
    assert merge_day_file(BASE, BASE + BOB, BASE + COMPACT) == BASE + BOB + COMPACT


def test_a_compactions_new_file_keeps_its_title_first() -> None:
    compacted = "# 2026-08-13\n" + COMPACT
    merged = merge_day_file("", BOB, compacted)
    assert merged.startswith("# 2026-08-13\n\n## Session 10:02\n")
    assert merged.endswith(COMPACT)
    assert merge_day_file("", compacted, BOB) == compacted + BOB


def test_an_ours_without_a_final_newline_is_not_glued_to_their_block() -> None:
    merged = merge_day_file(BASE, BASE + "- a note", BASE + BOB)
    assert "- a note\n" in merged
    assert merged.endswith(BOB)


def test_nothing_changed_on_their_side_leaves_ours_byte_for_byte() -> None:
    ours = BASE + "\n\n\n" + ALICE + "   \n"
    assert merge_day_file(BASE, ours, BASE) == ours
