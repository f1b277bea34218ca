"""Today in the store: what today's daily memory file holds, every session and agent together.

A session's capture counters (``capture (this session): ...``) say what *this* process did; a
session that just started shows zeros even when another one captured a minute ago. This line
says what the store holds today, so the two together never contradict what just happened.

The figures are read from the memory store itself (today's daily memory file, through
``MemoryStore.read_day``), not from a counter pimem keeps. The store is the one thing every writer
shares, so the count is true across processes and agents without any bookkeeping: it includes
captures, ``memory_write`` and ``pimem write`` entries and entries other memsearch agents of the
mesh append, and an entry that is forgotten stops being counted. A persisted counter would only
see pimem's own writes and would drift from the file on every forget. What the store cannot tell
(exchanges the gates skipped, a model's distillation against an extract) stays in the session's
counters. Captures and explicit writes are not told apart: both carry the same session anchor,
so any split would be a guess. Entries are counted as the vocabulary defines them (``### HH:MM``
headings, outside memsearch's ``## Memory Compact`` blocks); sessions are the distinct session
ids of their anchors.
"""

from __future__ import annotations

import re

import attrs

from pimem_core.api import Pimem
from pimem_core.conflicts import without_conflicts
from pimem_core.day_file import COMPACT_HEADING, ENTRY_HEADING, GROUP_HEADING
from pimem_core.errors import PimemError
from pimem_core.runtime.capture import MARKER_PREFIX
from pimem_core.types import Scope, StatusSection

LABEL = "today in this store (all sessions)"

_SESSION = re.compile(r"^<!--\s*session:(\S+)\s")


@attrs.frozen(kw_only=True)
class DayCount:
    """The entries of one daily memory file."""

    entries: int = 0
    #: Distinct session ids among the entries' anchors.
    sessions: int = 0
    #: Entries that are capture's could-not-be-distilled markers.
    markers: int = 0


def count_entries(text: str) -> DayCount:
    entries = markers = 0
    sessions: set[str] = set()
    in_compact = False
    lines = text.split("\n")
    for number, line in enumerate(lines):
        if GROUP_HEADING.match(line):
            # A compaction's summary runs to the next group heading, its ### headings included.
            in_compact = COMPACT_HEADING.match(line) is not None
            continue
        if in_compact or not ENTRY_HEADING.match(line):
            continue
        entries += 1
        body = lines[number + 1 : number + 3]
        anchor = _SESSION.match(body[0]) if body else None
        if anchor is not None:
            sessions.add(anchor.group(1))
        if len(body) > 1 and body[1].startswith(MARKER_PREFIX):
            markers += 1
    return DayCount(entries=entries, sessions=len(sessions), markers=markers)


def store_today_status(pimem: Pimem, scope: Scope) -> StatusSection:
    """The ``store-today`` status section: today's entries in *scope*'s store."""
    day = pimem.settings.now().date()
    data: dict[str, object] = {"date": day.isoformat(), "of": "all sessions"}
    try:
        text = pimem.read_day(scope, day)
    except PimemError as error:
        return StatusSection(
            name="store-today",
            rank=21,
            lines=(f"{LABEL}: unreadable ({error})",),
            data={**data, "error": str(error)},
        )
    # diff3's ancestor part of a conflicted file holds no entry of today's.
    count = count_entries(without_conflicts(text or ""))
    if count.entries == 0:
        line = f"{LABEL}: no entries yet"
    else:
        line = f"{LABEL}: {_plural(count.entries, 'entry', 'entries')}"
        if count.sessions:
            line += f" from {_plural(count.sessions, 'session', 'sessions')}"
        if count.markers:
            line += (
                f" ({_plural(count.markers, 'is a marker', 'are markers')} of an exchange that "
                "could not be distilled)"
            )
    return StatusSection(
        name="store-today", rank=21, lines=(line,), data={**data, **attrs.asdict(count)}
    )


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"
