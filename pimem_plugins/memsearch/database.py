"""memsearch on the database: opened with a warm embedder, served on pimem's own socket, leased
while calls follow each other closely, and closed once they stop.

Milvus Lite's file lock is machine-wide, so holding the database while idle would block every
other agent of the mesh; and Milvus Lite's own server listens on a TCP port any local user can
reach, which is why pimem serves an open database itself (:mod:`.database_socket`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from pimem_core.plugin import DayText, Scope
from pimem_plugins.memsearch import database_socket
from pimem_plugins.memsearch.compat import (
    LiteOnSocket,
    SocketUnusable,
    forget_unused_connections,
    lite_socket_unsupported,
    memsearch_with_embedder,
    read_markdown_through,
)
from pimem_plugins.memsearch.configuration import Configurations
from pimem_plugins.memsearch.database_uri import is_server, keep_database_private
from pimem_plugins.memsearch.embedders import Embedders
from pimem_plugins.memsearch.errors import database_failure, is_contention
from pimem_plugins.memsearch.like_length import like_length
from pimem_plugins.memsearch.turns import Turns
from pimem_plugins.memsearch.work_queue import BackendQueue

DEFAULT_LINGER_SECONDS = 1.0


@attrs.define
class Lease:
    key: tuple[str, str, int]
    memsearch: Any
    #: The local database served on pimem's own socket for this lease, if it is.
    served: LiteOnSocket | None = None
    last_used: float = 0.0


def quiet_pymilvus() -> None:
    """pymilvus logs a traceback for every failed call; pimem reports the failure itself.
    Its import sets its logger up, so the level is set after importing it."""
    import pymilvus  # noqa: F401

    logging.getLogger("pymilvus").setLevel(logging.CRITICAL)


class Database:
    """The engine's one open database at most, and every open and close of one."""

    def __init__(self, queue: BackendQueue, embedders: Embedders) -> None:
        #: The queue the lease's release runs on, as every other operation of the engine.
        self.queue = queue
        self._embedders = embedders
        self.lease: Lease | None = None
        self._release_timer: threading.Timer | None = None
        self.turns = Turns(holding=lambda: self.lease is not None, release=self.release)
        #: Seconds the database stays open after a call, waiting for the next one.
        self.linger = DEFAULT_LINGER_SECONDS
        #: Why local databases cannot be served on pimem's own socket; looked up once.
        self._unserved: str | None = None
        self._serving_checked = False
        #: How many times this engine opened a database (its lease, an index run's own client,
        #: a read-only count): what a test or a benchmark sees of the database's cost.
        self.opens = 0

    # -- opening and closing ------------------------------------------------------------

    def open(
        self, scope: Scope, config: Any, *, paths: tuple[str, ...] = (), create: bool = False
    ) -> tuple[Any, LiteOnSocket | None]:
        """A ``MemSearch`` for *scope*'s collection that reuses the warm embedder, and the
        local database served for it (close it after the ``MemSearch``). With *create*, a
        local database that does not exist yet is made (an index run writes to it).

        A failed open that the lock does not explain is tried once more: the holder may have
        let go between the failure and the look at the lock, and only a database that fails
        twice is taken for damaged."""
        try:
            return self._open(scope, config, paths, create)
        except Exception as error:
            if is_contention(error) or database_failure(error) is None:
                raise
            time.sleep(0.05)
            return self._open(scope, config, paths, create)

    def _open(
        self, scope: Scope, config: Any, paths: tuple[str, ...], create: bool
    ) -> tuple[Any, LiteOnSocket | None]:
        quiet_pymilvus()
        embedder = self._embedders.get(config)  # loaded before the database is taken
        keep_database_private(str(config.milvus.uri), scope, create=create)
        served = self.serve(str(config.milvus.uri), create=create)
        try:
            memsearch = memsearch_with_embedder(
                like_length(embedder, self._embedders.precedence.step_aside),
                paths=list(paths),
                embedding_provider=config.embedding.provider,
                embedding_model=config.embedding.model or None,
                milvus_uri=config.milvus.uri if served is None else served.uri,
                milvus_token=config.milvus.token or None,
                collection=scope.collection,
                max_chunk_size=config.chunking.max_chunk_size,
                overlap_lines=config.chunking.overlap_lines,
                ignore_files=list(config.indexing.ignore_files),
                exclude=list(config.indexing.exclude),
                reranker_model=config.reranker.model,
            )
        except BaseException:
            if served is not None:
                served.close()
            raise
        # Conflict markers never reach the collection (ADR 0016): a conflicted file is
        # chunked with its markers blank, so every other line keeps its number.
        read_markdown_through(memsearch, lambda text: DayText(text).blank_conflicts())
        return memsearch, served

    def unserved_reason(self) -> str | None:
        """Why local databases are not served on pimem's own socket here, so are closed after
        every call; ``None`` when they are."""
        if not self._serving_checked:
            self._unserved = lite_socket_unsupported()
            self._serving_checked = True
        return self._unserved

    def serve(self, uri: str, *, create: bool) -> LiteOnSocket | None:
        """Local database *uri*, opened and served on pimem's own socket; ``None`` for a server,
        for a database that does not exist and is only read (memsearch then opens nothing and
        creates nothing), and where it cannot be served so (:meth:`unserved_reason`): memsearch
        opens the database itself then, on Milvus Lite's own server."""
        if is_server(uri):
            return None
        database = Path(uri).expanduser()
        if (not create and not database.exists()) or self.unserved_reason() is not None:
            return None
        if database.exists() and not database.is_dir():
            # Not a Milvus Lite 3 database (a 2.x file, a wrong path): memsearch's own open
            # fails with the message that says so, and nothing is served.
            return None
        try:
            return database_socket.serve(database)
        except SocketUnusable as error:
            self._unserved = str(error)
            return None

    def opened(self, uri: str) -> None:
        """After this process opened *uri*."""
        self.opens += 1
        self.turns.opened(uri)

    def close(self, memsearch: Any, served: LiteOnSocket | None, uri: str) -> None:
        try:
            memsearch.close()
        finally:
            if served is not None:
                # The channel pymilvus keeps goes first: a server stopped under it makes gRPC
                # log the lost connection on stderr.
                forget_unused_connections()
                served.close()
            # Whatever connection pymilvus would keep goes with the database.
            forget_unused_connections()
            self.turns.closed(uri)

    # -- the lease ----------------------------------------------------------------------

    def _leased(self, scope: Scope, config: Any, *, create: bool = False) -> Any:
        """An open ``MemSearch`` for *scope*'s collection, reused while calls keep coming.

        Opening Milvus Lite costs tens of milliseconds and a freshly opened collection
        searches several times slower, so the database stays open between calls that follow
        each other closely and is closed once no call came for the linger time. Only one
        database is open at a time: closing a Milvus Lite client stops the database for the
        whole process, so two open clients would pull the ground from under each other.
        """
        uri = str(config.milvus.uri)
        key = (uri, scope.collection, id(config))
        if self.lease is not None and self.lease.key != key:
            self.release()
        self.turns.take(uri)
        if self.lease is None:
            memsearch, served = self.open(scope, config, create=create)
            self.lease = Lease(key=key, memsearch=memsearch, served=served)
            self.opened(uri)
        return self.lease.memsearch

    def _used(self) -> None:
        """Note a call; the lease is closed after the linger time unless another one comes.
        A local database not served on pimem's own socket is closed at once: Milvus Lite's own
        server lets other local users in for as long as it is open."""
        if self.lease is None:
            return
        self.lease.last_used = time.monotonic()
        if self.linger <= 0 or (self.lease.served is None and not is_server(self.lease.key[0])):
            self.release()
            return
        # One pending release at a time: a burst of calls must not leave a thread per call.
        if self._release_timer is not None:
            self._release_timer.cancel()
        self._release_timer = threading.Timer(self.linger, self._release_when_idle)
        self._release_timer.daemon = True
        self._release_timer.start()

    def _release_when_idle(self) -> None:
        def release_if_idle() -> None:
            lease = self.lease
            if lease is not None and time.monotonic() - lease.last_used >= self.linger:
                self.release()

        self.queue.run("release", release_if_idle)

    def release(self) -> None:
        """Close the database now (its lock goes back to the other agents)."""
        lease, self.lease = self.lease, None
        if lease is not None:
            self.close(lease.memsearch, lease.served, lease.key[0])

    @contextlib.contextmanager
    def use(self, scope: Scope, config: Any, *, create: bool = False) -> Iterator[Any]:
        """The leased ``MemSearch`` for one call (*create*: one that writes); a failed call
        drops the lease."""
        try:
            yield self._leased(scope, config, create=create)
        except BaseException:
            self.release()
            raise
        self._used()


@attrs.define(eq=False)
class OnDatabase:
    """An engine's room that works on collections through its leased database (its index runs,
    its reads), with the collaborators every such room takes: memsearch's configuration per
    project, the database, and the warm embedders."""

    _configurations: Configurations
    _database: Database
    _embedders: Embedders
