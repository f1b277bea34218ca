"""The stable snapshot: usage instructions plus the latest entries of today's and yesterday's
memory files, or of the latest earlier days when those two have none.

It is appended to the agent's system prompt on every turn, and the session keeps it
byte-identical between checkpoints so provider prefix caches survive.
``PI_MEMSEARCH_SNAPSHOT=off`` deactivates this plugin.

Two layouts (``PIMEM_SNAPSHOT_LAYOUT``, ADR 0022):

- ``entries`` (default): whole entries, newest last, each as its ``### HH:MM`` heading and its
  bullets without the session anchor; a section is cut only between entries. The day (the
  section's heading) and the time (the entry's) address an entry, as ``memory_search`` shows
  it and ``memory_forget`` takes it; ``memory_expand`` gives the anchor. Hollow entries
  (failure markers, bare headings, empty bullets: :mod:`pimem_plugins.shared.hollow`) are
  left out. When neither today nor yesterday has an entry to show, the latest earlier days
  that do are shown instead, newest day first, within the two days' budgets together.
- ``tail``: the seed's layout, the files' last characters as they are, anchors included, cut
  at a line start.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Literal

import attrs

from pimem_core.plugin import (
    DayAddress,
    DayText,
    MemoryStore,
    Scope,
    Settings,
    SettingSpec,
    hookimpl,
)
from pimem_plugins.shared.hollow import is_hollow, without_empty_bullets
from pimem_plugins.shared.layout import days_in

TODAY_BUDGET = 3000
YESTERDAY_BUDGET = 2000
#: The earlier days' sections together, headings included, when today and yesterday show none.
EARLIER_BUDGET = TODAY_BUDGET + YESTERDAY_BUDGET
TRUNCATED = "[... earlier entries omitted]"
#: After the head of an entry too long for the budget on its own.
ENTRY_CUT = "[... the rest of this entry omitted]"
SOURCE = "stable-snapshot"

Layout = Literal["entries", "tail"]
LAYOUTS: tuple[Layout, ...] = ("entries", "tail")

# What only pimem knows, said once: the tools' descriptions say what each tool does, the
# skills how to recall: every request carries this block.
_INTRO = """\
## Project memory

