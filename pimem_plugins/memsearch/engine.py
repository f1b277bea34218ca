"""memsearch in-process: its own configuration, a warm embedder, the database opened per call.

Every agent of the mesh runs memsearch with the configuration memsearch resolves (the global
``~/.memsearch/config.toml``, then the project's ``.memsearch.toml`` at the repository
directory), so pimem resolves it the same way and embeds with the same provider and model.
Loading an embedder costs about a second, so each one is kept for the life of the engine.
The Milvus Lite database, by contrast, is leased for as long as calls follow each other and
closed once they stop: its file lock is machine-wide, and holding it while idle would block every
other agent. While it is open, pimem serves it on a Unix socket of its own, where Milvus Lite
would listen on a TCP port any local user can reach (:mod:`.database_socket`).

The engine is what the ``memsearch-index`` plugin sees; each of its jobs is a collaborator of
its own: :mod:`.configuration`, :mod:`.embedders`, :mod:`.database` (with :mod:`.turns`, the
knock protocol), :mod:`.index_runs` and :mod:`.reads`.

Everything here runs on its queue's single worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import MutableMapping
from typing import Any

from pimem_core.plugin import CollectionMissing, Scope
from pimem_plugins.memsearch.configuration import Availability, Configurations
from pimem_plugins.memsearch.database import Database
from pimem_plugins.memsearch.database_uri import is_server
from pimem_plugins.memsearch.embedders import Embedders
from pimem_plugins.memsearch.embedding_model import check_model
from pimem_plugins.memsearch.index_runs import IndexRuns
from pimem_plugins.memsearch.reads import Reads
from pimem_plugins.memsearch.work_queue import BackendQueue

_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "grpc_proxy")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


class MemsearchEngine:
    """memsearch for one plugin manager: configuration per project, embedders kept warm."""

    def __init__(self, queue: BackendQueue) -> None:
        #: The queue every operation of this engine runs on (the lease's release too).
        self.queue = queue
        # One BLAS thread: idle OpenBLAS threads spin on the two cores the search needs. It
        # takes effect only if numpy is not loaded yet, which is when memsearch first runs.
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        _bypass_proxy_for_loopback(os.environ)
        # Milvus Lite logs a traceback when another process holds the database, and its
        # in-process server logs calls it does not implement; pimem reports what matters itself.
        logging.getLogger("milvus_lite").setLevel(logging.CRITICAL)
        logging.getLogger("grpc._server").setLevel(logging.CRITICAL)
        self.configurations = Configurations()
        self.embedders = Embedders(self.configurations)
        self.database = Database(queue, self.embedders)
        self.index_runs = IndexRuns(self.configurations, self.database, self.embedders)
        self.reads = Reads(self.configurations, self.database, self.embedders)

    @property
    def bootstrap_note(self) -> str:
        """What the zero-config start did, or why it did nothing."""
        return self.configurations.bootstrap_note

    @property
    def linger(self) -> float:
        """Seconds the database stays open after a call, waiting for the next one."""
        return self.database.linger

    @linger.setter
    def linger(self, seconds: float) -> None:
        self.database.linger = seconds

    @property
    def opens(self) -> int:
        """How many times this engine opened a database."""
        return self.database.opens

    def event_loop(self) -> asyncio.AbstractEventLoop:
        """The engine's one event loop (for providers whose ``embed`` is async only)."""
        return self.embedders.event_loop()

    def availability(self) -> Availability:
        return self.configurations.availability()

    def config(self, scope: Scope, *, bootstrap: bool = True) -> Any:
        return self.configurations.config(scope, bootstrap=bootstrap)

    def release(self) -> None:
        """Close the database now (its lock goes back to the other agents)."""
        self.database.release()

    def warm(self, scope: Scope) -> None:
        """Load *scope*'s embedder and search once, so the first recall pays no start-up: a
        fresh client's first search loads the collection, several times a warm search."""
        # Nothing indexed yet: the embedder is warm all the same, the collection comes later.
        with contextlib.suppress(CollectionMissing):
            self.reads.recall(scope, "warm-up", 1)

    def rest(self) -> None:
        """Give back what the embedders keep between batches (:meth:`Embedders.rest`)."""
        self.embedders.rest()

    def embedder(self, scope: Scope) -> Any:
        """*scope*'s warm memsearch embedder (loaded on first use)."""
        return self.embedders.get(self.config(scope))

    def chunking(self, scope: Scope) -> tuple[int, int]:
        """memsearch's ``max_chunk_size`` and ``overlap_lines`` for *scope*."""
        chunking = self.config(scope).chunking
        return int(chunking.max_chunk_size), int(chunking.overlap_lines)

    def describe(self, scope: Scope) -> dict[str, str]:
        """Provider, model (and whether it is on this machine) and database, for *scope*;
        looked up on disk only: no embedder is loaded and no model hub asked."""
        config = self.config(scope)
        embedding = config.embedding
        check = check_model(
            str(embedding.provider),
            str(embedding.model or ""),
            configured=self.configurations.configured(config),
            ask_hub=False,
        )
        described = {
            "provider": str(embedding.provider),
            "model": check.describe(),
            "milvus_uri": str(config.milvus.uri),
        }
        unserved = None if is_server(str(config.milvus.uri)) else self.database.unserved_reason()
        if unserved is not None:
            described["database"] = (
                f"closed after every call, not kept open: pimem cannot serve it on a private "
                f"socket ({unserved}), and Milvus Lite's own server lets other local users in"
            )
        return described


def _bypass_proxy_for_loopback(environ: MutableMapping[str, str]) -> None:
    """Keep loopback out of any HTTP proxy the user set for the internet.

    Where pimem cannot serve a local database on its own socket, Milvus Lite serves it on
    127.0.0.1 inside this process, and gRPC honours ``http_proxy``: behind a proxy every
    database call would go to the proxy and fail.
    """
    if not any(environ.get(name) or environ.get(name.upper()) for name in _PROXY_VARIABLES):
        return
    for name in ("no_proxy", "NO_PROXY"):
        hosts = [host for host in environ.get(name, "").split(",") if host.strip()]
        missing = [host for host in _LOOPBACK if host not in hosts]
        environ[name] = ",".join(hosts + missing)
