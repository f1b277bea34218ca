"""Shared fixtures: an isolated environment, a git repository, and ways to run pimem."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
import warm_cli

from bench.pi_host import PI_LINES, ModelServer, PiWorld
from pimem_core import Pimem
from pimem_core.doors import service_client
from pimem_plugins.memsearch.offline_model import (
    OfflineModel,
    default_hf_home,
    install_offline_model,
)

# Every variable pimem reads; the suite starts each test without any of them.
PIMEM_VARIABLES = (
    "PI_MEMSEARCH_CAPTURE",
    "PI_MEMSEARCH_CAPTURE_MODEL",
    "PI_MEMSEARCH_SNAPSHOT",
    "PI_MEMSEARCH_AUTO_CONTEXT",
    "PI_MEMSEARCH_SEARCH_TIMEOUT_MS",
    "PI_MEMSEARCH_COMPACT_TIMEOUT_MS",
    "PI_MEMSEARCH_SCAN_ROOTS",
    "PI_MEMSEARCH_STORE_CMD",
    "MEMSEARCH_DIR",
    "PIMEM_DISABLE_PLUGINS",
    "PIMEM_STRICT_PLUGINS",
    "PIMEM_NOW",
    "PIMEM_DB_LINGER_MS",
    "PIMEM_SCRUB_SECRETS",
    "PIMEM_DISTILLER",
    "PIMEM_DISTILL_URL",
    "PIMEM_DISTILL_MODEL",
    "PIMEM_DISTILL_API_KEY",
    "PIMEM_DISTILL_TIMEOUT_MS",
    "PIMEM_DISTILL_BUDGET",
    "PIMEM_HOME",
    "PIMEM_AUTO_CONTEXT_MIN_SIMILARITY",
    "PIMEM_BIN",
    "PIMEM_MAINTENANCE",
    "PIMEM_MAINTENANCE_INTERVAL_HOURS",
    "PIMEM_RANKER",
    "PIMEM_AUTO_CONTEXT_MIN_RELEVANCE",
    "PIMEM_CATCH_UP_MS",
    "PIMEM_SERVICE",
    "PIMEM_SERVICE_IDLE_S",
    "PIMEM_USE",
)

CLOCK = "2026-08-13T22:41"
#: The repository's root: tests sit in folders that mirror the architecture, at any depth.
REPO_ROOT = Path(__file__).resolve().parents[1]
#: The folders whose tests need what ``make test-fast`` leaves out, by marker: the real pi
#: (``pi``), a memory service of their own (``service``, also any test using ``service_env``),
#: the bench's parts (``bench``).
SLOW_FOLDERS = {"adapters": "pi", "service": "service", "bench": "bench"}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--warm-cli",
        action="store_true",
        help="start the `pimem` commands of run_cli forked from a server that has imported "
        "the numeric libraries already (tests/warm_cli.py); make test-fast",
    )


def pytest_configure(config: pytest.Config) -> None:
    global WARM_CLI
    WARM_CLI = bool(config.getoption("--warm-cli", default=False))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by its folder, and a test that starts a memory service as ``service``."""
    tests = Path(__file__).parent
    for item in items:
        folders = item.path.relative_to(tests).parts[:-1]
        for folder in folders:
            if folder in SLOW_FOLDERS:
                item.add_marker(SLOW_FOLDERS[folder])
        if "service_env" in getattr(item, "fixturenames", ()):
            item.add_marker("service")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``pytest -n N`` (pytest-xdist): each test is a unit of work of its own, handed to the
    next free worker, except that the tests of a module with a module-scoped fixture (a venv, a
    Milvus server) go together to one worker, which sets it up once; those modules first."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    shared: dict[str, bool] = {}

    def shares_setup(path: str) -> bool:
        if path not in shared:
            source = (config.rootpath / path).read_text()
            shared[path] = 'scope="module"' in source
        return shared[path]

    class SharedSetupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if shares_setup(path) else nodeid

    return SharedSetupScheduling(config, log)


# Where `make model` installs the offline model ($PIMEM_HOME, else pimem's per-user data
# directory), fixed at import: tests point HOME at a directory of their own and clear PIMEM_HOME.
MODEL_HF_HOME = default_hf_home()
# The Hugging Face libraries read these once, at import: set them before anything imports them,
# so every memsearch process of the suite finds the offline model and none can reach a model hub.
os.environ["HF_HOME"] = str(MODEL_HF_HOME)
os.environ["HF_HUB_OFFLINE"] = "1"
# One BLAS thread, as pimem's memsearch engine asks (it sets this in its own environment, after
# numpy is loaded): every `pimem` child starts with it, whichever test ran first in this process.
os.environ["OPENBLAS_NUM_THREADS"] = "1"


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for name in PIMEM_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIMEM_STRICT_PLUGINS", "1")
    # The memory service is on by default; a test runs in process unless it turns it on
    # (``service_env``), so no test leaves a service behind or meets another test's.
    monkeypatch.setenv("PIMEM_SERVICE", "off")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    # The sockets pimem serves its database on, in process too: the test's own, not the user's.
    # Not under tmp_path: a socket's path holds 107 bytes at most, and under pytest-xdist
    # tmp_path is a folder deeper (popen-gwN), too deep for pimem's sockets to sit in it.
    runtime = Path(tempfile.mkdtemp(prefix="pimem-run-"))  # 0700
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    yield
    shutil.rmtree(runtime, ignore_errors=True)


