"""The ``pimem`` command line: a stable contract for scripts, agents and other tools.

The parser is built from the command table: the operations ``pimem serve`` offers too
(:data:`pimem_core.doors.commands.SHARED`) and the commands only the command line has (:data:`OWN`).

Exit codes: 0 success, 1 a user-facing error (one line on stderr, no traceback), 2 usage.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from pimem_core.api import Pimem
from pimem_core.command_table import Args, Command, Flag, Outcome, Param, UsageError
from pimem_core.doors.commands import SHARED, FrontDoor, in_front_door, plugin_commands
from pimem_core.doors.failures import error_log, keep_traceback, one_line
from pimem_core.doors.git import COMMANDS as GIT_COMMANDS
from pimem_core.doors.git import GROUP as GIT_GROUP
from pimem_core.errors import PimemError, StoreError
from pimem_core.manager import shown_setting
from pimem_core.types import Scope

#: Said on stderr by ``pimem write CONTENT``: its text sits in ``/proc/<pid>/cmdline`` unscrubbed
#: while the command runs, where any local user can read it; stdin is private.
#: Commands that show failed plugins in their answer, or run for long (``serve``, the service):
#: no warning line after them.
QUIET_ABOUT_PLUGINS = frozenset({"plugins", "status", "serve", "service"})
ARGV_CONTENT_WARNING = (
    "pimem: warning: other local users can read a command line (ps, /proc) and this one holds "
    "the entry's text; pipe the text in instead: pimem write - --session ..."
)


class CliDoor(FrontDoor):
    """The command line: the scope of ``--cwd``, waiting and notes on stderr."""

    def __init__(self, pimem: Pimem, cwd: Path, *, ready_written: bool = False) -> None:
        super().__init__(pimem)
        self._cwd = cwd
        self._scope: Scope | None = None
        self.ready_written = ready_written

    def scope(self) -> Scope:
        if self._scope is None:
            self._scope = self.pimem.resolve_scope(self._cwd)
        return self._scope

    def base_dir(self) -> Path:
        return Path.cwd()

    def on_wait(self, holder: str) -> None:
        print(f"pimem: waiting on {holder}...", file=sys.stderr)

    def note(self, line: str) -> None:
        print(line, file=sys.stderr)

    def notice(self, line: str) -> None:
        # Now, before the result: a search that indexed first took longer, and this says why.
        print(f"pimem: {line}", file=sys.stderr, flush=True)

    def service_line(self) -> str | None:
        if not self.pimem.settings.service:
            return None
        from pimem_core.doors.service_client import describe

        return describe()

    def content(self, value: str) -> str:
        if value != "-":
            return value
        try:
            return sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError:
            raise StoreError("the content read from stdin is not UTF-8 text") from None


def _progress_bar(done: int, total: int) -> None:
    width = 30
    filled = width * done // max(total, 1)
    bar = "#" * filled + "-" * (width - filled)
    print(f"\rindexing [{bar}] {done}/{total} files", end="", file=sys.stderr, flush=True)


# -- the commands only the command line has ------------------------------------------------------


@in_front_door
def _scope(door: FrontDoor, a: Args) -> Outcome:
    fields = door.scope().to_json()
    text = "\n".join(
        f"{key}: {'(none)' if value is None else value}" for key, value in fields.items()
    )
    return Outcome(text=text, data=fields)


@in_front_door
def _index(door: FrontDoor, a: Args) -> Outcome:
    scope = door.scope()
    report = door.pimem.index_memory(scope, "cli", on_wait=door.on_wait, progress=door.progress)
    failed = "".join(f"\n  failed: {f.path} ({f.error})" for f in report.failed_files)
    if report.total_files == 0 and not report.failed_files:
        text = f"no memory yet in {scope.memory_dir}; nothing to index: write or capture something first"
    else:
        # memsearch counts the chunks it embedded, not the ones it dropped: say what it did.
        text = (
            f"{report.total_files} file(s) of {scope.memory_dir} checked, "
            f"{report.indexed_chunks} new chunk(s) embedded into {scope.collection}"
        )
        text += (
            f"; {len(report.failed_files)} file(s) failed:{failed}"
            if failed
            else "; the collection matches the files"
        )
    data = {
        "collection": scope.collection,
        "indexed_chunks": report.indexed_chunks,
        "total_files": report.total_files,
        "failed_files": [{"path": f.path, "error": f.error} for f in report.failed_files],
    }
    return Outcome(text=text, data=data)


@in_front_door
def _serve(door: FrontDoor, a: Args) -> Outcome:
    from pimem_core.doors.serve import serve

    serve(door.pimem, announce=not door.ready_written)
    return Outcome(text=None)


@in_front_door
def _maintenance(door: FrontDoor, a: Args) -> Outcome:
    from pimem_core.runtime.maintenance import MaintenanceRunner

    runner = MaintenanceRunner(door.pimem, door.scope(), budget=door.budget())
    reports = runner.run_due(force=a["force"])
    lines = [
        f"{report.name}: {report.result}" + (f" ({report.detail})" if report.detail else "")
        for report in reports
    ]
    return Outcome(
        text="\n".join(lines) or "No maintenance tasks: no plugin provides one.",
        data=[report.to_json() for report in reports],
    )


@in_front_door
def _service_run(door: FrontDoor, a: Args) -> Outcome:
    from pimem_core.doors.service import run_service

    run_service(door.pimem, run_line, note=door.note)
    return Outcome(text=None)


@in_front_door
def _service_status(door: FrontDoor, a: Args) -> Outcome:
    from pimem_core.doors import service_client
    from pimem_core.doors.service_wire import socket_path

    own = socket_path()
    services = service_client.every_service()
    lines = [service_client.describe()]
    listed = []
    for running in services:
        hello, mine = running.hello, running.path == own
        uptime = max(0, int(time.time() - hello.started))
        if not mine:
            apart = ", ".join(running.differences()) or "the same settings, another installation"
            lines.append(
                f"also running, for other settings: pid {hello.pid}, up {uptime} s ({apart})"
            )
        listed.append(
            {
                "pid": hello.pid,
                "version": hello.version,
                "started": hello.started,
                "socket": str(running.path),
                "this_environment": mine,
                "differences": [] if mine else running.differences(),
            }
        )
    here = next((item for item in listed if item["this_environment"]), None)
    return Outcome(
        text="\n".join(lines),
        data={
            "running": here is not None,
            **(
                {}
                if here is None
                else {"pid": here["pid"], "version": here["version"], "started": here["started"]}
            ),
            "services": listed,
        },
    )


@in_front_door
def _service_stop(door: FrontDoor, a: Args) -> Outcome:
    from pimem_core.doors import service_client
    from pimem_core.doors.service_wire import socket_path

    if a["all"]:
        stopped = []
        for running in service_client.every_service():
            found = service_client.probe(running.path)
            if found is not None:
                service_client.stop(found, running.path)
                stopped.append(running.hello.pid)
        text = (
            f"stopped {len(stopped)} memory service(s) (pid {', '.join(map(str, stopped))})"
            if stopped
            else "no memory service is running"
        )
        return Outcome(text=text, data={"stopped": stopped})
    path = socket_path()
    found = service_client.probe(path)
    if found is None:
        others = len(service_client.every_service())
        more = (
            f"; {others} started with other settings run (`pimem service status`, `--all`)"
            if others
            else ""
        )
        return Outcome(
            text=f"no memory service is running for this environment{more}", data={"stopped": None}
        )
    pid = found.hello.pid
    service_client.stop(found, path)
    return Outcome(text=f"stopped the memory service (pid {pid})", data={"stopped": pid})


@in_front_door
def _snapshot(door: FrontDoor, a: Args) -> Outcome:
    snapshot = door.pimem.build_snapshot(door.scope())
    if snapshot is None:
        door.note(
            "no stable snapshot: no plugin builds one (PI_MEMSEARCH_SNAPSHOT=off, or the "
            "plugin is blocked; see `pimem plugins`)"
        )
        return Outcome(text=None)
    return Outcome(text=snapshot.removesuffix("\n"))  # printed with one newline


@in_front_door
def _plugins(door: FrontDoor, a: Args) -> Outcome:
    records = door.pimem.pm.records
    answers = door.pimem.pm.answering_plugins()
    rows = [("NAME", "DISTRIBUTION", "VERSION", "STATUS", "HOOKS")]
    for record in records:
        hooks = ", ".join(
            hook.removeprefix("pimem_")
            + (" (only when chosen)" if hook in record.only_when_chosen else "")
            for hook in record.hooks
        )
        detail = record.error if record.error else hooks
        rows.append(
            (
                record.name,
                record.distribution or "-",
                record.version or "-",
                record.status_text,
                detail,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
        + "  "
        + row[4]
        for row in rows
    ]
    declared = [record for record in records if record.settings]
    if declared:
        lines += ["", "plugin settings (environment variable = current value):"]
    for record in declared:
        lines.append(f"  {record.name}:")
        lines += [
            f"    {value.env}={shown_setting(value.value)}  ({value.help}; default "
            f"{shown_setting(value.default)})"
            for value in record.settings
        ]
    settings = door.pimem.pm.settings
    statuses = {record.name: record.status_text for record in records}
    lines += ["", "single-answer hooks (the plugin asked first):"]
    for hook, plugin in answers.items():
        choice = settings.choice(hook)
        if choice is None:
            why = ""
        elif choice.plugin == plugin:
            why = f"  (chosen: {choice.setting})"
        else:  # chosen but not active: the default answers (docs/plugin-hooks.md)
            status = statuses.get(choice.plugin, "not loaded")
            why = f"  ({choice.setting}: {choice.plugin} is {status})"
        lines.append(f"  {hook} -> {plugin or '(none)'}{why}")
    contested = door.pimem.pm.contested_hooks()
    if contested:
        lines.append("")
    lines += [f"warning: {hook.text}" for hook in contested]
    failed = door.pimem.pm.failed
    lines += ["", *(f"warning: {record.failure}" for record in failed)] if failed else []
    added = plugin_commands(door.pimem)
    if added.added or added.left_out:
        lines += ["", "commands added by plugins:"]
        lines += [
            f"  pimem {command.name}  ({plugin}"
            + (f"; served as {command.method}" if command.method else "")
            + f"): {command.help}"
            for plugin, command in added.added
        ]
        lines += [
            f"  warning: pimem {name} of {plugin} is left out: {why}"
            for plugin, name, why in added.left_out
        ]
    return Outcome(
        text="\n".join(line.rstrip() for line in lines),
        data={
            "plugins": [record.to_json() for record in records],
            "single_answer_hooks": answers,
            "commands": [
                {"command": command.name, "plugin": plugin, "method": command.method}
                for plugin, command in added.added
            ],
            "commands_left_out": [
                {"command": name, "plugin": plugin, "why": why}
                for plugin, name, why in added.left_out
            ],
            "chosen": [choice.to_json() for choice in settings.chosen_plugins],
            "warnings": [hook.to_json() for hook in contested],
        },
    )


#: The commands only the command line has.
OWN: tuple[Command, ...] = (
    Command(
        path=("scope",),
        help="show the memory store and collection this directory resolves to",
        handler=_scope,
    ),
    Command(
        path=("index",),
        help="index the memory store into its collection",
        handler=_index,
        progress=True,
    ),
    Command(
        path=("serve",),
        help="serve one agent session over JSON lines on stdin and stdout (the host protocol)",
        handler=_serve,
        project=False,
        json_output=False,
    ),
    Command(
        path=("maintenance", "run"),
        help="run the due maintenance tasks now, with the model a plugin provides",
        description="Run the maintenance tasks named in PIMEM_MAINTENANCE that are due, in "
        "this process, with the model a plugin provides (the bundled memsearch-llm: "
        "memsearch's [llm] model); each model call counts against PIMEM_DISTILL_BUDGET.",
        handler=_maintenance,
        params=(
            Param(
                name="force",
                kind=Flag(),
                flags=("--force",),
                help="run enabled tasks even when they are not due",
            ),
        ),
    ),
    Command(
        path=("service", "run"),
        help="run this user's memory service in the foreground (what the first client starts)",
        handler=_service_run,
        project=False,
        json_output=False,
    ),
    Command(
        path=("service", "status"),
        help="list this user's memory services (pid, uptime, what sets each apart)",
        handler=_service_status,
        project=False,
    ),
    Command(
        path=("service", "stop"),
        help="stop this environment's memory service (--all: every one of this user's)",
        handler=_service_stop,
        project=False,
        params=(
            Param(
                name="all",
                kind=Flag(),
                flags=("--all",),
                help="stop every memory service of this user, whatever it was started with",
            ),
        ),
    ),
    Command(
        path=("snapshot",),
        help="print the block the agent's system prompt receives",
        handler=_snapshot,
        json_output=False,
    ),
    Command(
        path=("plugins",),
        help="list plugins, their status and which one answers each hook",
        handler=_plugins,
        project=False,
    ),
)

#: The help's order of the commands (a group's commands in the table's order).
_ORDER = (
    "scope", "write", "forget", "index", "search", "expand", "compact", "status", "transcript",
    "serve", "service", "skills", "maintenance", "snapshot", "plugins", "git",
)  # fmt: skip

#: Every command of the command line, in its help's order.
COMMANDS: tuple[Command, ...] = tuple(
    sorted((*SHARED, *OWN, *GIT_COMMANDS), key=lambda command: _ORDER.index(command.path[0]))
)

#: The commands that group others (``pimem skills list``): their help and description.
GROUPS = {
    "skills": (
        "review and install the skill candidates drafted from memory",
        "Skill candidates are drafts: nothing is installed until you ask.",
    ),
    "maintenance": ("run the maintenance tasks", None),
    "service": (
        "this user's warm memory service on a Unix socket (PIMEM_SERVICE=off: none)",
        None,
    ),
    "git": GIT_GROUP,
}


# -- the parser ------------------------------------------------------------------------------------


def _directory(value: str) -> Path:
    path = Path(value).absolute()
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{value} is not a directory")
    return path


def _options(
    parser: argparse.ArgumentParser, *, cwd: bool, json_output: bool, top: bool = False
) -> None:
    """The options accepted before and after the command. A command's copies default to
    SUPPRESS, so a value given before the command is kept and one given after it wins."""
    if cwd:
        parser.add_argument(
            "--cwd",
            type=_directory,
            default=None if top else argparse.SUPPRESS,
            metavar="DIR",
            help="the session directory to resolve the project from (default: the current directory)",
        )
    if json_output:
        parser.add_argument(
            "--json",
            action="store_true",
            default=False if top else argparse.SUPPRESS,
            help="print JSON",
        )
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0 if top else argparse.SUPPRESS,
        help="log what pimem does to stderr (-v: info, -vv: debug)",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="run in this process, not in this user's memory service",
    )
    if not top:
        parser.set_defaults(takes_cwd=cwd, takes_json=json_output)


def build_parser(
    parser_class: type[argparse.ArgumentParser] = argparse.ArgumentParser,
    added: Sequence[Command] = (),
) -> argparse.ArgumentParser:
    """The parser of the command table: pimem's commands, then the *added* ones (plugins')."""
    parser = parser_class(
        prog="pimem",
        description="Persistent, shared, markdown-first memory for coding agents. "
        "--cwd, --json and -v go before or after the command.",
    )
    parser.add_argument(
        "--version", action="version", version=f"pimem {importlib.metadata.version('pimem')}"
    )
    _options(parser, cwd=True, json_output=True, top=True)
    top = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    groups: dict[str, argparse._SubParsersAction[argparse.ArgumentParser]] = {}
    for command in (*COMMANDS, *added):
        commands = top
        if len(command.path) == 2:
            group = command.path[0]
            if group not in groups:
                help, description = GROUPS.get(group, (command.group_help, None))
                groups[group] = top.add_parser(
                    group, help=help, description=description
                ).add_subparsers(dest=f"{group}_command", required=True, metavar="COMMAND")
            commands = groups[group]
        sub = commands.add_parser(
            command.path[-1],
            help=command.help,
            description=command.description or command.help,
            epilog=command.epilog,
        )
        sub.set_defaults(spec=command)
        _options(sub, cwd=command.project, json_output=command.json_output)
        for param in command.params:
            param.add_to(sub)
    return parser


def _log_to_stderr(verbosity: int) -> None:
    if verbosity <= 0:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("pimem: %(levelname)s %(name)s: %(message)s"))
    for name in ("pimem_core", "pimem_plugins"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.INFO if verbosity == 1 else logging.DEBUG)
        logger.addHandler(handler)


def execute(
    parser: argparse.ArgumentParser,
    argv: Sequence[str] | None,
    make_door: Callable[[Path], FrontDoor],
    *,
    out: TextIO,
    err: TextIO,
    default_cwd: Path | None = None,
) -> int:
    """Parse *argv*, run its command with the door *make_door* gives for its directory, and
    write the answer to *out* (errors to *err*); the exit code. The CLI and the memory service
    (:mod:`pimem_core.doors.service`) both run commands through here."""
    args = parser.parse_args(argv)
    command: Command = args.spec
    for option, given, taken in (
        ("--cwd", args.cwd is not None, args.takes_cwd),
        ("--json", args.json, args.takes_json),
    ):
        if given and not taken:
            parser.error(f"pimem {command.name} does not take {option}")
    if args.cwd is None:
        args.cwd = default_cwd if default_cwd is not None else Path.cwd()
    values = vars(args)
    try:
        if command.check is not None:
            command.check(values)
    except UsageError as error:
        parser.error(str(error))
    door: FrontDoor | None = None
    try:
        door = make_door(args.cwd)
        if command.progress and err.isatty() and not args.json:
            door.progress = _progress_bar
        outcome = command.handler(door, values)
        if door.progress is not None:
            print(file=err)
        if command.path == ("write",) and values["content"] != "-":
            # Said here, where the command line and the memory service both run it: once
            # either way, and after the write, so that a refused one says only why.
            print(ARGV_CONTENT_WARNING, file=err)
    except UsageError as error:
        parser.error(str(error))
    except PimemError as error:
        print(f"pimem: error: {error}", file=err)
        _warn_of_failed_plugins(door, command, err, said=str(error))
        return 1
    except Exception as error:  # noqa: BLE001 - a bug: one line naming its plugin, traceback kept
        kept = keep_traceback(error, error_log()) if door is None else door.keep_traceback(error)
        print(one_line(error, kept), file=err)
        return 1
    except KeyboardInterrupt:
        return 130
    _warn_of_failed_plugins(door, command, err)
    try:
        if args.json:
            print(json.dumps(outcome.data, indent=2), file=out)
        elif outcome.text is not None:
            print(outcome.text, file=out)
        out.flush()
    except BrokenPipeError:
        # The reader stopped early (`pimem search ... | head`): what it read is what it wanted.
        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
    return 0


def _warn_of_failed_plugins(
    door: FrontDoor | None, command: Command, err: TextIO, said: str = ""
) -> None:
    """One line for each plugin that failed to load, after the command's answer (status and
    ``pimem plugins`` show them in theirs); for one deciding where memory goes, the store this
    command used. A line the command's error said already is not repeated."""
    if door is None or command.path[0] in QUIET_ABOUT_PLUGINS:
        return
    for record in door.pimem.pm.failed:
        if record.failure in said:
            continue
        used = ""
        if record.routes_memory:
            with contextlib.suppress(PimemError):
                used = f" (this command used the memory in {door.scope().memory_dir})"
        print(f"pimem: warning: {record.failure}{used}", file=err)


