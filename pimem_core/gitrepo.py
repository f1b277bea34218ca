"""Where a scope's memory store sits in a git repository, and the attribute lines that tell git
how to merge its daily memory files (ADR 0016).

The repository is found as git finds it, by a ``.git`` directory or file at or above a
directory, without running git: a write looks it up. Git itself runs only to tell whether it
ignores the day files, to report how it merges them, and to register pimem's merge driver.
"""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import attrs

from pimem_core.types import Scope

#: The daily memory files of a store, as a pattern (``YYYY-MM-DD.md``; notes beside them are
#: edited in place, which a union merge would garble).
DAY_FILES = "????-??-??.md"
#: The name pimem's merge driver is registered under (``merge=pimem-day-files``).
DRIVER = "pimem-day-files"
# Characters a plain .gitattributes pattern cannot hold (space ends it, the rest are glob or
# quoting syntax).
_AWKWARD = re.compile(r'[\s"\\*?\[\]]|^[!#]')
_GIT_TIMEOUT_SECONDS = 10


@attrs.frozen(kw_only=True)
class StorePlace:
    """The repository whose work tree holds a store, and its day files as a pattern there."""

    #: The top of the work tree of the session's repository; ``None`` outside git.
    work_tree: Path | None = None
    #: The store's day files relative to it (``.memsearch/memory/????-??-??.md``).
    pattern: str | None = None
    #: Why no pattern applies, for status.
    why_not: str | None = None
    #: The name pimem's merge driver is registered under (``merge=pimem-day-files``).
    DRIVER: ClassVar[str] = DRIVER

    @classmethod
    def locate(cls, scope: Scope) -> StorePlace:
        """Where *scope*'s store sits (:func:`locate_store`)."""
        return locate_store(scope)

    def git(self, *args: str) -> subprocess.CompletedProcess[str] | None:
        """``git <args>`` in the work tree; ``None`` when git cannot be run at all."""
        assert self.work_tree is not None
        return run_git(self.work_tree, *args)

    def merge_attribute(self, text: str) -> str | None:
        """What the attributes file *text* says about merging the day files
        (:func:`merge_attribute` for :attr:`pattern`)."""
        assert self.pattern is not None
        return merge_attribute(text, self.pattern)

    def ensure_attribute(self, file: Path, value: str) -> bool:
        """Append ``<pattern> <value>`` to the attributes *file* unless a line for the pattern
        already says how to merge (:func:`ensure_attribute`)."""
        assert self.pattern is not None
        return ensure_attribute(file, self.pattern, value)

    @staticmethod
    def ensure_line(file: Path, line: str) -> bool:
        """Append *line* to *file* (a ``.gitignore``) unless it holds it already
        (:func:`ensure_line`)."""
        return ensure_line(file, line)

    def sample(self, name: str = "2000-01-01.md") -> str:
        """A day file's path relative to the work tree, for asking git about it."""
        assert self.pattern is not None
        return self.pattern.rsplit("/", 1)[0] + "/" + name

    def ignores(self, path: str) -> bool | None:
        """Whether git ignores the day file *path* (relative to the work tree): ``None`` when
        git cannot tell (not installed, not really a repository)."""
        assert self.work_tree is not None
        done = run_git(self.work_tree, "check-ignore", "--quiet", "--", path)
        if done is None or done.returncode not in (0, 1):
            return None
        return done.returncode == 0


def work_tree_of(directory: Path) -> Path | None:
    """The nearest directory at or above *directory* holding ``.git`` (a directory, or a linked
    worktree's file); ``None`` outside any work tree. *directory* need not exist yet."""
    start = Path(os.path.realpath(directory))
    for candidate in (start, *start.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def locate_store(scope: Scope) -> StorePlace:
    """Where *scope*'s store sits: in the session's repository, or why it does not count.

    A store counts only when the repository that holds it is the session's own: one that a
    store command or ``MEMSEARCH_DIR`` put elsewhere (another repository, or none) belongs to
    whoever put it there.
    """
    root = work_tree_of(scope.repository_dir)
    if root is None:
        return StorePlace(why_not="the project is not in a git work tree")
    memory = Path(os.path.realpath(scope.memory_dir))
    if work_tree_of(memory) != root:
        placed_by = " (where the store command placed it)" if scope.store_command else ""
        return StorePlace(
            work_tree=root,
            why_not=f"the store {scope.memory_dir} lies outside the repository {root}{placed_by}",
        )
    relative = memory.relative_to(root).as_posix()
    if _AWKWARD.search(relative):
        return StorePlace(
            work_tree=root,
            why_not=f"the store's path {relative} does not fit a plain .gitattributes pattern",
        )
    return StorePlace(work_tree=root, pattern=f"{relative}/{DAY_FILES}")


def merge_attribute(text: str, pattern: str) -> str | None:
    """What the last line for exactly *pattern* in an attributes file says about merging
    (``merge=union``, ``-merge``, ...); ``None`` when no line for it does."""
    said = None
    for line in text.splitlines():
        words = line.split()
        if len(words) < 2 or words[0] != pattern:
            continue
        for word in words[1:]:
            if word.lstrip("-!").split("=", 1)[0] == "merge":
                said = word
    return said


def ensure_attribute(file: Path, pattern: str, value: str) -> bool:
    """Append ``<pattern> <value>`` to the attributes *file* unless a line for *pattern*
    already says how to merge; ``True`` when it appended. Other lines are never touched."""
    return _append_unless(
        file, f"{pattern} {value}", lambda text: merge_attribute(text, pattern) is not None
    )


def ensure_line(file: Path, line: str) -> bool:
    """Append *line* to *file* (a ``.gitignore``) unless it holds it already; ``True`` when it
    appended. Other lines are never touched."""
    return _append_unless(
        file, line, lambda text: line in (existing.strip() for existing in text.splitlines())
    )


def _append_unless(file: Path, line: str, present: Callable[[str], bool]) -> bool:
    file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(file, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        # pimem's own writers take turns, so two sessions never add the line twice.
        fcntl.flock(fd, fcntl.LOCK_EX)
        text = _read_all(fd).decode("utf-8", errors="replace")
        if present(text):
            return False
        end = "\r\n" if "\r\n" in text else "\n"
        separator = end if text and not text.endswith("\n") else ""
        os.write(fd, f"{separator}{line}{end}".encode())
        return True
    finally:
        os.close(fd)


def _read_all(fd: int) -> bytes:
    chunks = []
    offset = 0
    while chunk := os.pread(fd, 65_536, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def run_git(work_tree: Path, *args: str) -> subprocess.CompletedProcess[str] | None:
    """``git <args>`` in *work_tree*; ``None`` when git cannot be run at all."""
    try:
        return subprocess.run(
            ["git", *args],
            cwd=work_tree,
            capture_output=True,
            encoding="utf-8",
            errors="replace",
            stdin=subprocess.DEVNULL,
            timeout=_GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
