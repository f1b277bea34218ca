"""Linked git worktrees of one repository share the primary checkout's memory.

Agents working in parallel worktrees (``git worktree add ../feature``) then write to, search
and compact one memory store and one collection: they see each other's memory.

A linked worktree's ``.git`` is a file, ``gitdir: <primary>/.git/worktrees/<name>``; that
directory's ``commondir`` file names the repository's common git directory (``../..``), whose
parent is the primary checkout. For a linked worktree this plugin answers
``pimem_resolve_scope`` with the primary checkout's scope, before the default resolver
(``tryfirst``); for anything else (a primary checkout, a directory outside git, a submodule, a
worktree of a bare repository) it answers ``None`` and the default resolver answers.

It steps aside, too, when ``MEMSEARCH_DIR`` or ``PI_MEMSEARCH_STORE_CMD`` choose the store:
those settings name a store on purpose.
"""

from __future__ import annotations

import os
from pathlib import Path

from pimem_core.plugin import (
    Scope,
    Settings,
    hookimpl,
)

__all__ = ["pimem_resolve_scope", "primary_checkout"]


def primary_checkout(worktree: Path) -> Path | None:
    """The primary checkout of the repository *worktree* is a linked worktree of, else ``None``.

    :param worktree: a worktree's top directory (the one holding its ``.git``).
    """
    dot_git = worktree / ".git"
    if not dot_git.is_file():
        return None  # a primary checkout (a .git directory) or no git at all
    try:
        pointer = dot_git.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not pointer.startswith("gitdir:"):
        return None
    gitdir = worktree / pointer.removeprefix("gitdir:").strip()  # absolute paths replace
    try:
        common = (gitdir / "commondir").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None  # a submodule: its git directory has no commondir
    common_dir = Path(os.path.realpath(gitdir / common))
    primary = common_dir.parent
    if common_dir.name != ".git" or not common_dir.is_dir():
        return None  # a bare repository: no checkout holds its memory
    return primary


@hookimpl(tryfirst=True)
def pimem_resolve_scope(cwd: Path, settings: Settings) -> Scope | None:
    """The primary checkout's scope for a directory in a linked worktree, else ``None``."""
    # The store command is another plugin's setting: read from the environment pimem was given.
    if settings.memsearch_dir or settings.environ.get("PI_MEMSEARCH_STORE_CMD"):
        return None
    primary = primary_checkout(Scope.find_repository_dir(cwd))
    return None if primary is None else Scope.for_project(primary)
