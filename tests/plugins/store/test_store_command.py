"""The store command (PI_MEMSEARCH_STORE_CMD): ownership, failures, state-dir and memoization."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pimem_core import Pimem
from pimem_core.errors import ScopeError
from pimem_core.scope import Scope
from pimem_plugins import store_command
from pimem_plugins.memsearch.config import child_environment
from pimem_plugins.store_command import Mode, StoreCommand

from conftest import make_pimem, write_script

CENTRAL = """\
case "$1" in
  memory-dir) echo /central/my-app/memory ;;
  collection) echo ms_my_app_62c1f414 ;;
  *) exit 0 ;;
esac
"""


def with_command(script: Path, **env: str) -> Pimem:
    return make_pimem({"PI_MEMSEARCH_STORE_CMD": str(script), **env})


def answering(tmp_path: Path, **answers: str) -> Path:
    """A store command printing *answers* (mode with ``_`` for ``-``) and declining the rest."""
    cases = "".join(
        f'  {mode.replace("_", "-")}) echo "{value}" ;;\n' for mode, value in answers.items()
    )
    return write_script(tmp_path / "store-cmd", f'case "$1" in\n{cases}  *) exit 0 ;;\nesac\n')


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    path = tmp_path / "worktree"
    path.mkdir()
    (path / ".git").write_text("gitdir: /elsewhere/.git/worktrees/wt\n")
    return path


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    path = tmp_path / "plain"
    path.mkdir()
    return path


# -- TC-07 -----------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["repo", "worktree", "plain"])
def test_command_owns_store_and_collection(
    where: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    directory: Path = request.getfixturevalue(where)
    script = write_script(tmp_path / "central.sh", CENTRAL)
    scope = with_command(script).resolve_scope(directory)
    assert scope.memory_dir == Path("/central/my-app/memory")
    assert scope.scope_dir == Path("/central/my-app")
    assert scope.collection == "ms_my_app_62c1f414"
    assert scope.repository_dir == directory
    assert scope.store_command == str(script)
    assert scope.state_dir is None


def test_command_outranks_memsearch_dir(repo: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "central.sh", CENTRAL)
    shared = tmp_path / "shared" / "memsearch"
    scope = with_command(script, MEMSEARCH_DIR=str(shared)).resolve_scope(repo)
    assert scope.memory_dir == Path("/central/my-app/memory")
    assert scope.scope_dir == Path("/central/my-app")
    assert scope.collection == "ms_my_app_62c1f414"


def test_command_runs_in_the_resolved_directory(repo: Path, tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "pwd.sh",
        'case "$1" in\n'
        '  memory-dir) echo "$(pwd -P)/$1" ;;\n'
        "  collection) echo ms_here_12345678 ;;\n"
        "esac\n",
    )
    link = tmp_path / "link"
    link.symlink_to(repo / "packages" / "core")
    scope = with_command(script).resolve_scope(link)
    real = Path(os.path.realpath(repo / "packages" / "core"))
    assert scope.memory_dir == real / "memory-dir"
    assert scope.scope_dir == real


def test_command_gets_exactly_one_argument(repo: Path, tmp_path: Path) -> None:
    log = tmp_path / "argv.log"
    script = write_script(
        tmp_path / "argv.sh",
        f'echo "$# $*" >> "{log}"\n'
        'case "$1" in\n'
        "  memory-dir) echo /central/x/memory ;;\n"
        "  collection) echo ms_x_12345678 ;;\n"
        "esac\n",
    )
    with_command(script).resolve_scope(repo)
    assert log.read_text().splitlines() == ["1 memory-dir", "1 state-dir", "1 collection"]


def test_answers_are_remembered_until_the_command_changes(repo: Path, tmp_path: Path) -> None:
    log = tmp_path / "runs.log"

    def script_naming(store: str) -> Path:
        return write_script(
            tmp_path / "store.sh",
            f'echo "$1" >> "{log}"\n'
            'case "$1" in\n'
            f"  memory-dir) echo /central/{store}/memory ;;\n"
            f"  collection) echo ms_{store}_12345678 ;;\n"
            "esac\n",
        )

    pimem = with_command(script_naming("first"))
    assert pimem.resolve_scope(repo).memory_dir == Path("/central/first/memory")
    assert pimem.resolve_scope(repo).memory_dir == Path("/central/first/memory")
    assert len(log.read_text().splitlines()) == 3, "asked once per mode while unchanged"
    script = script_naming("second")
    os.utime(script, ns=(time.time_ns() + 10**9,) * 2)  # a new mtime even on a coarse clock
    # The memory service keeps one plugin manager for hours: an edited command is asked again.
    assert pimem.resolve_scope(repo).memory_dir == Path("/central/second/memory")
    assert pimem.resolve_scope(repo).collection == "ms_second_12345678"


# -- TC-08 -----------------------------------------------------------------------------------


def test_non_zero_exit_raises_with_stderr(repo: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "fail.sh", 'echo "no store for you" >&2\nexit 3\n')
    with pytest.raises(ScopeError) as caught:
        with_command(script).resolve_scope(repo)
    message = str(caught.value)
    assert "PI_MEMSEARCH_STORE_CMD" in message
    assert str(script) in message
    assert "memory-dir" in message
    assert "exited 3: no store for you" in message


def test_empty_collection_answer_raises(repo: Path, tmp_path: Path) -> None:
    script = answering(tmp_path, memory_dir="/central/my-app/memory")
    with pytest.raises(ScopeError) as caught:
        with_command(script).resolve_scope(repo)
    message = str(caught.value)
    assert "PI_MEMSEARCH_STORE_CMD" in message
    assert str(script) in message
    assert "collection" in message
    assert "printed nothing" in message


def test_empty_memory_dir_answer_raises(repo: Path, tmp_path: Path) -> None:
    script = answering(tmp_path, collection="ms_x_12345678")
    with pytest.raises(ScopeError, match="printed nothing") as caught:
        with_command(script).resolve_scope(repo)
    assert "memory-dir" in str(caught.value)


def test_relative_memory_dir_answer_raises(repo: Path, tmp_path: Path) -> None:
    script = answering(tmp_path, memory_dir="central/my-app/memory", collection="ms_x_12345678")
    with pytest.raises(ScopeError) as caught:
        with_command(script).resolve_scope(repo)
    message = str(caught.value)
    assert "PI_MEMSEARCH_STORE_CMD" in message
    assert str(script) in message
    assert "memory-dir" in message
    assert "absolute" in message
    assert '"central/my-app/memory"' in message


def test_non_existent_command_raises_failed_to_run(repo: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-script"
    with pytest.raises(ScopeError) as caught:
        with_command(missing).resolve_scope(repo)
    message = str(caught.value)
    assert "PI_MEMSEARCH_STORE_CMD" in message
    assert str(missing) in message
    assert "memory-dir" in message
    assert "failed to run" in message


def test_command_with_arguments_is_not_split(repo: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "central.sh", CENTRAL)
    with pytest.raises(ScopeError, match="failed to run"):
        with_command(Path(f"{script} --flag")).resolve_scope(repo)


def test_invalid_collection_name_raises(repo: Path, tmp_path: Path) -> None:
    script = answering(tmp_path, memory_dir="/central/x/memory", collection="my-app")
    with pytest.raises(ScopeError) as caught:
        with_command(script).resolve_scope(repo)
    message = str(caught.value)
    assert "collection" in message
    assert "'my-app'" in message


def test_collection_starting_with_a_digit_raises(repo: Path, tmp_path: Path) -> None:
    script = answering(tmp_path, memory_dir="/central/x/memory", collection="1abc")
    with pytest.raises(ScopeError, match="1abc"):
        with_command(script).resolve_scope(repo)


def test_multi_line_answer_raises(repo: Path, tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "lines.sh",
        'case "$1" in\n  memory-dir) printf "/a/memory\\n/b/memory\\n" ;;\nesac\n',
    )
    with pytest.raises(ScopeError, match="lines") as caught:
        with_command(script).resolve_scope(repo)
    assert "memory-dir" in str(caught.value)


def test_answer_is_trimmed(repo: Path, tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "padded.sh",
        'case "$1" in\n'
        '  memory-dir) printf "  /central/x/memory  \\n\\n" ;;\n'
        '  collection) printf "\\tms_x_12345678\\n" ;;\n'
        "esac\n",
    )
    scope = with_command(script).resolve_scope(repo)
    assert scope.memory_dir == Path("/central/x/memory")
    assert scope.collection == "ms_x_12345678"


def test_slow_command_times_out(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_command, "TIMEOUT_SECONDS", 1)
    script = write_script(tmp_path / "slow.sh", "exec sleep 5\n")
    with pytest.raises(ScopeError) as caught:
        with_command(script).resolve_scope(repo)
    message = str(caught.value)
    assert str(script) in message
    assert "memory-dir" in message
    assert "1 s" in message


def test_failure_does_not_fall_back_to_the_default_scope(repo: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "fail.sh", "exit 1\n")
    pimem = with_command(script)
    for _ in range(2):
        with pytest.raises(ScopeError):
            pimem.resolve_scope(repo)
    assert not (repo / ".memsearch").exists()


# -- TC-09 -----------------------------------------------------------------------------------


def test_state_dir_declined_by_succeeding_with_no_output(repo: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "central.sh", CENTRAL)
    scope = with_command(script).resolve_scope(repo)
    assert scope.state_dir is None
    assert scope.memory_dir == Path("/central/my-app/memory")
    assert scope.collection == "ms_my_app_62c1f414"
    # Outside a .memsearch tree, no state-dir and no MEMSEARCH_DIR: memsearch writes no state.
    assert scope.index_state_path is None
    env = child_environment(scope, {"MEMSEARCH_DIR": "Y", "OTHER": "1"})
    assert env["MEMSEARCH_DIR"] == "Y"
    assert env["OTHER"] == "1"


def test_declined_state_dir_leaves_an_absent_memsearch_dir_absent(
    repo: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path / "central.sh", CENTRAL)
    scope = with_command(script).resolve_scope(repo)
    assert "MEMSEARCH_DIR" not in child_environment(scope, {})


def test_state_dir_answer_is_used_and_exported(repo: Path, tmp_path: Path) -> None:
    state = tmp_path / "state" / "ms_my_app"
    script = answering(
        tmp_path,
        memory_dir="/central/my-app/memory",
        collection="ms_my_app_62c1f414",
        state_dir=str(state),
    )
    scope = with_command(script).resolve_scope(repo)
    assert scope.state_dir == state
    assert scope.index_state_path == state / ".index-state.json"
    assert child_environment(scope, {"MEMSEARCH_DIR": "Y"})["MEMSEARCH_DIR"] == str(state)


def test_state_dir_outranks_an_inherited_memsearch_dir(repo: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    script = answering(
        tmp_path, memory_dir="/central/x/memory", collection="ms_x_12345678", state_dir=str(state)
    )
    scope = with_command(script, MEMSEARCH_DIR=str(tmp_path / "y")).resolve_scope(repo)
    assert scope.index_state_path == state / ".index-state.json"


def test_relative_state_dir_answer_raises(repo: Path, tmp_path: Path) -> None:
    script = answering(
        tmp_path, memory_dir="/central/x/memory", collection="ms_x_12345678", state_dir="state"
    )
    with pytest.raises(ScopeError, match="absolute") as caught:
        with_command(script).resolve_scope(repo)
    assert "state-dir" in str(caught.value)


def test_state_dir_failing_is_an_error_not_a_decline(repo: Path, tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "strict.sh",
        'case "$1" in\n'
        "  memory-dir) echo /central/x/memory ;;\n"
        "  collection) echo ms_x_12345678 ;;\n"
        '  *) echo "unknown mode $1" >&2; exit 1 ;;\n'
        "esac\n",
    )
    with pytest.raises(ScopeError) as caught:
        with_command(script).resolve_scope(repo)
    message = str(caught.value)
    assert "state-dir" in message
    assert "exited 1: unknown mode state-dir" in message


# -- TC-10 -----------------------------------------------------------------------------------


def logging_command(tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "calls.log"
    script = write_script(
        tmp_path / "logging.sh",
        f'echo "$1" >> "{log}"\n'
        'case "$1" in\n'
        "  memory-dir) echo /central/x/memory ;;\n"
        "  collection) echo ms_x_12345678 ;;\n"
        f"  state-dir) echo {tmp_path}/state ;;\n"
        "esac\n",
    )
    return script, log


def test_scope_asks_each_mode_once_per_directory(repo: Path, tmp_path: Path) -> None:
    script, log = logging_command(tmp_path)
    pimem = with_command(script)
    for _ in range(3):
        pimem.resolve_scope(repo)
        pimem.resolve_scope(repo / ".")
    assert sorted(log.read_text().splitlines()) == ["collection", "memory-dir", "state-dir"]


@pytest.mark.parametrize("mode", ["memory-dir", "collection", "state-dir"])
def test_store_command_memoizes_each_mode(repo: Path, tmp_path: Path, mode: Mode) -> None:
    script, log = logging_command(tmp_path)
    command = StoreCommand(str(script))
    answers = {
        command.answer(mode, directory) for _ in range(3) for directory in (repo, repo / ".")
    }
    assert len(answers) == 1
    assert log.read_text().splitlines() == [mode]


def test_a_different_directory_asks_again(repo: Path, tmp_path: Path) -> None:
    script, log = logging_command(tmp_path)
    command = StoreCommand(str(script))
    command.collection(repo)
    command.collection(repo / "packages")
    assert log.read_text().splitlines() == ["collection", "collection"]


def test_failures_are_not_memoized_as_answers(repo: Path, tmp_path: Path) -> None:
    flag = tmp_path / "ready"
    script = write_script(
        tmp_path / "flaky.sh",
        f'[ -e "{flag}" ] || exit 1\n'
        'case "$1" in\n'
        "  memory-dir) echo /central/x/memory ;;\n"
        "  collection) echo ms_x_12345678 ;;\n"
        "esac\n",
    )
    pimem = with_command(script)
    with pytest.raises(ScopeError):
        pimem.resolve_scope(repo)
    flag.touch()
    assert pimem.resolve_scope(repo).collection == "ms_x_12345678"


# -- plugin activation and projects ------------------------------------------------------------


def test_plugin_is_inactive_without_the_variable() -> None:
    records = {record.name: record for record in make_pimem().pm.records}
    assert records["store-command"].status == "inactive-by-setting"


def test_plugin_is_active_with_the_variable(tmp_path: Path) -> None:
    script = write_script(tmp_path / "central.sh", CENTRAL)
    records = {record.name: record for record in with_command(script).pm.records}
    assert records["store-command"].status == "active"


def test_project_collection_is_asked_in_the_project_dir(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    script = write_script(
        tmp_path / "project.sh",
        f'echo "$1 $(pwd -P)" >> "{log}"\n'
        'case "$1" in\n  collection) echo ms_alpha_12345678 ;;\nesac\n',
    )
    project = tmp_path / "alpha"
    (project / ".memsearch" / "memory").mkdir(parents=True)
    pimem = with_command(script)
    scope = pimem.resolve_project(project)
    pimem.resolve_project(project)
    assert scope.collection == "ms_alpha_12345678"
    assert scope.memory_dir == project / ".memsearch" / "memory"
    assert scope.index_state_path == project / ".memsearch" / ".index-state.json"
    assert scope.scope_dir == project
    assert scope.store_command == str(script)
    assert log.read_text().splitlines() == [f"collection {os.path.realpath(project)}"]


def test_project_through_the_command_ignores_derivation(tmp_path: Path) -> None:
    script = answering(tmp_path, collection="ms_from_command_1")
    project = tmp_path / "store"
    (project / "memory").mkdir(parents=True)
    scope = with_command(script).resolve_project(project)
    assert scope.collection == "ms_from_command_1"
    assert scope.collection != Scope.derive_collection(project)
    assert scope.memory_dir == project / "memory"


def test_project_with_a_failing_command_raises(tmp_path: Path) -> None:
    script = write_script(tmp_path / "fail.sh", "echo broken >&2\nexit 2\n")
    project = tmp_path / "alpha"
    (project / "memory").mkdir(parents=True)
    with pytest.raises(ScopeError, match="exited 2: broken"):
        with_command(script).resolve_project(project)


def test_a_timed_out_command_takes_its_children_with_it(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by the reliability suite: only the shell was killed; its sleep lived on.
    monkeypatch.setattr(store_command, "TIMEOUT_SECONDS", 1)
    pid_file = tmp_path / "child.pid"
    script = write_script(tmp_path / "hang.sh", f"sleep 300 &\necho $! > {pid_file}\nwait\n")
    with pytest.raises(ScopeError, match="did not answer within 1 s"):
        with_command(script).resolve_scope(repo)
    child = int(pid_file.read_text())

    def state() -> str:
        try:
            return Path(f"/proc/{child}/stat").read_text().split(") ")[1][0]
        except FileNotFoundError:
            return "gone"

    deadline = time.monotonic() + 5  # a killed process takes a moment to die
    while state() not in ("Z", "X", "gone") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert state() in ("Z", "X", "gone"), f"the store command's child {child} is still running"


def test_an_answer_with_a_control_character_is_refused(repo: Path, tmp_path: Path) -> None:
    # Found by the reliability suite: a NUL reached the store path and every file operation.
    script = write_script(
        tmp_path / "nul.sh",
        'case "$1" in\n'
        "  memory-dir) printf '/central/a\\000b' ;;\n"
        "  collection) echo ms_x_12345678 ;;\n"
        "esac\n",
    )
    with pytest.raises(ScopeError, match="control characters"):
        with_command(script).resolve_scope(repo)
