"""Daily memory files: their grammar, the entries one holds, and surgery that removes one entry.

A daily memory file is ``<memory dir>/YYYY-MM-DD.md``. An entry is a ``### HH:MM`` heading up to
the next ``#``, ``##`` or ``###`` heading; ``## Session HH:MM`` headings group a session's
entries. memsearch's compaction appends a ``## Memory Compact`` block (its summary, which may
have its own ``###`` sub-headings) that can be removed as a whole. The functions here are pure:
text in, text out.
"""

from __future__ import annotations

import re
from typing import ClassVar

import attrs

from pimem_core.conflicts import (
    blank_conflicts,
    is_conflicted,
    marker_lines,
    without_conflicts,
    without_marker_lines,
)

#: The day file's grammar, line by line. An entry's heading (its time the one group).
ENTRY_HEADING = re.compile(r"^###\s+(\d{2}:\d{2})\s*$")
#: A line that ends an entry: any heading of level 1 to 3.
ENTRY_BOUNDARY = re.compile(r"^#{1,3}\s")
#: A heading that groups entries (a title, ``## Session HH:MM``, a compaction).
GROUP_HEADING = re.compile(r"^#{1,2}\s")
#: memsearch >= 0.4.23 writes ``## Memory Compact HH:MM``; older versions ``## Memory Compact``.
COMPACT_HEADING = re.compile(r"^##\s+Memory Compact(?:\s+\d{2}:\d{2})?\s*$")
#: A session anchor on a line of its own, as every mesh agent writes it under an entry's heading.
ANCHOR_LINE = re.compile(r"^[ \t]*<!--\s*session:.*?-->[ \t]*(?:\n|$)", re.MULTILINE | re.DOTALL)
#: A session anchor anywhere (a person may have put one inside a line).
ANCHOR = re.compile(r"<!--\s*session:.*?-->", re.DOTALL)
_SECTION_HEADING = re.compile(r"^##\s")
_SUB_HEADING = re.compile(r"^#{2,}\s+(.+?)\s*$")
_DATE_TITLE = re.compile(r"^#\s+\d{4}-\d{2}-\d{2}\s*$")


def without_anchors(text: str) -> str:
    """*text* without its session anchors (and the lines that held only one): what an entry
    says, for a reader who gets the anchor elsewhere (L2 recall)."""
    return ANCHOR.sub("", ANCHOR_LINE.sub("", text))


def _rejoined(text: str, lines: list[str]) -> str:
    """*lines*, what is left of *text* after a removal, as text again. When what went was last,
    the blank line that separates the next append from the rest is kept."""
    remaining = "\n".join(lines)
    if text.endswith("\n\n") and not remaining.endswith("\n\n"):
        remaining += "\n"
    return remaining


@attrs.frozen(kw_only=True)
class DayEntry:
    """An entry's place in a daily memory file: lines ``start`` (its heading) to ``end`` (exclusive)."""

    time: str
    start: int
    end: int
    #: The entry's lines without the blank lines that trail it.
    text: str

    def removed_from(self, text: str) -> str:
        """*text* without this entry; ``""`` when nothing worth keeping remains (delete the file).

        The entry's own ``##`` heading goes too when the entry was all it held; titles, free-form
        notes and every other entry are left byte for byte.
        """
        lines = text.split("\n")
        owner = next(
            (i for i in range(self.start - 1, -1, -1) if GROUP_HEADING.match(lines[i])), None
        )
        del lines[self.start : self.end]
        if owner is not None and _SECTION_HEADING.match(lines[owner]):
            after = owner + 1
            while after < len(lines) and not lines[after].strip():
                after += 1
            if after == len(lines) or GROUP_HEADING.match(lines[after]):
                del lines[owner:after]
        if not any(line.strip() for line in lines):
            return ""
        return _rejoined(text, lines)


def list_entries(text: str) -> list[DayEntry]:
    """Every entry of *text*, in order. In a file git left conflicted an entry also ends at a
    conflict marker, so a forget takes the entry and leaves the markers where they are."""
    lines = text.split("\n")
    markers = set(marker_lines(text))
    entries = []
    for start, line in enumerate(lines):
        match = ENTRY_HEADING.match(line)
        if match is None or start in markers:
            continue
        end = next(
            (
                i
                for i in range(start + 1, len(lines))
                if ENTRY_BOUNDARY.match(lines[i]) or i in markers
            ),
            len(lines),
        )
        body = lines[start:end]
        while body and not body[-1].strip():
            body.pop()
        entries.append(DayEntry(time=match.group(1), start=start, end=end, text="\n".join(body)))
    return entries


