"""Cross-repo recall on real memsearch, Milvus Lite and the offline model: three projects under
one scan root (one never indexed), a foreign hit expanded by its label, and nothing written."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from bridge import Bridge

from pimem_core.scope import Scope
from pimem_core.types import Anchor, Entry
from pimem_plugins.memsearch.config import global_config_path
from pimem_plugins.memsearch.engine import MemsearchEngine
from pimem_plugins.memsearch.offline_model import OfflineModel
from pimem_plugins.memsearch.work_queue import BackendQueue

from conftest import Result, make_pimem, run_cli

MEMORIES = {
    "repo": "- the user and the agent chose Redis for the hot cache with 5 minute TTLs",
    "alpha": "- the agent fixed the login redirect loop by escaping the return URL",
    "beta": "- the team deploys the billing service with blue-green releases on Fridays",
    "gamma": "- the billing deploys moved to canary releases behind a feature flag",
}


@pytest.fixture
def mesh(
    memsearch_home: Path, offline_model: OfflineModel, repo: Path, tmp_path: Path
) -> dict[str, Path]:
    """The session's repo, and under scan root R: alpha (a git checkout), beta (a bare
    ``memory/`` store), gamma (written, never indexed). All but gamma indexed."""
    root = tmp_path / "R"
    alpha, beta, gamma = root / "alpha", root / "beta", root / "gamma"
    (alpha / ".git").mkdir(parents=True)
    beta.mkdir(parents=True)
    gamma.mkdir(parents=True)
    stores = {
        "repo": (make_pimem().resolve_scope(repo), True),
        "alpha": (make_pimem().resolve_scope(alpha), True),
        # MEMSEARCH_DIR is how a store outside the checkouts gets the bare shape.
        "beta": (make_pimem({"MEMSEARCH_DIR": str(beta)}).resolve_scope(beta), True),
        "gamma": (make_pimem().resolve_scope(gamma), False),
    }
    pimem = make_pimem({"PIMEM_DB_LINGER_MS": "0"})  # the CLI must not wait for this process
    for name, (scope, indexed) in stores.items():
        entry = Entry(
            anchor=Anchor(session=f"s-{name}", turn="t1", transcript=f"/home/user/{name}.jsonl"),
            content=MEMORIES[name],
            written_at=pimem.settings.now(),
        )
        pimem.append_entry(scope, entry)
        if indexed:
            assert pimem.index_memory(scope, "test").indexed_chunks == 1
    assert (beta / "memory").is_dir()
    assert (gamma / ".memsearch" / "memory").is_dir()
    newcomer = tmp_path / "newcomer"  # a session directory with no memory at all
    newcomer.mkdir()
    return {
        "repo": repo,
        "root": root,
        "alpha": alpha,
        "beta": beta,
        "gamma": gamma,
        "newcomer": newcomer,
    }


def environment(memsearch_home: Path, offline_model: OfflineModel, root: Path) -> dict[str, str]:
    return {
        "HOME": str(memsearch_home),
        **offline_model.environment(),
        "PI_MEMSEARCH_SCAN_ROOTS": str(root),
        "PIMEM_DB_LINGER_MS": "0",
    }


def ok(result: Result) -> str:
    assert result.code == 0, result.stderr
    return result.stdout


def files(top: Path, *ignored: Path) -> dict[str, tuple[int, int] | None]:
    """Every directory and file under *top* but *ignored*; a file with its size and change time
    (a directory's own time changes with its entries, which are listed anyway)."""
    found: dict[str, tuple[int, int] | None] = {}
    for directory, names, filenames in os.walk(top):
        for name in names + filenames:
            path = Path(directory, name)
            if any(path == skip or skip in path.parents for skip in ignored):
                continue
            status = path.lstat()
            found[str(path.relative_to(top))] = (
                None if name in names else (status.st_size, status.st_mtime_ns)
            )
    return found


def collections(database: Path) -> list[str]:
    from milvus_lite.server_manager import server_manager_instance
    from pymilvus import MilvusClient

    client = MilvusClient(uri=str(database))
    try:
        return sorted(client.list_collections())
    finally:
        client.close()
        # As memsearch does: only releasing the server frees the database's file lock.
        server_manager_instance.release_server(str(database))


@pytest.fixture
def untouched(mesh: dict[str, Path], tmp_path: Path) -> Iterator[None]:
    """Fails the test when any file or collection appeared or changed while it ran."""
    database = tmp_path / "milvus.db"
    # The database is compared by its collections; ONNX Runtime keeps its own usage log in the
    # cache, and a session keeps its snapshot in pimem's per-user state (until it shuts down).
    ignored = (database, tmp_path / "home" / ".cache", tmp_path / "home" / ".local")
    before_files, before_collections = files(tmp_path, *ignored), collections(database)
    assert Scope.derive_collection(mesh["gamma"]) not in before_collections
    yield
    assert files(tmp_path, *ignored) == before_files
    assert collections(database) == before_collections


def test_fan_out_reads_a_never_indexed_project_by_its_files_and_expands_a_foreign_hit(
    mesh: dict[str, Path],
    memsearch_home: Path,
    offline_model: OfflineModel,
    untouched: None,
) -> None:
    repo, root, beta = mesh["repo"], mesh["root"], mesh["beta"]
    env = environment(memsearch_home, offline_model, root)
    query = "how do we deploy the billing service"
    data = json.loads(
        ok(run_cli("search", query, "--all", "-k", "3", "--json", "--cwd", str(repo), env=env))
    )
    # gamma was never indexed on this machine: its day files are searched as they are, and
    # nothing is written to it or to the database (``untouched``).
    assert data["searched"] == [str(repo), str(mesh["alpha"]), str(beta), str(mesh["gamma"])]
    assert data["skipped"] == []
    assert data["collapsed"] == []
    # Relevance compares across collections: the chunk that answers comes first, from beta,
    # and the other projects' best chunks rank below it.
    assert {hit["project"] for hit in data["hits"]} <= set(data["searched"])
    assert len(data["hits"]) == 3
    assert all(hit["score_kind"] == "relevance" for hit in data["hits"])
    best = data["hits"][0]
    assert best["project"] == str(beta)
    assert best["score"] > max(hit["score"] for hit in data["hits"][1:])
    assert "blue-green" in best["content"]
    assert best["source"] == str(beta / "memory" / "2026-08-13.md")

    text = ok(run_cli("search", query, "--all", "-k", "3", "--cwd", str(repo), env=env))
    assert text.startswith(
        "3 memory chunk(s), 4 projects searched, 0 skipped, "
        "best first (score = relevance from 0 to 1, comparable across searches):\n\n"
    )
    assert re.search(
        rf"^1\. 2026-08-13 22:41 \| relevance \d\.\d\d \| "
        rf"chunk {best['chunk_hash']} \| project {re.escape(str(beta))}\n- ",
        text,
        re.MULTILINE,
    )
    assert "<!-- session:" not in text  # the anchors are expand's to show
    assert "never indexed on this machine" not in text

    # The label routes the expansion to beta's collection; the session's own has no such chunk.
    section = json.loads(
        ok(
            run_cli(
                "expand", best["chunk_hash"], "--project", best["project"], "--json",
                "--cwd", str(repo), env=env,
            )
        )
    )  # fmt: skip
    assert "blue-green" in section["content"]
    assert section["anchor"] == {
        "session": "s-beta",
        "turn": "t1",
        "transcript": "/home/user/beta.jsonl",
    }
    own = run_cli("expand", best["chunk_hash"], "--cwd", str(repo), env=env)
    assert own.code == 1
    assert f"is not in collection {Scope.derive_collection(repo)}" in own.stderr


def test_the_host_protocol_searches_all_and_expands_by_label(
    mesh: dict[str, Path],
    memsearch_home: Path,
    offline_model: OfflineModel,
    untouched: None,
) -> None:
    newcomer = mesh["newcomer"]  # no memory yet: starting its session writes nothing
    bridge = Bridge(environment(memsearch_home, offline_model, mesh["root"]))
    try:
        bridge.call("session.start", session_id="s9", cwd=str(newcomer), transcript=None)
        answer = bridge.call("memory.search", query="login redirect", scope="all", top_k=2)
        result = answer["result"]
        # The session's own project has no memory yet: searched, with nothing to find; gamma,
        # never indexed here, is searched by its day files.
        searched = [str(newcomer), str(mesh["alpha"]), str(mesh["beta"]), str(mesh["gamma"])]
        assert result["searched"] == searched
        assert result["skipped"] == []
        assert result["collapsed"] == []
        best = result["hits"][0]
        assert best["project"] == str(mesh["alpha"])
        assert len(result["hits"]) == 2
        assert result["text"].startswith(
            "2 memory chunk(s), 4 projects searched, 0 skipped, "
            "best first (score = relevance from 0 to 1, comparable across searches):"
        )
        expanded = bridge.call(
            "memory.expand", chunk_hash=best["chunk_hash"], project=best["project"]
        )
        assert "login redirect loop" in expanded["result"]["section"]["content"]
        refused = bridge.call("memory.search", query="q", scope="everywhere")
        assert refused["error"]["type"] == "request"
    finally:
        assert bridge.close() == 0


def test_a_read_only_configuration_never_bootstraps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offline_model: OfflineModel
) -> None:
    """A foreign project in a home with no memsearch configuration: the zero-config provider
    and model apply in memory, and no configuration file is written."""
    monkeypatch.setenv("HOME", str(tmp_path / "empty-home"))
    monkeypatch.setenv("PIMEM_HOME", str(offline_model.hf_home.parent))  # the model is installed
    project = tmp_path / "foreign"
    (project / ".memsearch" / "memory").mkdir(parents=True)
    scope = make_pimem().resolve_project(project)
    engine = MemsearchEngine(BackendQueue())
    embedding = engine.config(scope, bootstrap=False).embedding
    assert (embedding.provider, embedding.model) == ("onnx", "local/all-MiniLM-L6-v2")
    assert not global_config_path().exists()
    assert not (tmp_path / "empty-home").exists()
    engine.config(scope)  # the session's own reads may bootstrap, as before
    assert 'model = "local/all-MiniLM-L6-v2"' in global_config_path().read_text()
