"""Each assumption pimem_plugins.memsearch.compat makes about memsearch, checked on the installed
release: an upgrade that breaks one fails here, by name."""

from __future__ import annotations

import asyncio
import inspect
import os
from pathlib import Path
from typing import Any

import memsearch.config
import memsearch.core
import memsearch.scanner
import memsearch.skills
import memsearch.store
import onnxruntime
import pytest
from memsearch.embeddings.onnx import OnnxEmbedding
from milvus_lite import DataDirLockedError, MilvusLite
from milvus_lite.adapter.grpc import server as lite_server
from pymilvus import MilvusClient
from pymilvus.client.connection_manager import ConnectionManager

from pimem_plugins.memsearch import compat as memsearch_compat
from pimem_plugins.memsearch.offline_model import OfflineModel

from proc_sockets import tcp_listeners


def parameters(function: Any) -> list[str]:
    return list(inspect.signature(function).parameters)


def test_config_paths_are_module_attributes_and_are_restored(tmp_path: Path) -> None:
    before = memsearch.config.GLOBAL_CONFIG_PATH, memsearch.config.PROJECT_CONFIG_PATH
    with memsearch_compat.config_paths(tmp_path / "g.toml", tmp_path / "p.toml"):
        assert tmp_path / "g.toml" == memsearch.config.GLOBAL_CONFIG_PATH
        assert tmp_path / "p.toml" == memsearch.config.PROJECT_CONFIG_PATH
    assert before == (memsearch.config.GLOBAL_CONFIG_PATH, memsearch.config.PROJECT_CONFIG_PATH)


def test_merged_config_layers_global_then_trusted_project_keys(tmp_path: Path) -> None:
    (tmp_path / "g.toml").write_text('[embedding]\nprovider = "onnx"\nmodel = "m"\n')
    (tmp_path / "p.toml").write_text('[milvus]\nuri = "/somewhere/else.db"\n')
    config = memsearch_compat.merged_config(tmp_path / "g.toml", tmp_path / "p.toml")
    assert (config.embedding.provider, config.embedding.model) == ("onnx", "m")
    # milvus.uri is a trusted key: a project file cannot move the database.
    assert config.milvus.uri != "/somewhere/else.db"


def test_the_onnx_provider_creates_its_session_through_the_module() -> None:
    source = inspect.getsource(OnnxEmbedding.__init__)
    assert "ort.InferenceSession(" in source
    with memsearch_compat.onnx_sessions_without_spinning():
        assert onnxruntime.InferenceSession.__name__ == "quiet"
    assert onnxruntime.InferenceSession.__name__ == "InferenceSession"


def test_the_onnx_providers_arena_is_given_back_between_runs(offline_model: OfflineModel) -> None:
    files = offline_model.files()
    assert files is not None
    embedder = memsearch_compat.onnx_provider_from_files(offline_model.model, *files, batch_size=0)
    assert isinstance(embedder._session, onnxruntime.InferenceSession)
    texts = ["a long text about the cache " * 60, "short"] * 4
    before = embedder._encode(texts)
    assert memsearch_compat.release_onnx_arena(embedder)
    assert embedder._encode(texts) == before  # bit for bit
    assert not memsearch_compat.release_onnx_arena(object())


def test_the_onnx_provider_finds_its_files_through_one_static_method() -> None:
    found = inspect.getattr_static(OnnxEmbedding, "_download_model_files")
    assert isinstance(found, staticmethod)
    assert parameters(found.__func__) == ["model", "hf_hub_download", "list_repo_files"]


def test_memsearch_gets_its_provider_from_the_core_module() -> None:
    assert "get_provider(" in inspect.getsource(memsearch.core.MemSearch.__init__)
    assert callable(memsearch.core.get_provider)
    sentinel = object()
    with pytest.raises(Exception):  # noqa: B017, PT011 - any failure past the swap is fine
        memsearch_compat.memsearch_with_embedder(sentinel, paths=[], milvus_uri="")
    assert memsearch.core.get_provider is not None
    assert "lambda" not in repr(memsearch.core.get_provider)


def test_the_store_keeps_what_a_dense_search_uses() -> None:
    store = memsearch.store.MilvusStore
    for name in ("_require_collection", "_connected_client"):
        assert callable(getattr(store, name)), name
    assert "chunk_hash" in store._QUERY_FIELDS
    assert "self._collection" in inspect.getsource(store.__init__)
    assert '"embedding"' in inspect.getsource(store)


def test_pymilvus_keeps_its_shared_connections_where_they_are_forgotten(tmp_path: Path) -> None:
    manager = ConnectionManager.get_instance()
    assert isinstance(manager._registry, dict)
    assert hasattr(manager._lock, "__enter__")
    store = memsearch.store.MilvusStore(
        str(tmp_path / "milvus.db"), collection="c", dimension=4, _create_if_missing=True
    )
    opened = [m for m in manager._registry.values() if m.has_clients]
    assert opened, "an open store's connection is in the registry"
    assert all(callable(m.strategy.close) for m in opened)
    store.close()
    memsearch_compat.forget_unused_connections()
    assert not [m for m in manager._registry.values() if not m.has_clients]


