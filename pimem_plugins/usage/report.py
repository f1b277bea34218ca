"""What the usage record says over a span of days: :class:`UsageReport`, built from the record's
lines and the store's entries, without pimem, an index or a model.

The record is ``<state dir>/usage/<collection>/<YYYY-MM-DD>.jsonl`` (docs/usage.md): one JSON
object a line, appended to; a line that does not read as one (a crash tore it) is skipped and
counted. :func:`read_records` reads the files, :func:`store_entries` lists the store's entries
with their sizes, :func:`build_report` puts the two together.

Words, as the report uses them:

- a **recall** is a ``memory_search`` (a ``search`` line); an entry is *recalled* when a search
  lists it, ``memory_expand`` opens it or auto-context injects it;
- a recall is **used** when a ``used`` line of the same session, after it, names one of its hits
  (through the search or an expand of it); an injection, when one names one of its entries
  through the injection;
- an entry is **never recalled in N days** when no line of the last N days recalls it or says it
  was used (through the snapshot too): a candidate for memory compaction.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import attrs

from pimem_core.plugin import DayText
from pimem_plugins.shared.layout import days_in

#: The stable snapshot's budget, today's and yesterday's sections together, in characters: the
#: ``stable-snapshot`` plugin's ``TODAY_BUDGET + YESTERDAY_BUDGET`` (a test holds the two equal).
SNAPSHOT_BUDGET = 5000
#: How many entries the report lists as recalled most.
TOP = 10
#: The report's JSON schema version.
VERSION = 1

_RECORD_FILE = re.compile(r"(\d{4}-\d{2}-\d{2})\.jsonl")

#: An entry's address: its day and its ``HH:MM``.
Key = tuple[str, str]


@attrs.frozen(kw_only=True)
class Records:
    """The record's lines from a span of days, in the order they were written (by file day,
    then line), each with its file's day; and how many lines were skipped."""

    lines: tuple[tuple[date, Mapping[str, Any]], ...]
    #: Lines that are not a record (a torn last line, a foreign object).
    skipped: int = 0
    #: The first day the record has a file for, whatever the span; ``None``: no record.
    first_day: date | None = None


def record_days(usage_dir: Path) -> list[date]:
    """The days *usage_dir* has a record file for, oldest first."""
    return days_in(usage_dir, _RECORD_FILE)


def day_file_days(memory_dir: Path) -> list[date]:
    """The days *memory_dir* has a daily memory file for, oldest first."""
    return days_in(memory_dir)


def read_records(usage_dir: Path, start: date, end: date) -> Records:
    """The record's lines of the days *start* to *end*, both included."""
    days = record_days(usage_dir)
    lines: list[tuple[date, Mapping[str, Any]]] = []
    skipped = 0
    for day in days:
        if not start <= day <= end:
            continue
        try:
            text = (usage_dir / f"{day.isoformat()}.jsonl").read_text(
                encoding="utf-8", errors="replace"
            )
        except OSError:
            continue  # gone since it was listed
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except ValueError:
                skipped += 1  # torn by a crash mid-write
                continue
            if not isinstance(value, dict) or value.get("v") != 1 or "kind" not in value:
                skipped += 1
                continue
            lines.append((day, value))
    return Records(lines=tuple(lines), skipped=skipped, first_day=days[0] if days else None)


@attrs.frozen(kw_only=True)
class StoreEntry:
    """One entry of the memory store and its size: its characters in its day file, heading
    and session anchor included."""

    day: str
    time: str
    chars: int

    @property
    def key(self) -> Key:
        return (self.day, self.time)


def store_entries(days: Iterable[tuple[str, str]]) -> tuple[StoreEntry, ...]:
    """Every entry of the day files given as ``(YYYY-MM-DD, text)``."""
    return tuple(
        StoreEntry(day=day, time=entry.time, chars=len(entry.text))
        for day, text in days
        for entry in DayText(text).entries()
    )


