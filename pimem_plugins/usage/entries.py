"""What the usage record tells the rest of pimem about single entries: those memory did not
give the agent for a span of days (what ``pimem compact --never-recalled`` condenses), and
those the agent used (what the snapshot may keep first)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import date, timedelta
from pathlib import Path

from pimem_core.plugin import DayAddress, PimemError
from pimem_plugins.usage.report import build_report, read_records, store_entries


def never_recalled(
    directory: Path, collection: str, day_files: Iterable[tuple[str, str]], today: date, days: int
) -> list[DayAddress]:
    """The entries of *day_files* (``(YYYY-MM-DD, text)``) written before the last *days* days
    that no line of those days recalls or says was used. The record must reach back that far:
    without it, an entry nobody recalled cannot be told from one recalled before the record."""
    start = today - timedelta(days=days - 1)
    records = read_records(directory, start, today)
    if records.first_day is None:
        raise PimemError(
            f"no usage record of {collection} yet: pimem records what memory gives the agent "
            f"in its sessions (docs/usage.md); after {days} days of it, the entries never "
            "recalled can be told"
        )
    if records.first_day > start:
        covered = (today - records.first_day).days + 1
        raise PimemError(
            f"the usage record of {collection} begins {records.first_day.isoformat()}: it "
            f"tells which entries went {covered} days without a recall (--never-recalled "
            f"{covered}), {days} days from {(records.first_day + timedelta(days=days - 1))}"
        )
    report = build_report(records, store_entries(day_files), today=today, since=start, days=days)
    return [
        DayAddress(day=date.fromisoformat(entry.day), time=entry.time)
        for entry in report.never_recalled
        if entry.day < start.isoformat()
    ]


def used(directory: Path, today: date, days: int) -> Iterator[DayAddress]:
    """The entries a ``used`` line of the last *days* days names."""
    records = read_records(directory, today - timedelta(days=days - 1), today)
    for _, line in records.lines:
        entry = line.get("entry")
        if line.get("kind") != "used" or not isinstance(entry, dict):
            continue
        try:
            yield DayAddress.parse(str(entry.get("day")), str(entry.get("time")))
        except PimemError:
            continue  # a line that names no entry of a day file
