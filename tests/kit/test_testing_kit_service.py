"""The test kit through a real memory service: ``run_pimem(..., service=True)`` hands its
commands to one, and ``ask_pimem_serve``'s ``pimem serve`` relays to one; each in a runtime
directory of the test's own, where the service is stopped and the directory removed at the end.

The index is the docs' example (plugin-hooks.md), installed as a real distribution.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_example_index import FIRST, SECOND, install_example

from pimem_core.doors import service_client
from pimem_core.testing import InMemoryIndexPlugin, RunPimem, ask_pimem_serve, read_hits

from conftest import CLOCK, REPO_ROOT, alive

ROOT = REPO_ROOT
HOOK_DOCS = (ROOT / "docs" / "plugin-hooks.md").read_text()

ANCHOR = ("--session", "s1", "--transcript", "/t/s1.jsonl")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git root that opted in to the docs' example index."""
    directory = tmp_path / "project"
    (directory / ".git").mkdir(parents=True)
    (directory / ".keyword-index").touch()
    return directory


def test_run_pimem_through_the_service_reads_the_example_index_writes(
    run_pimem: RunPimem, tmp_path: Path, project: Path
) -> None:
    env = {"PIMEM_NOW": CLOCK, **install_example(tmp_path / "site")}

    def write(content: str, turn: str) -> None:
        written = run_pimem(
            "write", "-", *ANCHOR, "--turn", turn, env=env, cwd=project, stdin=content,
            service=True,
        )  # fmt: skip
        assert written.exit_code == 0, written.stderr

    def found(query: str) -> list[str]:
        result = run_pimem("search", query, env=env, cwd=project, service=True)
        assert result.exit_code == 0, result.stderr
        return [hit.content for hit in read_hits(result.stdout)]

    write(FIRST, "t1")
    assert found("PostgreSQL ledger") == [FIRST]
    write(SECOND, "t2")
    assert found("redis cache") == [SECOND]
    status = run_pimem("status", env=env, cwd=project, service=True)
    assert "backend: keyword index (2 chunks in memory)" in status.stdout
    # Answered by the service, not in process: it says so itself.
    assert "\nservice: running, pid " in status.stdout
    (running,) = service_client.every_service()
    assert running.path.parent == Path(os.environ["XDG_RUNTIME_DIR"]) / "pimem"


def test_run_pimem_through_the_service_loads_only_installed_plugins(run_pimem: RunPimem) -> None:
    with pytest.raises(ValueError, match="installed plugins, through their entry points"):
        run_pimem("search", "node", plugins=[InMemoryIndexPlugin()], service=True)


def test_a_command_the_service_did_not_answer_fails_the_test(
    run_pimem: RunPimem, project: Path
) -> None:
    # A service that cannot start (a setting it refuses): the thin client runs the command in
    # process, which a test through the service must not take for the service's answer.
    with pytest.raises(AssertionError, match="was not answered by the memory service") as failed:
        run_pimem("search", "node", env={"PIMEM_RANKER": "nobody"}, cwd=project, service=True)
    assert "the service's log" in str(failed.value)


SERVICE_TEST = """
import json
import os
from pathlib import Path

from pimem_core.doors import service_client


def test_through_the_service(run_pimem, tmp_path):
    project = tmp_path / "p"
    (project / ".git").mkdir(parents=True)
    written = run_pimem(
        "write", "-", "--session", "s1", "--turn", "t1", "--transcript", "/t/s1.jsonl",
        cwd=project, stdin="- kept", service=True,
    )
    assert written.exit_code == 0, written.stderr
    (running,) = service_client.every_service()
    seen = {"pid": running.hello.pid, "runtime": os.environ["XDG_RUNTIME_DIR"]}
    Path(os.environ["SEEN"]).write_text(json.dumps(seen))
"""


def test_run_pimem_stops_its_service_and_removes_its_runtime_directory(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_service.py").write_text(SERVICE_TEST)
    seen = tmp_path / "seen.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "."],
        capture_output=True,
        text=True,
        cwd=suite,
        env={**os.environ, "SEEN": str(seen)},
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    found = json.loads(seen.read_text())
    assert not alive(found["pid"]), "the test's memory service outlived it"
    assert not Path(found["runtime"]).exists(), "the test's runtime directory is still there"


@pytest.fixture
def temporary_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The temporary directory the kit makes runtime directories in, for this test alone
    (short: a socket's path must stay under 108 bytes)."""
    directory = Path(tempfile.mkdtemp(prefix="kit-"))
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    yield directory
    directory.rmdir()  # empty, or the test failed to clean up: then this fails too


def test_ask_pimem_serve_relays_to_a_service_of_its_own_and_stops_it(
    tmp_path: Path, project: Path, temporary_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stopped: list[service_client.Running] = []
    every_service = service_client.every_service

    def seen(environ: dict[str, str] | None = None) -> list[service_client.Running]:
        found = every_service(environ)
        stopped.extend(found)
        return found

    # What the kit finds to stop at the end of the call.
    monkeypatch.setattr(service_client, "every_service", seen)
    users = Path(os.environ["XDG_RUNTIME_DIR"])  # the runtime directory the test was given
    env = {
        **os.environ,
        **install_example(tmp_path / "site"),
        "PIMEM_NOW": CLOCK,
        "PIMEM_SERVICE": "on",
    }
    (project / ".memsearch" / "memory").mkdir(parents=True)
    (project / ".memsearch" / "memory" / "2026-08-13.md").write_text(
        f"## Session 22:00\n\n### 22:40\n<!-- session:s1 turn:t1 transcript:/t/s1.jsonl -->\n{FIRST}\n"
    )
    requests = [
        {"id": 1, "method": "session.start", "params": {
            "session_id": "s2", "cwd": str(project), "transcript": str(tmp_path / "s2.jsonl")}},
        {"id": 2, "method": "memory.search", "params": {"query": "PostgreSQL ledger"}},
        {"id": 3, "method": "session.shutdown", "params": {}},
    ]  # fmt: skip
    answers = ask_pimem_serve(requests, env=env, cwd=project)
    assert FIRST in answers[2]["result"]["text"]
    (service,) = {(running.hello.pid, running.path) for running in stopped}
    pid, socket = service
    assert not alive(pid), "the call's memory service outlived it"
    assert socket.is_relative_to(temporary_dir), socket
    assert not (users / "pimem").exists(), "a service was started in the test's runtime dir"
    assert list(temporary_dir.iterdir()) == [], "the call's runtime directory is still there"


def docs_test_through_the_service() -> str:
    """The test plugin-hooks.md shows under "Testing through the service"."""
    section = HOOK_DOCS.split("### Testing through the service\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```py\n(.*?)```", section, re.DOTALL)
    return str(block)


def test_the_docs_test_through_the_service_passes_both_ways(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_keyword_index.py").write_text(docs_test_through_the_service())
    env = {**os.environ, **install_example(tmp_path / "site")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error", "."],
        capture_output=True,
        text=True,
        cwd=suite,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout, done.stdout
