"""``pimem usage``: what the usage record says about a project's memory, or every project's.

It reads the record's day files and the store's daily memory files, nothing else: no index, no
model, so it answers in well under a second on a month of records.
"""

from __future__ import annotations

import os
import re
from datetime import date, timedelta
from pathlib import Path

from pimem_core.plugin import (
    Args,
    Command,
    Door,
    Outcome,
    Param,
    PimemPaths,
    Scope,
    SettingsError,
    UsageError,
)
from pimem_plugins.shared.layout import TREE, children_of
from pimem_plugins.usage.chart import day_chart
from pimem_plugins.usage.report import (
    Records,
    UsageReport,
    build_report,
    day_file_days,
    read_records,
    store_entries,
    summary_line,
)

#: What ``--since`` and ``--days`` default to.
DEFAULT_SINCE = "30d"
DEFAULT_DAYS = 30
#: How many never-recalled and never-recalled-since-written entries the text lists.
LISTED = 10
SCAN_ROOTS = "PI_MEMSEARCH_SCAN_ROOTS"
_DAYS = re.compile(r"([1-9][0-9]{0,4})d")


def parse_since(word: str, today: date) -> date:
    """``--since``: a day (``2026-08-01``) or a number of days, today included (``7d``)."""
    match = _DAYS.fullmatch(word)
    if match is not None:
        return today - timedelta(days=int(match.group(1)) - 1)
    try:
        since = date.fromisoformat(word)
    except ValueError:
        raise UsageError(
            f"--since must be a day (YYYY-MM-DD) or a number of days (7d), got {word!r}"
        ) from None
    if since > today:
        raise UsageError(f"--since {word} is after today ({today.isoformat()})")
    return since


def parse_days(word: str) -> int:
    if not word.isdigit() or not 1 <= int(word) <= 36500:
        raise UsageError(f"--days must be a whole number of days from 1, got {word!r}")
    return int(word)


def usage_dir(door: Door, scope: Scope) -> Path:
    """Where the record of *scope*'s store lies."""
    return PimemPaths.from_env(door.pimem.settings.environ).state_dir / "usage" / scope.collection


def report_for(door: Door, scope: Scope, *, today: date, since: date, days: int) -> UsageReport:
    """The report on *scope*'s store from *since* to *today*."""
    start = min(since, today - timedelta(days=days - 1))
    records: Records = read_records(usage_dir(door, scope), start, today)
    texts = (
        (day.isoformat(), door.pimem.read_day(scope, day) or "")
        for day in day_file_days(scope.memory_dir)
    )
    return build_report(records, store_entries(texts), today=today, since=since, days=days)


def scanned_projects(door: Door) -> list[Scope]:
    """The projects under the cross-repo scan roots: their immediate children holding
    ``.memsearch/memory``, each laid out as memsearch lays a project out."""
    raw = door.pimem.settings.environ.get(SCAN_ROOTS, "")
    roots = [Path(part) for part in raw.split(os.pathsep) if part]
    if not roots:
        raise SettingsError(
            f"pimem usage --all needs {SCAN_ROOTS}: directories whose immediate children hold "
            "memory stores (.memsearch/memory/)"
        )
    found: dict[str, Scope] = {}
    for path in children_of(roots, asked_by="pimem usage --all", setting=SCAN_ROOTS):
        if os.path.isdir(path / TREE / "memory"):
            scope = Scope.for_project(path)
            found.setdefault(scope.collection, scope)
    return sorted(found.values(), key=lambda scope: str(scope.scope_dir))


def usage(door: Door, args: Args) -> Outcome:
    today = door.pimem.settings.now().date()
    since = parse_since(args["since"] or DEFAULT_SINCE, today)
    days = parse_days(args["days"] or str(DEFAULT_DAYS))
    if not args["all"]:
        scope = door.scope()
        report = report_for(door, scope, today=today, since=since, days=days)
        return Outcome(
            text=render(report, scope.collection),
            data={"project": str(scope.scope_dir), "collection": scope.collection}
            | report.to_json(),
        )
    projects = [
        (scope, report_for(door, scope, today=today, since=since, days=days))
        for scope in scanned_projects(door)
    ]
    lines = [f"{scope.scope_dir}\n  {summary_line(report)}" for scope, report in projects]
    return Outcome(
        text="\n".join(lines) if lines else "no project with memory under the scan roots",
        data={
            "projects": [
                {"project": str(scope.scope_dir), "collection": scope.collection} | report.to_json()
                for scope, report in projects
            ]
        },
    )