# -- the report --------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class EntryUse:
    """One entry as the report lists it: how often it was recalled and used in the span."""

    day: str
    time: str
    chars: int | None
    recalls: int = 0
    used: int = 0

    def to_json(self) -> dict[str, object]:
        return attrs.asdict(self)


@attrs.frozen(kw_only=True)
class Counts:
    """What the record counts in a report's span: its ``counts``, as ``pimem usage --json``
    prints them."""

    #: Sessions with a line in the span (one that began before it counts too).
    sessions: int = 0
    recalls: int = 0
    recalls_used: int = 0
    #: Recalls that found nothing.
    recalls_empty: int = 0
    expands: int = 0
    injections: int = 0
    injections_used: int = 0
    captures: int = 0
    #: Captures a gate skipped (not in :attr:`captures`).
    captures_skipped: int = 0
    writes: int = 0
    snapshots: int = 0
    #: ``used`` lines, every way an entry reached the agent.
    uses: int = 0
    #: ``truncated`` lines: the record dropped lines that day.
    truncated: int = 0
    #: Lines skipped because they do not read (a torn last line).
    skipped_lines: int = 0


@attrs.frozen(kw_only=True)
class UsageReport:
    """What the record says about one store from :attr:`since` to :attr:`until`."""

    since: date
    until: date
    #: The span of "never recalled": the last *days* days.
    days: int
    #: The first day the record covers (``None``: no record yet).
    record_since: date | None
    counts: Counts = attrs.field(factory=Counts)
    #: The ``used`` lines (:attr:`Counts.uses`) by the way the entry reached the agent.
    uses_by_way: Mapping[str, int] = attrs.field(factory=dict)
    #: Each day from :attr:`since` to :attr:`until`: ``(day, recalls, uses)``.
    per_day: tuple[tuple[date, int, int], ...] = ()
    top_recalled: tuple[EntryUse, ...] = ()
    #: The store's entries no recall or use reached in the last :attr:`days` days, largest first.
    never_recalled: tuple[StoreEntry, ...] = ()
    #: Their share of the snapshot's budget: what they took of it, on average, in the span's
    #: snapshots (``None``: no snapshot was recorded).
    snapshot_share: float | None = None
    #: Entries written in the span (captured or ``memory_write``) that nothing recalled after.
    written_unrecalled: tuple[EntryUse, ...] = ()
    #: The store's entries all told, and their characters.
    entries: int = 0
    entry_chars: int = 0

    @property
    def span_days(self) -> int:
        return (self.until - self.since).days + 1

    @property
    def recall_share(self) -> float | None:
        counts = self.counts
        return counts.recalls_used / counts.recalls if counts.recalls else None

    @property
    def injection_share(self) -> float | None:
        counts = self.counts
        return counts.injections_used / counts.injections if counts.injections else None

    @property
    def never_recalled_chars(self) -> int:
        return sum(entry.chars for entry in self.never_recalled)

    def to_json(self) -> dict[str, object]:
        """The report as ``pimem usage --json`` prints it (docs/usage.md gives the schema)."""
        return {
            "version": VERSION,
            "since": self.since.isoformat(),
            "until": self.until.isoformat(),
            "record_since": None if self.record_since is None else self.record_since.isoformat(),
            "counts": attrs.asdict(self.counts),
            "uses_by_way": dict(self.uses_by_way),
            "shares": {"recalls_used": self.recall_share, "injections_used": self.injection_share},
            "per_day": [
                {"day": day.isoformat(), "recalls": recalls, "uses": uses}
                for day, recalls, uses in self.per_day
            ],
            "top_recalled": [entry.to_json() for entry in self.top_recalled],
            "never_recalled": {
                "days": self.days,
                "count": len(self.never_recalled),
                "chars": self.never_recalled_chars,
                "snapshot_budget": SNAPSHOT_BUDGET,
                "snapshot_share": self.snapshot_share,
                "entries": [attrs.asdict(entry) for entry in self.never_recalled],
            },
            "written_unrecalled": [entry.to_json() for entry in self.written_unrecalled],
            "store": {"entries": self.entries, "chars": self.entry_chars},
        }


