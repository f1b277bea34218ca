"""Every place pimem relies on memsearch, onnxruntime, pymilvus or Milvus Lite beyond their public
API.

memsearch 0.4.23 offers no way to do some things pimem needs in process: point its configuration
lookup at a given home and project, hand a ``MemSearch`` an embedder that is already warm, search
by vector with cosine similarity, report index progress per file, run the skill distiller's
steps one by one. Milvus Lite offers no way to serve a database on a Unix socket rather than a
TCP port. Each function below does one such thing and says what it assumes;
``tests/plugins/memsearch/test_memsearch_compat.py`` checks every assumption against the installed release, so a
memsearch upgrade that breaks one fails there, by name, not somewhere in a session.

Only one thread at a time may use the functions that swap module attributes (pimem runs all
memsearch calls on its backend queue's worker); they restore what they replaced.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import inspect
import os
import socket
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

# -- configuration ------------------------------------------------------------------------------


@contextlib.contextmanager
def config_paths(global_path: Path, project_path: Path) -> Iterator[None]:
    """memsearch's config lookup pointed at these files for one call.

    Assumes: ``memsearch.config`` reads ``GLOBAL_CONFIG_PATH`` (fixed at import from ``~``) and
    ``PROJECT_CONFIG_PATH`` (relative to the working directory) as module attributes.
    """
    import memsearch.config as config

    saved = config.GLOBAL_CONFIG_PATH, config.PROJECT_CONFIG_PATH
    config.GLOBAL_CONFIG_PATH, config.PROJECT_CONFIG_PATH = global_path, project_path
    try:
        yield
    finally:
        config.GLOBAL_CONFIG_PATH, config.PROJECT_CONFIG_PATH = saved


def merged_config(global_path: Path, project_path: Path) -> Any:
    """memsearch's configuration from these two files, as ``resolve_config`` builds it, without
    touching its module attributes (safe beside the backend's thread).

    Assumes: the private steps of ``resolve_config``: ``_default_dict``, ``deep_merge``,
    ``load_config_file``, ``_filter_project_config``, ``_resolve_env_refs_in_dict`` and
    ``_dict_to_config``. Raises memsearch's ``ConfigEnvVarError``, ``OSError`` or ``ValueError``.
    """
    from memsearch import config as ms

    data = ms.deep_merge(ms._default_dict(), ms.load_config_file(global_path))
    data = ms.deep_merge(data, ms._filter_project_config(ms.load_config_file(project_path)))
    return ms._dict_to_config(ms._resolve_env_refs_in_dict(data))


# -- embedding ----------------------------------------------------------------------------------


def _usable_cpus() -> int:
    affinity = getattr(os, "sched_getaffinity", None)  # not on macOS
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


@contextlib.contextmanager
def onnx_sessions_without_spinning() -> Iterator[None]:
    """ONNX Runtime sessions created meanwhile have idle worker threads that sleep.

    Spinning threads keep both cores of a small machine busy between calls and slow the
    database search that follows every embedding (measured: warm search p50 44 -> 20 ms at
    2,000 chunks). Assumes: memsearch's onnx provider creates its session with
    ``onnxruntime.InferenceSession(path)``, looked up on the module at call time.
    """
    try:
        import onnxruntime
    except ImportError:
        yield
        return
    create = onnxruntime.InferenceSession

    def quiet(path: object, sess_options: Any = None, *args: Any, **kwargs: Any) -> Any:
        options = sess_options if sess_options is not None else onnxruntime.SessionOptions()
        if not options.intra_op_num_threads:
            # ONNX Runtime's default counts physical cores, one on a 2-vCPU machine: two
            # sleeping threads embed a query in 3.1 ms against 4.8 (3.5 against 4.2 with the
            # other core busy).
            options.intra_op_num_threads = min(4, _usable_cpus())
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # Weights are not copied into pre-packed layouts: MiniLM's session takes 97 MB instead
        # of 129, and batches of like length embed as fast (measured on 140 real chunks).
        options.add_session_config_entry("session.disable_prepacking", "1")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        return create(path, options, *args, **kwargs)

    onnxruntime.InferenceSession = quiet
    try:
        yield
    finally:
        onnxruntime.InferenceSession = create


def release_onnx_arena(embedder: Any) -> bool:
    """Give back the memory arena of memsearch's ONNX provider *embedder*; ``False`` for
    another provider.

    ONNX Runtime's CPU arena keeps what the largest batch a session ran needed: a batch of
    long texts (256 word pieces each, 32 of them) leaves about 550 MB in it. Kept while a run
    of batches goes on, it saves the system's page faults (an index run of long entries took
    1.4x as long without it); given back once the run is over, the process does not keep its
    busiest minute. A run of one word piece with the arena's shrinkage asked for frees every
    region no run uses. Vectors are bit for bit the same. Assumes: ``OnnxEmbedding`` keeps its
    ``onnxruntime.InferenceSession`` in ``_session``.
    """
    session = getattr(embedder, "_session", None)
    try:
        import numpy as np
        import onnxruntime
    except ImportError:
        return False
    if not isinstance(session, onnxruntime.InferenceSession):
        return False
    options = onnxruntime.RunOptions()
    options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    feed = {
        item.name: np.full((1, 1), 0 if item.name == "token_type_ids" else 1, np.int64)
        for item in session.get_inputs()
    }
    session.run(None, feed, options)
    return True


def onnx_provider_from_files(model: str, tokenizer: Path, graph: Path, *, batch_size: int) -> Any:
    """memsearch's onnx provider on these files, instead of a Hugging Face cache lookup.

    Assumes: ``OnnxEmbedding`` finds its files through the static method
    ``_download_model_files(model, hf_hub_download, list_repo_files) -> (tokenizer, graph)``.
    """
    from memsearch.embeddings.onnx import OnnxEmbedding

    class FromFiles(OnnxEmbedding):  # type: ignore[misc]
        @staticmethod
        def _download_model_files(*_: object) -> tuple[str, str]:
            return str(tokenizer), str(graph)

    return FromFiles(model, batch_size=batch_size)


# -- the database -------------------------------------------------------------------------------


def memsearch_with_embedder(embedder: Any, **options: Any) -> Any:
    """A ``memsearch.core.MemSearch`` built with *options* that uses *embedder* as it is.

    Assumes: ``MemSearch.__init__`` gets its provider from ``memsearch.core.get_provider``.
    """
    from memsearch import core

    load = core.get_provider
    core.get_provider = lambda *_, **__: embedder
    try:
        return core.MemSearch(**options)
    finally:
        core.get_provider = load


def dense_search(memsearch: Any, vector: Sequence[float], top_k: int) -> list[dict[str, Any]]:
    """The *top_k* chunks nearest to *vector* by cosine similarity, each its fields plus
    ``distance`` (the similarity), best first.

    Raises memsearch's ``CollectionNotFoundError`` when the collection was never created.
    Assumes: ``MilvusStore`` keeps ``_require_collection()``, ``_connected_client()``,
    ``_collection`` and ``_QUERY_FIELDS``, and the dense field is named ``embedding``.
    """
    store = memsearch.store
    store._require_collection()
    found = store._connected_client().search(
        collection_name=store._collection,
        data=[list(vector)],
        anns_field="embedding",
        limit=top_k,
        search_params={"metric_type": "COSINE"},
        output_fields=store._QUERY_FIELDS,
    )
    hits = found[0] if found else []
    return [{**hit["entity"], "distance": hit["distance"]} for hit in hits]


async def index_with_progress(memsearch: Any, progress: Callable[[int, int], None]) -> Any:
    """memsearch's own index run (``index_with_report``), reporting each file as it is done.

    Assumes: ``MemSearch`` keeps ``_paths``, ``_ignore_files``, ``_exclude`` and indexes each
    scanned file through ``_index_file(scanned, *, force)``; ``memsearch.scanner.scan_paths``
    lists the same files.
    """
    from memsearch.scanner import scan_paths

    total = len(
        scan_paths(
            memsearch._paths, ignore_files=memsearch._ignore_files, exclude=memsearch._exclude
        )
    )
    done = 0
    index_file = memsearch._index_file

    async def counted(scanned: Any, *, force: bool = False) -> int:
        nonlocal done
        try:
            return int(await index_file(scanned, force=force))
        finally:
            done += 1
            progress(done, total)

    memsearch._index_file = counted
    return await memsearch.index_with_report()


def read_markdown_through(memsearch: Any, transform: Callable[[str], str]) -> None:
    """Make *memsearch* (a ``MemSearch``) index each markdown file as ``transform(text)``.

    Assumes: ``index_file`` and ``index_with_report`` index each file through
    ``self._index_file(scanned, *, force)``, which reads it with ``read_utf8_text_replace``,
    looked up on ``memsearch.core`` at call time, before chunking it.
    """
    from memsearch import core

    index_file = memsearch._index_file

    async def transformed(scanned: Any, *, force: bool = False) -> int:
        read = core.read_utf8_text_replace
        core.read_utf8_text_replace = lambda path: transform(read(path))
        try:
            return int(await index_file(scanned, force=force))
        finally:
            core.read_utf8_text_replace = read

    memsearch._index_file = transformed


# -- connections --------------------------------------------------------------------------------


def forget_unused_connections() -> None:
    """Close the gRPC connections no Milvus client uses any more.

    pymilvus keeps one shared connection per address for the life of the process, even once
    every client using it is closed; Milvus Lite serves each opening of a database on a new
    port, so a long-lived process that opens and closes the database (the service does, to
    share the lock) would keep a dead channel per opening: about 0.2 MB each.

    Assumes: ``pymilvus.client.connection_manager.ConnectionManager.get_instance()`` holds its
    shared connections in ``_registry`` (key to ``ManagedConnection``) under ``_lock``, and a
    ``ManagedConnection`` has ``has_clients`` and is closed by ``strategy.close(managed)``.
    """
    from pymilvus.client.connection_manager import ConnectionManager

    manager = ConnectionManager.get_instance()
    with manager._lock:
        unused = [key for key, managed in manager._registry.items() if not managed.has_clients]
        for key in unused:
            managed = manager._registry.pop(key)
            with contextlib.suppress(Exception):  # a channel already gone is closed enough
                managed.strategy.close(managed)


# -- Milvus Lite on a Unix socket ---------------------------------------------------------------


class SocketUnusable(Exception):
    """The database's socket could not be bound (the database was closed again)."""


