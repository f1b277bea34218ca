"""pimem's runtime directory, where its sockets live: one per user, which nobody else may enter.

The memory service's socket and the Milvus Lite database pimem serves are both kept out of other
users' reach by this directory's mode before anything else. Light on purpose: the service's thin
client imports it before anything else of pimem.
"""

from __future__ import annotations

import os
import stat
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path

from pimem_core.private_files import private_dir


class NotPrivate(Exception):
    """A directory could not be made, or is not this user's alone; the message says which."""


def runtime_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Under ``PIMEM_HOME`` when set (as :mod:`pimem_core.paths` places pimem's other files),
    else the user's runtime directory."""
    env = os.environ if environ is None else environ
    home = env.get("PIMEM_HOME")
    if home:
        return Path(home).expanduser() / "run"
    xdg = env.get("XDG_RUNTIME_DIR")
    if xdg and Path(xdg).is_dir():
        return Path(xdg) / "pimem"
    if sys.platform.startswith("linux"):
        # Without a session runtime directory (containers, cron), a per-user folder under the
        # temporary directory; its 0700 mode keeps other users out.
        import tempfile

        return Path(tempfile.gettempdir()) / f"pimem-{os.getuid()}"
    import platformdirs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Path(platformdirs.user_runtime_dir("pimem", appauthor=False))


def make_private(directory: Path) -> None:
    """Make *directory* with mode 0700, or check the one there: refused unless it is a directory
    this user owns, and narrowed to 0700 when others could enter it."""
    try:
        private_dir(directory, root=directory)
        info = directory.lstat()
    except OSError as error:
        raise NotPrivate(f"cannot make the runtime directory {directory}: {error}") from None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise NotPrivate(f"{directory} is not a directory owned by this user")
    if info.st_mode & 0o077:
        try:
            directory.chmod(0o700)
        except OSError as error:
            raise NotPrivate(f"cannot make {directory} private: {error}") from None


def private_runtime_dir(environ: Mapping[str, str] | None = None) -> Path | None:
    """The runtime directory, made or checked to be this user's alone (0700): where a plugin
    binds a socket of its own. ``None`` when it cannot be (another user's, not a directory)."""
    directory = runtime_dir(environ)
    try:
        make_private(directory)
    except NotPrivate:
        return None
    return directory
