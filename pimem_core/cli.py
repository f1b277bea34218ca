"""The ``pimem`` command line: a stable contract for scripts, agents and other tools.

Exit codes: 0 success, 1 a user-facing error (one line on stderr, no traceback), 2 usage.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from pimem_core.api import Pimem
from pimem_core.errors import PimemError, StoreError
from pimem_core.types import Anchor, DayAddress, Entry

Command = Callable[[Pimem, argparse.Namespace], None]


def _directory(value: str) -> Path:
    path = Path(value).absolute()
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{value} is not a directory")
    return path


def _emit(args: argparse.Namespace, data: object, text: str) -> None:
    if getattr(args, "json", False):
        print(json.dumps(data, indent=2))
    else:
        print(text)


def cmd_scope(pimem: Pimem, args: argparse.Namespace) -> None:
    scope = pimem.resolve_scope(args.cwd)
    fields = scope.to_json()
    _emit(args, fields, "\n".join(f"{key}: {value}" for key, value in fields.items()))


def _read_content(content: str) -> str:
    if content != "-":
        return content
    try:
        return sys.stdin.buffer.read().decode("utf-8")
    except UnicodeDecodeError:
        raise StoreError("the content read from stdin is not UTF-8 text") from None


def cmd_write(pimem: Pimem, args: argparse.Namespace) -> None:
    entry = Entry(
        anchor=Anchor(session=args.session, turn=args.turn, transcript=args.transcript),
        content=_read_content(args.content),
        written_at=pimem.settings.now(),
    )
    file = pimem.append_entry(pimem.resolve_scope(args.cwd), entry)
    _emit(args, {"file": str(file)}, f"Saved the memory entry to {file}")


def cmd_forget(pimem: Pimem, args: argparse.Namespace) -> None:
    address = DayAddress.parse(args.date, args.time)
    redaction = pimem.forget_entry(pimem.resolve_scope(args.cwd), address)
    gone = " (it held nothing else, so the file was deleted)" if redaction.deleted else ""
    _emit(
        args,
        {"file": str(redaction.file), "removed": redaction.removed, "deleted": redaction.deleted},
        f"Forgot the entry at {address.time} in {redaction.file}{gone}. "
        f"No other copy is kept; this was it:\n\n{redaction.removed}",
    )


def cmd_snapshot(pimem: Pimem, args: argparse.Namespace) -> None:
    snapshot = pimem.build_snapshot(pimem.resolve_scope(args.cwd))
    if snapshot is None:
        print(
            "no stable snapshot: no plugin builds one (PI_MEMSEARCH_SNAPSHOT=off, or the "
            "plugin is blocked; see `pimem plugins`)",
            file=sys.stderr,
        )
        return
    sys.stdout.write(snapshot)
    sys.stdout.flush()


def cmd_plugins(pimem: Pimem, args: argparse.Namespace) -> None:
    records = pimem.pm.records
    answers = pimem.pm.answering_plugins()
    if args.json:
        _emit(
            args,
            {"plugins": [record.to_json() for record in records], "single_answer_hooks": answers},
            "",
        )
        return
    rows = [("NAME", "DISTRIBUTION", "VERSION", "STATUS", "HOOKS")]
    for record in records:
        hooks = ", ".join(hook.removeprefix("pimem_") for hook in record.hooks)
        detail = record.error if record.error else hooks
        rows.append(
            (record.name, record.distribution or "-", record.version or "-", record.status, detail)
        )
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
        + "  "
        + row[4]
        for row in rows
    ]
    lines += ["", "single-answer hooks (the plugin asked first):"]
    lines += [f"  {hook} -> {plugin or '(none)'}" for hook, plugin in answers.items()]
    print("\n".join(line.rstrip() for line in lines))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pimem", description="Persistent, shared, markdown-first memory for coding agents."
    )
    parser.add_argument(
        "--version", action="version", version=f"pimem {importlib.metadata.version('pimem')}"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(
        name: str, handler: Command, help: str, *, project: bool = True, json_output: bool = True
    ) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help)
        sub.set_defaults(handler=handler)
        if project:
            sub.add_argument(
                "--cwd",
                type=_directory,
                default=Path.cwd(),
                metavar="DIR",
                help="the session directory to resolve the project from (default: the current directory)",
            )
        if json_output:
            sub.add_argument("--json", action="store_true", help="print JSON")
        return sub

    command("scope", cmd_scope, "show the memory store and collection this directory resolves to")

    write = command("write", cmd_write, "append one memory entry to today's daily memory file")
    write.add_argument(
        "content", metavar="CONTENT", help="markdown bullets, or - to read them from stdin"
    )
    write.add_argument(
        "--session", required=True, metavar="ID", help="the session id of the anchor"
    )
    write.add_argument("--turn", required=True, metavar="ID", help="the entry id of the anchor")
    write.add_argument(
        "--transcript", required=True, metavar="PATH", help="the session's transcript file"
    )

    forget = command(
        "forget", cmd_forget, "remove exactly one memory entry, addressed by day and time"
    )
    forget.add_argument("--date", required=True, metavar="YYYY-MM-DD")
    forget.add_argument("--time", required=True, metavar="HH:MM")

    command(
        "snapshot",
        cmd_snapshot,
        "print the block the agent's system prompt receives",
        json_output=False,
    )
    command(
        "plugins",
        cmd_plugins,
        "list plugins, their status and which one answers each hook",
        project=False,
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if hasattr(sys.stdout, "reconfigure"):
        # Memory text is UTF-8; a narrower terminal encoding must not crash the command.
        sys.stdout.reconfigure(errors="backslashreplace")
    try:
        pimem = Pimem.from_env()
        handler: Command = args.handler
        handler(pimem, args)
    except PimemError as error:
        print(f"pimem: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