def lite_socket_unsupported() -> str | None:
    """Why pimem cannot serve a database of the installed Milvus Lite on a Unix socket of its
    own; ``None`` when it can.

    Milvus Lite's own server (``milvus_lite.server_manager``, which pymilvus starts for a
    ``.db`` URI) listens on a TCP port of 127.0.0.1, where every local user may connect.
    Assumes (milvus-lite 3.0 to 3.2.2 alike): ``milvus_lite.db.MilvusLite(data_dir)`` opens a
    database and takes its lock, raising ``DataDirLockedError`` when another holds it, and
    ``close()`` gives both back; ``milvus_lite.adapter.grpc.server._build_server(db,
    max_workers)`` returns an unstarted ``grpc.Server`` with Milvus's API on *db*, and
    ``DEFAULT_MAX_WORKERS`` is the pool Milvus Lite gives its own.
    """
    if not hasattr(socket, "AF_UNIX"):
        return "this platform has no Unix sockets"
    try:
        version = importlib.metadata.version("milvus-lite")
    except importlib.metadata.PackageNotFoundError:
        version = "(version unknown)"
    try:
        from milvus_lite.adapter.grpc.server import DEFAULT_MAX_WORKERS, _build_server
        from milvus_lite.db import MilvusLite
    except ImportError as error:
        return f"milvus-lite {version} has no in-process server pimem knows ({error})"
    if (
        list(inspect.signature(_build_server).parameters)[:2] != ["db", "max_workers"]
        or not isinstance(DEFAULT_MAX_WORKERS, int)
        or not callable(getattr(MilvusLite, "close", None))
    ):
        return f"milvus-lite {version} builds its in-process server differently"
    return None


