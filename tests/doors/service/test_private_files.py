"""What pimem keeps outside a project is its user's alone: directories 0700, files 0600,
whatever the umask and the parent's mode, and a tree an older pimem left open is tightened the
first time pimem writes under it again. A project's own files keep their modes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from another_user import needs_another_user, run_as_nobody
from bridge import Bridge
from service_helpers import wait_until
from test_service_sessions import EXCHANGE, open_session, status_of

from pimem_core import private_files
from pimem_core.doors import service_client, service_wire
from pimem_core.paths import PimemPaths
from pimem_core.private_files import open_private, private_dir, write_private
from pimem_core.runtime.budget import DistillBudget
from pimem_core.runtime.journal import CaptureJournal, Pending
from pimem_core.types import Scope
from pimem_plugins.memsearch.database_uri import keep_database_private
from pimem_plugins.memsearch.offline_model import OfflineModel

from conftest import CLOCK, alive, run_cli


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def umask() -> Iterator[None]:
    """The usual umask, for this process and the children it starts."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def old_tree(root: Path) -> list[Path]:
    """What an older pimem left in *root*: open directories and files."""
    made = [root / "read-model", root / "read-model" / "ms_x", root / "read-model" / "ms_x" / "c"]
    made[-1].parent.mkdir(parents=True)
    made[-1].write_text("every entry of every project")
    for path in made:
        path.chmod(0o755 if path.is_dir() else 0o644)
    root.chmod(0o755)
    return [root, *made]


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o277])
def test_directories_and_files_are_private_whatever_the_umask(tmp_path: Path, mask: int) -> None:
    old = os.umask(mask)
    try:
        directory = private_dir(tmp_path / "a" / "b" / "c")
        write_private(directory / "ledger.json", "{}")
        os.close(open_private(directory / "service.lock", os.O_RDWR))
    finally:
        os.umask(old)
    assert [mode(tmp_path / part) for part in ("a", "a/b", "a/b/c")] == [0o700] * 3
    assert mode(directory / "ledger.json") == 0o600
    assert mode(directory / "service.lock") == 0o600
    assert [p.name for p in directory.iterdir() if p.name.endswith(".tmp")] == []


def test_a_file_an_older_pimem_left_open_is_closed_when_opened(tmp_path: Path) -> None:
    log = tmp_path / "service.log"
    log.write_text("old")
    log.chmod(0o644)
    os.close(open_private(log, os.O_WRONLY | os.O_APPEND))
    assert mode(log) == 0o600
    assert log.read_text() == "old"


@pytest.mark.parametrize("layout", ["xdg", "pimem-home"])
def test_an_older_pimems_open_tree_is_tightened_on_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str, umask: None
) -> None:
    if layout == "xdg":
        for name in ("CACHE", "STATE", "DATA"):
            parent = tmp_path / name.lower()
            parent.mkdir(mode=0o755)
            monkeypatch.setenv(f"XDG_{name}_HOME", str(parent))
    else:
        monkeypatch.setenv("PIMEM_HOME", str(tmp_path / "pimem-home"))
    paths = PimemPaths.from_env()
    state, cache = old_tree(paths.state_dir), old_tree(paths.cache_dir)
    elsewhere = tmp_path / "not-pimems"
    elsewhere.write_text("a file of the user's")
    elsewhere.chmod(0o644)
    (paths.state_dir / "read-model" / "link").symlink_to(elsewhere)

    # Any first write under a root: here the distillation budget's, under the state root.
    DistillBudget(limit=0, path=paths.state_dir / "distill-budget.json").spend()

    assert {path: mode(path) for path in state} == {
        path: 0o700 if path.is_dir() else 0o600 for path in state
    }
    assert mode(paths.state_dir / "distill-budget.json") == 0o600
    assert mode(elsewhere) == 0o644, "a link is not followed"
    assert mode(cache[-1]) == 0o644, "each root when pimem writes under it, not all at once"
    if layout == "xdg":
        assert mode(paths.state_dir.parent) == 0o755, "the user's directories are left alone"

    write_private(paths.cache_dir / "read-model" / "ms_y" / "chunks.json", "[]")
    assert {path: mode(path) for path in cache} == {
        path: 0o700 if path.is_dir() else 0o600 for path in cache
    }


def test_a_tightened_root_is_not_walked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, umask: None
) -> None:
    monkeypatch.setenv("PIMEM_HOME", str(tmp_path / "pimem-home"))
    state = PimemPaths.from_env().state_dir
    old_tree(state)
    walks: list[Path] = []
    tighten = private_files.tighten

    def counted(tree: Path) -> None:
        walks.append(tree)
        tighten(tree)

    monkeypatch.setattr(private_files, "tighten", counted)
    for turn in ("t1", "t2", "t3"):
        CaptureJournal(state / "capture-journal", "s1").add(Pending(turn=turn, after=None))
    assert walks == [state]


def test_a_milvus_lite_database_is_private_outside_the_project_only(
    tmp_path: Path, umask: None
) -> None:
    project = tmp_path / "project"
    scope = Scope(
        repository_dir=project,
        scope_dir=project,
        memory_dir=project / ".memsearch" / "memory",
        collection="ms_project_00000000",
        index_state_path=None,
    )
    outside = tmp_path / "home" / ".memsearch" / "milvus.db"
    keep_database_private(str(outside), scope, create=True)
    assert mode(outside) == 0o700

    opened = tmp_path / "opened.db"
    (opened / "collections").mkdir(parents=True, mode=0o755)
    opened.chmod(0o755)
    keep_database_private(str(opened), scope, create=False)
    assert (mode(opened), mode(opened / "collections")) == (0o700, 0o700)
    never_made = tmp_path / "status.db"
    keep_database_private(str(never_made), scope, create=False)
    assert not never_made.exists(), "a read never makes a database"

    inside = project / ".memsearch" / "milvus.db"
    inside.mkdir(parents=True)
    inside.chmod(0o755)
    keep_database_private(str(inside), scope, create=True)
    assert mode(inside) == 0o755, "the project's files are the project's"
    keep_database_private("http://localhost:19530", scope, create=True)


