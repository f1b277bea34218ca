"""The mesh's layout rules: where memsearch and its agent plugins keep a project's memory.

These are facts every memsearch agent shares, mirrored byte for byte so memories flow between
agents: ``MEMSEARCH_DIR`` resolution and where ``.index-state.json`` lives. The collection name
and the repository directory are public, as :class:`Scope`'s constructors.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable
from datetime import date
from pathlib import Path
from typing import Required, TypedDict, Unpack

from pimem_core.plugin import Scope, SettingsError

__all__ = [
    "DAY_FILE",
    "STATE_FILE",
    "TREE",
    "Where",
    "children_of",
    "days_in",
    "discovered_store",
    "has_memory_files",
    "index_state_path",
    "laid_out_scope",
    "maintenance_root",
    "resolve_memsearch_dir",
]

# The names of memsearch's tree and state file, as the plugin API's Scope.for_project lays them out
# (``<project>/.memsearch/memory`` and ``<project>/.memsearch/.index-state.json``).
_LAID_OUT = Scope.for_project(Path(os.sep))
#: The directory memsearch keeps a project's memory in, at the project's root.
TREE = _LAID_OUT.memory_dir.parent.name
_STATE_PATH = _LAID_OUT.index_state_path
assert _STATE_PATH is not None  # Scope.for_project always places the state file
#: The file in which memsearch records a store's index health.
STATE_FILE = _STATE_PATH.name
#: A daily memory file's name, ``YYYY-MM-DD.md``; its group is the day.
DAY_FILE = re.compile(r"(\d{4}-\d{2}-\d{2})\.md")


def maintenance_root(scope: Scope) -> Path:
    """memsearch's directory for the project (``.memsearch``, or ``MEMSEARCH_DIR``): where the
    index state, the maintenance state and the maintained files live (pimem's maintenance
    runner keeps its state there by the same rule)."""
    if scope.index_state_path is not None:
        return scope.index_state_path.parent
    return scope.memory_dir.parent


def resolve_memsearch_dir(repository_dir: Path, value: str) -> Path:
    """``MEMSEARCH_DIR`` as memsearch's children see it: relative values resolve at the repository."""
    return Path(os.path.normpath(os.path.join(repository_dir, value)))


def _tree_root(path: Path) -> Path | None:
    parts = path.parts
    if TREE not in parts:
        return None
    return Path(*parts[: parts.index(TREE) + 1])


def index_state_path(
    *,
    memory_dir: Path,
    repository_dir: Path,
    memsearch_dir: str | None,
    state_dir: Path | None,
    store_command: bool,
) -> Path | None:
    """Where memsearch writes ``.index-state.json`` for this store, or ``None`` if it never will.

    In order: the store command's ``state-dir`` answer; ``MEMSEARCH_DIR``; the root of the
    ``.memsearch`` tree the store sits in (its first ``.memsearch`` component, checked on the
    path as written and then with symlinks resolved, since memsearch truncates there); nothing
    when a store command placed the store elsewhere; else beside the store.
    """
    if state_dir is not None:
        return state_dir / STATE_FILE
    if memsearch_dir:
        return resolve_memsearch_dir(repository_dir, memsearch_dir) / STATE_FILE
    lexical = Path(os.path.normpath(os.path.abspath(memory_dir)))
    root = _tree_root(lexical) or _tree_root(Path(os.path.realpath(lexical)))
    if root is not None:
        return root / STATE_FILE
    if store_command:
        return None
    return lexical.parent / STATE_FILE


class Where(TypedDict, total=False):
    """Where a resolver put a store: :class:`Scope`'s fields but its index state."""

    repository_dir: Required[Path]
    scope_dir: Required[Path]
    memory_dir: Required[Path]
    collection: Required[str]
    store_command: str | None
    state_dir: Path | None


def laid_out_scope(memsearch_dir: str | None, **where: Unpack[Where]) -> Scope:
    """The scope of a store placed *where* a resolver put it, its index state where memsearch
    writes it (:func:`index_state_path`)."""
    state_path = index_state_path(
        memory_dir=where["memory_dir"],
        repository_dir=where["repository_dir"],
        memsearch_dir=memsearch_dir,
        state_dir=where.get("state_dir"),
        store_command=where.get("store_command") is not None,
    )
    return Scope(index_state_path=state_path, **where)


def discovered_store(project_dir: Path) -> tuple[Path, Path]:
    """The memory directory and state file of a project found by scanning (no git walk).

    ``<dir>/.memsearch/memory`` when it exists (state in ``<dir>/.memsearch``), else
    ``<dir>/memory`` (the shape ``MEMSEARCH_DIR`` and store commands produce, state beside it).
    """
    tree = project_dir / TREE
    if (tree / "memory").is_dir():
        return tree / "memory", tree / STATE_FILE
    return project_dir / "memory", project_dir / STATE_FILE


def children_of(roots: Iterable[Path | str], *, asked_by: str, setting: str) -> list[Path]:
    """The immediate children of *roots* (scan roots), absolute, root by root.

    A root that cannot be listed raises :class:`SettingsError` naming it and the *setting* that
    lists it (*asked_by* says what scans): a mistyped root must not quietly scan fewer projects
    than asked for.
    """
    children: list[Path] = []
    for root in roots:
        base = Path(os.path.abspath(root))
        try:
            with os.scandir(base) as entries:
                children.extend(Path(entry.path) for entry in entries)
        except OSError as error:
            raise SettingsError(
                f"{asked_by} cannot scan {base} (listed in {setting}): {error.strerror or error}"
            ) from None
    return children


def has_memory_files(memory_dir: Path) -> bool:
    """Whether *memory_dir* holds a file memsearch would index: a ``.md`` or ``.markdown``
    file at any depth, hidden files and directories left out, as memsearch's scanner does.

    ``False`` means a store with no memory yet (the directory may not exist). A directory that
    cannot be listed counts as holding memory: what cannot be seen is not known to be empty,
    and the operation that follows reports why it cannot read it.
    """
    # Stops at the first markdown file: a search asks this of a store of a thousand files.
    unreadable = False
    pending = [os.fspath(memory_dir)]
    while pending:
        subdirectories = []
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    if entry.name.startswith("."):
                        continue
                    with contextlib.suppress(OSError):
                        if entry.name.endswith((".md", ".markdown")) and entry.is_file():
                            return True
                        if entry.is_dir(follow_symlinks=False):
                            subdirectories.append(entry.path)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            unreadable = True
            continue
        pending.extend(reversed(subdirectories))
    return unreadable


def days_in(directory: Path, pattern: re.Pattern[str] = DAY_FILE) -> list[date]:
    """The days *directory* has a file for, named as *pattern* says (its first group the day),
    oldest first: by default, a store's daily memory files. None where it cannot be listed."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []  # no store yet, or one that cannot be listed
    days = []
    for name in names:
        match = pattern.fullmatch(name)
        if match is None:
            continue
        try:
            days.append(date.fromisoformat(match.group(1)))
        except ValueError:
            continue  # a name shaped like a day that is none (2026-02-30.md)
    return sorted(days)
