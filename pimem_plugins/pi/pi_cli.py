"""pi as ``pimem setup pi`` meets it: the ``pi`` command on PATH, its version and Node, and its
settings file, where a pi package is registered.

pi keeps the packages it loads in ``<agent dir>/settings.json`` (``packages``), the agent dir
being ``PI_CODING_AGENT_DIR`` or ``~/.pi/agent``. A local package is written there relative to
the agent dir and compared by its resolved absolute path (links not followed); this module reads
and writes entries exactly so, and ``pi install`` / ``pi remove`` write the same.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from pimem_core.plugin import PimemError, write_atomically

#: The oldest pi the adapter runs on (docs/pi-adapter.md): 0.73, the last release under the
#: old name; every 1.x.
MIN_PI = (0, 73, 0)
PI_TIMEOUT_SECONDS = 120
UPDATE_PI = "update pi (`npm install -g @earendil-works/pi-coding-agent`)"
VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def parse_version(text: str) -> tuple[int, int, int] | None:
    found = VERSION.search(text)
    return None if found is None else (int(found[1]), int(found[2]), int(found[3]))


def shown(version: tuple[int, int, int]) -> str:
    return ".".join(map(str, version))


def last_line(*texts: str) -> str:
    lines = [line.strip() for text in texts for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


# -- pi's settings ---------------------------------------------------------------------------


def agent_dir(environ: Mapping[str, str]) -> Path:
    """pi's agent directory, as pi resolves it."""
    configured = environ.get("PI_CODING_AGENT_DIR")
    if configured:
        return Path(configured).expanduser().absolute()
    return Path.home() / ".pi" / "agent"


def _is_local(source: str) -> bool:
    return not source.startswith(("npm:", "git:", "git@")) and "://" not in source


@attrs.frozen
class PiSettings:
    """pi's global settings file, read fresh at every call."""

    path: Path

    @classmethod
    def of(cls, environ: Mapping[str, str]) -> PiSettings:
        return cls(agent_dir(environ) / "settings.json")

    @property
    def base(self) -> Path:
        return self.path.parent

    def read(self) -> dict[str, Any]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as error:
            raise PimemError(f"cannot read pi's settings {self.path}: {error}") from None
        try:
            data = json.loads(text) if text.strip() else {}
        except ValueError as error:
            raise PimemError(
                f"pi's settings {self.path} are not valid JSON ({error}): fix the file, then run "
                "`pimem setup pi` again"
            ) from None
        if not isinstance(data, dict):
            raise PimemError(f"pi's settings {self.path} hold no JSON object: fix the file")
        return data

    def local_packages(self) -> list[tuple[object, Path]]:
        """Each local package entry, with the directory pi resolves it to."""
        found = []
        for entry in self.read().get("packages") or []:
            source = entry.get("source") if isinstance(entry, dict) else entry
            if isinstance(source, str) and source.strip() and _is_local(source.strip()):
                found.append((entry, self.resolve(source.strip())))
        return found

    def resolve(self, source: str) -> Path:
        if source.startswith("~"):
            return Path(os.path.normpath(Path.home() / source[1:].lstrip("/")))
        return Path(os.path.normpath(self.base / source))

    def registered(self, package: Path) -> bool:
        return any(path == package for _, path in self.local_packages())

    def entry_for(self, package: Path) -> str:
        """The entry pi writes for *package*: its path relative to the agent dir."""
        return os.path.relpath(package, self.base)

    def add(self, package: Path) -> bool:
        """Register *package* as ``pi install`` does; ``False`` when it is there already."""
        if self.registered(package):
            return False
        data = self.read()
        data["packages"] = [*(data.get("packages") or []), self.entry_for(package)]
        self._write(data)
        return True

    def remove(self, package: Path) -> bool:
        """Remove every entry of *package*, as ``pi remove`` does; ``False`` when none."""
        data = self.read()
        entries = [entry for entry, path in self.local_packages() if path == package]
        if not entries:
            return False
        data["packages"] = [entry for entry in data.get("packages") or [] if entry not in entries]
        self._write(data)
        return True

    def _write(self, data: Mapping[str, Any]) -> None:
        # As pi writes it (JSON.stringify with two spaces), so a later `pi install` finds it alike.
        try:
            mode = self.path.stat().st_mode & 0o777
        except OSError:
            mode = None
        try:
            write_atomically(self.path, json.dumps(data, indent=2, ensure_ascii=False))
            if mode is not None:
                self.path.chmod(mode)
        except OSError as error:
            raise PimemError(f"cannot write pi's settings {self.path}: {error}") from None


# -- the pi command --------------------------------------------------------------------------


def find_pi(environ: Mapping[str, str]) -> Path | None:
    found = shutil.which("pi", path=environ.get("PATH"))
    return None if found is None else Path(found)