Every agent working in this project shares this memory, a markdown file per day. """

_RULES = """ \
Search it before working out again what was solved or decided; save what the user asks you to \
remember with `memory_write`. This block changes only at checkpoints; what is saved meanwhile \
shows in tool results."""

#: What the ``entries`` layout says of its entries: their day and time are their handle.
_ENTRIES_NOTE = (
    "Its latest entries follow by day and time, as `memory_search` lists them with the chunk "
    "hash `memory_expand` takes."
)
#: ... and the seed's ``tail`` layout, whose entries show their session anchors.
_TAIL_NOTE = "Its latest entries follow, each anchored to the session that wrote it."
INSTRUCTIONS = f"{_INTRO}{_ENTRIES_NOTE}{_RULES}"
TAIL_INSTRUCTIONS = f"{_INTRO}{_TAIL_NOTE}{_RULES}"


#: The snapshot's layout: whole entries without anchors (default), or the seed's file tails.
LAYOUT = SettingSpec.choice(
    plugin=SOURCE,
    name="layout",
    env="PIMEM_SNAPSHOT_LAYOUT",
    values=LAYOUTS,
    default="entries",
    help="the snapshot's layout: entries (whole entries, no anchors) or tail (the seed's)",
    # It shapes one session's system prompt, not what the plugin loads.
    per_session=True,
)

#: Over budget, keep the entries the agent used lately ahead of newer ones it never used.
PREFER_USED = SettingSpec.switch(
    plugin=SOURCE,
    name="prefer_used",
    env="PIMEM_SNAPSHOT_PREFER_USED",
    default=False,
    help="when a day's entries overflow the snapshot, keep those the agent used in the last "
    "30 days (the usage record) ahead of newer ones it never used",
    per_session=True,
)
#: How far back "used lately" looks.
USED_SPAN_DAYS = 30

#: The setting that turns the snapshot off (shown by `pimem plugins`).
ACTIVATION_SETTING = "PI_MEMSEARCH_SNAPSHOT"


def is_active(settings: Settings) -> bool:
    return settings.snapshot


@hookimpl
def pimem_declare_settings() -> tuple[SettingSpec[Layout], SettingSpec[bool]]:
    return (LAYOUT, PREFER_USED)


def tail(text: str, budget: int) -> tuple[str, bool]:
    """The end of *text* within *budget* characters, cut at a line start when possible."""
    if len(text) <= budget:
        return text, False
    cut = text[-budget:]
    newline = cut.find("\n")
    aligned = cut[newline + 1 :] if newline != -1 else ""
    return aligned or cut, True


@attrs.frozen(kw_only=True)
class Block:
    """One block of a daily memory file as the snapshot shows it."""

    text: str
    #: An entry's time (``### HH:MM``); ``None`` for any other block. The omitted-entries
    #: marker counts entries.
    time: str | None

    @property
    def entry(self) -> bool:
        return self.time is not None


def blocks(body: str) -> Iterator[Block]:
    """The blocks of *body* in file order, as the ``entries`` layout shows them: an entry
    without its session anchor; a ``## Memory Compact`` block whole, its sub-headings
    included; any other heading with its lines; each without its empty bullets. A hollow block
    is left out: a failure marker or a heading with nothing under it, ``## Session HH:MM``
    included (in a shared file another session's entries may follow it, so the grouping it
    suggests is not reliable, and each entry has its time)."""
    lines = body.split("\n")
    starts = [0]
    in_compact = False
    for number, line in enumerate(lines):
        if number and DayText.ENTRY_BOUNDARY.match(line):
            # memsearch's summary may have ### sub-headings: they stay in its block.
            if in_compact and not (
                DayText.GROUP_HEADING.match(line) or DayText.ENTRY_HEADING.match(line)
            ):
                continue
            starts.append(number)
        if DayText.ENTRY_BOUNDARY.match(line):
            in_compact = DayText.COMPACT_HEADING.match(line) is not None
    for start, end in zip(starts, [*starts[1:], len(lines)], strict=True):
        part = lines[start:end]
        heading = DayText.ENTRY_HEADING.match(part[0])
        text = "\n".join(part)
        text = (DayText(text).without_anchors() if heading else text).strip("\n")
        if is_hollow(text):
            continue
        time = heading.group(1) if heading else None
        yield Block(text=without_empty_bullets(text), time=time)


#: Whether a block goes ahead of the others when they do not all fit.
Preferred = Callable[[Block], bool]


def latest_blocks(
    body: str, budget: int, preferred: Preferred | None = None
) -> tuple[str, str | None]:
    """The newest whole blocks of *body* within *budget* characters, in file order, and the
    marker that says what was left out (``None``: nothing was). A block too long for the
    budget on its own shows its head, cut at a line end, rather than nothing. With
    *preferred*, the blocks it picks go first, newest first, then the others."""
    return _fit(list(blocks(body)), budget, head=True, preferred=preferred)


def _fit(
    shown: list[Block], budget: int, *, head: bool, preferred: Preferred | None = None
) -> tuple[str, str | None]:
    """:func:`latest_blocks` of blocks already read; with *head* false, a newest block too
    long for *budget* gives nothing rather than its head."""
    newest_first = list(reversed(range(len(shown))))
    if preferred is not None:
        newest_first.sort(key=lambda at: not preferred(shown[at]))  # stable: newest first still
    kept: list[int] = []
    used = 0
    for at in newest_first:
        cost = len(shown[at].text) + (2 if kept else 0)  # the blank line between two blocks
        if used + cost > budget:
            if preferred is None:
                break  # the latest ones only: an older block never shows in a newer one's place
            continue
        kept.append(at)
        used += cost
    kept.sort()
    if not kept and not head:
        return "", None
    if not kept and shown:
        return _head(shown[-1].text, budget), _omitted(shown[:-1])
    text = "\n\n".join(shown[at].text for at in kept)
    shown_at = set(kept)
    left_out = [block for at, block in enumerate(shown) if at not in shown_at]
    return text, _omitted(left_out, earlier=not kept or len(left_out) <= kept[0])


def _head(text: str, budget: int) -> str:
    """The start of *text* within *budget* characters including :data:`ENTRY_CUT`, cut at a
    line end (a hard cut when its first line alone is too long)."""
    room = max(budget - len(ENTRY_CUT) - 1, 0)
    head = text[:room]
    newline = head.rfind("\n")
    if newline > 0 and text[room : room + 1] != "\n":
        head = head[:newline]
    return f"{head.rstrip()}\n{ENTRY_CUT}"


def _omitted(left_out: list[Block], *, earlier: bool = True) -> str | None:
    if not left_out:
        return None
    count = sum(block.entry for block in left_out)
    if not count:
        return TRUNCATED
    which = "earlier " if earlier else ""
    return f"[... {count} {which}{'entry' if count == 1 else 'entries'} omitted]"


@hookimpl(trylast=True)
def pimem_build_snapshot(
    scope: Scope,
    settings: Settings,
    now: datetime,
    store: MemoryStore,
    used_entries: Callable[[int], frozenset[DayAddress]],
) -> str:
    layout = LAYOUT.read(settings)
    today = now.date()
    used = (
        used_entries(USED_SPAN_DAYS) if layout == "entries" and PREFER_USED.read(settings) else None
    )
    sections = [INSTRUCTIONS if layout == "entries" else TAIL_INSTRUCTIONS]
    for label, day, budget in (
        ("Today", today, TODAY_BUDGET),
        ("Yesterday", today - timedelta(days=1), YESTERDAY_BUDGET),
    ):
        body = _read(store, day)
        shown = _section(body, budget, layout, _used_on(used, day)) if body else ""
        if shown:
            sections.append(f"### {label} ({day.isoformat()})\n\n{shown}")
    if len(sections) == 1 and layout == "entries":
        # A store nobody wrote to for a while (a clone, another agent's, a holiday) still
        # shows its latest memory; the seed's tail layout stays as it was.
        sections += earlier_sections(store, scope.memory_dir, today, used)
    return "\n\n".join(sections)


def _used_on(used: frozenset[DayAddress] | None, day: date) -> Preferred | None:
    """The entries of *day* in *used*, as :func:`latest_blocks` prefers them."""
    if used is None:
        return None
    times = {entry.time for entry in used if entry.day == day}
    return lambda block: block.time in times


def _read(store: MemoryStore, day: date) -> str:
    # A day file git left conflicted shows both sides, never the markers (ADR 0016).
    return DayText(store.read_day(day) or "").without_conflicts().strip()


def days_before(memory_dir: Path, day: date) -> list[date]:
    """The days before *day* that have a daily memory file in *memory_dir*, newest first."""
    return [earlier for earlier in reversed(days_in(memory_dir)) if earlier < day]


def earlier_sections(
    store: MemoryStore,
    memory_dir: Path,
    today: date,
    used: frozenset[DayAddress] | None = None,
) -> list[str]:
    """The sections of the latest days before yesterday with entries to show, newest day
    first, each headed by how long ago and the day, within :data:`EARLIER_BUDGET` all told.
    A day is cut only between entries, and older days stop where one was cut."""
    sections: list[str] = []
    room = EARLIER_BUDGET
    for day in days_before(memory_dir, today - timedelta(days=1)):
        shown = list(blocks(_read(store, day)))
        if not shown:
            continue  # no entries, or only hollow ones
        heading = f"### {(today - day).days} days ago ({day.isoformat()})"
        room_left = room - len(heading) - 2
        kept, marker = _fit(shown, room_left, head=not sections, preferred=_used_on(used, day))
        if not kept:
            break
        sections.append(f"{heading}\n\n{marker}\n\n{kept}" if marker else f"{heading}\n\n{kept}")
        room -= len(sections[-1]) + 2
        if marker:
            break  # an older day's entries must not show while newer ones were left out
    return sections


def _section(body: str, budget: int, layout: Layout, preferred: Preferred | None) -> str:
    """A section's text under its heading: the marker, if any, then what is kept."""
    if layout == "tail":
        kept, truncated = tail(body, budget)
        return f"{TRUNCATED}\n{kept}" if truncated else kept
    kept, marker = latest_blocks(body, budget, preferred)
    if not kept:
        return ""  # only session headings: nothing to show
    # A blank line after the marker, as between blocks: it is not part of the first one.
    return f"{marker}\n\n{kept}" if marker else kept
