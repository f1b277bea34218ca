"""The CLI contract: commands, JSON fields and exit codes (0 success, 1 error, 2 usage)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pimem_plugins.layout import derive_collection

from conftest import run_cli, write_script

ANCHOR = ("--session", "s1", "--turn", "t1", "--transcript", "/home/user/a.jsonl")


def test_scope_json_has_the_contract_fields(repo: Path) -> None:
    result = run_cli("scope", "--json", "--cwd", str(repo / "packages" / "core"))
    assert result.code == 0
    assert json.loads(result.stdout) == {
        "repository_dir": str(repo),
        "scope_dir": str(repo),
        "memory_dir": str(repo / ".memsearch" / "memory"),
        "collection": derive_collection(repo),
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


def test_write_json_output(repo: Path) -> None:
    result = run_cli("write", "- x", "--cwd", str(repo), "--json", *ANCHOR)
    assert json.loads(result.stdout) == {"file": str(repo / ".memsearch/memory/2026-08-13.md")}


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
    result = run_cli(
        "write", "- x", "--cwd", str(repo), "--session", "s1", "--turn", "", "--transcript", "/t"
    )
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