def node_version(environ: Mapping[str, str]) -> tuple[Path, str] | None:
    """The ``node`` on PATH and its version (``v22.19.0``), or ``None``."""
    node = shutil.which("node", path=environ.get("PATH"))
    if node is None:
        return None
    try:
        done = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Path(node), done.stdout.strip() or "unknown"


def required_node(pi: Path) -> str | None:
    """What pi's own package asks of Node (``>=22.19.0``), when ``pi`` leads to its package."""
    for directory in Path(os.path.realpath(pi)).parents:
        try:
            manifest = json.loads((directory / "package.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(manifest, dict) and str(manifest.get("name", "")).endswith("coding-agent"):
            wanted = (manifest.get("engines") or {}).get("node")
            return wanted if isinstance(wanted, str) else None
    return None


@attrs.frozen(kw_only=True)
class Pi:
    """The ``pi`` command on PATH, which runs."""

    path: Path
    version: tuple[int, int, int]
    environ: Mapping[str, str]

    @property
    def shown_version(self) -> str:
        return shown(self.version)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(
                [str(self.path), *args],
                capture_output=True,
                text=True,
                timeout=PI_TIMEOUT_SECONDS,
                check=False,
                stdin=subprocess.DEVNULL,
                # pi needs no network to register a local package: no update checks.
                env={**self.environ, "PI_OFFLINE": "1"},
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise PimemError(f"`pi {' '.join(args)}` could not run: {error}") from None

    def change(self, action: str, package: Path) -> None:
        """``pi install`` or ``pi remove`` of *package*, which must succeed."""
        done = self.run(action, str(package))
        if done.returncode != 0:
            raise PimemError(
                f"`pi {action} {package}` failed (exit {done.returncode}: "
                f"{last_line(done.stdout, done.stderr)})"
            )


def probe_pi(path: Path, environ: Mapping[str, str]) -> Pi:
    """The pi at *path*, checked: it starts, and is recent enough for the adapter."""
    pi = Pi(path=path, version=(0, 0, 0), environ=environ)
    done = pi.run("--version")
    version = parse_version(done.stdout) or parse_version(done.stderr)
    if done.returncode != 0 or version is None:
        raise PimemError(_why_pi_fails(path, environ, done))
    if version < MIN_PI:
        raise PimemError(
            f"pi {shown(version)} ({path}) is older than {shown(MIN_PI)}, the oldest pi pimem's "
            f"adapter runs on: {UPDATE_PI}, then run `pimem setup pi` again"
        )
    return attrs.evolve(pi, version=version)


def _why_pi_fails(
    path: Path, environ: Mapping[str, str], done: subprocess.CompletedProcess[str]
) -> str:
    said = (
        f"`{path} --version` failed (exit {done.returncode}: {last_line(done.stdout, done.stderr)})"
    )
    node, wanted = node_version(environ), required_node(path)
    floor = parse_version(wanted or "")
    if node is not None and floor is not None:
        have = parse_version(node[1])
        if have is not None and have < floor:
            return (
                f"{said}: this pi needs Node {wanted} and the node on PATH ({node[0]}) is "
                f"{node[1]}; install a newer Node (https://nodejs.org), then run `pimem setup pi` "
                "again"
            )
    if node is None:
        return f"{said}: there is no node on PATH; install Node (pi 1.x needs 22.19 or newer)"
    return (
        f"{said}: check that pi runs (`pi --version`); pi 1.x needs Node 22.19 or newer, the "
        f"node on PATH is {node[1]}"
    )


def pi_node(pi: Path, environ: Mapping[str, str]) -> str | None:
    """The version of the Node this ``pi`` runs on, when its script says which (``#!/usr/bin/env
    node``: the node on PATH); ``None`` for a wrapper that does not say."""
    try:
        with Path(os.path.realpath(pi)).open("rb") as script:
            first = script.readline(200).decode(errors="replace").strip()
    except OSError:
        return None
    if first.startswith("#!") and first.split()[-1] == "node" and "env" in first:
        found = node_version(environ)
        return None if found is None else found[1]
    return None


def describe_pi(pi: Pi, environ: Mapping[str, str]) -> str:
    node = pi_node(pi.path, environ)
    on = "" if node is None else f", on Node {node}"
    return f"{pi.path} (pi {pi.shown_version}{on})"


def pi_changed(settings: PiSettings, package: Path, *, expect: bool, said: Sequence[str]) -> None:
    """Check that pi's settings now say what the command that changed them meant."""
    if settings.registered(package) != expect:
        raise PimemError(
            f"{' '.join(said)} succeeded, yet {settings.path} {'does not list' if expect else 'still lists'} "
            f"{package}: that pi keeps its settings elsewhere; set PI_CODING_AGENT_DIR as pi has it "
            "and run `pimem setup pi` again"
        )