# -- the text ----------------------------------------------------------------------------------


def _share(part: int, whole: int) -> str:
    return f"{round(100 * part / whole)}% used ({part})" if whole else ""


def _skipped(count: int) -> str:
    return f"and {count} skipped by a gate" if count else ""


def _chars(count: int | None) -> str:
    return "?" if count is None else f"{count:,} chars"


def render(report: UsageReport, collection: str) -> str:
    """The text ``pimem usage`` prints: the counts, the chart, the entries recalled most, and
    the ones no recall reached."""
    if report.record_since is None:
        return (
            f"pimem usage: {collection}: nothing recorded yet (the record starts with the next "
            "session)"
        )
    head = f"pimem usage: {collection}, {report.since} to {report.until}"
    if report.record_since > report.since:
        head += f" (the record starts {report.record_since})"
    counts = report.counts
    rows = [
        ("sessions", counts.sessions, ""),
        ("recalls", counts.recalls, _share(counts.recalls_used, counts.recalls)),
        ("expands", counts.expands, ""),
        ("injections", counts.injections, _share(counts.injections_used, counts.injections)),
        ("captures", counts.captures, _skipped(counts.captures_skipped)),
        ("writes", counts.writes, ""),
        ("snapshots", counts.snapshots, ""),
        ("uses", counts.uses, ", ".join(f"{way} {n}" for way, n in report.uses_by_way.items())),
    ]
    lines = [head, ""]
    lines += [f"  {name:<11}{count:>6}   {more}".rstrip() for name, count, more in rows]
    if counts.recalls_empty:
        lines.append(f"  ({counts.recalls_empty} recalls found nothing)")
    if counts.truncated or counts.skipped_lines:
        lines.append(
            f"  (the record is incomplete: {counts.truncated} truncation marks, "
            f"{counts.skipped_lines} unreadable lines skipped)"
        )
    chart = day_chart(report.per_day)
    if chart:
        lines += ["", "recalls and uses per day", chart]
    if report.top_recalled:
        lines += ["", "recalled most"]
        lines += [
            f"  {entry.day} {entry.time}  {entry.recalls:>4} recalls {entry.used:>4} used  "
            f"{_chars(entry.chars)}"
            for entry in report.top_recalled
        ]
    never = report.never_recalled
    lines += [
        "",
        f"never recalled in {report.days} days: {len(never)} of {report.entries} entries, "
        f"{report.never_recalled_chars:,} of {report.entry_chars:,} chars",
    ]
    if report.snapshot_share is not None:
        lines.append(
            f"  (in the span's {counts.snapshots} snapshots they took "
            f"{round(100 * report.snapshot_share)}% of the snapshot's budget)"
        )
    lines += [f"  {entry.day} {entry.time}  {_chars(entry.chars)}" for entry in never[:LISTED]]
    if len(never) > LISTED:
        lines.append(f"  ... {len(never) - LISTED} smaller (--json lists them all)")
    written = report.written_unrecalled
    if written:
        lines += ["", f"written since {report.since} and never recalled: {len(written)} entries"]
        lines += [f"  {e.day} {e.time}  {_chars(e.chars)}" for e in written[:LISTED]]
        if len(written) > LISTED:
            lines.append(f"  ... {len(written) - LISTED} more (--json lists them all)")
    return "\n".join(lines)


USAGE = Command(
    path=("usage",),
    help="how memory was used: recalls, injections, captures, and what nothing recalls",
    description=(
        "What the usage record says about this project's memory over a span of days: how many "
        "sessions, recalls, expands, injections and captures; the share of recalls and "
        "injections the agent used; the entries recalled most; the entries no recall reached "
        "in --days days (candidates for compaction) and memory written but never recalled."
    ),
    epilog="docs/usage.md says what 'used' means, where it can be wrong, and the --json schema.",
    handler=usage,
    params=(
        Param.option(
            "since",
            "DAY|Nd",
            f"the first day: a date (2026-08-01) or a number of days, today included "
            f"(default {DEFAULT_SINCE})",
        ),
        Param.option(
            "days",
            "N",
            f"list the entries no recall reached in the last N days (default {DEFAULT_DAYS})",
        ),
        Param.flag("all", f"every project under the scan roots ({SCAN_ROOTS})"),
    ),
)

COMMANDS: tuple[Command, ...] = (USAGE,)