class LiteOnSocket:
    """A local Milvus Lite database served by this process on the Unix socket *path*, for
    pymilvus to reach at :attr:`uri`, until :meth:`close` or the process's exit.

    Opening takes the database's lock first, so only its holder binds or removes *path*; the
    socket is gone before the lock is given back, so the next holder's socket is never taken
    for a stale one. *scratch*, a directory made for *path* alone, is removed with it.
    See :func:`lite_socket_unsupported` for what it assumes.
    """

    def __init__(self, database: Path, path: Path, *, scratch: Path | None = None) -> None:
        from milvus_lite.adapter.grpc.server import DEFAULT_MAX_WORKERS, _build_server
        from milvus_lite.db import MilvusLite

        db = MilvusLite(str(database))
        try:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # stale: its server's process died holding the lock
            server = _build_server(db, DEFAULT_MAX_WORKERS)
            try:
                server.add_insecure_port(f"unix:{path}")
                # The directory keeps other users out already; the socket's mode, should it
                # be opened up by mistake.
                path.chmod(0o600)
            except (RuntimeError, OSError) as error:
                server.stop(None)
                raise SocketUnusable(f"cannot listen on a Unix socket: {error}") from None
            server.start()
        except BaseException:
            db.close()
            raise
        self.uri = f"unix:{path}"
        self._stop = weakref.finalize(self, _stop_serving, server, db, path, scratch)

    def close(self) -> None:
        """Stop serving and close the database (its lock goes back to the other agents)."""
        self._stop()