@attrs.frozen(kw_only=True)
class CompactBlock:
    """A ``## Memory Compact`` block: lines ``start`` (its heading) to ``end`` (exclusive)."""

    start: int
    end: int
    #: The block's lines without the blank lines that trail it.
    text: str
    #: The text of every heading of level 2 or deeper in the block, its own heading first.
    headings: tuple[str, ...]

    @property
    def last(self) -> int:
        """The 0-based index of the block's last non-blank line."""
        return self.start + self.text.count("\n")

    def removed_from(self, text: str) -> str:
        """*text* without this block; ``""`` when nothing worth keeping remains (delete the file).

        Unlike :meth:`DayEntry.removed_from`, a ``# YYYY-MM-DD`` date title (memsearch's compaction writes one
        into a new file) does not keep the file alive; any other title or line does.
        """
        lines = text.split("\n")
        del lines[self.start : self.end]
        if all(not line.strip() or _DATE_TITLE.match(line) for line in lines):
            return ""
        return _rejoined(text, lines)


def list_compact_blocks(text: str) -> list[CompactBlock]:
    """Every ``## Memory Compact`` block of *text*, in order.

    A block ends at the next ``#`` or ``##`` heading, or at a bare ``### HH:MM`` entry heading: an
    entry of the same session appended after a compaction opens no ``## Session`` heading.
    """
    lines = text.split("\n")
    markers = set(marker_lines(text))
    blocks = []
    for start, line in enumerate(lines):
        if COMPACT_HEADING.match(line) is None or start in markers:
            continue
        end = next(
            (
                i
                for i in range(start + 1, len(lines))
                if GROUP_HEADING.match(lines[i]) or ENTRY_HEADING.match(lines[i]) or i in markers
            ),
            len(lines),
        )
        body = lines[start:end]
        while body and not body[-1].strip():
            body.pop()
        headings = tuple(
            match.group(1) for match in map(_SUB_HEADING.match, body) if match is not None
        )
        blocks.append(CompactBlock(start=start, end=end, text="\n".join(body), headings=headings))
    return blocks


@attrs.frozen
class DayText:
    """A daily memory file's text, read as every mesh agent reads it: the plugin API's one
    name for the day file's grammar, its entries and blocks, and git's conflict markers in it.

    >>> day = DayText("### 09:12\n<!-- session:s1 turn:t1 transcript:/t.jsonl -->\nRedis.\n")
    >>> [entry.time for entry in day.entries()]
    ['09:12']
    >>> day.without_anchors()
    '### 09:12\nRedis.\n'
    """

    text: str

    #: An entry's heading (its time the one group).
    ENTRY_HEADING: ClassVar[re.Pattern[str]] = ENTRY_HEADING
    #: A line that ends an entry: any heading of level 1 to 3.
    ENTRY_BOUNDARY: ClassVar[re.Pattern[str]] = ENTRY_BOUNDARY
    #: A heading that groups entries (a title, ``## Session HH:MM``, a compaction).
    GROUP_HEADING: ClassVar[re.Pattern[str]] = GROUP_HEADING
    #: A compaction's heading, with or without its time.
    COMPACT_HEADING: ClassVar[re.Pattern[str]] = COMPACT_HEADING

    def entries(self) -> list[DayEntry]:
        """Every ``### HH:MM`` entry, in order (:func:`list_entries`)."""
        return list_entries(self.text)

    def compact_blocks(self) -> list[CompactBlock]:
        """Every ``## Memory Compact`` block, in order (:func:`list_compact_blocks`)."""
        return list_compact_blocks(self.text)

    def without_anchors(self) -> str:
        """The text without session anchors (:func:`without_anchors`)."""
        return without_anchors(self.text)

    def is_conflicted(self) -> bool:
        """Whether git left a region of it unresolved."""
        return is_conflicted(self.text)

    def without_conflicts(self) -> str:
        """Both sides' lines, no marker and no ancestor part: what a union merge leaves."""
        return without_conflicts(self.text)

    def blank_conflicts(self) -> str:
        """Markers and ancestor lines made blank, every other line at its number: what an
        index chunks, so that search, expand and forget can address the file by line."""
        return blank_conflicts(self.text)

    def without_marker_lines(self) -> str:
        """Every line shaped like a marker gone: for a chunk, whose region cannot be told."""
        return without_marker_lines(self.text)
