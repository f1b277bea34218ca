"""The CLI contract: commands, JSON fields and exit codes (0 success, 1 error, 2 usage)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pimem_core.doors.cli import build_parser
from pimem_core.render import NO_LEGS
from pimem_core.scope import Scope

from conftest import make_distribution, run_cli, write_script

ANCHOR = ("--session", "s1", "--turn", "t1", "--transcript", "/home/user/a.jsonl")


def test_scope_json_has_the_contract_fields(repo: Path) -> None:
    result = run_cli("scope", "--json", "--cwd", str(repo / "packages" / "core"))
    assert result.code == 0
    assert json.loads(result.stdout) == {
        "repository_dir": str(repo),
        "scope_dir": str(repo),
        "memory_dir": str(repo / ".memsearch" / "memory"),
        "collection": Scope.derive_collection(repo),
        "index_state_path": str(repo / ".memsearch" / ".index-state.json"),
        "store_command": None,
        "state_dir": None,
    }


def test_scope_reports_the_store_command_and_a_state_file_that_will_never_exist(
    tmp_path: Path, repo: Path
) -> None:
    store = tmp_path / "central" / "repo"
    command = write_script(
        tmp_path / "resolver",
        f'case "$1" in memory-dir) echo {store};; collection) echo ms_central;; *) exit 0;; esac\n',
    )
    result = run_cli(
        "scope", "--json", "--cwd", str(repo), env={"PI_MEMSEARCH_STORE_CMD": str(command)}
    )
    fields = json.loads(result.stdout)
    assert fields["store_command"] == str(command)
    assert fields["index_state_path"] is None
    assert fields["memory_dir"] == str(store)


def test_scope_text_lists_every_field(repo: Path) -> None:
    lines = run_cli("scope", "--cwd", str(repo)).stdout.splitlines()
    assert [line.split(":", 1)[0] for line in lines] == [
        "repository_dir",
        "scope_dir",
        "memory_dir",
        "collection",
        "index_state_path",
        "store_command",
        "state_dir",
    ]


def test_write_reads_content_from_stdin_and_names_the_file(repo: Path) -> None:
    result = run_cli("write", "-", "--cwd", str(repo), *ANCHOR, stdin="- décidé: café au lait\n")
    file = repo / ".memsearch" / "memory" / "2026-08-13.md"
    assert result.code == 0
    assert str(file) in result.stdout
    assert file.read_text(encoding="utf-8").endswith("- décidé: café au lait\n\n")


def test_write_warns_once_when_the_text_is_in_the_command_line_and_not_for_stdin(
    repo: Path,
) -> None:
    given = run_cli("write", "- given as an argument", "--cwd", str(repo), *ANCHOR)
    assert given.code == 0, given.stderr
    assert given.stderr == (
        "pimem: warning: other local users can read a command line (ps, /proc) and this one "
        "holds the entry's text; pipe the text in instead: pimem write - --session ...\n"
    )
    piped = run_cli("write", "-", "--cwd", str(repo), *ANCHOR, stdin="- piped in\n")
    assert piped.code == 0, piped.stderr
    assert piped.stderr == ""
    day_file = (repo / ".memsearch" / "memory" / "2026-08-13.md").read_text()
    assert "- given as an argument" in day_file
    assert "- piped in" in day_file


def test_write_json_output(repo: Path) -> None:
    result = run_cli("write", "- x", "--cwd", str(repo), "--json", *ANCHOR)
    assert json.loads(result.stdout) == {
        "file": str(repo / ".memsearch/memory/2026-08-13.md"),
        "conflicted": False,
        "redacted": {},
        "notices": [],
    }


def test_write_says_how_many_secrets_of_which_kinds_it_redacted(repo: Path) -> None:
    # Built here, so that no key-shaped string is committed for secret scanners to flag.
    aws = "AKIA" + "QX7RT2WM9KLP4ZB3"
    openai = "sk-" + "proj" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z" * 2
    content = f"- the deploy key is {aws}\n- the model key is {openai}, the old one {aws}"
    result = run_cli("write", content, "--cwd", str(repo), *ANCHOR)
    assert result.code == 0, result.stderr
    said = result.stdout.splitlines()
    assert said[1] == (
        "Redacted 3 secrets before saving (1 openai-api-key, 2 aws-access-key): the entry "
        "holds [REDACTED:openai-api-key] and [REDACTED:aws-access-key] in their place, and "
        "memory keeps no copy."
    )
    assert aws not in result.stdout
    assert openai not in result.stdout
    data = json.loads(run_cli("write", f"- {aws}", "--cwd", str(repo), "--json", *ANCHOR).stdout)
    assert data["redacted"] == {"aws-access-key": 1}


def test_status_shows_what_the_store_holds_today_from_every_session(repo: Path) -> None:
    """Issue 14, item 7: entries written by other processes show in the store's line; the CLI
    has no session, so no session counters."""
    env = {"PIMEM_DISABLE_PLUGINS": "memsearch-index"}
    before = run_cli("status", "--cwd", str(repo), env=env)
    assert "today in this store (all sessions): no entries yet\n" in before.stdout
    run_cli("write", "- one", "--cwd", str(repo), *ANCHOR)
    run_cli("write", "- two", "--cwd", str(repo), *ANCHOR)
    other = ("--session", "s2", "--turn", "t9", "--transcript", "/home/user/b.jsonl")
    run_cli("write", "- three", "--cwd", str(repo), *other)
    result = run_cli("status", "--cwd", str(repo), env=env)
    assert result.code == 0
    assert "today in this store (all sessions): 3 entries from 2 sessions\n" in result.stdout
    assert "capture" not in result.stdout
    data = json.loads(run_cli("status", "--cwd", str(repo), "--json", env=env).stdout)
    assert data["store-today"] == {
        "date": "2026-08-13",
        "of": "all sessions",
        "entries": 3,
        "sessions": 2,
        "markers": 0,
    }
    assert "capture" not in data


def test_forget_prints_the_removed_markdown(repo: Path) -> None:
    run_cli("write", "- to be forgotten", "--cwd", str(repo), *ANCHOR)
    result = run_cli("forget", "--cwd", str(repo), "--date", "2026-08-13", "--time", "22:41")
    assert result.code == 0
    assert (
        "### 22:41\n<!-- session:s1 turn:t1 transcript:/home/user/a.jsonl -->\n- to be forgotten"
        in (result.stdout)
    )
    assert "deleted" in result.stdout
    assert not (repo / ".memsearch/memory/2026-08-13.md").exists()


@pytest.mark.parametrize(
    "args",
    [
        ("write", "- x", "--session", "s1"),  # missing --turn and --transcript
        ("forget", "--date", "2026-08-13"),  # missing --time
        ("scope", "--cwd", "/definitely/not/a/directory"),
        ("nonsense",),
        (),
    ],
)
def test_usage_errors_exit_2(args: tuple[str, ...]) -> None:
    assert run_cli(*args).code == 2


def test_user_errors_exit_1_with_one_line_and_no_traceback(repo: Path) -> None:
    no_turn = ("--session", "s1", "--turn", "", "--transcript", "/t")
    result = run_cli("write", "-", "--cwd", str(repo), *no_turn, stdin="- x")
    assert result.code == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("pimem: error: ")
    assert "Traceback" not in result.stderr
    assert not (repo / ".memsearch").exists()


def test_a_failing_store_command_is_a_user_error(tmp_path: Path, repo: Path) -> None:
    command = write_script(tmp_path / "resolver", 'echo "no store for you" >&2; exit 3\n')
    result = run_cli("scope", "--cwd", str(repo), env={"PI_MEMSEARCH_STORE_CMD": str(command)})
    assert result.code == 1
    assert "PI_MEMSEARCH_STORE_CMD" in result.stderr
    assert "exited 3: no store for you" in result.stderr
    assert result.stderr.count("\n") == 1


def test_version() -> None:
    result = run_cli("--version")
    assert result.code == 0
    assert result.stdout.startswith("pimem ")


def test_non_utf8_terminal_does_not_crash_output(repo: Path) -> None:
    run_cli("write", "- naïve ☃ entry", "--cwd", str(repo), *ANCHOR)
    result = run_cli("snapshot", "--cwd", str(repo), env={"PYTHONIOENCODING": "latin-1"})
    assert result.code == 0


# -- a store with no memory yet (no embedder needed: nothing is searched) ----------------------


def test_search_in_a_store_with_no_memory_says_so_and_finds_nothing(repo: Path) -> None:
    memory_dir = repo / ".memsearch" / "memory"
    result = run_cli("search", "ledger database", "--cwd", str(repo))
    assert result.code == 0
    assert result.stdout == f"no memory yet in {memory_dir}; write or capture something first\n"
    assert run_cli("search", "ledger", "--cwd", str(repo), "--json").stdout.strip() == "[]"
    memory_dir.mkdir(parents=True)  # an empty memory directory holds no memory either
    (memory_dir / ".hidden.md").write_text("- memsearch skips hidden files\n")
    result = run_cli("search", "ledger", "--cwd", str(repo))
    assert (result.code, result.stdout) == (
        0,
        f"no memory yet in {memory_dir}; write or capture something first\n",
    )
    assert "memsearch index" not in result.stdout + result.stderr


def test_index_of_a_store_with_no_memory_says_so_and_creates_nothing(repo: Path) -> None:
    result = run_cli("index", "--cwd", str(repo))
    assert result.code == 0
    memory_dir = repo / ".memsearch" / "memory"
    assert result.stdout == (
        f"no memory yet in {memory_dir}; nothing to index: write or capture something first\n"
    )
    assert not (repo / ".memsearch").exists()
    memory_dir.mkdir(parents=True)
    again = run_cli("index", "--cwd", str(repo), "--json")
    assert json.loads(again.stdout)["total_files"] == 0
    assert sorted(path.name for path in (repo / ".memsearch").iterdir()) == ["memory"]


def test_expand_in_a_store_with_no_memory_is_an_error_that_says_why(repo: Path) -> None:
    result = run_cli("expand", "0123456789abcdef", "--cwd", str(repo))
    assert result.code == 1
    memory_dir = repo / ".memsearch" / "memory"
    assert result.stderr == (
        f"pimem: error: no memory yet in {memory_dir}; write or capture something first\n"
    )


# -- the query and its score --------------------------------------------------------------------


@pytest.mark.parametrize("query", ["", " ", "\t\n  "])
def test_an_empty_or_blank_query_is_a_usage_error(repo: Path, query: str) -> None:
    result = run_cli("search", query, "--cwd", str(repo))
    assert result.code == 2
    assert "argument QUERY: must hold at least one word" in result.stderr
    assert run_cli("search", query, "--all", "--cwd", str(repo)).code == 2


def test_search_help_says_what_the_score_is() -> None:
    help_text = " ".join(run_cli("search", "--help").stdout.split())
    assert "rank fusion (RRF, k=60)" in help_text
    assert "does not measure relevance" in help_text


# -- search --explain: each leg's rank and score -------------------------------------------------

# Two indexes, installed as a distribution: the kit's, indexed afresh by every process (it keeps
# nothing on disk), and one that reports each retriever's rank and score as pimem's ranker does.
SEARCH_INDEXES = """
import attrs
from pimem_core import hookimpl
from pimem_core.testing import InMemoryIndex
from pimem_core.types import LegScore
from pimem_core.scope import Scope


