"""The ``pimem`` command line: a stable contract for scripts, agents and other tools.

Exit codes: 0 success, 1 a user-facing error (one line on stderr, no traceback), 2 usage.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from pimem_core.api import Pimem
from pimem_core.budget import DistillBudget
from pimem_core.errors import NoMemoryYet, PimemError, StoreError
from pimem_core.manager import shown_setting
from pimem_core.render import (
    cross_repo_to_json,
    hit_to_json,
    redaction_to_json,
    render_cross_repo,
    render_hits,
    render_redaction,
    render_section,
    render_status,
    render_transcript,
    section_to_json,
    status_to_json,
    transcript_to_json,
)
from pimem_core.skills import (
    candidate_to_json,
    render_candidate,
    render_candidates,
    render_installed,
)
from pimem_core.store_today import store_today_status
from pimem_core.types import Anchor, DayAddress, Entry, SearchQuery, TranscriptRequest

Command = Callable[[Pimem, argparse.Namespace], None]


def _positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {value!r}")
    return int(value)


def _non_negative(value: str) -> int:
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 0, got {value!r}")
    return int(value)


def _directory(value: str) -> Path:
    path = Path(value).absolute()
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{value} is not a directory")
    return path


def _query(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError("must hold at least one word, got an empty query")
    return value


def _emit(args: argparse.Namespace, data: object, text: str) -> None:
    if getattr(args, "json", False):
        print(json.dumps(data, indent=2))
    else:
        print(text)


def cmd_scope(pimem: Pimem, args: argparse.Namespace) -> None:
    scope = pimem.resolve_scope(args.cwd)
    fields = scope.to_json()
    text = "\n".join(
        f"{key}: {'(none)' if value is None else value}" for key, value in fields.items()
    )
    _emit(args, fields, text)


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
    scope = pimem.resolve_scope(args.cwd)
    if args.chunk is not None:
        redaction = pimem.forget_chunk(scope, args.chunk, on_wait=_waiting)
    else:
        redaction = pimem.forget_entry(scope, DayAddress.parse(args.date, args.time))
    _emit(args, redaction_to_json(redaction), render_redaction(redaction))
    # A forget is a redaction: take the text out of the index now, not at the next index run.
    try:
        pimem.index_memory(scope, "forget", files=(redaction.file,), on_wait=_waiting)
    except PimemError as error:
        print(
            f"pimem: the index still holds the forgotten text until it is rebuilt: {error}",
            file=sys.stderr,
        )


def _waiting(holder: str) -> None:
    print(f"pimem: waiting on {holder}...", file=sys.stderr)


def cmd_index(pimem: Pimem, args: argparse.Namespace) -> None:
    scope = pimem.resolve_scope(args.cwd)
    progress = _progress_bar if sys.stderr.isatty() and not args.json else None
    report = pimem.index_memory(scope, "cli", on_wait=_waiting, progress=progress)
    if progress is not None:
        print(file=sys.stderr)
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
    _emit(
        args,
        {
            "collection": scope.collection,
            "indexed_chunks": report.indexed_chunks,
            "total_files": report.total_files,
            "failed_files": [{"path": f.path, "error": f.error} for f in report.failed_files],
        },
        text,
    )


def _progress_bar(done: int, total: int) -> None:
    width = 30
    filled = width * done // max(total, 1)
    bar = "#" * filled + "-" * (width - filled)
    print(f"\rindexing [{bar}] {done}/{total} files", end="", file=sys.stderr, flush=True)


def cmd_search(pimem: Pimem, args: argparse.Namespace) -> None:
    scope = pimem.resolve_scope(args.cwd)
    query = SearchQuery(text=args.query, top_k=args.k)
    if args.all:
        result = pimem.search_everywhere(scope, query, on_wait=_waiting)
        _emit(args, cross_repo_to_json(result), render_cross_repo(args.query, result))
        return
    try:
        hits = pimem.search_memory(scope, query, on_wait=_waiting)
    except NoMemoryYet as empty:
        _emit(args, [], str(empty))  # not an error: an empty store has no hits
        return
    _emit(args, [hit_to_json(hit) for hit in hits], render_hits(args.query, hits))


def cmd_expand(pimem: Pimem, args: argparse.Namespace) -> None:
    scope = pimem.resolve_scope(args.cwd)
    foreign = args.project is not None and args.project != scope.scope_dir
    if foreign:
        scope = pimem.resolve_project(args.project)
    section = pimem.expand_chunk(scope, args.chunk_hash, on_wait=_waiting, read_only=foreign)
    _emit(args, section_to_json(section), render_section(section))


def cmd_compact(pimem: Pimem, args: argparse.Namespace) -> None:
    scope = pimem.resolve_scope(args.cwd)
    result = pimem.compact_memory(scope, on_wait=_waiting)
    text = result.summary or "Nothing to compact: the collection has no indexed chunks."
    _emit(args, {"collection": scope.collection, "summary": result.summary}, text)


def cmd_status(pimem: Pimem, args: argparse.Namespace) -> None:
    scope = pimem.resolve_scope(args.cwd)
    # No session here: the store's line for today, without a session's capture counters.
    sections = (
        *pimem.collect_status(scope),
        store_today_status(pimem, scope),
        DistillBudget.for_settings(pimem.settings).status(),
        pimem.settings_status(),
    )
    sections = tuple(sorted(sections, key=lambda section: section.rank))
    _emit(args, status_to_json(scope, sections), render_status(scope, sections))


def cmd_skills(pimem: Pimem, args: argparse.Namespace) -> None:
    scope = pimem.resolve_scope(args.cwd)
    if args.skills_command == "list":
        candidates = pimem.list_skill_candidates(scope)
        _emit(args, [candidate_to_json(c) for c in candidates], render_candidates(candidates))
    elif args.skills_command == "show":
        candidate = pimem.read_skill_candidate(scope, args.name)
        _emit(args, candidate_to_json(candidate), render_candidate(candidate))
    else:
        written = pimem.install_skill_candidate(scope, args.name, args.to)
        _emit(
            args,
            {"name": args.name, "installed": [str(path) for path in written]},
            render_installed(args.name, written),
        )


def cmd_maintenance(pimem: Pimem, args: argparse.Namespace) -> None:
    from pimem_core.maintenance import MaintenanceRunner

    scope = pimem.resolve_scope(args.cwd)
    runner = MaintenanceRunner(pimem, scope, budget=DistillBudget.for_settings(pimem.settings))
    reports = runner.run_due(force=args.force)
    lines = [
        f"{report.name}: {report.result}" + (f" ({report.detail})" if report.detail else "")
        for report in reports
    ]
    _emit(
        args,
        [report.to_json() for report in reports],
        "\n".join(lines) or "No maintenance tasks: no plugin provides one.",
    )


def cmd_transcript(pimem: Pimem, args: argparse.Namespace) -> None:
    request = TranscriptRequest(
        path=args.path, turn=args.turn, context=args.context, limit=args.limit
    )
    transcript = pimem.read_transcript(request)
    _emit(args, transcript_to_json(transcript), render_transcript(transcript))


def cmd_serve(pimem: Pimem, args: argparse.Namespace) -> None:
    from pimem_core.serve import serve

    serve(pimem)


def cmd_model_install(pimem: Pimem, args: argparse.Namespace) -> None:
    from pimem_core.offline_model import describe_install, install_offline_model

    report = install_offline_model(
        args.hf_home, progress=lambda line: print(f"pimem: {line}", file=sys.stderr)
    )
    _emit(args, report.to_json(), describe_install(report))


def cmd_config_use_offline_model(pimem: Pimem, args: argparse.Namespace) -> None:
    from pimem_core.memsearch_config import use_offline_model

    choice = use_offline_model(pimem.resolve_scope(args.cwd).repository_dir)
    _emit(args, choice.to_json(), choice.describe())


def cmd_snapshot(pimem: Pimem, args: argparse.Namespace) -> None:
    snapshot = pimem.build_snapshot(pimem.resolve_scope(args.cwd))
    if snapshot is None:
        print(
            "no stable snapshot: no plugin builds one (PI_MEMSEARCH_SNAPSHOT=off, or the "
            "plugin is blocked; see `pimem plugins`)",
            file=sys.stderr,
        )
        return
    sys.stdout.write(snapshot if snapshot.endswith("\n") else snapshot + "\n")
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
    lines += ["", "single-answer hooks (the plugin asked first):"]
    lines += [f"  {hook} -> {plugin or '(none)'}" for hook, plugin in answers.items()]
    print("\n".join(line.rstrip() for line in lines))


SCORE_HELP = (
    "Each hit's score is memsearch's rank fusion (RRF, k=60) of a meaning (dense) and a keyword "
    "(BM25) ranking, divided by its maximum: 1.0 means first in both rankings, above 0.5 means "
    "in both rankings' top k. It depends only on ranks: it orders the hits and does not measure "
    "relevance (the best hit of a query unrelated to every entry can still score 1.0). With "
    "memsearch's reranker configured, the score is the reranker's instead."
)


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
    if not top:
        parser.set_defaults(takes_cwd=cwd, takes_json=json_output)


def _log_to_stderr(verbosity: int) -> None:
    if verbosity <= 0:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("pimem: %(levelname)s %(name)s: %(message)s"))
    for name in ("pimem_core", "pimem_plugins"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.INFO if verbosity == 1 else logging.DEBUG)
        logger.addHandler(handler)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pimem",
        description="Persistent, shared, markdown-first memory for coding agents. "
        "--cwd, --json and -v go before or after the command.",
    )
    parser.add_argument(
        "--version", action="version", version=f"pimem {importlib.metadata.version('pimem')}"
    )
    _options(parser, cwd=True, json_output=True, top=True)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(
        name: str,
        handler: Command,
        help: str,
        *,
        project: bool = True,
        json_output: bool = True,
        epilog: str | None = None,
    ) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help, epilog=epilog)
        sub.set_defaults(handler=handler)
        _options(sub, cwd=project, json_output=json_output)
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
        "forget", cmd_forget, "remove exactly one memory entry, by day and time or by chunk hash"
    )
    forget.add_argument("--date", metavar="YYYY-MM-DD")
    forget.add_argument("--time", metavar="HH:MM")
    forget.add_argument("--chunk", metavar="HASH", help="a chunk hash from `pimem search`")

    command("index", cmd_index, "index the memory store into its collection")

    search = command(
        "search", cmd_search, "search memory (L1): the best chunks for a query", epilog=SCORE_HELP
    )
    search.add_argument("query", type=_query, metavar="QUERY", help="what to look for, in words")
    search.add_argument("-k", "--top-k", dest="k", type=_positive, default=5, metavar="N")
    search.add_argument(
        "--all",
        action="store_true",
        help="also search every project under PI_MEMSEARCH_SCAN_ROOTS (cross-repo recall)",
    )

    expand = command("expand", cmd_expand, "show the whole section behind a chunk hash (L2)")
    expand.add_argument("chunk_hash", metavar="HASH")
    expand.add_argument(
        "--project",
        type=_directory,
        metavar="DIR",
        help="the project a cross-repo hit came from, as labelled",
    )

    command("compact", cmd_compact, "condense the memory store with memsearch's LLM settings")
    command("status", cmd_status, "show the store, collection, backend and index health")

    transcript = command(
        "transcript",
        cmd_transcript,
        "show the turns of an agent's transcript around an anchored entry (L3)",
        project=False,
    )
    transcript.add_argument("path", type=Path, metavar="PATH", help="the transcript file")
    transcript.add_argument(
        "--turn", metavar="ID", help="an entry id, or a unique prefix of one (default: the end)"
    )
    transcript.add_argument(
        "--context",
        type=_non_negative,
        default=3,
        metavar="N",
        help="turns to show on each side of --turn (default 3)",
    )
    transcript.add_argument(
        "--limit",
        type=_positive,
        default=20,
        metavar="N",
        help="without --turn, how many of the last turns to show (default 20)",
    )

    command(
        "serve",
        cmd_serve,
        "serve one agent session over JSON lines on stdin and stdout (the host protocol)",
        project=False,
        json_output=False,
    )

    model = commands.add_parser("model", help="manage the offline embedding model")
    model_commands = model.add_subparsers(dest="model_command", required=True, metavar="COMMAND")
    install = model_commands.add_parser(
        "install-offline",
        help="write all-MiniLM-L6-v2 as an ONNX model (about 87 MB) that loads with no network",
    )
    install.set_defaults(handler=cmd_model_install)
    install.add_argument("--hf-home", type=Path, metavar="DIR", help="where to put the model")
    _options(install, cwd=False, json_output=True)

    config = commands.add_parser("config", help="memsearch's configuration, as pimem uses it")
    config_commands = config.add_subparsers(dest="config_command", required=True, metavar="COMMAND")
    use_offline = config_commands.add_parser(
        "use-offline-model",
        help="make memsearch embed with the offline model (its global configuration)",
        description="Set embedding.provider and embedding.model in memsearch's global "
        "configuration to the offline model, keeping every other setting.",
    )
    use_offline.set_defaults(handler=cmd_config_use_offline_model)
    _options(use_offline, cwd=True, json_output=True)

    skills = commands.add_parser(
        "skills",
        help="review and install the skill candidates drafted from memory",
        description="Skill candidates are drafts: nothing is installed until you ask.",
    )
    skills_commands = skills.add_subparsers(dest="skills_command", required=True, metavar="COMMAND")

    def skills_command(name: str, help: str) -> argparse.ArgumentParser:
        sub = skills_commands.add_parser(name, help=help, description=help)
        sub.set_defaults(handler=cmd_skills)
        _options(sub, cwd=True, json_output=True)
        return sub

    skills_command("list", "list the candidates and which are pending install")
    skills_command("show", "print one candidate's SKILL.md").add_argument("name", metavar="NAME")
    install_skill = skills_command(
        "install", "copy a candidate into a skills directory, as DIR/NAME/SKILL.md"
    )
    install_skill.add_argument("name", metavar="NAME")
    install_skill.add_argument(
        "--to",
        required=True,
        type=lambda value: Path(value).expanduser().absolute(),
        metavar="DIR",
        help="the skills directory (for pi: .pi/skills or ~/.pi/agent/skills)",
    )

    maintenance = commands.add_parser("maintenance", help="run the maintenance tasks")
    maintenance_commands = maintenance.add_subparsers(
        dest="maintenance_command", required=True, metavar="COMMAND"
    )
    run = maintenance_commands.add_parser(
        "run",
        help="run the due maintenance tasks now, with memsearch's [llm] model",
        description="Run the maintenance tasks named in PIMEM_MAINTENANCE that are due, in "
        "this process, with memsearch's [llm] model; each model call counts against "
        "PIMEM_DISTILL_BUDGET.",
    )
    run.set_defaults(handler=cmd_maintenance)
    _options(run, cwd=True, json_output=True)
    run.add_argument(
        "--force", action="store_true", help="run enabled tasks even when they are not due"
    )

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
    parser = build_parser()
    args = parser.parse_args(argv)
    for option, given, taken in (
        ("--cwd", args.cwd is not None, args.takes_cwd),
        ("--json", args.json, args.takes_json),
    ):
        if given and not taken:
            parser.error(f"{_command_name(args)} does not take {option}")
    if args.cwd is None:
        args.cwd = Path.cwd()
    _log_to_stderr(args.verbose)
    if args.handler is cmd_forget:
        by_day = args.date is not None or args.time is not None
        if by_day == (args.chunk is not None):
            parser.error("forget takes exactly one address: --chunk HASH, or --date and --time")
        if by_day and (args.date is None or args.time is None):
            parser.error("forget by day needs --date and --time together")
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


def _command_name(args: argparse.Namespace) -> str:
    sub = getattr(args, f"{args.command}_command", None)
    return f"pimem {args.command}" + (f" {sub}" if sub else "")


if __name__ == "__main__":
    sys.exit(main())
