"""What a long-lived process loaded once and cannot see change: the installed distributions (so
its plugins and their entry points), pimem's and its plugins' code, and the files plugins load
from elsewhere (the offline embedding model).

The memory service takes a :class:`Footprint` when it starts and compares a fresh one before
each request: a distribution installed or removed, a package edited in place, a model
reinstalled all change it, and a service whose footprint changed hands its socket to a new
service instead of answering with what it loaded before (docs/service.md). A footprint is
file names and modification times, no content: about a millisecond on a usual virtual
environment.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import attrs

#: What marks an installed distribution or a path hook in a ``sys.path`` directory.
_INSTALLED = (".dist-info", ".egg-info", ".pth", ".egg-link")


@attrs.frozen
class Footprint:
    """The names and modification times of what a process loaded from disk."""

    entries: tuple[tuple[str, int], ...]

    @classmethod
    def take(cls, *, code: Iterable[Path], files: Iterable[Path] = ()) -> Footprint:
        """This process's footprint: the distributions on its ``sys.path`` (its first entry, the
        script's or working directory, left out), every source file of *code* (packages and
        modules) and every file of *files* (files, or directories walked whole)."""
        found: list[tuple[str, int]] = []
        for directory in dict.fromkeys(sys.path[1:]):
            found.extend(_installed(directory))
        for root in code:
            found.extend(_files(root, suffix=".py"))
        for root in files:
            found.extend(_files(root, suffix=""))
        return cls(tuple(found))

    def differs(self, other: Footprint) -> str | None:
        """What changed from *other* to this footprint, in a few words, or ``None``."""
        before, after = dict(other.entries), dict(self.entries)
        added = sorted(after.keys() - before.keys())
        removed = sorted(before.keys() - after.keys())
        changed = sorted(
            name for name in after.keys() & before.keys() if after[name] != before[name]
        )
        for verb, names in (("installed", added), ("removed", removed), ("changed", changed)):
            if names:
                more = f" and {len(names) - 1} more" if len(names) > 1 else ""
                return f"{os.path.basename(names[0])} {verb}{more}"
        return None


def _installed(directory: str) -> Iterator[tuple[str, int]]:
    try:
        with os.scandir(directory or ".") as entries:
            for entry in entries:
                if entry.name.endswith(_INSTALLED):
                    try:
                        yield entry.path, entry.stat().st_mtime_ns
                    except OSError:
                        continue
    except OSError:
        return  # a zip or a directory that is gone: nothing installed there to watch


def _files(root: Path, *, suffix: str) -> Iterator[tuple[str, int]]:
    if root.is_file():
        with contextlib.suppress(OSError):
            yield os.fspath(root), root.stat().st_mtime_ns
        return
    pending = [os.fspath(root)]
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            if entry.name != "__pycache__":
                                pending.append(entry.path)
                        elif entry.name.endswith(suffix):
                            yield entry.path, entry.stat().st_mtime_ns
                    except OSError:
                        continue
        except OSError:
            continue
