"""The handlers of pimem's memory commands, and the rules that fit plugins' commands beside
pimem's.

The commands themselves are declared in the command table (:mod:`pimem_core.doors.table`):
each names its handler here. A handler runs in a
:class:`~pimem_core.doors.front_door.FrontDoor` and returns an
:class:`~pimem_core.command_table.Outcome`, the text and the JSON both doors answer with.
"""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

import attrs

from pimem_core.command_table import (
    Args,
    Command,
    FilePath,
    Kind,
    MemoryAccess,
    Outcome,
    UsageError,
)
from pimem_core.conflicts import describe_conflicted, is_conflicted
from pimem_core.doors import protocol, routes
from pimem_core.doors.front_door import FrontDoor, in_front_door
from pimem_core.doors.skills import (
    candidate_to_json,
    render_candidate,
    render_candidates,
    render_installed,
)
from pimem_core.errors import NoMemoryYet, PimemError, PluginError, TranscriptNotHere
from pimem_core.render import (
    cross_repo_to_json,
    hit_to_json,
    redaction_to_json,
    render_cross_repo,
    render_hits,
    render_redacted,
    render_redaction,
    render_section,
    render_status,
    render_transcript,
    render_transcript_elsewhere,
    section_to_json,
    status_to_json,
    transcript_elsewhere_to_json,
    transcript_to_json,
)
from pimem_core.runtime.status import status_sections
from pimem_core.service_values import TranscriptRequest
from pimem_core.types import Anchor, DayAddress, Entry, Scope, SearchQuery

# -- the core's own parameter kinds -----------------------------------------------------------


class Query(Kind):
    def from_word(self, word: str) -> object:
        if not word.strip():
            raise ValueError("must hold at least one word, got an empty query")
        return word


class UserDir(FilePath):
    """A directory the user names (``~`` expanded); a relative one is taken from the door's
    :meth:`Door.base_dir`."""

    def from_word(self, word: str) -> object:
        path = super().from_word(word)
        assert isinstance(path, Path)
        return path.expanduser()


class ProjectDir(FilePath):
    """A cross-repo hit's project label: on the command line an existing directory (made
    absolute), over the protocol the absolute path verbatim."""

    def from_word(self, word: str) -> object:
        path = Path(word).absolute()
        if not path.is_dir():
            raise ValueError(f"{word} is not a directory")
        return path

    def from_json(self, value: object) -> object:
        path = super().from_word(value) if isinstance(value, str) else None
        if not isinstance(path, Path) or not path.is_absolute():
            raise ValueError(
                f"must be a project label, the absolute path a cross-repo hit names, got {value!r}"
            )
        return path


# -- the handlers ------------------------------------------------------------------------------


@in_front_door
def write(door: FrontDoor, a: Args) -> Outcome:
    # Scrubbed here as well as by the facade, to tell the writer what was taken out.
    scrubbed = door.pimem.scrubber.scrubbed(door.content(a["content"]))
    entry = Entry(
        anchor=Anchor(session=a["session"], turn=a["turn"], transcript=a["transcript"]),
        content=scrubbed.text,
        written_at=door.pimem.settings.now(),
    )
    notices: list[str] = []
    file = door.pimem.append_entry(door.scope(), entry, on_notice=notices.append)
    lines = [f"Saved the memory entry to {file}"]
    if scrubbed.found:
        lines.append(render_redacted(scrubbed.found))
    conflicted = _conflicted(door, entry.written_at.date())
    if conflicted:
        # Kept all the same, below the markers: said now so that the merge gets resolved.
        lines.append(f"Note: the entry went below the markers: {describe_conflicted([file])}")
    lines += notices
    return Outcome(
        text="\n".join(lines),
        data={
            "file": str(file),
            "conflicted": conflicted,
            "redacted": dict(scrubbed.found),
            "notices": notices,
        },
    )


def _conflicted(door: FrontDoor, day: date) -> bool:
    """Whether *day*'s daily memory file holds git conflict markers (``False`` when it cannot
    be read: the entry was written, and that is what the command answers)."""
    try:
        return is_conflicted(door.pimem.read_day(door.scope(), day) or "")
    except PimemError:
        return False


def check_forget(a: Args) -> None:
    by_day = a["date"] is not None or a["time"] is not None
    if by_day == (a["chunk_hash"] is not None):
        raise UsageError(
            "forget takes exactly one address: a chunk hash (--chunk, chunk_hash), "
            "or a date and a time together"
        )
    if by_day and (a["date"] is None or a["time"] is None):
        raise UsageError("forget by day needs a date and a time together")