def _key(value: object) -> Key | None:
    """An entry's address from a record's entry object, or ``None`` for a malformed one."""
    if not isinstance(value, dict):
        return None
    day, time = value.get("day"), value.get("time")
    if not isinstance(day, str) or not isinstance(time, str):
        return None
    return (day, time)


def _entries(line: Mapping[str, Any], field: str) -> list[tuple[Key, int | None]]:
    found = []
    values = line.get(field)
    for value in values if isinstance(values, list) else [values]:
        key = _key(value)
        if key is not None and isinstance(value, dict):
            chars = value.get("chars")
            found.append((key, chars if isinstance(chars, int) else None))
    return found


@attrs.define
class _Event:
    """A recall or an injection, while the record is read: its keys, and whether it was used."""

    keys: frozenset[Key]
    counted: bool
    used: bool = False


@attrs.define
class _Tally:
    """What :func:`build_report` counts as it reads the lines in order."""

    since: date
    recent: date
    counts: Counter[str] = attrs.field(factory=Counter)
    uses_by_way: Counter[str] = attrs.field(factory=Counter)
    recalls_per_day: Counter[date] = attrs.field(factory=Counter)
    uses_per_day: Counter[date] = attrs.field(factory=Counter)
    entry_recalls: Counter[Key] = attrs.field(factory=Counter)
    entry_uses: Counter[Key] = attrs.field(factory=Counter)
    chars: dict[Key, int] = attrs.field(factory=dict)
    #: Keys recalled or used in the last N days.
    reached_recently: set[Key] = attrs.field(factory=set)
    #: The line each key was last recalled or used at.
    last_reached: dict[Key, int] = attrs.field(factory=dict)
    #: By session: its recalls, its injections, in order.
    searches: defaultdict[str, list[_Event]] = attrs.field(factory=lambda: defaultdict(list))
    injected: defaultdict[str, list[_Event]] = attrs.field(factory=lambda: defaultdict(list))
    #: Written in the span: key -> the line it was written at.
    written: dict[Key, int] = attrs.field(factory=dict)
    snapshots: list[list[tuple[Key, int | None]]] = attrs.field(factory=list)
    #: The sessions with a line in the span.
    sessions: set[str] = attrs.field(factory=set)

    def reach(self, day: date, number: int, keys: Iterable[Key], *, recall: bool) -> None:
        for key in keys:
            if day >= self.since and recall:
                self.entry_recalls[key] += 1
            if day >= self.recent:
                self.reached_recently.add(key)
            self.last_reached[key] = number

    def read(self, number: int, day: date, line: Mapping[str, Any]) -> None:
        kind, session = line.get("kind"), str(line.get("session", ""))
        counted = day >= self.since
        if counted:
            self.sessions.add(session)
        if kind in ("search", "injection"):
            found = _entries(line, "hits" if kind == "search" else "entries")
            self.chars.update((key, chars) for key, chars in found if chars is not None)
            keys = frozenset(key for key, _ in found)
            events = self.searches if kind == "search" else self.injected
            events[session].append(_Event(keys=keys, counted=counted))
            self.reach(day, number, keys, recall=True)
            if counted:
                self.counts["recalls" if kind == "search" else "injections"] += 1
                if kind == "search":
                    self.recalls_per_day[day] += 1
                    self.counts["recalls_empty"] += not keys
        elif kind == "expand":
            found = _entries(line, "entry")
            self.reach(day, number, (key for key, _ in found), recall=True)
            self.counts["expands"] += counted
        elif kind == "used":
            self._used(number, day, session, line, counted=counted)
        elif kind in ("capture", "write"):
            if kind == "capture" and "skipped" in line:
                self.counts["captures_skipped"] += counted
                return
            self.counts["captures" if kind == "capture" else "writes"] += counted
            for key, chars in _entries(line, "entries"):
                if chars is not None:
                    self.chars[key] = chars
                if counted:
                    self.written[key] = number
        elif kind == "snapshot":
            if counted:
                self.counts["snapshots"] += 1
                self.snapshots.append(_entries(line, "entries"))
        elif kind == "truncated":
            self.counts["truncated"] += counted

    def _used(
        self, number: int, day: date, session: str, line: Mapping[str, Any], *, counted: bool
    ) -> None:
        found = _entries(line, "entry")
        if not found:
            return
        key = found[0][0]
        self.reach(day, number, (key,), recall=False)
        via = str(line.get("via", ""))
        if counted:
            self.counts["uses"] += 1
            self.uses_by_way[via] += 1
            self.uses_per_day[day] += 1
            self.entry_uses[key] += 1
        # The latest recall (or injection) of this session that showed the entry was used.
        if via == "injection":
            events, share = self.injected.get(session, []), "injections_used"
        elif via in ("search", "expand"):
            events, share = self.searches.get(session, []), "recalls_used"
        else:
            return  # through the snapshot: no recall to credit
        for event in reversed(events):
            if key in event.keys:
                if not event.used and event.counted:
                    self.counts[share] += 1
                event.used = True
                break


