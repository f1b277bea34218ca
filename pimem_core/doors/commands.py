"""The operations both front doors offer, in one table.

What a command is (:class:`~pimem_core.command_table.Command`, its parameters and the
:class:`~pimem_core.command_table.Outcome` it returns) is the contract's
(:mod:`pimem_core.command_table`); here are pimem's own commands, their handlers, and the rules
that fit plugins' commands beside them. The CLI (:mod:`pimem_core.doors.cli`) builds its parser
from the table and prints the text or the JSON; ``pimem serve`` (:mod:`pimem_core.doors.serve`)
answers each served command's method with the text and the same JSON. The core's handlers run
in a :class:`FrontDoor`: a door whose ``pimem`` is the whole facade.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path

import attrs

from pimem_core.api import Pimem
from pimem_core.command_table import (
    Args,
    Choice,
    Command,
    Count,
    Door,
    FilePath,
    Flag,
    Handler,
    Kind,
    Outcome,
    Param,
    UsageError,
)
from pimem_core.conflicts import describe_conflicted, is_conflicted
from pimem_core.doors.failures import error_log, keep_traceback
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
from pimem_core.runtime.budget import DistillBudget
from pimem_core.runtime.status import status_sections
from pimem_core.types import Anchor, DayAddress, Entry, SearchQuery, TranscriptRequest

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


# -- pimem's front doors -----------------------------------------------------------------------


class FrontDoor(Door):
    """A front door of pimem's own (the command line, ``pimem serve``, the memory service): a
    :class:`~pimem_core.command_table.Door` whose ``pimem`` is the whole facade, for the core's
    handlers."""

    def __init__(self, pimem: Pimem) -> None:
        self.pimem: Pimem = pimem

    def budget(self) -> DistillBudget:
        """The distillation budget status shows."""
        return DistillBudget.for_settings(self.pimem.settings)

    def keep_traceback(self, error: BaseException) -> Path | None:
        """Keep the traceback of a bug *error* where the user can read it; the file, or
        ``None`` when it could not be kept."""
        return keep_traceback(error, error_log())


def in_front_door(handler: Callable[[FrontDoor, Args], Outcome]) -> Handler:
    """A core command's handler: run by pimem's own doors only, each a :class:`FrontDoor`."""

    @functools.wraps(handler)
    def run(door: Door, args: Args) -> Outcome:
        if not isinstance(door, FrontDoor):
            raise TypeError(f"pimem's own commands run in its front doors, not in {door!r}")
        return handler(door, args)

    return run


# -- the handlers ------------------------------------------------------------------------------


@in_front_door
def _write(door: FrontDoor, a: Args) -> Outcome:
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


def _check_forget(a: Args) -> None:
    by_day = a["date"] is not None or a["time"] is not None
    if by_day == (a["chunk_hash"] is not None):
        raise UsageError(
            "forget takes exactly one address: a chunk hash (--chunk, chunk_hash), "
            "or a date and a time together"
        )
    if by_day and (a["date"] is None or a["time"] is None):
        raise UsageError("forget by day needs a date and a time together")


@in_front_door
def _forget(door: FrontDoor, a: Args) -> Outcome:
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
def _search(door: FrontDoor, a: Args) -> Outcome:
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
def _expand(door: FrontDoor, a: Args) -> Outcome:
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
def _compact(door: FrontDoor, a: Args) -> Outcome:
    scope = door.scope()
    result = door.pimem.compact_memory(scope, on_wait=door.on_wait)
    return Outcome(
        text=result.summary or "Nothing to compact: the collection has no indexed chunks.",
        data={"collection": scope.collection, "summary": result.summary},
    )


@in_front_door
def _status(door: FrontDoor, a: Args) -> Outcome:
    scope = door.scope()
    sections = status_sections(door.pimem, scope, door.budget())
    text, data = render_status(scope, sections), status_to_json(scope, sections)
    service = door.service_line()
    if service is not None:
        text += f"\nservice: {service}"
        data = {**data, "service": service}
    return Outcome(text=text, data=data)


@in_front_door
def _transcript(door: FrontDoor, a: Args) -> Outcome:
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
def _skills_list(door: FrontDoor, a: Args) -> Outcome:
    candidates = door.pimem.list_skill_candidates(door.scope())
    return Outcome(
        text=render_candidates(candidates),
        data=[candidate_to_json(candidate) for candidate in candidates],
        key="candidates",
    )


@in_front_door
def _skills_show(door: FrontDoor, a: Args) -> Outcome:
    candidate = door.pimem.read_skill_candidate(door.scope(), a["name"])
    return Outcome(
        text=render_candidate(candidate), data=candidate_to_json(candidate), key="candidate"
    )


@in_front_door
def _skills_install(door: FrontDoor, a: Args) -> Outcome:
    scope, name = door.scope(), a["name"]
    written = door.pimem.install_skill_candidate(scope, name, door.base_dir() / a["to"])
    return Outcome(
        text=render_installed(name, written),
        data={"name": name, "installed": [str(path) for path in written]},
    )


# -- the table ---------------------------------------------------------------------------------

SCORE_HELP = (
    "Each hit opens with one line: the day and time it was written, its score, its chunk hash "
    "(for `pimem expand`) and, with --all, its project; its text follows. The list's heading "
    "says what the score is. Relevance (pimem's own ranker) runs from 0 to 1 and compares "
    "across searches: an unrelated query scores low. memsearch's ranker gives a reciprocal "
    "rank fusion (RRF, k=60) of a meaning (dense) and a keyword (BM25) ranking, divided by its "
    "maximum: 1.0 means first in both rankings, above 0.5 means in both rankings' top k. It "
    "depends only on ranks: it orders the hits and does not measure relevance (the best hit of "
    "a query unrelated to every entry can still score 1.0). With a reranker (memsearch's, or a "
    "plugin's) the score is the reranker's. --explain shows each retriever's rank and score."
)

_NOT_PERSISTED = (
    "memory_write needs a persisted session: the session anchor needs an entry id and a "
    "transcript path"
)

#: The operations both doors offer, in the CLI's order.
SHARED: tuple[Command, ...] = (
    Command(
        path=("write",),
        help="append one memory entry to today's daily memory file",
        handler=_write,
        method="memory.write",
        params=(
            Param(
                name="content",
                required=True,
                metavar="CONTENT",
                help="- to read the markdown bullets from stdin; the bullets themselves work "
                "too, but other local users can read a command line",
            ),
            Param(
                name="session",
                flags=("--session",),
                required=True,
                metavar="ID",
                help="the session id of the anchor",
                served=False,
                from_session="session_id",
                missing=_NOT_PERSISTED,
            ),
            Param(
                name="turn",
                flags=("--turn",),
                required=True,
                metavar="ID",
                help="the entry id of the anchor",
                missing=_NOT_PERSISTED,
            ),
            Param(
                name="transcript",
                flags=("--transcript",),
                required=True,
                metavar="PATH",
                help="the session's transcript file",
                served=False,
                from_session="transcript",
                missing=_NOT_PERSISTED,
            ),
        ),
    ),
    Command(
        path=("forget",),
        help="remove exactly one memory entry, by day and time or by chunk hash",
        handler=_forget,
        method="memory.forget",
        check=_check_forget,
        params=(
            Param(name="date", flags=("--date",), metavar="YYYY-MM-DD"),
            Param(name="time", flags=("--time",), metavar="HH:MM"),
            Param(
                name="chunk_hash",
                flags=("--chunk",),
                metavar="HASH",
                help="a chunk hash from `pimem search`",
            ),
        ),
    ),
    Command(
        path=("search",),
        help="search memory (L1): the best chunks for a query",
        epilog=SCORE_HELP,
        handler=_search,
        method="memory.search",
        params=(
            Param(
                name="query",
                kind=Query(),
                required=True,
                metavar="QUERY",
                help="what to look for, in words",
            ),
            Param(name="top_k", kind=Count(1), flags=("-k", "--top-k"), default=5, metavar="N"),
            Param(
                name="scope",
                kind=Choice(("project", "all")),
                flags=("--all",),
                const="all",
                default="project",
                help="also search every project under PI_MEMSEARCH_SCAN_ROOTS (cross-repo recall)",
            ),
            Param(
                name="explain",
                kind=Flag(),
                flags=("--explain",),
                default=False,
                help="after each hit's line, one line per retriever (leg): its rank among its "
                "candidates and its score (the JSON always has them, as legs)",
            ),
        ),
    ),
    Command(
        path=("expand",),
        help="show the whole section behind a chunk hash (L2)",
        handler=_expand,
        method="memory.expand",
        params=(
            Param(name="chunk_hash", required=True, metavar="HASH"),
            Param(
                name="project",
                kind=ProjectDir(),
                flags=("--project",),
                metavar="DIR",
                help="the project a cross-repo hit came from, as labelled",
            ),
        ),
    ),
    Command(
        path=("compact",),
        help="condense the memory store into a summary, when the index can (memsearch's: with its "
        "LLM settings)",
        handler=_compact,
        method="memory.compact",
    ),
    Command(
        path=("status",),
        help="show the store, collection, backend and index health",
        handler=_status,
        method="memory.status",
    ),
    Command(
        path=("transcript",),
        help="show the turns of an agent's transcript around an anchored entry (L3)",
        handler=_transcript,
        method="memory.transcript",
        project=False,
        params=(
            Param(
                name="transcript_path",
                kind=FilePath(),
                required=True,
                metavar="PATH",
                help="the transcript file",
            ),
            Param(
                name="turn",
                flags=("--turn",),
                metavar="ID",
                help="an entry id, or a unique prefix of one (default: the end)",
            ),
            Param(
                name="context",
                kind=Count(0),
                flags=("--context",),
                default=3,
                metavar="N",
                help="turns to show on each side of --turn (default 3)",
            ),
            Param(
                name="limit",
                kind=Count(1),
                flags=("--limit",),
                default=20,
                metavar="N",
                help="without --turn, how many of the last turns to show (default 20)",
            ),
        ),
    ),
    Command(
        path=("skills", "list"),
        help="list the candidates and which are pending install",
        handler=_skills_list,
        method="memory.skills",
        action="list",
    ),
    Command(
        path=("skills", "show"),
        help="print one candidate's SKILL.md",
        handler=_skills_show,
        method="memory.skills",
        action="show",
        params=(Param(name="name", required=True, metavar="NAME"),),
    ),
    Command(
        path=("skills", "install"),
        help="copy a candidate into a skills directory, as DIR/NAME/SKILL.md",
        handler=_skills_install,
        method="memory.skills",
        action="install",
        params=(
            Param(name="name", required=True, metavar="NAME"),
            Param(
                name="to",
                kind=UserDir(),
                flags=("--to",),
                required=True,
                metavar="DIR",
                help="the skills directory (for pi: .pi/skills or ~/.pi/agent/skills)",
                missing='installing a skill needs "to": the skills directory the user chose '
                "(for pi: .pi/skills in the project, or ~/.pi/agent/skills)",
            ),
        ),
    ),
)


def served(commands: Sequence[Command] = SHARED) -> dict[str, tuple[Command, ...]]:
    """The served methods and their commands (more than one: chosen by ``action``)."""
    methods: dict[str, tuple[Command, ...]] = {}
    for command in commands:
        if command.method is not None:
            methods[command.method] = (*methods.get(command.method, ()), command)
    return methods


@attrs.frozen(kw_only=True)
class PluginCommands:
    """The commands plugins add to a table, and the ones left out, each with why."""

    added: tuple[tuple[str, Command], ...] = ()
    #: ``(plugin, command name, why)``.
    left_out: tuple[tuple[str, str, str], ...] = ()

    @property
    def commands(self) -> tuple[Command, ...]:
        return tuple(command for _, command in self.added)


#: The first word of every command pimem has itself (a test keeps it equal to the command
#: line's table): a plugin's commands start with a word of their own.
CORE_WORDS = frozenset(
    {
        "compact", "expand", "forget", "git", "index", "maintenance", "plugins", "scope",
        "search", "serve", "service", "skills", "snapshot", "status", "transcript", "write",
    }
)  # fmt: skip


def plugin_commands(pimem: Pimem) -> PluginCommands:
    """The plugins' commands that fit beside pimem's and each other: one whose first word is
    pimem's, whose words or method another command has, is left out, so a plugin never shadows
    pimem's commands or another plugin's."""
    words: set[tuple[str, ...]] = set()
    groups: set[str] = set()
    singles: set[str] = set(CORE_WORDS)
    methods = {*served(SHARED), "ping"}
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
        elif command.path[0] in CORE_WORDS:
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
