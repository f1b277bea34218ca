"""memsearch in-process: its own configuration, a warm embedder, the database opened per call.

Every agent of the mesh runs memsearch with the configuration memsearch resolves (the global
``~/.memsearch/config.toml``, then the project's ``.memsearch.toml`` at the repository
directory), so pimem resolves it the same way and embeds with the same provider and model.
Loading an embedder costs about a second, so each one is kept for the life of the engine.
The Milvus Lite database, by contrast, is leased for as long as calls follow each other and
closed once they stop: its file lock is machine-wide, and holding it while idle would block every
other agent. While it is open, pimem serves it on a Unix socket of its own, where Milvus Lite
would listen on a TCP port any local user can reach (:mod:`.database_socket`).

Everything here runs on its queue's single worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import hashlib
import importlib.metadata
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import Any

import attrs

from pimem_core.plugin import (
    Anchor,
    CollectionMissing,
    FailedFile,
    IndexReport,
    IndexStateError,
    NoMemoryYet,
    PimemError,
    PimemPaths,
    Scope,
    ScoreKind,
    SearchHit,
    Section,
    blank_conflicts,
    conflicted_files,
    describe_conflicted,
    give_back_memory,
    private_dir,
    without_marker_lines,
)
from pimem_plugins.memsearch import database_socket, lock_knocks
from pimem_plugins.memsearch.compat import (
    CollectionState,
    LiteOnSocket,
    SocketUnusable,
    dense_search,
    forget_unused_connections,
    index_with_progress,
    lite_socket_unsupported,
    memsearch_with_embedder,
    milvus_lite_collection_state,
    onnx_sessions_without_spinning,
    read_markdown_through,
    release_onnx_arena,
)
from pimem_plugins.memsearch.config import config_files, global_config_path, project_config_path
from pimem_plugins.memsearch.embedding_model import (
    EmbeddingModelMissing,
    check_model,
    load_embedder,
)
from pimem_plugins.memsearch.ledger import DayFile, IndexLedger
from pimem_plugins.memsearch.offline_model import MODEL_ID, PROVIDER, installed_model
from pimem_plugins.memsearch.work_queue import BackendQueue
from pimem_plugins.shared.index_state import read_index_state
from pimem_plugins.shared.layout import has_memory_files

REQUIREMENT = "memsearch[onnx]>=0.4.23,<0.5"
NEGATIVE_PROBE_SECONDS = 30.0
DEFAULT_LINGER_SECONDS = 1.0
#: When another process knocks at the open local database (opens its lock file: a
#: ``memsearch`` command that found it taken, say), the database is closed before the next
#: call and left closed until the knocker comes back for it, for this long at most: under a
#: steady stream of calls (a busy memory service) the other agents of the mesh still get in.
COURTESY_SECONDS = 5.0
#: Where knocks cannot be seen: a local database in use this long without a pause (open, or
#: closed and opened again at once) is left closed for :data:`YIELD_SECONDS` before the next
#: call, whether or not anyone waits for it.
MAX_HOLD_SECONDS = 3.0
YIELD_SECONDS = 2.5
_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "grpc_proxy")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
CHUNK_HASH = re.compile(r"[0-9a-f]{16}")
_ANCHOR = re.compile(r"<!--\s*session:(\S+)\s+turn:(\S+)\s+transcript:(\S+)\s*-->")
_HEADING = re.compile(r"^(#{1,6})\s+(.+)$")


def zero_config() -> dict[str, dict[str, str]]:
    """The embedding settings that apply while no memsearch configuration exists: the onnx
    provider, as memsearch's own agent plugins choose, with pimem's offline model once it is
    installed (else memsearch's default onnx model, from the model hub)."""
    if installed_model() is None:
        return {"embedding": {"provider": PROVIDER}}
    return {"embedding": {"provider": PROVIDER, "model": MODEL_ID}}


class BackendUnavailable(PimemError):
    """memsearch cannot be used in this environment; the message says how to install it."""


class DatabaseLocked(PimemError):
    """Another process kept the Milvus Lite database open through every retry."""


class DatabaseFailed(PimemError):
    """The database could not be used (damaged, unreadable); the message says how to rebuild."""


@attrs.define
class _Lease:
    key: tuple[str, str, int]
    memsearch: Any
    #: The local database served on pimem's own socket for this lease, if it is.
    served: LiteOnSocket | None = None
    last_used: float = 0.0


@attrs.frozen
class Availability:
    version: str | None
    reason: str | None = None

    @property
    def available(self) -> bool:
        return self.reason is None


def install_instructions(reason: str) -> str:
    return (
        f"The memory backend is unavailable: {reason}. pimem needs {REQUIREMENT} in its own "
        f'Python environment: run `pip install "{REQUIREMENT}"` there (or `make venv` in a '
        "pimem checkout), then retry. Writing memory keeps working meanwhile."
    )


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


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


def is_server(uri: str) -> bool:
    """Whether memsearch's ``milvus.uri`` names a Milvus server (or Zilliz Cloud) rather than
    a local Milvus Lite database: a server has no file lock and nothing on this disk."""
    return uri.startswith(("http://", "https://", "tcp://", "unix:"))


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


def extract_section(lines: list[str], start_line: int, level: int) -> tuple[str, int, int]:
    """The section around a chunk, as memsearch's expand shows it: from the chunk's heading
    to the next heading of the same or a higher level, without the blank lines that end it.
    Lines are 1-based and inclusive in the result, as in a hit's range."""
    start = start_line - 1
    end = len(lines)
    if level > 0:
        for i in range(min(start_line, len(lines)) - 1, -1, -1):
            match = _HEADING.match(lines[i])
            if match and len(match.group(1)) <= level:
                start = i
                break
        for i in range(start_line, len(lines)):
            match = _HEADING.match(lines[i])
            if match and len(match.group(1)) <= level:
                end = i
                break
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return "\n".join(lines[start:end]), start + 1, end


def parse_anchor(text: str) -> Anchor | None:
    match = _ANCHOR.search(text)
    if match is None:
        return None
    return Anchor(session=match.group(1), turn=match.group(2), transcript=match.group(3))


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
        self._embedders: dict[tuple[object, ...], Any] = {}
        # Embedders are asked for off the queue too (the read model encodes on its own
        # threads): two loading at once would keep two copies of the model.
        self._embedders_lock = threading.Lock()
        self._event_loop: asyncio.AbstractEventLoop | None = None
        self._probe: Availability | None = None
        self._probed_at = 0.0
        self.bootstrap_note = "not checked yet"
        self._lease: _Lease | None = None
        self._release_timer: threading.Timer | None = None
        #: When the database was last closed, and since when it has been in use with no
        #: pause long enough for another process to take it (:meth:`_take_turn`).
        self._closed_at = float("-inf")
        self._streak: float | None = None
        #: Other processes' opens of the local database's lock file, by database.
        self._knocks: dict[str, lock_knocks.LockKnocks | None] = {}
        self._owed = False
        self._configs: dict[tuple[Path, Path, str], tuple[tuple[object, ...], Any]] = {}
        #: Configurations made of pimem's zero-config defaults, no file: by id.
        self._zero_configs: dict[int, Any] = {}
        #: Seconds the database stays open after a call, waiting for the next one.
        self.linger = DEFAULT_LINGER_SECONDS
        #: Why local databases cannot be served on pimem's own socket; looked up once.
        self._unserved: str | None = None
        self._serving_checked = False
        self._ledgers: dict[tuple[str, str], IndexLedger] = {}
        #: How many times this engine opened a database (its lease, an index run's own client,
        #: a read-only count): what a test or a benchmark sees of the database's cost.
        self.opens = 0
        #: Each local collection's chunk count as last counted, with the collection's files as
        #: they were then (by database and collection).
        self._counts: dict[tuple[str, str], tuple[CollectionState, int]] = {}

    @property
    def _loop(self) -> asyncio.AbstractEventLoop:
        """One event loop for every call: memsearch's HTTP-based providers break on a new one."""
        if self._event_loop is None:
            self._event_loop = asyncio.new_event_loop()
        return self._event_loop

    # -- availability and configuration ---------------------------------------------------

    def availability(self) -> Availability:
        """Whether memsearch can be imported; a failure is re-checked after 30 s."""
        fresh = time.monotonic() - self._probed_at < NEGATIVE_PROBE_SECONDS
        if self._probe is not None and (self._probe.available or fresh):
            return self._probe
        try:
            import memsearch.core  # the import is the probe
            import memsearch.store  # noqa: F401

            self._probe = Availability(version=importlib.metadata.version("memsearch"))
        except Exception as error:  # noqa: BLE001 - any import failure: the backend cannot run
            self._probe = Availability(version=None, reason=f"memsearch failed to import ({error})")
        self._probed_at = time.monotonic()
        return self._probe

    def require(self) -> None:
        availability = self.availability()
        if availability.reason is not None:
            raise BackendUnavailable(install_instructions(availability.reason))

    def bootstrap(self, scope: Scope) -> None:
        """Zero-config start: with no memsearch configuration at all and the offline model
        installed, write the onnx provider and that model to memsearch's global configuration,
        so every agent of the mesh embeds alike. Without the model nothing is written: a
        configuration naming a model that is not there would hold back every other agent. An
        existing configuration is never changed."""
        if global_config_path().exists():
            self.bootstrap_note = f"not needed (existing config: {global_config_path()})"
            return
        if project_config_path(scope.repository_dir).exists():
            self.bootstrap_note = (
                f"not needed (existing config: {project_config_path(scope.repository_dir)})"
            )
            return
        if installed_model() is None:
            self.bootstrap_note = (
                "waiting for the offline model (`pimem model install-offline`); until then "
                "memsearch's onnx defaults apply, and no configuration is written"
            )
            return
        from memsearch.config import set_config_value

        try:
            with config_files(scope.repository_dir):
                set_config_value("embedding.provider", PROVIDER)
                set_config_value("embedding.model", MODEL_ID)
        except OSError as error:
            self.bootstrap_note = f"failed ({error})"
            return
        self.bootstrap_note = (
            f"set embedding.provider = {PROVIDER} and embedding.model = {MODEL_ID} "
            f"in {global_config_path()}"
        )

    def config(self, scope: Scope, *, bootstrap: bool = True) -> Any:
        """memsearch's resolved configuration for *scope*, re-read when its files change.

        With *bootstrap* false nothing is written (a read of a project the session does not
        own). With no configuration at all, :func:`zero_config` applies in memory.
        """
        self.require()
        if bootstrap:
            self.bootstrap(scope)
        files = (global_config_path(), project_config_path(scope.repository_dir))
        stamp = tuple(_stamp(path) for path in files)
        defaults = zero_config() if stamp == (None, None) else None
        key = (*files, str(defaults))
        cached = self._configs.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        from memsearch.config import ConfigEnvVarError, resolve_config

        try:
            with config_files(scope.repository_dir):
                config = resolve_config(default_overrides=defaults)
        except ConfigEnvVarError as error:
            raise PimemError(f"memsearch configuration error: {error}") from None
        except (OSError, ValueError) as error:
            raise PimemError(f"cannot read memsearch's configuration: {error}") from None
        self._configs[key] = (stamp, config)
        if defaults is not None:
            self._zero_configs[id(config)] = config
        return config

    def _embedder(self, config: Any) -> Any:
        """The warm embedder for *config*; a model that cannot be had fails at once."""
        embedding = config.embedding
        key = (
            embedding.provider,
            embedding.model,
            embedding.batch_size,
            embedding.base_url,
            embedding.api_key,
        )
        with self._embedders_lock:
            if key not in self._embedders:
                self._embedders[key] = self._load_embedder(config)
            return self._embedders[key]

    def _load_embedder(self, config: Any) -> Any:
        embedding = config.embedding
        options = {
            "batch_size": embedding.batch_size,
            "base_url": embedding.base_url or None,
            "api_key": embedding.api_key or None,
        }
        configured = config is not self._zero_configs.get(id(config))
        try:
            with onnx_sessions_without_spinning():
                return load_embedder(
                    embedding.provider, embedding.model, configured=configured, options=options
                )
        except EmbeddingModelMissing:
            raise
        except Exception as error:  # the provider's own failure, reported with the fix
            said = str(error).strip().rstrip(".")
            raise PimemError(
                f"memsearch could not load the embedding provider {embedding.provider} "
                f"with the model {embedding.model or 'it defaults to'} ({said}); check "
                f"`embedding` in {global_config_path()}"
            ) from error

    def _memsearch(
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
        _quiet_pymilvus()
        embedder = self._embedder(config)  # loaded before the database is taken
        keep_database_private(str(config.milvus.uri), scope, create=create)
        served = self._serve(str(config.milvus.uri), create=create)
        try:
            memsearch = memsearch_with_embedder(
                embedder,
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
        read_markdown_through(memsearch, blank_conflicts)
        return memsearch, served

    def unserved_reason(self) -> str | None:
        """Why local databases are not served on pimem's own socket here, so are closed after
        every call; ``None`` when they are."""
        if not self._serving_checked:
            self._unserved = lite_socket_unsupported()
            self._serving_checked = True
        return self._unserved

    def _serve(self, uri: str, *, create: bool) -> LiteOnSocket | None:
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

    def _close(self, memsearch: Any, served: LiteOnSocket | None, uri: str) -> None:
        try:
            memsearch.close()
        finally:
            if served is not None:
                # The channel pymilvus keeps goes first: a server stopped under it makes gRPC
                # log the lost connection on stderr.
                forget_unused_connections()
                served.close()
            self._closed(uri)

    def _missing(self, scope: Scope) -> CollectionMissing:
        """What to say when the collection does not exist: there may be nothing to index yet.
        (memsearch's own message names its CLI's flags, which do not apply here.)"""
        if not has_memory_files(scope.memory_dir):
            return no_memory_yet(scope)
        return CollectionMissing(
            f"collection {scope.collection} was never indexed on this machine; "
            f"`pimem index` builds it from {scope.memory_dir}"
        )

    # -- the database lease -------------------------------------------------------------

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
        if self._lease is not None and self._lease.key != key:
            self.release()
        self._take_turn(uri)
        if self._lease is None:
            memsearch, served = self._memsearch(scope, config, create=create)
            self._lease = _Lease(key=key, memsearch=memsearch, served=served)
            self._opened(uri)
        return self._lease.memsearch

    def _used(self) -> None:
        """Note a call; the lease is closed after the linger time unless another one comes.
        A local database not served on pimem's own socket is closed at once: Milvus Lite's own
        server lets other local users in for as long as it is open."""
        if self._lease is None:
            return
        self._lease.last_used = time.monotonic()
        if self.linger <= 0 or (self._lease.served is None and not is_server(self._lease.key[0])):
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
            lease = self._lease
            if lease is not None and time.monotonic() - lease.last_used >= self.linger:
                self.release()

        self.queue.run("release", release_if_idle)

    def release(self) -> None:
        """Close the database now (its lock goes back to the other agents)."""
        lease, self._lease = self._lease, None
        if lease is not None:
            self._close(lease.memsearch, lease.served, lease.key[0])

    def _watch(self, uri: str) -> lock_knocks.LockKnocks | None:
        """The knocks at local database *uri*, once it exists (``None`` where inotify is not
        available: turns are then taken on a timer)."""
        if uri not in self._knocks:
            database = Path(uri).expanduser()
            if not database.is_dir():
                return None  # not made yet: looked for again at the next call
            self._knocks[uri] = lock_knocks.watch(database)
        return self._knocks[uri]

    def _opened(self, uri: str) -> None:
        """After this process opened *uri*: its own knock, and those made while it was closed,
        are nobody waiting for it."""
        self.opens += 1
        knocks = None if is_server(uri) else self._watch(uri)
        if knocks is not None:
            knocks.forget()

    def _closed(self, uri: str) -> None:
        """After this process closed *uri*: a knock while it was open is remembered (the
        knocker is owed a turn), and the connection pymilvus would keep is dropped."""
        forget_unused_connections()
        self._closed_at = time.monotonic()
        knocks = self._knocks.get(uri)
        self._owed = knocks is not None and knocks.knocked()

    def _take_turn(self, uri: str) -> None:
        """Before a call on a local database: when another process knocked while it was
        open, close it and leave it to them (on the backend queue, so pimem's own calls wait
        with it). Where knocks cannot be seen, after :data:`MAX_HOLD_SECONDS` of use with no
        pause of :data:`YIELD_SECONDS`, close it and wait that long."""
        if is_server(uri):
            return  # a server has no lock to share
        knocks = self._watch(uri)
        if knocks is not None:
            if self._lease is not None and knocks.knocked():
                self.release()
                self._owed = True
            if self._owed:
                self._owed = False
                self._step_aside(knocks, until=self._closed_at + COURTESY_SECONDS)
            return
        now = time.monotonic()
        if self._streak is None or (self._lease is None and now - self._closed_at >= YIELD_SECONDS):
            self._streak = now  # left alone long enough: a new stretch of use begins
        elif now - self._streak >= MAX_HOLD_SECONDS:
            self.release()
            time.sleep(YIELD_SECONDS)
            self._streak = time.monotonic()

    @staticmethod
    def _step_aside(knocks: lock_knocks.LockKnocks, *, until: float) -> None:
        """Wait, the database closed, until the knocker comes back (and a moment more, for it
        to take the lock) or the clock reads *until*."""
        while time.monotonic() < until:
            if knocks.knocked():
                time.sleep(0.2)
                return
            time.sleep(0.1)

    @contextlib.contextmanager
    def _database(self, scope: Scope, config: Any, *, create: bool = False) -> Iterator[Any]:
        """The leased ``MemSearch`` for one call (*create*: one that writes); a failed call
        drops the lease."""
        try:
            yield self._leased(scope, config, create=create)
        except BaseException:
            self.release()
            raise
        self._used()

    # -- operations ---------------------------------------------------------------------

    def ledger(self, scope: Scope) -> IndexLedger:
        """*scope*'s index ledger for the collection as memsearch's configuration names it
        now (database and embedding model): what this machine last indexed of each day file."""
        config = self.config(scope)
        embedding = config.embedding
        key = "\0".join(
            (
                str(config.milvus.uri),
                scope.collection,
                str(embedding.provider),
                str(embedding.model or ""),
                str(scope.memory_dir),
            )
        )
        file = (
            PimemPaths.from_env().state_dir
            / "index-ledger"
            / f"{scope.collection}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.json"
        )
        slot = (str(scope.memory_dir), scope.collection)
        ledger = self._ledgers.get(slot)
        if ledger is None or ledger.file != file:
            ledger = self._ledgers[slot] = IndexLedger(file, scope.memory_dir)
        return ledger

    def ledger_if_open(self, scope: Scope) -> IndexLedger | None:
        """*scope*'s ledger when this engine has used it: a write need not load memsearch."""
        return self._ledgers.get((str(scope.memory_dir), scope.collection))

    def index(
        self,
        scope: Scope,
        files: tuple[Path, ...],
        progress: Callable[[int, int], None] | None,
        *,
        budget: float | None = None,
    ) -> IndexReport:
        """memsearch's index of the store, or of just *files* (a partial update, as
        ``memsearch index <file>`` does: nothing else is pruned). With a *budget* (seconds),
        *files* are taken in order until it is spent, at least one: the report's
        ``total_files`` says how many. The ledger records what the run took in."""
        config = self.config(scope)
        ledger = self.ledger(scope)
        taken = ledger.fingerprint(files or None)
        from memsearch.index_report import IndexFailure
        from memsearch.index_state import (
            record_index_error,
            record_index_report,
            record_index_started,
        )

        paths = tuple(str(file) for file in files) or (str(scope.memory_dir),)
        state = {
            "operation": "index",
            "paths": paths,
            "collection": scope.collection,
            "milvus_uri": config.milvus.uri,
        }
        state_path = scope.index_state_path
        if state_path is not None:
            _drop_unreadable_state(state_path)
            record_index_started(state_path, **state)
        try:
            if files:
                # A few changed files go through the leased client: reopening the database
                # afterwards would cost more than the update (at 20,000 chunks, a second).
                deadline = None if budget is None else time.monotonic() + budget
                with self._database(scope, config, create=True) as memsearch:
                    report = self._loop.run_until_complete(_index_files(memsearch, files, deadline))
            else:
                # Searching through the client that ran a full index is slow: use a client
                # of its own, and close it.
                self.release()
                self._take_turn(str(config.milvus.uri))
                memsearch, served = self._memsearch(scope, config, paths=paths, create=True)
                self._opened(str(config.milvus.uri))
                try:
                    report = self._loop.run_until_complete(
                        index_with_progress(memsearch, progress)
                        if progress
                        else memsearch.index_with_report()
                    )
                finally:
                    self._close(memsearch, served, str(config.milvus.uri))
        except Exception as error:
            if state_path is not None:
                record_index_error(state_path, error, **state)
            self.rest()
            raise
        if report.indexed_chunks:
            self.rest()
        if state_path is not None:
            record_index_report(state_path, report, **state)
        failures: tuple[IndexFailure, ...] = report.failed_files
        ledger.record(_taken_in(taken, files[: report.total_files] if files else None, failures))
        return IndexReport(
            indexed_chunks=report.indexed_chunks,
            total_files=report.total_files,
            failed_files=tuple(FailedFile(path=f.path, error=f.error) for f in failures),
        )

    def search(
        self, scope: Scope, text: str, top_k: int, *, bootstrap: bool = True
    ) -> tuple[SearchHit, ...]:
        config = self.config(scope, bootstrap=bootstrap)
        from memsearch.store import CollectionNotFoundError

        try:
            with self._database(scope, config) as memsearch:
                results = self._loop.run_until_complete(memsearch.search(text, top_k=top_k))
        except CollectionNotFoundError:
            raise self._missing(scope) from None
        kind: ScoreKind = "reranker" if config.reranker.model else "rank_fusion"
        return tuple(_hit(result, kind) for result in results)

    def expand(self, scope: Scope, chunk_hash: str, *, bootstrap: bool = True) -> Section:
        if not CHUNK_HASH.fullmatch(chunk_hash):
            raise PimemError(f"chunk hash must be 16 lowercase hex digits, got {chunk_hash!r}")
        config = self.config(scope, bootstrap=bootstrap)
        from memsearch.store import CollectionNotFoundError

        try:
            with self._database(scope, config) as memsearch:
                chunks = memsearch.store.query(filter_expr=f'chunk_hash == "{chunk_hash}"')
        except CollectionNotFoundError:
            raise self._missing(scope) from None
        if not chunks:
            raise PimemError(
                f"chunk {chunk_hash} is not in collection {scope.collection}; "
                "it may have been re-indexed under a new hash: search again"
            )
        return section_of(chunk_hash, chunks[0])

    def compact(self, scope: Scope, scrub: Callable[[str], str]) -> str:
        """memsearch's compaction summary, with secrets kept out of it: the chunks are scrubbed
        before the LLM reads them and the summary before it is returned (the store writes it).
        The database is closed during the LLM call, which can take minutes: other agents may
        use it meanwhile."""
        conflicted = conflicted_files(scope.memory_dir)
        if conflicted:
            # A store in the middle of a merge is not settled enough to be summed up.
            raise PimemError(f"memory compaction refused: {describe_conflicted(conflicted)}")
        config = self.config(scope)
        from memsearch.compact import compact_chunks
        from memsearch.store import CollectionNotFoundError

        llm, legacy = config.llm, config.compact
        prompt = None
        if config.prompts.compact:
            prompt = Path(config.prompts.compact).expanduser().read_text(encoding="utf-8")
        elif legacy.prompt_file:
            prompt = Path(legacy.prompt_file).read_text(encoding="utf-8")
        try:
            with self._database(scope, config) as memsearch:
                chunks = memsearch.store.query()
        except CollectionNotFoundError:
            return ""  # never indexed: there is nothing to compact
        finally:
            self.release()
        if not chunks:
            return ""
        return scrub(
            self._loop.run_until_complete(
                compact_chunks(
                    [{**chunk, "content": scrub(str(chunk["content"]))} for chunk in chunks],
                    llm_provider=llm.provider or legacy.llm_provider,
                    model=llm.model or legacy.llm_model or None,
                    prompt_template=prompt,
                    base_url=llm.base_url or legacy.base_url or None,
                    api_key=llm.api_key or legacy.api_key or None,
                )
            )
        )

    def warm(self, scope: Scope) -> None:
        """Load *scope*'s embedder and search once, so the first recall pays no start-up: a
        fresh client's first search loads the collection, several times a warm search."""
        # Nothing indexed yet: the embedder is warm all the same, the collection comes later.
        with contextlib.suppress(CollectionMissing):
            self.recall(scope, "warm-up", 1)

    def recall(self, scope: Scope, text: str, top_k: int) -> tuple[tuple[SearchHit, float], ...]:
        """The chunks most similar to *text* (dense search, cosine), each with its similarity.

        Auto-context filters on similarity, so it ranks by it too. memsearch's hybrid search
        would add BM25 matches that the filter then drops, and in Milvus Lite its BM25 half
        costs as much as the dense one again, and a few hundred MB to keep loaded at 20,000
        chunks. The hits' ``score`` is the similarity. A store with no memory yet has no hits.
        """
        config = self.config(scope)
        from memsearch.store import CollectionNotFoundError

        vector = self._loop.run_until_complete(self._embedder(config).embed([text]))[0]
        try:
            with self._database(scope, config) as memsearch:
                found = dense_search(memsearch, vector, top_k)
        except CollectionNotFoundError:
            missing = self._missing(scope)
            if isinstance(missing, NoMemoryYet):
                return ()  # nothing to recall, and nothing wrong
            raise missing from None
        return tuple(
            (_hit({**hit, "score": hit["distance"]}, "similarity"), float(hit["distance"]))
            for hit in found
        )

    def event_loop(self) -> asyncio.AbstractEventLoop:
        """The engine's one event loop (for providers whose ``embed`` is async only)."""
        return self._loop

    def rest(self) -> None:
        """Give back what the embedders keep between batches (ONNX Runtime's memory arena):
        after an index run that embedded, and when the read model's background work is done.
        Any thread: a run in flight keeps what it uses."""
        released = [release_onnx_arena(embedder) for embedder in list(self._embedders.values())]
        if any(released):  # every arena, then what they freed (the allocator keeps it else)
            give_back_memory()

    def embedder(self, scope: Scope) -> Any:
        """*scope*'s warm memsearch embedder (loaded on first use)."""
        return self._embedder(self.config(scope))

    def chunking(self, scope: Scope) -> tuple[int, int]:
        """memsearch's ``max_chunk_size`` and ``overlap_lines`` for *scope*."""
        chunking = self.config(scope).chunking
        return int(chunking.max_chunk_size), int(chunking.overlap_lines)

    def rows(self, scope: Scope, filter_expr: str = "") -> list[dict[str, Any]]:
        """*scope*'s chunks as the collection holds them, vectors included, for the read
        model. Read in batches: a collection is read whole once, when no cache has it."""
        config = self.config(scope)
        from memsearch.store import CollectionNotFoundError

        fields = [
            "chunk_hash",
            "embedding",
            "content",
            "source",
            "heading",
            "heading_level",
            "start_line",
            "end_line",
        ]
        try:
            with self._database(scope, config) as memsearch:
                store = memsearch.store
                store._require_collection()
                client = store._connected_client()
                batches = client.query_iterator(
                    store._collection, batch_size=2_000, filter=filter_expr, output_fields=fields
                )
                rows: list[dict[str, Any]] = []
                try:
                    while batch := batches.next():
                        rows.extend(dict(row) for row in batch)
                finally:
                    batches.close()
        except CollectionNotFoundError:
            raise self._missing(scope) from None
        return rows

    def count(self, scope: Scope) -> int | None:
        """Chunks in *scope*'s collection; ``None`` when it was never created.

        Counting needs no embedder, so none is loaded: status stays fast, and answers even
        when the embedding model is missing. An open lease is used as it is. Else a local
        collection whose files are as they were at the last count has that count still
        (:func:`milvus_lite_collection_state`): opening the database read-only loads the
        whole collection (a third of a second at 20,000 chunks), which a status need not pay
        again while nothing changed."""
        config = self.config(scope)
        from memsearch.store import CollectionNotFoundError, MilvusStore

        uri = str(config.milvus.uri)
        key = (uri, scope.collection)
        _quiet_pymilvus()
        try:
            if self._lease is not None and self._lease.key[:2] == key:
                with self._database(scope, config) as memsearch:
                    return int(memsearch.store.count())
            remembered = self._counts.get(key)
            if (
                remembered is not None
                and not is_server(uri)
                and milvus_lite_collection_state(uri, scope.collection) == remembered[0]
            ):
                return remembered[1]
            self.release()
            keep_database_private(uri, scope, create=False)
            served = self._serve(uri, create=False)
            try:
                # No dimension: memsearch's read-only mode, which never creates anything.
                store = MilvusStore(
                    uri if served is None else served.uri,
                    token=config.milvus.token or None,
                    collection=scope.collection,
                    dimension=None,
                )
            except BaseException:
                if served is not None:
                    served.close()
                raise
            self._opened(uri)
            try:
                counted = int(store.count())
                # Read while the database is this process's: no other writes meanwhile.
                state = None if is_server(uri) else milvus_lite_collection_state(uri, key[1])
            finally:
                self._close(store, served, uri)
            if state is not None and state == milvus_lite_collection_state(uri, key[1]):
                self._counts[key] = (state, counted)
            return counted
        except CollectionNotFoundError:
            return None

    def describe(self, scope: Scope) -> dict[str, str]:
        """Provider, model (and whether it is on this machine) and database, for *scope*;
        looked up on disk only: no embedder is loaded and no model hub asked."""
        config = self.config(scope)
        embedding = config.embedding
        check = check_model(
            str(embedding.provider),
            str(embedding.model or ""),
            configured=config is not self._zero_configs.get(id(config)),
            ask_hub=False,
        )
        described = {
            "provider": str(embedding.provider),
            "model": check.describe(),
            "milvus_uri": str(config.milvus.uri),
        }
        unserved = None if is_server(str(config.milvus.uri)) else self.unserved_reason()
        if unserved is not None:
            described["database"] = (
                f"closed after every call, not kept open: pimem cannot serve it on a private "
                f"socket ({unserved}), and Milvus Lite's own server lets other local users in"
            )
        return described


def section_of(chunk_hash: str, chunk: Mapping[str, Any]) -> Section:
    """The L2 section around *chunk* (memsearch's fields), read from its file now."""
    source = Path(str(chunk["source"]))
    try:
        text = source.read_text(encoding="utf-8", errors="replace")
    except OSError:
        raise PimemError(
            f"chunk {chunk_hash} points at {source}, which no longer exists (reindex pending)"
        ) from None
    content, start, end = extract_section(
        blank_conflicts(text).splitlines(),
        int(chunk["start_line"]),
        int(chunk.get("heading_level", 0)),
    )
    return Section(
        chunk_hash=chunk_hash,
        source=str(source),
        heading=str(chunk.get("heading", "")),
        start_line=start,
        end_line=end,
        content=content,
        anchor=parse_anchor(content),
    )


def _quiet_pymilvus() -> None:
    """pymilvus logs a traceback for every failed call; pimem reports the failure itself.
    Its import sets its logger up, so the level is set after importing it."""
    import pymilvus  # noqa: F401

    logging.getLogger("pymilvus").setLevel(logging.CRITICAL)


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


def _drop_unreadable_state(path: Path) -> None:
    """Remove a state file that cannot be parsed: it only records index health, and memsearch
    reads it again before writing (JSON nested too deep would fail that index run)."""
    try:
        read_index_state(path)
    except IndexStateError:
        with contextlib.suppress(OSError):
            path.unlink()


def _hit(result: dict[str, Any], score_kind: ScoreKind = "rank_fusion") -> SearchHit:
    """A memsearch result as a hit. memsearch's ``end_line`` counts the blank lines after the
    chunk's text (and, at the end of a file, the empty line after its last newline); the hit
    names the text's own last line, the line expand's range ends on too."""
    content = str(result["content"])
    start, end = int(result["start_line"]), int(result["end_line"])
    return SearchHit(
        chunk_hash=str(result["chunk_hash"]),
        # Another agent may have indexed a conflicted file markers and all.
        content=without_marker_lines(content),
        source=str(result["source"]),
        heading=str(result.get("heading", "")),
        heading_level=int(result.get("heading_level", 0)),
        start_line=start,
        end_line=max(start, min(end, start + content.count("\n"))),
        score=float(result["score"]),
        score_kind=score_kind,
    )


def _taken_in(
    taken: list[DayFile], attempted: tuple[Path, ...] | None, failures: tuple[Any, ...]
) -> list[DayFile]:
    """The fingerprinted day files a run took in: those it reached (all of them when
    *attempted* is ``None``, a whole-store run) and did not fail on."""
    failed = {os.path.realpath(failure.path) for failure in failures}
    reached = None if attempted is None else {os.path.realpath(file) for file in attempted}
    return [
        day
        for day in taken
        if (reached is None or os.path.realpath(day.path) in reached)
        and os.path.realpath(day.path) not in failed
    ]


async def _index_files(
    memsearch: Any, files: tuple[Path, ...], deadline: float | None = None
) -> Any:
    """Re-index changed files one by one; a file that is gone loses its chunks. Past the
    *deadline* (monotonic seconds) the files left are not reached; the first always is."""
    from memsearch.index_report import IndexFailure, IndexReport, format_error

    indexed, failed = 0, []
    reached = 0
    for file in files:
        if reached and deadline is not None and time.monotonic() >= deadline:
            break
        reached += 1
        try:
            if file.exists():
                indexed += int(await memsearch.index_file(file))
            else:
                memsearch.store.delete_by_source(str(file.resolve()))
        except Exception as error:  # noqa: BLE001 - recorded per file, as memsearch does
            failed.append(IndexFailure(path=str(file), error=format_error(error)))
    return IndexReport(
        indexed_chunks=indexed,
        total_files=reached,
        indexed_files=reached - len(failed),
        failed_files=tuple(failed),
    )
