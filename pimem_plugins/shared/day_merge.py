"""Three versions of a daily memory file merged block by block: what git's merge driver runs.

A daily memory file is a run of blocks, each a heading and the lines up to the next: entries
(``### HH:MM``), ``## Session HH:MM`` headings, memsearch's ``## Memory Compact`` blocks (their
own ``###`` sub-headings included), titles, and free-form sections. Agents only append blocks and
a forget removes one, so two sides are merged by blocks rather than lines: the result is our
file without the blocks their side removed, with the blocks their side added appended in their
order. A block is known by its text, so the same entry on both sides is kept once.

Line merges (git's ``text`` and ``union``) get three things wrong here: two entries appended at
the same minute share their heading lines and fuse into one entry; a forget next to the other
side's append is undone; and the blank line that closes an entry goes missing (ADR 0016).
"""

from __future__ import annotations

import re
from collections import Counter

import attrs

from pimem_core.plugin import (
    DayText,
)

#: The heading a session's first entry of the day opens.
SESSION_HEADING = re.compile(r"^##\s+Session\b")
#: A level-1 heading (the title memsearch's compaction writes into a new file).
TITLE = re.compile(r"^#\s")


@attrs.frozen
class Block:
    #: The blank lines before it, as they were.
    lead: str
    #: Its heading (or first line) to its last line that is not blank, line ends included.
    body: str

    @property
    def session_heading(self) -> bool:
        return SESSION_HEADING.match(self.body) is not None and self.body.count("\n") <= 1

    @property
    def group_heading(self) -> bool:
        return DayText.GROUP_HEADING.match(self.body) is not None


@attrs.frozen
class DayFile:
    blocks: tuple[Block, ...]
    #: The blank lines after the last block.
    tail: str


def split_blocks(text: str) -> DayFile:
    """*text* as blocks; joining every block's lead and body, then the tail, gives it back."""
    blocks: list[Block] = []
    lead, body, blank = "", "", ""
    in_compact = False
    for line in _lines(text):
        if not line.strip():
            blank += line
            continue
        starts = DayText.ENTRY_BOUNDARY.match(line) is not None and (
            not in_compact or DayText.GROUP_HEADING.match(line) or DayText.ENTRY_HEADING.match(line)
        )
        if starts or not body:
            if body:
                blocks.append(Block(lead=lead, body=body))
            lead, body, blank = blank, line, ""
            if starts:
                in_compact = DayText.COMPACT_HEADING.match(line) is not None
        else:
            body, blank = body + blank + line, ""
    if body:
        blocks.append(Block(lead=lead, body=body))
    return DayFile(blocks=tuple(blocks), tail=blank)


def merge_day_file(base: str, ours: str, theirs: str) -> str:
    """Our file, less what their side removed since *base*, plus what it added.

    A ``## Session`` heading their side removed goes only when nothing is left under it; a
    title their side opened a new file with goes first, as memsearch writes it.
    """
    old, mine, other = split_blocks(base), split_blocks(ours), split_blocks(theirs)
    before = Counter(block.body for block in old.blocks)
    now = Counter(block.body for block in other.blocks)
    removed = before - now
    mine_count = Counter(block.body for block in mine.blocks)
    added = Counter(
        {body: count - max(before[body], mine_count[body]) for body, count in now.items()}
    )
    kept: list[Block] = []
    orphans: set[int] = set()  # session headings their side removed, kept for now
    for block in mine.blocks:
        if removed[block.body] > 0:
            removed[block.body] -= 1
            if not block.session_heading:
                continue
            orphans.add(len(kept))
        kept.append(block)
    appended: list[Block] = []
    for position, block in enumerate(other.blocks):
        if added[block.body] > 0:
            added[block.body] -= 1
            if position == 0 and TITLE.match(block.body) and not _starts_with_title(kept):
                kept.insert(0, attrs.evolve(block, lead=""))
                orphans = {index + 1 for index in orphans}
            elif position == 0:
                # Their file's first block follows ours as if their file were appended to it.
                appended.append(attrs.evolve(block, lead=mine.tail + block.lead))
            else:
                appended.append(block)
    blocks = kept + appended
    blocks = [
        block
        for index, block in enumerate(blocks)
        if index not in orphans or not _holds_nothing(blocks, index)
    ]
    tail = (other.tail if appended else mine.tail) or ""
    return _join(blocks, tail)


def _starts_with_title(blocks: list[Block]) -> bool:
    return bool(blocks) and TITLE.match(blocks[0].body) is not None


def _holds_nothing(blocks: list[Block], index: int) -> bool:
    following = blocks[index + 1] if index + 1 < len(blocks) else None
    return following is None or following.group_heading


def _lines(text: str) -> list[str]:
    """*text*'s lines with their ends; only ``\\n`` ends a line, as in every reader of it."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _join(blocks: list[Block], tail: str) -> str:
    text = ""
    for block in blocks:
        if text and not text.endswith("\n"):
            text += "\n"
        # Every block but the first opens after a blank line, wherever it came from; the
        # first after one at most.
        text += (block.lead or "\n" if text else "\n" if block.lead else "") + block.body
    if text and not text.endswith("\n"):
        text += "\n"
    return text + tail