def test_memsearch_indexes_each_file_through_one_method() -> None:
    init = inspect.getsource(memsearch.core.MemSearch.__init__)
    for name in ("self._paths", "self._ignore_files", "self._exclude"):
        assert name in init, name
    index_file = memsearch.core.MemSearch._index_file
    assert "force" in parameters(index_file)
    assert "self._index_file(" in inspect.getsource(memsearch.core.MemSearch)
    assert parameters(memsearch.scanner.scan_paths)[0] == "paths"


def test_the_skill_distiller_keeps_its_steps(tmp_path: Path) -> None:
    steps = memsearch_compat.distill_steps()
    assert set(steps) == {"ensure_git", "build_prompt", "parse_response", "commit"}
    assert parameters(steps["build_prompt"]) == ["ctx", "min_occurrences", "existing", "cfg"]
    assert parameters(steps["ensure_git"]) == ["root"]
    assert parameters(steps["commit"])[:2] == ["root", "message"]
    answer = '{"skills": [{"name": "Run Tests", "description": "d", "body": "b"}]}'
    assert [skill["name"] for skill in steps["parse_response"](answer)] == ["run-tests"]


def test_memsearch_reads_each_file_it_indexes_through_the_core_module() -> None:
    assert "read_utf8_text_replace(" in inspect.getsource(memsearch.core.MemSearch._index_file)
    assert "self._index_file(" in inspect.getsource(memsearch.core.MemSearch.index_file)
    read = memsearch.core.read_utf8_text_replace

    class Indexer:
        async def _index_file(self, scanned: Any, *, force: bool = False) -> int:
            return len(memsearch.core.read_utf8_text_replace(scanned))

    indexer = Indexer()
    memsearch_compat.read_markdown_through(indexer, lambda text: text + "!")
    file = Path(__file__)
    counted = asyncio.run(indexer._index_file(file))
    assert counted == len(file.read_text(encoding="utf-8")) + 1
    assert memsearch.core.read_utf8_text_replace is read


def test_milvus_lite_keeps_what_serving_it_on_a_unix_socket_uses() -> None:
    assert memsearch_compat.lite_socket_unsupported() is None
    assert parameters(lite_server._build_server)[:2] == ["db", "max_workers"]
    assert isinstance(lite_server.DEFAULT_MAX_WORKERS, int)
    assert parameters(MilvusLite.__init__)[1] == "data_dir"
    assert callable(MilvusLite.close)


def test_a_database_served_on_a_unix_socket_is_milvus_to_pymilvus_and_no_tcp_port(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    database, path = tmp_path / "milvus.db", run / "milvus.sock"
    served = memsearch_compat.LiteOnSocket(database, path)
    try:
        assert served.uri == f"unix:{path}"
        assert path.stat().st_mode & 0o777 == 0o600
        with pytest.raises(DataDirLockedError):
            MilvusLite(str(database))  # served means open: its lock is held
        client = MilvusClient(uri=served.uri)
        client.create_collection("c", dimension=4)
        client.insert("c", [{"id": 1, "vector": [0.1, 0.2, 0.3, 0.4]}])
        (hits,) = client.search("c", data=[[0.1, 0.2, 0.3, 0.4]], limit=1)
        assert hits[0]["id"] == 1
        client.close()
        assert tcp_listeners({os.getpid()}) == set()
    finally:
        served.close()
        memsearch_compat.forget_unused_connections()
    assert not path.exists()
    MilvusLite(str(database)).close()  # closed: anyone may open it again
    served.close()  # once is enough


def test_a_socket_that_cannot_be_bound_leaves_the_database_closed(tmp_path: Path) -> None:
    too_long = tmp_path / ("s" * 120)
    with pytest.raises(memsearch_compat.SocketUnusable, match="cannot listen on a Unix socket"):
        memsearch_compat.LiteOnSocket(tmp_path / "milvus.db", too_long)
    MilvusLite(str(tmp_path / "milvus.db")).close()


def test_a_milvus_lite_collection_changes_its_files_with_every_write_and_only_then(
    tmp_path: Path,
) -> None:
    uri = str(tmp_path / "milvus.db")
    state = memsearch_compat.milvus_lite_collection_state
    assert state(uri, "c") is None  # no database yet
    store = memsearch.store.MilvusStore(uri, collection="c", dimension=4, _create_if_missing=True)
    row = {"chunk_hash": "a" * 16, "embedding": [1.0, 0.0, 0.0, 0.0], "content": "alpha",
           "source": "/s.md", "heading": "", "heading_level": 0, "start_line": 1,
           "end_line": 1}  # fmt: skip
    seen = []
    try:
        seen.append(state(uri, "c"))
        store.upsert([row])
        seen.append(state(uri, "c"))  # a write reaches a file before the call returns
        store.upsert([{**row, "chunk_hash": "b" * 16, "content": "beta"}])
        seen.append(state(uri, "c"))
        store.delete_by_hashes(["a" * 16])
        seen.append(state(uri, "c"))
    finally:
        store.close()
    seen.append(state(uri, "c"))  # closing flushes what was written
    assert None not in seen
    assert len(set(seen)) == len(seen)
    reader = memsearch.store.MilvusStore(uri, collection="c", dimension=None)
    try:
        assert reader.count() == 1
        assert state(uri, "c") == seen[-1]  # opening and reading change nothing
    finally:
        reader.close()
    assert state(uri, "c") == seen[-1]
    assert state(uri, "other") is None