@in_front_door
def forget(door: FrontDoor, a: Args) -> Outcome:
    pimem, scope = door.pimem, door.scope()
    if a["chunk_hash"] is not None:
        redaction = pimem.forget_chunk(scope, a["chunk_hash"], on_wait=door.on_wait)
    else:
        redaction = pimem.forget_entry(scope, DayAddress.parse(a["date"], a["time"]))
    # A forget is a redaction: take the text out of the index now, not at the next index run.
    try:
        pimem.index_memory(scope, "forget", files=(redaction.file,), on_wait=door.on_wait)
    except PimemError as error:
        door.note(f"pimem: the index still holds the forgotten text until it is rebuilt: {error}")
    return Outcome(text=render_redaction(redaction), data=redaction_to_json(redaction))


@in_front_door
def search(door: FrontDoor, a: Args) -> Outcome:
    pimem, text, explain = door.pimem, a["query"], bool(a["explain"])
    query = SearchQuery(text=text, top_k=a["top_k"])
    # The JSON always carries every hit's legs: --explain changes only the text.
    if a["scope"] == "all":
        result = pimem.search_everywhere(
            door.scope(), query, on_wait=door.on_wait, on_notice=door.notice
        )
        return Outcome(
            text=render_cross_repo(text, result, explain=explain), data=cross_repo_to_json(result)
        )
    try:
        hits = pimem.search_memory(door.scope(), query, on_wait=door.on_wait, on_notice=door.notice)
    except NoMemoryYet as empty:  # not an error: an empty store has no hits
        return Outcome(text=str(empty), data=[], key="hits")
    return Outcome(
        text=render_hits(text, hits, explain=explain),
        data=[hit_to_json(hit) for hit in hits],
        key="hits",
    )


@in_front_door
def expand(door: FrontDoor, a: Args) -> Outcome:
    scope = door.scope()
    project: Path | None = a["project"]
    foreign = project is not None and project != scope.scope_dir
    if project is not None and foreign:
        scope = door.pimem.resolve_project(project)
    section = door.pimem.expand_chunk(
        scope, a["chunk_hash"], on_wait=door.on_wait, read_only=foreign, on_notice=door.notice
    )
    # A store shared through git holds entries of sessions that ran on a teammate's machine.
    here = section.anchor is None or os.path.exists(section.anchor.transcript)
    # Paths read relative to the session's project; another project's stay whole.
    project = None if foreign else scope.repository_dir
    return Outcome(
        text=render_section(section, transcript_here=here, project=project),
        data=section_to_json(section, transcript_here=here),
        key="section",
    )


@in_front_door
def compact(door: FrontDoor, a: Args) -> Outcome:
    scope = door.scope()
    days: int | None = a["never_recalled"]
    if days is not None:
        return _compact_unrecalled(door, scope, days)
    result = door.pimem.compact_memory(scope, on_wait=door.on_wait)
    return Outcome(
        text=result.summary or "Nothing to compact: the collection has no indexed chunks.",
        data={"collection": scope.collection, "summary": result.summary},
    )


def _compact_unrecalled(door: FrontDoor, scope: Scope, days: int) -> Outcome:
    """``pimem compact --never-recalled DAYS``: the entries the usage record says memory did
    not give the agent in the last *days* days, condensed."""
    only = door.pimem.unrecalled_entries(scope, days)
    if only is None:
        raise PimemError(
            "--never-recalled needs a usage record, and no plugin keeps one: the bundled "
            "usage plugin is off (PIMEM_DISABLE_PLUGINS names it)"
        )
    summary = None
    if only:
        summary = door.pimem.compact_memory(scope, only=only, on_wait=door.on_wait).summary
    if summary is None:
        text = f"Nothing to compact: every entry older than {days} days was recalled in them."
    else:
        count = f"{len(only)} {'entry' if len(only) == 1 else 'entries'}"
        text = f"{summary}\n\n(condensed from {count} never recalled in {days} days)"
    entries = sorted((entry.day.isoformat(), entry.time) for entry in only)
    return Outcome(
        text=text,
        data={
            "collection": scope.collection,
            "summary": summary,
            "entries": [{"day": day, "time": time} for day, time in entries],
        },
    )


