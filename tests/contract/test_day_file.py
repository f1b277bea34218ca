"""Day-file surgery: listing entries and removing exactly one, on text and through forget_entry."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pimem_core.day_file import (
    list_compact_blocks,
    list_entries,
)
from pimem_core.service_values import Redaction
from pimem_core.types import Anchor, DayAddress, Entry
from pimem_plugins.shared.entry_format import format_entry

from conftest import make_pimem

A1 = "<!-- session:s1 turn:t1 transcript:/home/user/a.jsonl -->"
A2 = "<!-- session:s1 turn:t2 transcript:/home/user/a.jsonl -->"
A3 = "<!-- session:s2 turn:t3 transcript:/home/user/b.jsonl -->"
E1 = f"### 22:41\n{A1}\n- decided to use redis for the hot cache"
E2 = f"### 22:55\n{A2}\n- dropped the varnish layer"
E3 = f"### 23:10\n{A3}\n- fixed the login redirect bug"
D = f"\n## Session 22:41\n\n{E1}\n\n{E2}\n\n\n## Session 23:10\n\n{E3}\n\n"

WITHOUT_2255 = f"\n## Session 22:41\n\n{E1}\n\n## Session 23:10\n\n{E3}\n\n"
WITHOUT_2310 = f"\n## Session 22:41\n\n{E1}\n\n{E2}\n\n"
SINGLE = f"\n## Session 22:41\n\n{E1}\n\n"
TITLED = "# 2026-08-13\n\n## Session 09:00\n\n### 09:00\n- first\n\n### 09:30\n- second\n"
TITLED_WITHOUT_0930 = "# 2026-08-13\n\n## Session 09:00\n\n### 09:00\n- first\n"
FREEFORM = "\n## Session 09:00\n\n- handwritten note\n\n### 09:12\n- a real entry\n"
FREEFORM_WITHOUT_0912 = "\n## Session 09:00\n\n- handwritten note\n"


def remove_at(text: str, time: str) -> str:
    (found,) = [entry for entry in list_entries(text) if entry.time == time]
    return found.removed_from(text)


# -- TC-31 on text -----------------------------------------------------------------------------


def test_list_entries_of_the_reference_file() -> None:
    entries = list_entries(D)
    assert [e.time for e in entries] == ["22:41", "22:55", "23:10"]
    # 0-based line indexes; the reference counts starts from 1 (4, 8, 15).
    assert [e.start for e in entries] == [3, 7, 14]
    assert [e.end for e in entries] == [7, 12, 19]
    assert [e.text for e in entries] == [E1, E2, E3]


def test_remove_a_middle_entry() -> None:
    assert remove_at(D, "22:55") == WITHOUT_2255


def test_remove_the_last_entry_of_a_session_drops_its_heading() -> None:
    result = remove_at(D, "23:10")
    assert result == WITHOUT_2310
    assert result.endswith("- dropped the varnish layer\n\n")
    assert "## Session 23:10" not in result


def test_remove_the_only_entry_empties_the_file() -> None:
    assert remove_at(SINGLE, "22:41") == ""


def test_remove_keeps_a_date_title() -> None:
    assert remove_at(TITLED, "09:30") == TITLED_WITHOUT_0930


def test_a_date_title_keeps_the_file_after_removing_its_last_entry() -> None:
    text = "# 2026-08-13\n\n## Session 09:00\n\n### 09:00\n- only\n"
    assert remove_at(text, "09:00") == "# 2026-08-13\n"


def test_a_hand_written_title_keeps_the_file() -> None:
    text = "# TODO list\n\n### 09:00\n- only\n"
    assert remove_at(text, "09:00") == "# TODO list\n"


def test_remove_keeps_free_form_notes_and_their_heading() -> None:
    assert remove_at(FREEFORM, "09:12") == FREEFORM_WITHOUT_0912


def test_non_time_level_3_headings_are_not_entries() -> None:
    text = "### Notes\n- x\n\n### 10:00\n- y\n\n### 10:00 draft\n- z\n"
    assert [e.time for e in list_entries(text)] == ["10:00"]
    assert [e.text for e in list_entries(text)] == ["### 10:00\n- y"]


def test_entry_heading_tolerates_extra_spaces() -> None:
    assert [e.time for e in list_entries("###   07:05  \n- x\n")] == ["07:05"]


def test_entry_ends_at_a_level_4_heading_only_when_it_is_level_1_to_3() -> None:
    text = "### 10:00\n- a\n#### detail\n- b\n## Other\n"
    assert list_entries(text)[0].text == "### 10:00\n- a\n#### detail\n- b"


def test_an_unrelated_empty_session_heading_is_kept() -> None:
    # A deliberate choice: only the removed entry's own heading is pruned, unlike the
    # reference's "drop every empty ## heading".
    text = (
        "\n## Session 08:00\n\n"
        "## Session 09:00\n\n### 09:00\n<!-- session:a turn:1 transcript:/a -->\n- one\n\n"
        "## Session 10:00\n\n### 10:00\n<!-- session:b turn:2 transcript:/b -->\n- two\n"
    )
    assert remove_at(text, "10:00") == (
        "\n## Session 08:00\n\n"
        "## Session 09:00\n\n### 09:00\n<!-- session:a turn:1 transcript:/a -->\n- one\n"
    )


# -- TC-31 through forget_entry ------------------------------------------------------------------


def forget(repo: Path, text: str, time: str, day: str = "2026-08-13") -> tuple[Redaction, Path]:
    file = repo / ".memsearch" / "memory" / f"{day}.md"
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)
    pimem = make_pimem()
    redaction = pimem.forget_entry(pimem.resolve_scope(repo), DayAddress.parse(day, time))
    return redaction, file


@pytest.mark.parametrize(
    ("text", "time", "expected", "removed"),
    [
        (D, "22:55", WITHOUT_2255, E2),
        (D, "23:10", WITHOUT_2310, E3),
        (D, "22:41", f"\n## Session 22:41\n\n{E2}\n\n\n## Session 23:10\n\n{E3}\n\n", E1),
        (TITLED, "09:30", TITLED_WITHOUT_0930, "### 09:30\n- second"),
        (FREEFORM, "09:12", FREEFORM_WITHOUT_0912, "### 09:12\n- a real entry"),
    ],
)
def test_forget_entry_rewrites_the_file(
    repo: Path, text: str, time: str, expected: str, removed: str
) -> None:
    redaction, file = forget(repo, text, time)
    assert file.read_bytes() == expected.encode()
    assert redaction == Redaction(file=file, removed=removed, deleted=False)


def test_forget_the_only_entry_deletes_the_file(repo: Path) -> None:
    redaction, file = forget(repo, SINGLE, "22:41")
    assert not file.exists()
    assert redaction == Redaction(file=file, removed=E1, deleted=True)


def test_forget_leaves_no_temporary_files(repo: Path) -> None:
    _, file = forget(repo, D, "22:55")
    assert sorted(p.name for p in file.parent.iterdir()) == ["2026-08-13.md"]


def test_forget_keeps_the_file_mode(repo: Path) -> None:
    file = repo / ".memsearch" / "memory" / "2026-08-13.md"
    file.parent.mkdir(parents=True)
    file.write_text(D)
    file.chmod(0o640)
    pimem = make_pimem()
    pimem.forget_entry(pimem.resolve_scope(repo), DayAddress.parse("2026-08-13", "22:55"))
    assert file.stat().st_mode & 0o777 == 0o640


# -- property: removing one entry leaves every other entry intact -------------------------------

# Lone surrogates cannot be encoded as UTF-8, so no generated text contains them.
NO_SURROGATES: tuple[Literal["Cs"]] = ("Cs",)

bullet_text = st.text(
    alphabet=st.characters(blacklist_categories=NO_SURROGATES, blacklist_characters="\n"),
    min_size=0,
    max_size=30,
)
bullets = st.lists(bullet_text.map(lambda s: f"- {s}"), min_size=1, max_size=3).map("\n".join)
note = st.text(
    alphabet=st.characters(blacklist_categories=NO_SURROGATES, blacklist_characters="\n#"),
    min_size=1,
    max_size=30,
).filter(lambda s: s.strip() != "")


@st.composite
def day_files(draw: st.DrawFn) -> tuple[str, list[str], list[str]]:
    """A day file, the texts of its entries (in order) and its free-form notes."""
    minutes = draw(st.lists(st.integers(0, 24 * 60 - 1), min_size=1, max_size=8, unique=True))
    text = draw(st.sampled_from(["", "# 2026-08-13\n"]))
    entries: list[str] = []
    notes: list[str] = []
    previous: str | None = None
    for minute in sorted(minutes):
        session = draw(st.sampled_from(["s1", "s2", "s3"]))
        entry = Entry(
            anchor=Anchor(session=session, turn=f"t{minute}", transcript="/t.jsonl"),
            content=draw(bullets),
            written_at=datetime(2026, 8, 13, minute // 60, minute % 60),
        )
        heading = session != previous
        block = format_entry(entry, session_heading=heading)
        if heading and draw(st.booleans()):
            free = draw(note)
            notes.append(free)
            block = block.replace("\n\n###", f"\n\n{free}\n\n###", 1)
        previous = session
        text += block
        entries.append(block[block.index("###") :].rstrip("\n"))
    return text, entries, notes


@given(day_files(), st.data())
def test_removing_one_entry_keeps_all_others_byte_identical(
    generated: tuple[str, list[str], list[str]], data: st.DataObject
) -> None:
    text, entries, notes = generated
    assert [e.text for e in list_entries(text)] == entries
    index = data.draw(st.integers(0, len(entries) - 1))
    result = list_entries(text)[index].removed_from(text)
    remaining = entries[:index] + entries[index + 1 :]
    if result == "":
        assert remaining == []
        assert notes == []
        return
    assert [e.text for e in list_entries(result)] == remaining
    for free in notes:
        assert free in result
    headings = text.count("\n## Session ")
    assert result.count("\n## Session ") in (headings, headings - 1)
    if text.startswith("# 2026-08-13\n"):
        assert result.startswith("# 2026-08-13\n")


# -- compact blocks on text ----------------------------------------------------------------------

ENTRY_0900 = "### 09:00\n<!-- session:s1 turn:t1 transcript:/a -->\n- before compaction"
ENTRY_0930 = "### 09:30\n<!-- session:s1 turn:t2 transcript:/a -->\n- after compaction"
BLOCK = "## Memory Compact 09:12\n\n- summary line\n\n### Decisions\n\n- use redis"
COMPACTED = f"# 2026-08-13\n\n## Session 09:00\n\n{ENTRY_0900}\n\n\n\n{BLOCK}\n\n{ENTRY_0930}\n\n"


def test_list_compact_blocks_ends_at_a_bare_entry_heading() -> None:
    (block,) = list_compact_blocks(COMPACTED)
    assert block.text == BLOCK
    assert block.headings == ("Memory Compact 09:12", "Decisions")
    lines = COMPACTED.split("\n")
    assert lines[block.start] == "## Memory Compact 09:12"
    assert lines[block.last] == "- use redis"
    assert lines[block.end] == "### 09:30"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("## Memory Compact\n\n- s\n", "## Memory Compact\n\n- s"),  # memsearch < 0.4.23
        ("##  Memory Compact  23:59  \n- s\n", "##  Memory Compact  23:59  \n- s"),
        ("## Memory Compact\n- s\n### Notes\n- n\n#### 10:00\n- m\n", None),
        ("## Memory Compact\n- s\n### 10:00 draft\n- d\n", None),
        ("## Memory Compact\n- s\n\n# Later title\n- t\n", "## Memory Compact\n- s"),
        ("## Memory Compact\n- s\n\n## Session 10:00\n", "## Memory Compact\n- s"),
        ("## Memory Compact\n- s\n###   10:00 \n- e\n", "## Memory Compact\n- s"),
    ],
)
def test_compact_block_extent(text: str, expected: str | None) -> None:
    (block,) = list_compact_blocks(text)
    assert block.text == (text.rstrip("\n") if expected is None else expected)
    assert block.start == 0


@pytest.mark.parametrize(
    "heading",
    [
        "## Memory Compacted",
        "## Memory Compact notes",
        "### Memory Compact",
        "## Memory Compact 9:12",
    ],
)
def test_other_headings_are_not_compact_blocks(heading: str) -> None:
    assert list_compact_blocks(f"{heading}\n- s\n") == []


def test_remove_a_compact_block_between_entries() -> None:
    (block,) = list_compact_blocks(COMPACTED)
    result = block.removed_from(COMPACTED)
    assert result == f"# 2026-08-13\n\n## Session 09:00\n\n{ENTRY_0900}\n\n\n\n{ENTRY_0930}\n\n"
    assert [e.text for e in list_entries(result)] == [ENTRY_0900, ENTRY_0930]


def test_remove_the_last_compact_block_keeps_the_blank_line_before_the_next_append() -> None:
    text = f"\n## Session 09:00\n\n{ENTRY_0900}\n\n\n\n{BLOCK}\n\n"
    (block,) = list_compact_blocks(text)
    assert block.removed_from(text) == f"\n## Session 09:00\n\n{ENTRY_0900}\n\n\n"


def test_remove_a_compact_block_ending_in_one_newline() -> None:
    text = f"{ENTRY_0900}\n\n## Memory Compact\n\n- s\n"
    (block,) = list_compact_blocks(text)
    assert block.removed_from(text) == f"{ENTRY_0900}\n"


@pytest.mark.parametrize(
    "text",
    [
        "# 2026-08-13\n\n\n## Memory Compact\n\n- summary\n",
        "# 2026-08-13\n\n## Memory Compact 09:12\n\n- summary\n\n# 2026-08-13\n\n",
        "\n\n## Memory Compact\n\n- summary\n",
    ],
)
def test_a_date_title_alone_does_not_keep_the_file(text: str) -> None:
    (block,) = list_compact_blocks(text)
    assert block.removed_from(text) == ""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("# TODO notes\n\n## Memory Compact\n\n- summary\n", "# TODO notes\n"),
        ("# 2026-08-13 notes\n\n## Memory Compact\n\n- s\n", "# 2026-08-13 notes\n"),
        (
            "# 2026-08-13\n- a stray line\n\n## Memory Compact\n- s\n",
            "# 2026-08-13\n- a stray line\n",
        ),
        (
            "# 2026-08-13\n\n## Session 09:00\n\n## Memory Compact\n- s\n",
            "# 2026-08-13\n\n## Session 09:00\n",
        ),
    ],
)
def test_anything_else_keeps_the_file(text: str, expected: str) -> None:
    (block,) = list_compact_blocks(text)
    assert block.removed_from(text) == expected


# -- property: removing a compact block leaves every entry intact --------------------------------

sub_heading = st.sampled_from(["Decisions", "Open questions", "Memory Compact", "Notes 09:12"])


@st.composite
def compact_blocks(draw: st.DrawFn) -> str:
    """A ``## Memory Compact`` block as memsearch writes it, ending in one newline."""
    stamp = draw(st.sampled_from(["", " 09:12", " 23:59"]))
    parts = [f"## Memory Compact{stamp}", "", draw(bullets)]
    for _ in range(draw(st.integers(0, 2))):
        level = draw(st.sampled_from(["###", "####"]))
        parts += ["", f"{level} {draw(sub_heading)}", "", draw(bullets)]
    return "\n".join(parts) + "\n"


