"""Where the engine serves a local Milvus Lite database: a Unix socket in pimem's runtime
directory, which only the user may enter.

Milvus Lite's own server listens on a TCP port of 127.0.0.1 while the database is open, and
any local user may connect there and read, write or drop memory; the memory service keeps the
database open much of the day. A socket in a private directory lets in no one else, and no
port is left for anyone to try.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from pimem_core.plugin import private_runtime_dir
from pimem_plugins.memsearch.compat import LiteOnSocket

#: The longest path a Unix socket can be bound at (``sun_path`` holds 108 bytes, its NUL too).
MAX_SOCKET_PATH = 107


def socket_name(database: Path) -> str:
    """``milvus-<digest>.sock``: named after the database, so the process that holds its lock
    finds and replaces a socket left by a holder that was killed."""
    digest = hashlib.sha256(str(database.resolve()).encode("utf-8")).hexdigest()[:12]
    return f"milvus-{digest}.sock"


def serve(database: Path) -> LiteOnSocket:
    """*database* opened and served on its socket; in a fresh private directory of its own when
    the runtime directory cannot be used or is too deep for a socket's path. Raises what
    opening the database raises (``DataDirLockedError`` when another process holds it), and
    ``SocketUnusable`` when no socket can be bound."""
    runtime = private_runtime_dir()
    path = None if runtime is None else runtime / socket_name(database)
    if path is not None and len(os.fsencode(path)) <= MAX_SOCKET_PATH:
        return LiteOnSocket(database, path)
    scratch = Path(tempfile.mkdtemp(prefix="pimem-"))  # made 0700, this user's
    try:
        return LiteOnSocket(database, scratch / "milvus.sock", scratch=scratch)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