def build_report(
    records: Records,
    store: Iterable[StoreEntry],
    *,
    today: date,
    since: date,
    days: int = 30,
) -> UsageReport:
    """The report from *since* to *today* of *records* (which must reach back to the earlier of
    *since* and the last *days* days) over the store's entries *store*."""
    tally = _Tally(since=since, recent=today - timedelta(days=days - 1))
    for number, (day, line) in enumerate(records.lines):
        if day <= today:
            tally.read(number, day, line)
    entries = tuple(store)
    sizes = {entry.key: entry.chars for entry in entries}
    never = tuple(
        sorted(
            (entry for entry in entries if entry.key not in tally.reached_recently),
            key=lambda entry: (-entry.chars, entry.day, entry.time),
        )
    )
    never_keys = {entry.key for entry in never}
    taken = [
        sum(chars or sizes.get(key, 0) for key, chars in shown if key in never_keys)
        for shown in tally.snapshots
    ]
    top = sorted(tally.entry_recalls.items(), key=lambda item: (-item[1], item[0]))[:TOP]
    return UsageReport(
        since=since,
        until=today,
        days=days,
        record_since=records.first_day,
        counts=Counts(sessions=len(tally.sessions), skipped_lines=records.skipped, **tally.counts),
        uses_by_way=dict(sorted(tally.uses_by_way.items())),
        per_day=tuple(
            (day, tally.recalls_per_day[day], tally.uses_per_day[day])
            for day in (since + timedelta(days=n) for n in range((today - since).days + 1))
        ),
        top_recalled=tuple(
            EntryUse(
                day=key[0],
                time=key[1],
                chars=sizes.get(key, tally.chars.get(key)),
                recalls=recalls,
                used=tally.entry_uses[key],
            )
            for key, recalls in top
        ),
        never_recalled=never,
        snapshot_share=sum(taken) / (SNAPSHOT_BUDGET * len(taken)) if taken else None,
        written_unrecalled=tuple(
            EntryUse(day=key[0], time=key[1], chars=sizes.get(key, tally.chars.get(key)))
            for key, number in sorted(tally.written.items())
            if tally.last_reached.get(key, -1) < number
        ),
        entries=len(entries),
        entry_chars=sum(entry.chars for entry in entries),
    )


def _percent(share: float | None) -> str:
    return "-" if share is None else f"{round(share * 100)}%"


def summary_line(report: UsageReport) -> str:
    """One line for ``pimem status`` and ``memory_status``."""
    if report.record_since is None:
        return "usage: nothing recorded yet"
    counts = report.counts
    return (
        f"usage ({report.span_days} days): {counts.sessions} sessions, "
        f"{counts.recalls} recalls ({_percent(report.recall_share)} used), "
        f"{counts.injections} injections ({_percent(report.injection_share)} used), "
        f"{counts.captures} captures; {len(report.never_recalled)} entries never recalled "
        f"in {report.days} days"
    )
