"""The offline embedding model: built from PyPI packages only, loaded by memsearch with no hub."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pimem_core import offline_model as om
from pimem_core.errors import PimemError
from pimem_core.offline_model import (
    MODEL_ID,
    OfflineModel,
    default_build_dir,
    default_hf_home,
    install_offline_model,
    is_installed,
    repo_dir,
)

from conftest import pimem_home

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
    env = {"PIMEM_HOME": str(tmp_path)}
    assert default_hf_home(env) == tmp_path / "hf-home"
    assert default_build_dir(env) == tmp_path / "cache" / "model-build"
    # Without it: pimem's per-user directories (HOME is a per-test directory here).
    assert default_hf_home({}).parts[-2:] == ("pimem", "hf-home")
    assert default_build_dir({}).parts[-2:] == ("pimem", "model-build")


def test_settings_for_memsearch(offline_model: OfflineModel) -> None:
    assert offline_model.to_json() == {
        "hf_home": str(pimem_home() / "hf-home"),
        "provider": "onnx",
        "model": "local/all-MiniLM-L6-v2",
    }
    assert offline_model.environment()["HF_HUB_OFFLINE"] == "1"


def test_second_install_is_immediate_and_builds_nothing(offline_model: OfflineModel) -> None:
    marker = repo_dir(offline_model.hf_home) / om.MARKER
    before = marker.stat().st_mtime_ns
    said: list[str] = []
    started = time.monotonic()
    again = install_offline_model(offline_model.hf_home, progress=said.append)
    assert time.monotonic() - started < 1.0
    assert again == offline_model
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


def test_memsearch_cli_indexes_and_searches_with_no_hub(
    offline_model: OfflineModel, tmp_path: Path
) -> None:
    home = Path(os.environ["HOME"])  # the per-test HOME, where memsearch reads its config
    (home / ".memsearch").mkdir(parents=True)
    (home / ".memsearch" / "config.toml").write_text(
        f'[embedding]\nprovider = "{offline_model.provider}"\nmodel = "{offline_model.model}"\n'
        f'[milvus]\nuri = "{tmp_path / "milvus.db"}"\n'
    )
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
    env = offline_env(offline_model)

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


def test_half_built_snapshot_is_rebuilt(offline_model: OfflineModel, tmp_path: Path) -> None:
    # A copy, so the shared model stays intact whatever happens here.
    hf_home = tmp_path / "hf-home"
    shutil.copytree(repo_dir(offline_model.hf_home), repo_dir(hf_home))
    (repo_dir(hf_home) / om.MARKER).unlink()
    (snapshot_of(hf_home) / "model.onnx").write_bytes(b"half")  # and an export cut short
    stale = hf_home / "hub" / ".pimem-staging-dead"  # left by a build that was killed
    stale.mkdir()
    assert not is_installed(hf_home)

    said: list[str] = []
    build_dir = default_build_dir({"PIMEM_HOME": str(pimem_home())})
    model = install_offline_model(hf_home, build_dir=build_dir, progress=said.append)

    assert model.hf_home == hf_home
    assert is_installed(hf_home)
    assert any(line.startswith("verify:") for line in said)
    assert (snapshot_of(hf_home) / "model.onnx").stat().st_size > 80_000_000
    assert not stale.exists()


@pytest.fixture
def fake_build_dir(tmp_path: Path) -> Path:
    """A build directory whose environment counts as ready (its python is the test's own)."""
    build_dir = tmp_path / "build"
    (build_dir / "venv" / "bin").mkdir(parents=True)
    (build_dir / "venv" / "bin" / "python").symlink_to(sys.executable)
    (build_dir / "venv" / ".pimem-requirements").write_text("\n".join(om.BUILD_REQUIREMENTS) + "\n")
    return build_dir


def test_failed_export_raises_a_pimem_error_and_leaves_nothing(
    fake_build_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "export.py"
    script.write_text("print('ONNX and torch disagree: cosines [0.5]')\nraise SystemExit(3)\n")
    monkeypatch.setattr(om, "EXPORT_SCRIPT", script)
    hf_home = tmp_path / "hf-home"

    with pytest.raises(PimemError) as caught:
        install_offline_model(hf_home, build_dir=fake_build_dir)

    message = str(caught.value)
    assert "the ONNX export (exit status 3)" in message
    assert "ONNX and torch disagree" in message
    assert str(fake_build_dir / "build.log") in message
    assert "pimem model install-offline" in message
    assert "ONNX and torch disagree" in (fake_build_dir / "build.log").read_text()
    assert not repo_dir(hf_home).exists()
    assert not list((hf_home / "hub").glob(".pimem-staging-*"))