def _stop_serving(server: Any, db: Any, path: Path, scratch: Path | None) -> None:
    try:
        server.stop(1).wait(5)  # no call is left: pymilvus's client is closed first
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        if scratch is not None:
            with contextlib.suppress(OSError):
                scratch.rmdir()
    finally:
        db.close()


# -- the database's files -----------------------------------------------------------------------

#: A collection's files as the system shows them: each one's path (within the collection's
#: directory), inode, size and modification time.
CollectionState = tuple[tuple[str, int, int, int], ...]


def milvus_lite_collection_state(uri: str, collection: str) -> CollectionState | None:
    """The files of *collection* in the local Milvus Lite database *uri*; ``None`` when it
    has no directory there (a server, a database or collection not created yet).

    Two equal states hold the same rows: a read needs nothing more to know the collection did
    not change. Assumes: Milvus Lite keeps a collection of the default database in
    ``<uri>/collections/<collection>`` (``milvus_lite.db.COLLECTIONS_DIRNAME``), appends every
    insert and delete to a write-ahead file there before the call returns, and replaces its
    manifest (a new file) when it flushes or compacts; opening, reading and closing the
    database leave every file as it was.
    """
    from milvus_lite.db import COLLECTIONS_DIRNAME

    root = os.path.join(os.path.expanduser(uri), COLLECTIONS_DIRNAME, collection)
    found: list[tuple[str, int, int, int]] = []
    todo = [root]
    try:
        while todo:
            with os.scandir(todo.pop()) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        todo.append(entry.path)
                        continue
                    status = entry.stat(follow_symlinks=False)
                    found.append(
                        (
                            os.path.relpath(entry.path, root),
                            status.st_ino,
                            status.st_size,
                            status.st_mtime_ns,
                        )
                    )
    except (FileNotFoundError, NotADirectoryError):
        return None
    return tuple(sorted(found))


# -- skill drafting -----------------------------------------------------------------------------


def distill_steps() -> Mapping[str, Callable[..., Any]]:
    """The steps of memsearch's skill distiller, run by pimem one by one with its own model:
    ``ensure_git(root)``, ``build_prompt(context, *, min_occurrences, existing, cfg)``,
    ``parse_response(text)`` and ``commit(root, message)``.

    Assumes: ``memsearch.skills`` keeps ``_ensure_git``, ``_build_distill_prompt``,
    ``_parse_distill_response`` and ``_git_commit``.
    """
    from memsearch import skills

    return {
        "ensure_git": skills._ensure_git,
        "build_prompt": skills._build_distill_prompt,
        "parse_response": skills._parse_distill_response,
        "commit": skills._git_commit,
    }