# -- as another user sees it ----------------------------------------------------------------

#: Opens each path it is given as user nobody would; prints those it could open (or reach).
READER = """
import json, os, sys
reached = []
for path in json.load(sys.stdin):
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
        reached.append([path, "opened"])
    except PermissionError:
        pass
    except OSError as error:  # a socket answers ENXIO once reached
        reached.append([path, error.strerror])
print(json.dumps(reached))
"""


def read_as_nobody(paths: list[Path]) -> list[list[str]]:
    """What uid 65534, with no group of root's, can open (read a file, list a directory)."""
    reached: list[list[str]] = json.loads(
        run_as_nobody(READER, stdin=json.dumps([str(path) for path in paths]))
    )
    return reached


def made_under(roots: list[Path], before: set[Path]) -> list[Path]:
    return sorted(
        path for root in roots for path in root.rglob("*") if path not in before and root != path
    )


@pytest.fixture
def open_home(offline_model: OfflineModel, umask: None) -> Iterator[Path]:
    """A home every user may enter, under a directory every user may enter (the test's own
    directory is closed to others, which would make any check of modes below it vacuous)."""
    base = Path(tempfile.mkdtemp(prefix="pimem-private-", dir="/tmp"))
    base.chmod(0o755)
    home = base / "home"
    for directory in (".cache", ".local/state", ".local/share", ".memsearch", "runtime"):
        (home / directory).mkdir(parents=True, mode=0o755)
    (home / ".memsearch" / "config.toml").write_text(
        f'[embedding]\nprovider = "{offline_model.provider}"\nmodel = "{offline_model.model}"\n'
    )
    yield home
    shutil.rmtree(base, ignore_errors=True)


@needs_another_user
@pytest.mark.parametrize("layout", ["platformdirs", "pimem-home"])
def test_another_user_can_read_nothing_pimem_keeps_outside_the_project(
    open_home: Path, offline_model: OfflineModel, layout: str
) -> None:
    project = open_home.parent / "project"
    (project / ".git").mkdir(parents=True)
    env = {
        **os.environ,
        "PIMEM_NOW": CLOCK,
        "HOME": str(open_home),
        **offline_model.environment(),
        "PIMEM_SERVICE": "on",
        "XDG_RUNTIME_DIR": str(open_home / "runtime"),
    }
    for name in ("XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "PIMEM_HOME"):
        env.pop(name, None)
    roots = [open_home / directory for directory in (".cache", ".local", ".memsearch", "runtime")]
    if layout == "pimem-home":
        env["PIMEM_HOME"] = str(open_home / "pimem-home")
        roots.append(open_home / "pimem-home")
        roots[-1].mkdir(mode=0o755)
    before = {path for root in roots for path in root.rglob("*")}
    sessions: list[Bridge] = []
    try:
        session = ("--session", "s0", "--turn", "t0", "--transcript", str(project / "s0.jsonl"))
        note = "- the team keeps its hot cache in Redis"
        assert run_cli("write", note, *session, "--cwd", str(project), env=env).code == 0
        assert run_cli("index", "--cwd", str(project), env=env).code == 0
        found = run_cli("search", "which cache", "--cwd", str(project), env=env)
        assert "Redis" in found.stdout, found.stderr
        assert "memory service is unavailable" not in found.stderr

        bridge = open_session(sessions, env, project)
        assert bridge.call("session.settled", leaf="a1", branch=EXCHANGE)["result"]["queued"]
        wait_until(lambda: "1 captured" in status_of(bridge), "the capture")
        assert "Redis" in json.dumps(bridge.call("memory.search", query="which cache")["result"])
        during = made_under(roots, before)
        assert read_as_nobody(during) == []

        assert bridge.call("session.shutdown", wait_for_index=True)["result"]["indexed_in_time"]
        assert bridge.close() == 0
    finally:
        for bridge in sessions:
            if bridge.process.stdin is not None and not bridge.process.stdin.closed:
                bridge.close()
        stop_service(env)

    made = made_under(roots, before)
    names = {path.name for path in made + during}
    # Not vacuous: the read model, the ledger, the budget, the session's snapshot, the
    # service's files and memsearch's database are all among what was checked.
    assert {"chunks.json", "distill-budget.json", "milvus.db", "snapshots"} <= names
    assert any(path.parent.name == "index-ledger" for path in made)
    assert any(name.endswith(".log") for name in names)
    assert any(name.endswith(".sock") for name in {path.name for path in during})
    assert read_as_nobody(made) == []
    # What Milvus Lite writes in its database has the umask's modes, out of reach behind it.
    database = open_home / ".memsearch" / "milvus.db"
    assert mode(database) == 0o700
    pimems = [path for path in made if not path.is_relative_to(database)]
    assert {path: mode(path) for path in pimems} == {
        path: 0o700 if path.is_dir() else 0o600 for path in pimems
    }

    day_file = next((project / ".memsearch" / "memory").glob("????-??-??.md"))
    assert mode(day_file) == 0o644, "the project's files keep the umask's modes"
    assert mode(project / ".memsearch") == 0o755


def stop_service(env: dict[str, str]) -> None:
    path = service_wire.socket_path(env)
    found = service_client.probe(path)
    if found is not None:
        pid = found.hello.pid
        service_client.stop(found, path)
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
