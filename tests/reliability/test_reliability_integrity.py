"""The reliability suite's own oracle: a torn, lost or doubled entry never passes for whole."""

from __future__ import annotations

from reliability.integrity import audit, parse
from reliability.workers import RAW_ENTRY

ENTRY = RAW_ENTRY.format(time="22:41", session="s", turn="t1", transcript="/t", content="- one")
OTHER = RAW_ENTRY.format(time="22:41", session="s", turn="t2", transcript="/t", content="- two")
HEADED = "\n## Session 22:41\n\n" + ENTRY


def test_whole_entries_parse_and_audit_clean() -> None:
    parsed = parse(HEADED + OTHER)
    assert parsed.entries == [("s", "t1", "- one"), ("s", "t2", "- two")]
    assert parsed.torn == []
    assert audit(HEADED + OTHER, {("s", "t1"): "- one", ("s", "t2"): "- two"}).problems == []


def test_half_an_entry_is_torn_and_takes_the_next_heading_with_it() -> None:
    third = RAW_ENTRY.format(time="22:42", session="s", turn="t3", transcript="/t", content="- 3")
    text = HEADED + OTHER[: len(OTHER) // 2] + third
    found = audit(text, {("s", "t1"): "- one", ("s", "t2"): "- two", ("s", "t3"): "- 3"})
    assert found.torn
    assert found.lost == [("s", "t2"), ("s", "t3")]  # the third starts mid-line: no heading


def test_an_entry_glued_to_a_torn_one_is_lost_not_whole() -> None:
    text = ENTRY[:-5] + OTHER  # the first entry lost its end, so the second starts mid-line
    found = audit(text, {("s", "t2"): "- two"})
    assert found.lost == [("s", "t2")]
    assert found.torn


def test_interleaved_bytes_are_torn() -> None:
    half = len(ENTRY) // 2
    text = ENTRY[:half] + OTHER + ENTRY[half:]
    assert audit(text, {("s", "t1"): "- one", ("s", "t2"): "- two"}).problems


def test_duplicates_and_strangers_are_reported() -> None:
    found = audit(ENTRY + ENTRY + OTHER, {("s", "t1"): "- one"})
    assert found.duplicated == [("s", "t1")]
    assert found.unexpected == [("s", "t2")]
    assert audit(ENTRY + OTHER, {("s", "t1"): "- one"}, extra_ok=True).problems == []


def test_altered_content_is_reported() -> None:
    assert audit(ENTRY, {("s", "t1"): "- uno"}).altered == [("s", "t1")]
