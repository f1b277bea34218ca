"""pimem's own files outside a project are its user's alone: directories 0700, files 0600.

What pimem keeps outside a project (its cache, state and data directories, the memory
service's runtime directory, a Milvus Lite database that lies outside the project) holds the
text of memory entries, or what is derived from it, for every project of the user. A project's
directory may be closed to other users while the usual ``~/.cache`` is open to all, so those
modes cannot be left to the umask and the parent's mode; and ``mkdir``'s mode goes through the
umask while ``parents=True`` does not apply it to the parents at all.

A tree an older pimem left open is tightened whole the first time pimem writes under it again:
its root is found open, which one ``lstat`` sees, and a root this module made never is.

A project's own files (its daily memory files, ``.gitattributes``...) are the team's: they keep
the modes the user's umask gives them and never go through this module.

Standard library only: the memory service's thin client uses it before anything else loads.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

DIRECTORY_MODE = 0o700
FILE_MODE = 0o600
#: The group's and others' permission bits.
_SHARED = 0o077


def private_dir(directory: Path, *, root: Path | None = None) -> Path:
    """Make *directory*, and every parent that is missing, 0700; return it.

    *root* is the directory of pimem's own that *directory* lies in (by default the one of
    :class:`~pimem_core.paths.PimemPaths` that holds it, if any). Found open to others, as an
    older pimem left it, it is tightened whole first (:func:`tighten`).
    """
    root = own_root(directory) if root is None else root
    if root is not None and _shared(root):
        tighten(root)
    _make(directory)
    return directory


def own_root(path: Path) -> Path | None:
    """The innermost of pimem's data, cache and state directories that holds *path*."""
    from pimem_core.paths import PimemPaths  # not at import: the thin client has no attrs

    paths = PimemPaths.from_env()
    holding = [
        root
        for root in (paths.data_dir, paths.cache_dir, paths.state_dir)
        if path.is_relative_to(root)
    ]
    return max(holding, key=lambda root: len(root.parts), default=None)


def tighten(tree: Path) -> None:
    """Take the group's and others' permissions off everything this user owns in *tree*,
    *tree* itself last (so a walk cut short is done again). Links are not followed."""
    uid = os.geteuid()
    try:
        top = tree.lstat()
    except OSError:
        return
    if not stat.S_ISDIR(top.st_mode) or top.st_uid != uid:
        return
    for directory, subdirectories, files in os.walk(tree):
        for name in (*subdirectories, *files):
            _tighten_one(Path(directory, name), uid)
    _tighten_one(tree, uid)


@contextlib.contextmanager
def replacing(path: Path, *, root: Path | None = None) -> Iterator[BinaryIO]:
    """A stream for *path*'s new content, which replaces *path* whole when the block ends (a
    reader, or a crash, sees the old file or the new one); 0600 from its first byte."""
    private_dir(path.parent, root=root)
    import tempfile  # here: it costs the thin client 7 ms to import, and it never writes so

    fd, staged = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # Never more than 0600 (mkstemp's mode), but the umask may have taken the owner's bits.
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as stream:
            yield stream
        os.replace(staged, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(staged)
        raise


def write_private(path: Path, data: str | bytes, *, root: Path | None = None) -> None:
    """Replace *path* with *data* (text as UTF-8), as :func:`replacing` does."""
    with replacing(path, root=root) as stream:
        stream.write(data.encode("utf-8") if isinstance(data, str) else data)


def open_private(path: Path, flags: int, *, root: Path | None = None) -> int:
    """``os.open`` of *path* with ``O_CREAT``, in a private directory; the file is 0600,
    whether it makes it (whatever the umask) or finds it as an older pimem left it."""
    private_dir(path.parent, root=root)
    fd = os.open(path, flags | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) != FILE_MODE:
            os.fchmod(fd, FILE_MODE)
    except OSError:
        os.close(fd)
        raise
    return fd


def _shared(path: Path) -> bool:
    try:
        return bool(path.lstat().st_mode & _SHARED)
    except OSError:
        return False


def _make(directory: Path) -> None:
    try:
        os.mkdir(directory, DIRECTORY_MODE)
    except FileNotFoundError:
        _make(directory.parent)
        try:
            os.mkdir(directory, DIRECTORY_MODE)
        except FileExistsError:
            if not directory.is_dir():
                raise
            return
    except FileExistsError:
        if not directory.is_dir():
            raise
        return
    # The umask may have taken the owner's own bits too.
    os.chmod(directory, DIRECTORY_MODE)


def _tighten_one(path: Path, uid: int) -> None:
    with contextlib.suppress(OSError):
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode) or info.st_uid != uid or not info.st_mode & _SHARED:
            return
        os.chmod(path, stat.S_IMODE(info.st_mode) & ~_SHARED)