def run_line(
    argv: list[str],
    make_door: Callable[[Path], FrontDoor],
    *,
    out: TextIO,
    err: TextIO,
    cwd: Path,
    parser_class: type[argparse.ArgumentParser],
) -> int:
    """One command line of a memory-service client, run as this command line runs it."""
    return execute(build_parser(parser_class), argv, make_door, out=out, err=err, default_cwd=cwd)


def _load(open_pimem: Callable[[], Pimem]) -> tuple[Pimem | PimemError, tuple[Command, ...]]:
    """pimem as *open_pimem* sets it up, and the commands its plugins add; a load that fails is
    reported by the command (``pimem --help`` still answers, without them)."""
    try:
        pimem = open_pimem()
    except PimemError as error:
        return error, ()
    try:
        added = plugin_commands(pimem)
    except PimemError as error:
        print(f"pimem: warning: plugin commands left out: {error}", file=sys.stderr)
        return pimem, ()
    return pimem, added.commands


def _as_the_service_would(pimem: Pimem, words: Sequence[str]) -> None:
    """A command the memory service could have run sees the environment it would have: what
    the service keeps, the plugins' declared settings among it (docs/plugin-hooks.md, "Your
    plugin in the memory service"). Only this process's own command line narrows it."""
    from pimem_core.doors import service_client
    from pimem_core.doors import service_wire as wire

    if not service_client.routable(words):
        return
    kept = wire.command_environment(os.environ, wire.declared_by(pimem.pm.declared_settings))
    for name in set(os.environ) - set(kept):
        del os.environ[name]


