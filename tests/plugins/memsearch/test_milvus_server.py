"""memsearch's ``milvus.uri`` naming a Milvus server: pimem, the memory service and the
memsearch CLI on one ``python -m milvus_lite server`` endpoint on 127.0.0.1.

The key integration flows of ``test_memsearch_integration`` run again here, unchanged, with
the memsearch configuration in HOME naming the server instead of a local database: one server
for the module, one collection per test (each test's repository has its own path).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import test_memsearch_integration as lite
from test_memsearch_integration import (
    ok,
    pimem,
    write_entries,
)

from bench.milvus_server import MilvusServer, memsearch_config, render
from pimem_core.scope import Scope
from pimem_plugins.memsearch.offline_model import OfflineModel

from conftest import CLOCK, run_cli


@pytest.fixture(scope="module")
def milvus_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MilvusServer]:
    """One ``milvus_lite server`` for the module, its data under a temporary directory."""
    with MilvusServer(tmp_path_factory.mktemp("milvus-server") / "data") as server:
        yield server


@pytest.fixture
def server_env(
    memsearch_home: Path, offline_model: OfflineModel, milvus_server: MilvusServer
) -> dict[str, str]:
    """memsearch's global configuration (as users write it) naming the server."""
    (memsearch_home / ".memsearch" / "config.toml").write_text(
        memsearch_config(milvus_server.uri, offline_model.provider, offline_model.model)
    )
    return {"HOME": str(memsearch_home), **offline_model.environment()}


def test_round_trip_on_the_server(server_env: dict[str, str], repo: Path, tmp_path: Path) -> None:
    lite.test_write_index_search_expand_forget_round_trip(server_env, repo)
    # Nothing local: no database directory where a local one would be, no lock file.
    assert not (tmp_path / "milvus.db").exists()
    assert not list(tmp_path.glob("**/LOCK"))


def test_status_names_the_server_and_an_open_client_makes_no_one_wait(
    server_env: dict[str, str], repo: Path, milvus_server: MilvusServer
) -> None:
    lite.test_status_reports_backend_store_and_health(server_env, repo)
    status = json.loads(ok(pimem(server_env, "status", "--json", "--cwd", str(repo))))
    assert status["backend"]["milvus_uri"] == milvus_server.uri
    state = json.loads((repo / ".memsearch" / ".index-state.json").read_text())
    assert state["milvus_uri"] == milvus_server.uri
    # No file lock: another process's open client (which holds a local database's lock, see
    # `test_a_search_waits_out_another_process_holding_the_database`) is nothing to wait on.
    holder = subprocess.Popen(
        [sys.executable, "-c", lite.HOLDER, milvus_server.uri, Scope.derive_collection(repo), "60"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **server_env},
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "holding"
        searched = pimem(server_env, "search", "login redirect", "--cwd", str(repo))
        indexed = pimem(server_env, "index", "--cwd", str(repo))
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    assert (searched.code, searched.stderr) == (0, "")
    assert "login redirect loop" in searched.stdout
    assert (indexed.code, indexed.stderr) == (0, "")


def test_mesh_parity_with_the_memsearch_cli_on_the_server(
    server_env: dict[str, str], repo: Path
) -> None:
    lite.test_memory_indexed_by_pimem_is_found_by_the_memsearch_cli(server_env, repo)
    other = repo.parent / "other"
    (other / ".git").mkdir(parents=True)
    lite.test_memory_indexed_by_the_memsearch_cli_is_found_by_pimem(server_env, other)


def test_the_service_serves_from_the_server(
    server_env: dict[str, str],
    service_env: dict[str, str],
    repo: Path,
    milvus_server: MilvusServer,
) -> None:
    served_env = {**service_env, **server_env}
    in_process = {**served_env, "PIMEM_SERVICE": "off"}
    session = ("--session", "s1", "--turn", "t1", "--transcript", "/home/user/s1.jsonl")
    content = "- the team moved the queue to NATS"
    written = run_cli(
        "write", "-", *session, "--cwd", str(repo), env={**served_env, "PIMEM_NOW": CLOCK},
        stdin=content,
    )  # fmt: skip
    assert (written.code, written.stderr) == (0, "")
    ok(pimem(served_env, "index", "--cwd", str(repo)))
    served = ok(pimem(served_env, "search", "which queue", "--json", "--cwd", str(repo)))
    local = ok(pimem(in_process, "search", "which queue", "--json", "--cwd", str(repo)))
    assert "NATS" in json.loads(served)[0]["content"]
    assert json.loads(served) == json.loads(local)
    status = ok(pimem(served_env, "status", "--cwd", str(repo)))
    assert "service: running" in status
    assert f"milvus_uri: {milvus_server.uri}" in status.splitlines()


def test_a_server_that_does_not_answer_is_named_not_called_damaged(
    server_env: dict[str, str], repo: Path, offline_model: OfflineModel
) -> None:
    write_entries(server_env, repo)
    uri = "http://127.0.0.1:1"
    (Path(server_env["HOME"]) / ".memsearch" / "config.toml").write_text(
        memsearch_config(uri, offline_model.provider, offline_model.model)
    )
    # pimem's ranker reads the day files: it answers with the server gone.
    assert "login redirect" in ok(pimem(server_env, "search", "login redirect", "--cwd", str(repo)))
    # memsearch's searches the collection, and says which server did not answer.
    memsearch_ranked = {**server_env, "PIMEM_RANKER": "memsearch"}
    searched = pimem(memsearch_ranked, "search", "login redirect", "--cwd", str(repo))
    assert searched.code == 1
    assert f"The Milvus server at {uri} did not answer" in searched.stderr
    assert "drop collection" not in searched.stderr
    status = ok(pimem(server_env, "status", "--cwd", str(repo)))
    assert f"The Milvus server at {uri} did not answer" in status
    assert "Redis" in (repo / ".memsearch" / "memory" / "2026-08-13.md").read_text()


def test_the_load_report_renders_a_fixed_run() -> None:
    summary = {"n": 2, "p50": 10.4, "p95": 20.6, "max": 21.0}
    results = {
        "agents": {"in-process": 1, "service": 2},
        "ops_per_agent": 10,
        "ops": 30,
        "errors": 0,
        "error_examples": [],
        "latency_ms": {
            kind: {"in-process": summary, "service": {"n": 0}, "all": summary}
            for kind in ("write", "search", "index")
        },
        "verify": {
            "written": 13,
            "once_in_files": 13,
            "in_collection": 13,
            "found_by_search": 13,
            "chunks": 14,
        },
        "lost": 0,
        "wall_s": 3.2,
    }
    lines = render(results)
    assert lines[0] == "## Several agents on one Milvus server"
    assert "| write | 10 / 21 | - | 10 / 21 | 2 |" in lines
    assert any("**Lost: 0.**" in line and "found by a search" in line for line in lines)
    assert any(line.startswith("3 agents (1 with pimem in process, 2 through") for line in lines)
