"""What the backend's failures mean (memsearch missing, another process on the database, a
damaged database, no collection yet) and what pimem tells the user to do about each."""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from pimem_core.plugin import CollectionMissing, NoMemoryYet, PimemError, Scope
from pimem_plugins.memsearch.database_uri import is_server
from pimem_plugins.shared.layout import has_memory_files

REQUIREMENT = "memsearch[onnx]>=0.4.23,<0.5"


class BackendUnavailable(PimemError):
    """memsearch cannot be used in this environment; the message says how to install it."""


class DatabaseLocked(PimemError):
    """Another process kept the Milvus Lite database open through every retry."""


class DatabaseFailed(PimemError):
    """The database could not be used (damaged, unreadable); the message says how to rebuild."""


def install_instructions(reason: str) -> str:
    return (
        f"The memory backend is unavailable: {reason}. pimem needs {REQUIREMENT} in its own "
        f'Python environment: run `pip install "{REQUIREMENT}"` there (or `make venv` in a '
        "pimem checkout), then retry. Writing memory keeps working meanwhile."
    )


def _chain(error: BaseException) -> Iterator[BaseException]:
    """*error* and its causes, each once: pymilvus raises ``e from e``, so a chain can loop."""
    seen: BaseException | None = error
    visited: set[int] = set()
    while seen is not None and id(seen) not in visited:
        visited.add(id(seen))
        yield seen
        seen = seen.__cause__ or seen.__context__


def is_contention(error: BaseException) -> bool:
    """Whether *error* means another process holds the Milvus Lite database.

    memsearch wraps every failed local open in one generic message, and the lock error
    itself is only logged by Milvus Lite, so a generic open failure is checked against the
    database's lock file. An incompatible database is never contention.
    """
    for link in _chain(error):
        text = str(link)
        if type(link).__name__ == "DataDirLockedError" or "another process holds the lock" in text:
            return True
        if "Could not open the local Milvus database at " in text and "is a file" not in text:
            path = text.removeprefix("Could not open the local Milvus database at ").split(":")[0]
            return _lock_held_elsewhere(Path(path))
    return False


def database_failure(error: BaseException) -> str | None:
    """What the database itself said, when *error* came from it (a damaged or unreadable
    database, as opposed to pimem's or memsearch's own failures); else ``None``."""
    for link in _chain(error):
        module = type(link).__module__
        if module.startswith(("pymilvus", "milvus_lite")):
            return str(getattr(link, "message", None) or link)
        if "Could not open the local Milvus database at " in str(link):
            return str(link).split(". ")[0]
    return None


def rebuild_instructions(uri: str, collection: str, said: str = "") -> str:
    """How to rebuild a collection from the markdown files, which hold every memory; for a
    server that did not answer (*said*: the database's message), how to reach it instead:
    nothing is damaged then, and dropping the collection would be the wrong advice."""
    if is_server(uri) and "Fail connecting to server" in said:
        return (
            f"The Milvus server at {uri} did not answer: start it, or correct milvus.uri in "
            "memsearch's configuration. The daily memory files keep every memory meanwhile."
        )
    if is_server(uri):
        return (
            f"If it is damaged, drop collection {collection} on the Milvus server and run "
            "`pimem index`: the daily memory files hold every memory."
        )
    return (
        f"If it is damaged, rebuild it from the daily memory files, which hold every memory: "
        f"move {uri}/collections/{collection} aside (Milvus Lite keeps each collection in a "
        f"directory; or move all of {uri}), then run `pimem index`."
    )


def _lock_held_elsewhere(database: Path) -> bool:
    try:
        fd = os.open(database / "LOCK", os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        return error.errno in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES)
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def no_memory_yet(scope: Scope) -> NoMemoryYet:
    return NoMemoryYet(f"no memory yet in {scope.memory_dir}; write or capture something first")


def collection_missing(scope: Scope) -> CollectionMissing:
    """What to say when the collection does not exist: there may be nothing to index yet.
    (memsearch's own message names its CLI's flags, which do not apply here.)"""
    if not has_memory_files(scope.memory_dir):
        return no_memory_yet(scope)
    return CollectionMissing(
        f"collection {scope.collection} was never indexed on this machine; "
        f"`pimem index` builds it from {scope.memory_dir}"
    )