class BareIndex(InMemoryIndex):
    def search(self, query, call):
        self.index("search", (), call)
        return super().search(query, call)


class LegsIndex(BareIndex):
    def search(self, query, call):
        legs = (
            LegScore(name="dense", rank=1, score=0.5),
            LegScore(name="lexical", rank=None, score=None),
        )
        return tuple(
            attrs.evolve(hit, score_kind="relevance", legs=legs)
            for hit in super().search(query, call)
        )


class Bare:
    @hookimpl(tryfirst=True)
    def pimem_open_index(self, scope):
        return BareIndex(scope)


class Legs:
    @hookimpl(tryfirst=True)
    def pimem_open_index(self, scope):
        return LegsIndex(scope)
"""
SEARCH_ENTRY = (
    "\n## Session 22:41\n\n### 22:41\n"
    "<!-- session:s1 turn:t1 transcript:/home/user/.pi/agent/sessions/s1.jsonl -->\n"
    "- the team chose Redis for the hot cache\n\n"
)


def search_indexes(tmp_path: Path, repo: Path, index: str) -> dict[str, str]:
    """The environment of a CLI whose index is *index* (``legs`` or ``bare``), over a store
    with one entry."""
    module = "pimem_search_indexes"
    site = make_distribution(
        tmp_path / "site",
        "pimem-search-indexes",
        {"legs": f"{module}:Legs", "bare": f"{module}:Bare"},
        {module: SEARCH_INDEXES},
    )
    day = repo / ".memsearch" / "memory" / "2026-08-13.md"
    day.parent.mkdir(parents=True)
    day.write_text(SEARCH_ENTRY)
    other = "bare" if index == "legs" else "legs"
    return {"PYTHONPATH": str(site), "PIMEM_DISABLE_PLUGINS": f"memsearch-index,{other}"}


def test_search_explain_shows_each_leg_and_the_json_keeps_them(tmp_path: Path, repo: Path) -> None:
    env = search_indexes(tmp_path, repo, "legs")
    cwd = ("--cwd", str(repo))
    (data,) = json.loads(run_cli("search", "redis cache", "--json", *cwd, env=env).stdout)
    assert data["content"] == SEARCH_ENTRY.strip().split("\n", 2)[2]  # the anchor included
    assert data["legs"] == [
        {"name": "dense", "rank": 1, "score": 0.5},
        {"name": "lexical", "rank": None, "score": None},
    ]
    explained = run_cli("search", "redis cache", "--explain", *cwd, env=env)
    assert explained.code == 0, explained.stderr
    assert explained.stdout == (
        "1 memory chunk(s), best first (score = relevance from 0 to 1, comparable across "
        "searches):\n\n"
        f"1. 2026-08-13 22:41 | relevance 1.00 | chunk {data['chunk_hash']}\n"
        "   dense: rank 1, score 0.500\n"
        "   lexical: not among its candidates\n"
        "- the team chose Redis for the hot cache\n"
    )
    plain = run_cli("search", "redis cache", *cwd, env=env).stdout
    assert plain == explained.stdout.replace(
        "   dense: rank 1, score 0.500\n   lexical: not among its candidates\n", ""
    )
    # --explain changes only the text: the JSON carries the legs either way.
    with_json = run_cli("search", "redis cache", "--explain", "--json", *cwd, env=env)
    assert (with_json.code, json.loads(with_json.stdout)) == (0, [data])


def test_search_explain_says_once_that_the_ranker_reports_no_legs(
    tmp_path: Path, repo: Path
) -> None:
    env = search_indexes(tmp_path, repo, "bare")
    text = run_cli("search", "redis cache", "--explain", "--cwd", str(repo), env=env).stdout
    assert text.splitlines()[:3] == [
        "1 memory chunk(s), best first (score = similarity to the query):",
        NO_LEGS,
        "",
    ]
    assert text.count(NO_LEGS) == 1


def test_search_help_offers_explain() -> None:
    help_text = " ".join(run_cli("search", "--help").stdout.split())
    assert "--explain" in help_text
    assert "one line per retriever (leg)" in help_text


# -- options before or after the command ---------------------------------------------------------


def test_cwd_json_and_verbose_go_before_or_after_the_command(tmp_path: Path, repo: Path) -> None:
    expected = run_cli("scope", "--json", "--cwd", str(repo)).stdout
    assert json.loads(expected)["scope_dir"] == str(repo)
    for args in (
        ("--cwd", str(repo), "--json", "scope"),
        ("--json", "scope", "--cwd", str(repo)),
        ("-v", "--cwd", str(repo), "scope", "--json"),
        ("--cwd", str(repo), "scope", "--json", "--verbose"),
    ):
        result = run_cli(*args)
        assert (result.code, result.stdout) == (0, expected), args
    # Given on both sides, the value after the command wins.
    other = tmp_path / "other"
    other.mkdir()
    both = run_cli("--cwd", str(other), "scope", "--cwd", str(repo), "--json")
    assert json.loads(both.stdout)["scope_dir"] == str(repo)
    assert run_cli("--cwd", str(repo), "skills", "list", "--json").code == 0


def _leaf_parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        yield path, parser
    for action in subparsers:
        for name, sub in action.choices.items():
            yield from _leaf_parsers(sub, (*path, name))


def test_every_command_takes_the_shared_options_where_it_has_them() -> None:
    """A command added with its own --cwd or --json would take a value given before it back to
    its default: every command declares the shared options through one helper."""
    from pimem_plugins.memsearch.tools import COMMANDS as MEMSEARCH_COMMANDS

    leaves = dict(_leaf_parsers(build_parser(added=MEMSEARCH_COMMANDS)))
    assert ("config", "use-offline-model") in leaves
    for path, parser in leaves.items():
        options = {o for action in parser._actions for o in action.option_strings}
        assert {"-v", "--verbose"} <= options, path
        assert parser.get_default("takes_cwd") == ("--cwd" in options), path
        assert parser.get_default("takes_json") == ("--json" in options), path
        for action in parser._actions:
            if {"--cwd", "--json", "--verbose"} & set(action.option_strings):
                assert action.default is argparse.SUPPRESS, (path, action.option_strings)


def test_a_directory_that_does_not_exist_is_named_before_the_command_too() -> None:
    result = run_cli("--cwd", "/definitely/not/a/directory", "scope")
    assert result.code == 2
    assert "/definitely/not/a/directory is not a directory" in result.stderr
    assert "invalid choice" not in result.stderr


def test_an_option_the_command_does_not_take_is_a_usage_error(repo: Path) -> None:
    result = run_cli("--json", "snapshot", "--cwd", str(repo))
    assert result.code == 2
    assert "pimem snapshot does not take --json" in result.stderr
    assert run_cli("--cwd", str(repo), "plugins").code == 2


def test_verbose_logs_to_stderr_and_leaves_stdout_alone(repo: Path) -> None:
    quiet = run_cli("scope", "--cwd", str(repo))
    info = run_cli("-v", "scope", "--cwd", str(repo))
    debug = run_cli("scope", "--cwd", str(repo), "-vv")
    assert quiet.stderr == ""
    assert info.stdout == debug.stdout == quiet.stdout
    assert "pimem: INFO pimem_core.api: scope of " in info.stderr
    assert "DEBUG" not in info.stderr
    assert "pimem: DEBUG pimem_core.manager: plugin scope-default: active" in debug.stderr


# -- one name for one thing --------------------------------------------------------------------


def test_scope_text_says_none_in_words(repo: Path) -> None:
    lines = run_cli("scope", "--cwd", str(repo)).stdout.splitlines()
    assert "store_command: (none)" in lines
    assert "state_dir: (none)" in lines
    assert not any(line.endswith("None") for line in lines)


def test_snapshot_ends_with_a_newline(repo: Path) -> None:
    empty = run_cli("snapshot", "--cwd", str(repo))
    run_cli("write", "- a fact", "--cwd", str(repo), *ANCHOR)
    written = run_cli("snapshot", "--cwd", str(repo))
    for result in (empty, written):
        assert result.code == 0
        assert result.stdout.endswith("\n")
        assert not result.stdout.endswith("\n\n")
    assert "- a fact\n" in written.stdout


def test_a_reader_that_stops_early_gets_no_traceback() -> None:
    """``pimem plugins | head -1``: the reader closes the pipe before pimem has written."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pimem_core", "plugins"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    process.stdout.close()
    with process.stderr:
        stderr = process.stderr.read().decode()
    assert process.wait(timeout=60) == 0
    assert "Traceback" not in stderr


def test_status_leads_with_how_memory_is_doing_and_ends_with_its_setup(repo: Path) -> None:
    """What a reader sees first (pi's TUI shows the start of a tool's answer) is health: the
    store's day, the index, auto-context, what memory was used for today; then the scope
    lines, then how memory is set up, the plugins' settings last."""
    result = run_cli("status", "--cwd", str(repo))
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    scope_at = lines.index(f"scope: {repo}")
    health, setup = lines[:scope_at], lines[scope_at:]
    assert health[0] == "today in this store (all sessions): no entries yet"
    assert [line.split(":", 1)[0] for line in health[1:]] == [
        "index",
        "indexed chunks",
        "auto-context",
        "usage today",
    ]
    assert setup[:3] == [
        f"scope: {repo}",
        f"store: {repo / '.memsearch' / 'memory'}",
        setup[2],
    ]
    assert setup[2].startswith("collection: ")
    for first_words in ("backend: available", "index state: ", "ranker: ", "git: "):
        assert any(line.startswith(first_words) for line in setup), first_words
    settings_at = setup.index("plugin settings:")
    assert setup[settings_at + 1 :], "the plugins' settings are listed"
    assert all(line.startswith("  ") for line in setup[settings_at + 1 :]), "and come last"
