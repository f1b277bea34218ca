"""Other processes knocking at a Milvus Lite database: opens of its lock file, seen by inotify.

Milvus Lite takes its database with a non-blocking ``flock`` on ``<database>/LOCK``: a
``memsearch`` command that finds it taken fails at once, and retries (if its caller does) a
moment later. Every attempt opens the lock file first, and Linux's inotify reports each open
to a watcher, whoever made it. So a process holding the database learns that someone is
waiting, and can step aside for them, instead of stepping aside on a timer whether or not
anyone is waiting (ADR 0006).

Where inotify is missing (not Linux, no libc, a watch limit reached) :func:`watch` returns
``None`` and the caller takes turns on its timer.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys
import weakref
from pathlib import Path

#: Milvus Lite's lock file, inside the database directory.
LOCK_FILE = "LOCK"

_IN_OPEN = 0x00000020
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = 0o2000000
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name


class LockKnocks:
    """Opens of one database's lock file since the last look.

    The holder's own opens count as knocks too: :meth:`forget` right after opening the
    database drops them (inotify queues an event before ``open`` returns).
    """

    def __init__(self, descriptor: int) -> None:
        self._descriptor = descriptor
        # An engine has no end of its own: the watch goes with it, not with the process.
        weakref.finalize(self, os.close, descriptor)

    def knocked(self) -> bool:
        """Whether the lock file was opened since the last look (what was queued is read)."""
        return LOCK_FILE in self._drain()

    def forget(self) -> None:
        """Drop what is queued: the holder's own open."""
        self._drain()

    def _drain(self) -> list[str]:
        names: list[str] = []
        while True:
            try:
                data = os.read(self._descriptor, 64 * 1024)
            except OSError:  # nothing queued (or a watch gone bad, which reads as quiet)
                return names
            offset = 0
            while offset + _EVENT.size <= len(data):
                _, _, _, length = _EVENT.unpack_from(data, offset)
                start = offset + _EVENT.size
                names.append(data[start : start + length].rstrip(b"\0").decode(errors="replace"))
                offset = start + length


def watch(database: Path) -> LockKnocks | None:
    """A watch on *database*'s lock file (a Milvus Lite data directory that exists), or
    ``None`` when inotify cannot watch it here."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)  # the C library the interpreter runs on
        descriptor = int(libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC))
    except (OSError, AttributeError):
        return None
    if descriptor < 0:
        return None
    # The directory, not the file: the lock file may not exist yet, or be made anew.
    if libc.inotify_add_watch(descriptor, os.fsencode(database), _IN_OPEN) < 0:
        os.close(descriptor)
        return None
    return LockKnocks(descriptor)