def _verbosity(argv: Sequence[str]) -> int:
    """``-v``'s count, read before the parser exists: loading the plugins it needs logs too."""
    return sum(
        len(word) - 1 if word.startswith("-v") and set(word[1:]) == {"v"} else word == "--verbose"
        for word in argv
    )


def main(
    argv: Sequence[str] | None = None,
    *,
    ready_written: bool = False,
    open_pimem: Callable[[], Pimem] | None = None,
) -> int:
    """Run one command. *ready_written*: the launcher wrote ``pimem serve``'s ready line.

    *open_pimem* builds the facade (default :meth:`Pimem.from_env`: the process environment and
    the installed plugins); the test kit's ``run_pimem`` chooses its plugins here. It is called
    before the command line is parsed, since plugins add commands to it; a plugin that fails to
    load or a bad setting is still an error exit of the command, not an exception.
    """
    if hasattr(sys.stdout, "reconfigure"):
        # Memory text is UTF-8; a narrower terminal encoding must not crash the command.
        sys.stdout.reconfigure(errors="backslashreplace")
    words = sys.argv[1:] if argv is None else list(argv)
    _log_to_stderr(_verbosity(words))
    pimem, added = _load(Pimem.from_env if open_pimem is None else open_pimem)
    if argv is None and open_pimem is None and isinstance(pimem, Pimem):
        _as_the_service_would(pimem, words)

    def make_door(cwd: Path) -> FrontDoor:
        if isinstance(pimem, PimemError):
            raise pimem
        return CliDoor(pimem, cwd, ready_written=ready_written)

    return execute(
        build_parser(added=added),
        argv,
        make_door,
        out=sys.stdout,
        err=sys.stderr,
    )


if __name__ == "__main__":
    sys.exit(main())
