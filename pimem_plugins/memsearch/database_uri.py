"""What memsearch's ``milvus.uri`` names: a Milvus server, or a Milvus Lite database on this
disk, kept private when it holds more than the project's own memory."""

from __future__ import annotations

import contextlib
from pathlib import Path

from pimem_core.plugin import Scope, private_dir


def is_server(uri: str) -> bool:
    """Whether memsearch's ``milvus.uri`` names a Milvus server (or Zilliz Cloud) rather than
    a local Milvus Lite database: a server has no file lock and nothing on this disk."""
    return uri.startswith(("http://", "https://", "tcp://", "unix:"))


def keep_database_private(uri: str, scope: Scope, *, create: bool) -> None:
    """A Milvus Lite database outside the project holds the memory of every project that uses
    it, as pimem's own files do: made 0700 (by *create*, before Milvus Lite makes it with the
    umask's mode), or tightened when found open. One in the project is the project's."""
    if is_server(uri):
        return
    # Resolved, so a project reached through a link still holds its own database.
    database = Path(uri).expanduser().resolve()
    if database.is_relative_to(scope.repository_dir.resolve()):
        return
    if create or database.is_dir():
        # One that cannot be made is memsearch's to report, in its own words.
        with contextlib.suppress(OSError):
            private_dir(database, root=database)
