"""The ``pimem`` command line as a contract for scripts, agents and other tools: its parser,
built from the command table (:data:`pimem_core.doors.table.CORE`, then the plugins'
commands), and :func:`execute`, which runs one command line for the CLI and for the memory
service alike.

Exit codes: 0 success, 1 a user-facing error (one line on stderr, no traceback), 2 usage.

Run as ``python -m pimem_core.doors.command_line``, it writes the table's light copy
(:mod:`pimem_core.doors.routes`) again; a test keeps the copy equal to the table.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import io
import json
import os
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, NoReturn, TextIO

from pimem_core.command_table import Command, Content, FilePath, UsageError
from pimem_core.doors.failures import error_log, keep_traceback, one_line
from pimem_core.doors.front_door import FrontDoor
from pimem_core.doors.table import CORE
from pimem_core.errors import PimemError

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

#: Said on stderr when a command's content is given on its command line: its text sits in
#: ``/proc/<pid>/cmdline`` unscrubbed while the command runs, where any local user can read
#: it; stdin is private.
ARGV_CONTENT_WARNING = (
    "pimem: warning: other local users can read a command line (ps, /proc) and this one holds "
    "the entry's text; pipe the text in instead: pimem write - --session ..."
)


def _progress_bar(done: int, total: int) -> None:
    width = 30
    filled = width * done // max(total, 1)
    bar = "#" * filled + "-" * (width - filled)
    print(f"\rindexing [{bar}] {done}/{total} files", end="", file=sys.stderr, flush=True)


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
    for command in (*CORE, *added):
        commands = top
        if len(command.path) == 2:
            group = command.path[0]
            if group not in groups:
                groups[group] = top.add_parser(
                    group, help=command.group_help, description=command.group_description
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
        if any(isinstance(p.kind, Content) and values[p.name] != "-" for p in command.params):
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
    if door is None or command.quiet_about_plugins:
        return
    for record in door.pimem.pm.failed:
        if record.failure in said:
            continue
        used = ""
        if record.routes_memory:
            with contextlib.suppress(PimemError):
                used = f" (this command used the memory in {door.scope().memory_dir})"
        print(f"pimem: warning: {record.failure}{used}", file=err)


class _ParserExit(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def _capturing_parser(out: IO[str], err: IO[str]) -> type[argparse.ArgumentParser]:
    """A parser class that writes to *out* and *err* and raises instead of exiting: a usage
    error in one client's command line must not end the process that runs it."""

    class CapturingParser(argparse.ArgumentParser):
        def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
            if message:
                (err if file is sys.stderr else out).write(message)

        def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
            if message:
                err.write(message)
            raise _ParserExit(status)

    return CapturingParser


def run_captured(
    argv: list[str], make_door: Callable[[Path], FrontDoor], *, cwd: Path
) -> tuple[int, str, str]:
    """One command line of a memory-service client (*cwd* its directory), run as this command
    line runs it: its exit code, stdout and stderr, a usage error among them."""
    out, err = io.StringIO(), io.StringIO()
    try:
        parser = build_parser(_capturing_parser(out, err))
        code = execute(parser, argv, make_door, out=out, err=err, default_cwd=cwd)
    except _ParserExit as exit:
        code = exit.status
    return code, out.getvalue(), err.getvalue()


# -- the table's light copy --------------------------------------------------------------------

_LIGHT_HEAD = '''"""The command table as the thin client and ``pimem serve``'s ready line read it, before any
of pimem is imported: generated from :data:`pimem_core.doors.table.CORE` and the command line's
parser by ``python -m pimem_core.doors.command_line``, and kept equal to them by a test. Do not
edit it by hand.
"""

from __future__ import annotations
'''

#: Each name of the light copy, and what it holds.
_LIGHT_NAMES = {
    "CORE_WORDS": "The first word of every command of pimem's own: a plugin's commands start with "
    "a word of their own.",
    "ROUTED": 'The commands the thin client hands to the memory service (``route="service"``).',
    "CHANGES": "Of those, the ones that change the store (``changes=True``): once handed over, "
    "never run again in process.",
    "FROM_STDIN": "Of those, the ones whose content ``-`` reads from stdin (a ``Content`` "
    "parameter): the client reads it and sends it along.",
    "VALUED": "The options before the command that take a value: the command word is found "
    "without the parser.",
    "PATHS": "The options of the routed commands whose value is a path, made absolute for the "
    "service.",
    "COMMAND_OPTIONS": "The options a command takes (``--cwd``, ``--json``): the only ones the "
    "service takes before the command.",
    "LOCAL": "The options that are this process's own (help, the version, ``--in-process``, the "
    "log): a command line with one is answered here.",
}


def light_table(commands: Sequence[Command] = CORE) -> dict[str, tuple[str, ...]]:
    """What the thin client and the ready line need of *commands* and the parser."""
    routed = [command for command in commands if command.route == "service"]
    if any(len(command.path) != 1 for command in routed):
        raise ValueError("the thin client routes one-word commands only")
    top = [action for action in build_parser()._actions if action.option_strings]
    bare, full = argparse.ArgumentParser(add_help=False), argparse.ArgumentParser(add_help=False)
    _options(bare, cwd=False, json_output=False)
    _options(full, cwd=True, json_output=True)
    per_command = set(full._option_string_actions) - set(bare._option_string_actions)
    valued = {word for action in top if action.nargs != 0 for word in action.option_strings}
    paths = {word for action in top if action.type is _directory for word in action.option_strings}
    for command in routed:
        paths |= {flag for p in command.params if isinstance(p.kind, FilePath) for flag in p.flags}
    found = {
        "CORE_WORDS": {command.path[0] for command in commands},
        "ROUTED": {command.path[0] for command in routed},
        "CHANGES": {command.path[0] for command in routed if command.changes},
        "FROM_STDIN": {
            command.path[0]
            for command in routed
            if any(isinstance(p.kind, Content) for p in command.params)
        },
        "VALUED": valued,
        "PATHS": paths,
        "COMMAND_OPTIONS": per_command,
        "LOCAL": {word for action in top for word in action.option_strings} - per_command,
    }
    return {name: tuple(sorted(found[name])) for name in _LIGHT_NAMES}


def light_module(commands: Sequence[Command] = CORE) -> str:
    """The text of :mod:`pimem_core.doors.routes` for *commands*."""
    parts = [_LIGHT_HEAD]
    for name, values in light_table(commands).items():
        said = "".join(f"#: {line}\n" for line in textwrap.wrap(_LIGHT_NAMES[name], 96))
        items = [json.dumps(value) for value in values]
        lines = "".join(f"    {item},\n" for item in items)
        # One value on one line, as ruff formats it.
        held = f"({items[0]},)" if len(items) == 1 else f"(\n{lines})"
        parts.append(f"{said}{name} = {held}\n")
    return "\n".join(parts)


if __name__ == "__main__":
    Path(__file__).with_name("routes.py").write_text(light_module(), encoding="utf-8")