@in_front_door
def status(door: FrontDoor, a: Args) -> Outcome:
    scope = door.scope()
    sections = status_sections(door.pimem, scope, door.budget())
    text, data = render_status(scope, sections), status_to_json(scope, sections)
    service = door.service_line()
    if service is not None:
        text += f"\nservice: {service}"
        data = {**data, "service": service}
    return Outcome(text=text, data=data)


@in_front_door
def transcript(door: FrontDoor, a: Args) -> Outcome:
    # Expand shows paths under ~ or relative to the project: taken back as shown.
    path: Path = a["transcript_path"].expanduser()
    if not path.is_absolute():
        path = door.base_dir() / path
    request = TranscriptRequest(path=path, turn=a["turn"], context=a["context"], limit=a["limit"])
    try:
        transcript = door.pimem.read_transcript(request)
    except TranscriptNotHere:
        # Not a failure: the answer is that the entry is all there is.
        path = request.path
        return Outcome(
            text=render_transcript_elsewhere(path), data=transcript_elsewhere_to_json(path)
        )
    return Outcome(text=render_transcript(transcript), data=transcript_to_json(transcript))


@in_front_door
def skills_list(door: FrontDoor, a: Args) -> Outcome:
    candidates = door.pimem.list_skill_candidates(door.scope())
    return Outcome(
        text=render_candidates(candidates),
        data=[candidate_to_json(candidate) for candidate in candidates],
        key="candidates",
    )


@in_front_door
def skills_show(door: FrontDoor, a: Args) -> Outcome:
    candidate = door.pimem.read_skill_candidate(door.scope(), a["name"])
    return Outcome(
        text=render_candidate(candidate), data=candidate_to_json(candidate), key="candidate"
    )


@in_front_door
def skills_install(door: FrontDoor, a: Args) -> Outcome:
    scope, name = door.scope(), a["name"]
    written = door.pimem.install_skill_candidate(scope, name, door.base_dir() / a["to"])
    return Outcome(
        text=render_installed(name, written),
        data={"name": name, "installed": [str(path) for path in written]},
    )


# -- plugins' commands ------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class PluginCommands:
    """The commands plugins add to a table, and the ones left out, each with why."""

    added: tuple[tuple[str, Command], ...] = ()
    #: ``(plugin, command name, why)``.
    left_out: tuple[tuple[str, str, str], ...] = ()

    @property
    def commands(self) -> tuple[Command, ...]:
        return tuple(command for _, command in self.added)


def plugin_commands(pimem: MemoryAccess) -> PluginCommands:
    """The plugins' commands that fit beside pimem's and each other: one whose first word is
    pimem's, whose words or method another command has, is left out, so a plugin never shadows
    pimem's commands or another plugin's. pimem's words and methods are read from the table's
    light copies (:mod:`pimem_core.doors.routes`, :mod:`pimem_core.doors.protocol`), kept equal
    to it by tests."""
    words: set[tuple[str, ...]] = set()
    groups: set[str] = set()
    singles: set[str] = set(routes.CORE_WORDS)
    methods = {*protocol.MEMORY_METHODS, "ping"}
    added: list[tuple[str, Command]] = []
    left_out: list[tuple[str, str, str]] = []
    for plugin, command in pimem.collect_commands():
        if not isinstance(command, Command):
            raise PluginError(
                f"pimem_collect_commands of {plugin} gave a {type(command).__name__}, not a Command"
            )
        why = None
        if not 1 <= len(command.path) <= 2 or not all(command.path):
            why = "a command is one or two words"
        elif command.path[0] in routes.CORE_WORDS:
            why = f"`pimem {command.path[0]}` is pimem's own"
        elif command.path in words:
            why = "another plugin has it"
        elif len(command.path) == 1 and command.path[0] in groups:
            why = f"`pimem {command.path[0]}` is a group of commands"
        elif len(command.path) == 2 and command.path[0] in singles:
            why = f"`pimem {command.path[0]}` is a command of its own"
        elif command.method is not None and (
            command.method in methods or command.method.startswith("session.")
        ):
            why = f"the method {command.method} is taken"
        if why is not None:
            left_out.append((plugin, command.name, why))
            continue
        added.append((plugin, command))
        words.add(command.path)
        (groups if len(command.path) > 1 else singles).add(command.path[0])
        if command.method is not None:
            methods.add(command.method)
    return PluginCommands(added=tuple(added), left_out=tuple(left_out))
