"""The usage record: what each session's memory showed the agent (snapshot, searches,
expands, injections), what capture and writes added, and whether the agent then used what it
was given, one JSON line each in pimem's state, never in the project (docs/usage.md).

``pimem usage`` reads it (:mod:`pimem_plugins.usage.command`); status carries one line.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from pimem_core.plugin import (
    Command,
    DayAddress,
    MemoryStore,
    PimemPaths,
    Scope,
    Settings,
    StatusSection,
    UsageEvent,
    hookimpl,
)
from pimem_plugins.usage import entries
from pimem_plugins.usage.record import (
    QUERY_CHARS,
    TERM_CHARS,
    append,
    entry_json,
    line_of,
    session_digest,
    status_line,
    usage_dir,
)
from pimem_plugins.usage.report import day_file_days
from pimem_plugins.usage.used import uses


class UsagePlugin:
    """Appends each usage event to the record; status and ``pimem usage`` read it."""

    @hookimpl
    def pimem_observe_usage(self, scope: Scope, event: UsageEvent) -> None:
        directory = usage_dir(PimemPaths.from_env().state_dir, scope.collection)
        append(directory / f"{event.at.date().isoformat()}.jsonl", records_of(event))

    @hookimpl
    def pimem_collect_status(self, scope: Scope, settings: Settings) -> Iterator[StatusSection]:
        directory = usage_dir(PimemPaths.from_env().state_dir, scope.collection)
        line = status_line(directory, settings.now().date().isoformat())
        yield StatusSection(name="usage", rank=41, lines=(line,), data={"record": str(directory)})

    @hookimpl
    def pimem_collect_unrecalled_entries(
        self, scope: Scope, settings: Settings, store: MemoryStore, days: int
    ) -> list[DayAddress]:
        directory = usage_dir(PimemPaths.from_env(settings.environ).state_dir, scope.collection)
        day_files = (
            (day.isoformat(), store.read_day(day) or "") for day in day_file_days(scope.memory_dir)
        )
        today = settings.now().date()
        return entries.never_recalled(directory, scope.collection, day_files, today, days)

    @hookimpl
    def pimem_collect_used_entries(
        self, scope: Scope, settings: Settings, days: int
    ) -> list[DayAddress]:
        directory = usage_dir(PimemPaths.from_env(settings.environ).state_dir, scope.collection)
        return list(entries.used(directory, settings.now().date(), days))

    @hookimpl
    def pimem_collect_commands(self) -> Iterable[Command]:
        from pimem_plugins.usage import command

        return tuple(getattr(command, "COMMANDS", ()))


def records_of(event: UsageEvent) -> Iterator[dict[str, object]]:
    """The record's lines for *event* (docs/usage.md)."""
    head = (event.at, session_digest(event.session))
    entries = [entry_json(entry) for entry in event.entries]
    if event.kind == "session":
        yield line_of(*head, "session", project=event.project)
    elif event.kind == "search":
        query = (event.query or "")[:QUERY_CHARS]
        yield line_of(*head, "search", query=query, hits=entries, top=event.top)
    elif event.kind == "expand":
        yield line_of(*head, "expand", entry=entries[0] if entries else None)
    elif event.kind == "capture" and event.skipped is not None:
        yield line_of(*head, "capture", skipped=event.skipped)
    elif event.kind in ("snapshot", "injection", "capture", "write"):
        yield line_of(*head, event.kind, entries=entries)
    elif event.kind == "settled":
        given = [(given.via, given.entry) for given in event.given]
        for use in uses(given, event.prompt, event.answer):
            yield line_of(
                *head,
                "used",
                entry=entry_json(use.entry),
                via=use.via,
                evidence=use.evidence,
                term=use.term[:TERM_CHARS],
                **({"turn": event.turn} if event.turn else {}),
            )
