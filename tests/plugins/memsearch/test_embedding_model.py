"""Where the embedding model comes from: on disk, from the hub, or a one-line refusal at once."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import constants

from pimem_core import Pimem
from pimem_core.types import Scope
from pimem_plugins.memsearch import embedding_model
from pimem_plugins.memsearch.embedding_model import (
    EmbeddingModelMissing,
    check_model,
    load_embedder,
)
from pimem_plugins.memsearch.engine import MemsearchEngine
from pimem_plugins.memsearch.offline_model import MODEL_ID, OfflineModel
from pimem_plugins.memsearch.work_queue import BackendQueue

from conftest import make_pimem

OTHER = "gpahal/bge-m3-onnx-int8"


@pytest.fixture
def listening() -> Iterator[int]:
    """A port that accepts connections: a model hub that can be reached."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


def closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as server:
        return int(server.getsockname()[1])


@pytest.fixture
def online_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite runs with HF_HUB_OFFLINE=1; these tests set the hub's state themselves."""
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


@pytest.fixture
def empty_hf_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A Hugging Face cache with no model in it (the suite's holds the offline model)."""
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))


@pytest.mark.usefixtures("empty_hf_cache")
def test_the_offline_model_missing_names_the_command_that_installs_it() -> None:
    check = check_model("onnx", MODEL_ID, configured=True, ask_hub=True)
    assert check.location is None
    assert check.problem == "not installed on this machine: run `pimem model install-offline`"
    with pytest.raises(EmbeddingModelMissing) as caught:
        load_embedder("onnx", MODEL_ID, configured=True, options={})
    assert str(caught.value) == (
        "the embedding model local/all-MiniLM-L6-v2 is not installed on this machine: "
        "run `pimem model install-offline`"
    )


@pytest.mark.usefixtures("online_hub", "empty_hf_cache")
def test_a_hub_model_with_no_reachable_hub_fails_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    unconfigured = check_model("onnx", "", configured=False, ask_hub=True)
    assert unconfigured.model == OTHER  # memsearch's default for onnx
    assert unconfigured.problem is not None
    assert unconfigured.problem.startswith("not on this machine, and the model hub cannot be")
    assert unconfigured.problem.endswith("for a model that needs no network, run "
                                         "`pimem model install-offline`")  # fmt: skip
    configured = check_model("onnx", OTHER, configured=True, ask_hub=True)
    assert configured.problem is not None
    assert configured.problem.endswith(
        "run `pimem model install-offline`, then `pimem config use-offline-model`"
    )


@pytest.mark.usefixtures("online_hub", "empty_hf_cache")
def test_a_hub_model_with_a_reachable_hub_is_left_to_memsearchs_download(
    monkeypatch: pytest.MonkeyPatch, listening: int
) -> None:
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{listening}")
    check = check_model("onnx", OTHER, configured=True, ask_hub=True)
    assert check.problem is None
    assert check.downloads
    assert "memsearch downloads it on first use" in check.describe()


@pytest.mark.usefixtures("empty_hf_cache")
def test_status_asks_no_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse() -> str | None:
        raise AssertionError("status must not ask the model hub")

    monkeypatch.setattr(embedding_model, "hub_unreachable", refuse)
    check = check_model("onnx", OTHER, configured=False, ask_hub=False)
    assert check.downloads
    assert check.problem is None


def test_service_providers_are_memsearchs_business() -> None:
    check = check_model("openai", "", configured=True, ask_hub=True)
    assert check.problem is None
    assert check.describe() == "text-embedding-3-small (provided by openai)"


@pytest.mark.usefixtures("empty_hf_cache")
def test_the_offline_model_loads_from_pimems_directory_with_no_variable(
    offline_model: OfflineModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No Hugging Face cache holds it: only pimem's data directory ($PIMEM_HOME/hf-home).
    monkeypatch.setenv("PIMEM_HOME", str(offline_model.hf_home.parent))
    check = check_model("onnx", MODEL_ID, configured=True, ask_hub=True)
    assert check.location is not None
    assert check.location.is_relative_to(offline_model.hf_home)
    embedder = load_embedder("onnx", MODEL_ID, configured=True, options={})
    assert embedder.model_name == MODEL_ID
    assert embedder.dimension == 384


def test_status_loads_no_embedder(memsearch_home: Path, repo: Path) -> None:
    pimem: Pimem = make_pimem()
    scope: Scope = pimem.resolve_scope(repo)
    engine = MemsearchEngine(BackendQueue())
    assert engine.reads.count(scope) is None
    described = engine.describe(scope)
    assert described["model"].startswith("local/all-MiniLM-L6-v2 (on this machine: ")
    assert engine.embedders.loaded == {}