@st.composite
def compacted_day_files(draw: st.DrawFn) -> tuple[str, list[str], list[str]]:
    """A day file of entries and compact blocks, its entries' texts and its blocks' texts."""
    minutes = draw(st.lists(st.integers(0, 24 * 60 - 1), min_size=0, max_size=6, unique=True))
    text = draw(st.sampled_from(["", "# 2026-08-13\n"]))
    entries: list[str] = []
    blocks: list[str] = []
    previous: str | None = None

    def add_block() -> None:
        nonlocal text
        block = draw(compact_blocks())
        blocks.append(block.rstrip("\n"))
        text += draw(st.sampled_from(["\n\n", "\n", ""])) + block

    for minute in sorted(minutes):
        if draw(st.booleans()):
            add_block()
        session = draw(st.sampled_from(["s1", "s2"]))
        entry = Entry(
            anchor=Anchor(session=session, turn=f"t{minute}", transcript="/t.jsonl"),
            content=draw(bullets),
            written_at=datetime(2026, 8, 13, minute // 60, minute % 60),
        )
        formatted = format_entry(entry, session_heading=session != previous)
        previous = session
        text += formatted
        entries.append(formatted[formatted.index("###") :].rstrip("\n"))
    if not blocks or draw(st.booleans()):
        add_block()
    return text, entries, blocks


@given(compacted_day_files(), st.data())
def test_removing_a_compact_block_keeps_every_entry_byte_identical(
    generated: tuple[str, list[str], list[str]], data: st.DataObject
) -> None:
    text, entries, blocks = generated
    assert [e.text for e in list_entries(text)] == entries
    found = list_compact_blocks(text)
    assert [b.text for b in found] == blocks
    index = data.draw(st.integers(0, len(found) - 1))
    result = found[index].removed_from(text)
    if result == "":
        assert entries == []
        assert len(blocks) == 1
        return
    assert [e.text for e in list_entries(result)] == entries
    assert [b.text for b in list_compact_blocks(result)] == blocks[:index] + blocks[index + 1 :]
    if text.endswith("\n\n"):
        assert result.endswith("\n\n")