class _QuickPolls:
    """The ``time`` module as pymilvus's gRPC client sees it here: its polls of half a second
    (an index being built, a flush, a compaction) look again after 10 ms."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @staticmethod
    def sleep(seconds: float) -> None:
        time.sleep(0.01 if seconds == 0.5 else seconds)


@pytest.fixture(autouse=True)
def quick_milvus_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """pymilvus waits half a second before it first asks whether an index it had built is done,
    and memsearch's collections have two: a second of waiting for every collection a test makes
    in process (Milvus Lite builds them at once). Only the polling changes."""
    from pymilvus.client import grpc_handler

    monkeypatch.setattr(grpc_handler, "time", _QuickPolls())


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A project directory that is a git root (its ``.git`` is a directory)."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "packages" / "core").mkdir(parents=True)
    return root


@attrs.frozen
class Result:
    code: int
    stdout: str
    stderr: str


def make_pimem(env: Mapping[str, str] | None = None) -> Pimem:
    """A facade over the installed plugins with *env* on top of the test environment."""
    return Pimem.from_env({**os.environ, "PIMEM_NOW": CLOCK, **(env or {})})


#: ``--warm-cli``: run_cli's commands start forked from a warm server (tests/warm_cli.py).
WARM_CLI = False


def run_cli(
    *args: str,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    cwd: Path | None = None,
) -> Result:
    """Run the real ``pimem`` command (``python -m pimem_core``) in a child process."""
    whole = {**os.environ, "PIMEM_NOW": CLOCK, **(env or {})}
    given = (stdin or "").encode()
    ran = warm_cli.run(args, env=whole, stdin=given, cwd=cwd, timeout=60) if WARM_CLI else None
    if ran is not None:
        code, stdout, stderr = ran
        return Result(code, stdout.decode(errors="replace"), stderr.decode(errors="replace"))
    done = subprocess.run(
        [sys.executable, "-m", "pimem_core", *args],
        input=given,
        capture_output=True,
        cwd=cwd,
        env=whole,
        check=False,
        timeout=60,
    )
    return Result(
        done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    )


@pytest.fixture
def pimem() -> Pimem:
    return make_pimem()


def write_script(path: Path, body: str) -> Path:
    """An executable shell script (for store commands)."""
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def make_distribution(
    root: Path,
    name: str,
    entry_points: Mapping[str, str],
    modules: Mapping[str, str],
    *,
    version: str = "1.0",
) -> Path:
    """Lay out an installed distribution (modules plus a real ``dist-info``) under *root*.

    Put *root* on ``sys.path`` (or ``PYTHONPATH``) and ``importlib.metadata`` finds it exactly
    as it finds a pip-installed plugin.
    """
    root.mkdir(parents=True, exist_ok=True)
    for module, source in modules.items():
        (root / f"{module}.py").write_text(source)
    dist_info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    )
    lines = "".join(f"{key} = {value}\n" for key, value in entry_points.items())
    (dist_info / "entry_points.txt").write_text(f"[pimem]\n{lines}")
    (dist_info / "RECORD").write_text("")
    return root


@pytest.fixture(scope="session")
def offline_model() -> OfflineModel:
    """The offline embedding model (written on first use, a few seconds; then instant).

    Its place is resolved at import, explicitly: the autouse fixture points ``HOME`` at a
    per-test directory, where pimem's defaults would write a fresh copy every time.
    """
    model = install_offline_model(MODEL_HF_HOME).model
    assert str(model.hf_home) == os.environ["HF_HOME"], "the model must be where HF_HOME points"
    return model


@pytest.fixture
def memsearch_home(
    tmp_path: Path, offline_model: OfflineModel, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """An isolated memsearch home (its own config and database) using the offline model.

    ``HOME`` points at it for this test, for in-process use and for child processes alike.
    """
    home = tmp_path / "home"
    (home / ".memsearch").mkdir(parents=True, exist_ok=True)
    (home / ".memsearch" / "config.toml").write_text(
        "[embedding]\n"
        f'provider = "{offline_model.provider}"\n'
        f'model = "{offline_model.model}"\n\n'
        "[milvus]\n"
        f'uri = "{tmp_path / "milvus.db"}"\n'
    )
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def server() -> Iterator[ModelServer]:
    """A scripted OpenAI-compatible model on 127.0.0.1 (rules set by the test)."""
    with ModelServer() as model:
        yield model


@pytest.fixture(params=sorted(PI_LINES))
def world(
    request: pytest.FixtureRequest,
    repo: Path,
    memsearch_home: Path,
    tmp_path: Path,
    server: ModelServer,
) -> PiWorld:
    """The real pi of one line (each test runs on both) in a fresh project, with memsearch
    configured in HOME and the clock fixed, against *server*."""
    return PiWorld.create(
        PI_LINES[request.param],
        repo=repo,
        agent_dir=tmp_path / "agent",
        server=server,
        base_env=dict(os.environ),
        extra_env={"PIMEM_NOW": CLOCK},
    )


def alive(pid: int) -> bool:
    """Whether *pid* runs; a zombie (killed, not reaped by its parent yet) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        waited = 0  # not this process's child
    if waited:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


@pytest.fixture
def service_env(
    tmp_path: Path, memsearch_home: Path, offline_model: OfflineModel
) -> Iterator[dict[str, str]]:
    """A child's whole environment with the service on, its runtime directory under the test's
    own ``PIMEM_HOME``; any service left running is stopped afterwards."""
    env = {
        # Whole, as a child gets it: the service's socket is named after this environment.
        **os.environ,
        "PIMEM_NOW": CLOCK,
        "HOME": str(memsearch_home),
        **offline_model.environment(),
        "PIMEM_HOME": str(tmp_path / "ph"),
        "PIMEM_SERVICE": "on",
    }
    yield env
    # Every service of the test's runtime directory, whatever environment started it.
    for running in service_client.every_service(env):
        found = service_client.probe(running.path)
        if found is not None:
            service_client.stop(found, running.path)
        if alive(running.hello.pid):
            os.kill(running.hello.pid, signal.SIGKILL)
