"""Throw-away worlds for the scenarios: a git project, a ``HOME`` and a Milvus Lite database.

Nothing a scenario does may reach the user's own ``~/.memsearch`` or pimem's own state, so every
process, child or in-process, runs with ``HOME`` and ``PIMEM_HOME`` inside the sandbox and with
every pimem and memsearch variable of the calling shell removed.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import attrs

from pimem_plugins.memsearch.offline_model import OfflineModel, install_offline_model

ROOT = Path(__file__).resolve().parents[1]
#: The fixed local time every scenario writes at: one daily memory file, whatever the clock says.
CLOCK = "2026-08-13T22:41"
DAY_FILE = "2026-08-13.md"
_INHERITED_PREFIXES = ("PIMEM_", "PI_MEMSEARCH_", "MEMSEARCH_", "MILVUS_")


@functools.cache
def offline_model() -> OfflineModel:
    """The offline embedding model where ``make model`` installs it (installed now if missing).

    Looked up once: ``python -m reliability`` resolves it before it points ``PIMEM_HOME`` at a
    scratch directory for the scenarios."""
    return install_offline_model().model


def clean_environ(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """*base* (default: this process's environment) without pimem's or memsearch's variables."""
    source = os.environ if base is None else base
    return {
        key: value
        for key, value in source.items()
        if not key.startswith(_INHERITED_PREFIXES) and key not in ("HOME",)
    }


@attrs.frozen
class Sandbox:
    """One project with its own ``HOME`` (memsearch configuration) and database."""

    root: Path
    model: OfflineModel | None = None

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def memory_dir(self) -> Path:
        return self.project / ".memsearch" / "memory"

    @property
    def day_file(self) -> Path:
        return self.memory_dir / DAY_FILE

    @property
    def state_file(self) -> Path:
        return self.project / ".memsearch" / ".index-state.json"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def database(self) -> Path:
        return self.root / "milvus.db"

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment of a process working in this sandbox."""
        env = clean_environ()
        env.update(
            HOME=str(self.home),
            PIMEM_HOME=str(self.root / "pimem-home"),
            PIMEM_STRICT_PLUGINS="1",
            PIMEM_NOW=CLOCK,
            # In process unless a scenario of the memory service turns it on.
            PIMEM_SERVICE="off",
            PYTHONIOENCODING="utf-8",
            HF_HUB_OFFLINE="1",
        )
        if self.model is not None:
            env.update(self.model.environment())
        env.update(extra or {})
        return env

    def pimem(
        self,
        *args: str,
        extra: Mapping[str, str] | None = None,
        stdin: str = "",
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        """Run the real ``pimem`` command in a child process, at the project."""
        return subprocess.run(
            [sys.executable, "-m", "pimem_core", *args],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=self.project,
            env=self.env(extra),
            timeout=timeout,
            check=False,
        )

    def write_args(self, content: str, *, session: str, turn: str) -> Sequence[str]:
        """Arguments of ``pimem write`` for one entry of this sandbox's project."""
        return (
            "write",
            content,
            "--cwd",
            str(self.project),
            "--session",
            session,
            "--turn",
            turn,
            "--transcript",
            f"/transcripts/{session}.jsonl",
        )


def make_sandbox(root: Path, model: OfflineModel | None = None) -> Sandbox:
    """Lay out a sandbox under *root*; with *model*, memsearch is configured to embed with it."""
    box = Sandbox(root=root, model=model)
    (box.project / ".git").mkdir(parents=True, exist_ok=True)
    (box.home / ".memsearch").mkdir(parents=True, exist_ok=True)
    if model is not None:
        (box.home / ".memsearch" / "config.toml").write_text(
            f'[embedding]\nprovider = "{model.provider}"\nmodel = "{model.model}"\n\n'
            f'[milvus]\nuri = "{box.database}"\n'
        )
    return box


@contextlib.contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """Run in-process code with *env* as the whole process environment (memsearch reads
    ``HOME`` on every call), and come back to the working directory it started in."""
    saved, cwd = dict(os.environ), os.getcwd()
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
        os.chdir(cwd)
