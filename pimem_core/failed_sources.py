"""The source of a plugin that failed to import, read without importing it again: the files a
fix edits (a long-lived process watches them) and the hooks they name (whether the plugin
decides where memory goes, so that writes wait for it)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from pimem_core.hookspecs import HOOK_NAMES

#: How many source files of a plugin that failed to import are read for the hooks they name.
_SOURCE_FILES_READ = 500
_HOOK_WORD = re.compile(r"\bpimem_[a-z_]+\b")


def source_files(value: str) -> tuple[Path, ...] | None:
    """The source files of the package an entry point's module belongs to, found without
    importing anything (a plugin that failed to import is not run again); ``None`` when they
    cannot be found."""
    top = value.partition(":")[0].strip().partition(".")[0]
    try:
        spec = importlib.util.find_spec(top)  # a top-level name: nothing is executed
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        files = sorted(
            path
            for location in spec.submodule_search_locations
            for path in Path(location).rglob("*.py")
            if "__pycache__" not in path.parts
        )
        return tuple(files[:_SOURCE_FILES_READ]) or None
    if spec.origin and spec.origin.endswith(".py"):
        return (Path(spec.origin),)
    return None


def hooks_named_in(sources: tuple[Path, ...]) -> frozenset[str] | None:
    """The pimem hooks *sources* name (define, import or mention); ``None`` when one cannot
    be read, since what it holds is not known."""
    named: set[str] = set()
    for path in sources:
        try:
            named.update(_HOOK_WORD.findall(path.read_text(encoding="utf-8", errors="replace")))
        except OSError:
            return None
    return frozenset(named & set(HOOK_NAMES))
