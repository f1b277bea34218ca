"""``pimem service run``: one warm memory service per user, on a Unix socket.

The service owns one :class:`~pimem_core.api.Pimem` (one plugin manager, so one embedder, one
read model per collection and one backend queue) and answers the command lines its clients
(:mod:`pimem_core.doors.service_client`) hand it, with the handlers the CLI runs, for the scope
of each client's directory. It listens in a directory only its user may enter, checks each
peer's user id, and exits after an idle time.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import attrs

from pimem_core.allocator import give_back_memory, resident_kb
from pimem_core.api import Pimem
from pimem_core.doors import service_wire as wire
from pimem_core.doors.command_line import run_captured
from pimem_core.doors.installation import Footprint
from pimem_core.doors.serve import Server
from pimem_core.doors.service_limits import BACKLOG, Peer, Requests, peer_allowed, unrouted
from pimem_core.doors.service_request import (
    ServiceInfo,
    ServiceRun,
    SocketWriter,
    malformed,
    other_settings,
)
from pimem_core.errors import PimemError
from pimem_core.private_files import open_private, write_private
from pimem_core.runtime.snapshot_cache import prepare_snapshot

__all__ = ["MemoryTrim", "Peer", "Service", "loaded_code", "peer_allowed", "run_service"]

log = logging.getLogger(__name__)

#: How often the accept loop wakes to check the idle time and a stop request...
_TICK_S = 0.2
#: ...and how often, while no request comes, whether what it loaded changed on disk.
_IDLE_CHECK_S = 5.0


@attrs.define
class MemoryTrim:
    """Gives memory back at most every :attr:`every_s` seconds, once the service's resident
    memory moved by :attr:`change_kb` since it last did. Work goes on with no request open
    (a session's index run, the read model's background work, the database opened and closed
    for a session attached for hours), and the memory it frees stays with the allocator; a
    request's end alone would not see it."""

    change_kb: int = 8 * 1024
    every_s: float = 10.0
    _after_kb: int | None = attrs.field(default=None, init=False)
    _at: float = attrs.field(default=float("-inf"), init=False)

    def tick(self, now: float) -> bool:
        """Give memory back when due; whether it did."""
        if now - self._at < self.every_s:
            return False
        resident = resident_kb()
        if resident is None:
            return False
        if self._after_kb is not None and abs(resident - self._after_kb) < self.change_kb:
            return False
        give_back_memory()
        self._at = now
        self._after_kb = resident_kb() or resident
        return True


@attrs.define
class Work:
    """The requests and attached sessions running (each in a ``with`` block), and when the last
    one ended: the idle time starts again at each end."""

    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    _running: int = attrs.field(default=0, init=False)
    _ended: float = attrs.field(factory=time.monotonic, init=False)

    def __enter__(self) -> None:
        with self._lock:
            self._running += 1

    def __exit__(self, *_: object) -> None:
        with self._lock:
            self._running -= 1
            self._ended = time.monotonic()

    def idle_for(self, seconds: float) -> bool:
        """Nothing running, and nothing ended in the last *seconds*."""
        with self._lock:
            return self._running == 0 and time.monotonic() - self._ended >= seconds


@contextlib.contextmanager
def _heartbeat(conn: socket.socket) -> Iterator[Callable[[dict[str, object]], None]]:
    """While a request runs, tell its client every :data:`~service_wire.HEARTBEAT_S` that the
    service is at work, so a client can tell a long request from a wedged service. Yields the
    way to send the reply (after which no heartbeat follows)."""
    lock = threading.Lock()
    done = threading.Event()

    def beat() -> None:
        while not done.wait(wire.HEARTBEAT_S):
            with lock, contextlib.suppress(OSError):
                if not done.is_set():
                    wire.send(conn, {"working": True})

    def send(reply: dict[str, object]) -> None:
        with lock:
            done.set()
            wire.send(conn, reply)

    beating = threading.Thread(target=beat, name="pimem-service-heartbeat", daemon=True)
    beating.start()
    try:
        yield send
    finally:
        done.set()


def loaded_code(pimem: Pimem) -> tuple[Path, ...]:
    """The source of pimem's core and of every plugin loaded: the package a plugin belongs to,
    or its module's file when it is a module of its own (an editable install is edited there);
    and the source files of every plugin that failed to load."""
    names = {__name__} | {
        getattr(plugin, "__name__", None) if inspect.ismodule(plugin) else type(plugin).__module__
        for plugin in pimem.pm.get_plugins()
    }
    found: dict[Path, None] = {}
    for name in sorted(filter(None, names)):
        top = sys.modules.get(name.partition(".")[0])
        source = getattr(top, "__file__", None)
        if source is None:
            continue
        found[Path(source).parent if hasattr(top, "__path__") else Path(source)] = None
    # A plugin that failed to load is watched too: its fix counts from the next request.
    found.update(dict.fromkeys(pimem.pm.failed_sources))
    return tuple(found)


def take_footprint(code: tuple[Path, ...], loaded: tuple[Path, ...]) -> Footprint:
    """What this process loaded that an install, an edit or a model reinstall changes."""
    return Footprint.take(code=code, files=loaded)


def declared_of(pimem: Pimem) -> wire.Declared:
    """The loaded plugins' settings, as the service's clients must know them."""
    return wire.declared_by(pimem.pm.declared_settings)


@attrs.define
class Service:
    """The accept loop and its connections."""

    pimem: Pimem
    path: Path
    idle_s: float
    info: ServiceInfo = attrs.field(
        factory=lambda: ServiceInfo(pid=os.getpid(), started=time.time())
    )
    #: What the answers depend on, taken at start and compared before every request.
    code: tuple[Path, ...] = attrs.field(
        default=attrs.Factory(lambda self: loaded_code(self.pimem), takes_self=True)
    )
    #: The files plugins load from outside their packages (the offline model).
    loaded: tuple[Path, ...] = attrs.field(
        default=attrs.Factory(lambda self: self.pimem.collect_loaded_files(), takes_self=True)
    )
    footprint: Footprint = attrs.field(
        default=attrs.Factory(lambda self: take_footprint(self.code, self.loaded), takes_self=True)
    )
    _checked: float = attrs.field(factory=time.monotonic, init=False)
    declared: wire.Declared = attrs.field(
        default=attrs.Factory(lambda self: declared_of(self.pimem), takes_self=True)
    )
    _retired: str | None = attrs.field(default=None, init=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    #: Connections open, and of those the ones running a request or an attached session
    #: (:attr:`_work`): only a busy one holds off the idle exit; one still waiting for its
    #: request is given at most its bound (``service_limits.REQUEST_S``) by the drain.
    _active: int = attrs.field(default=0, init=False)
    _work: Work = attrs.field(factory=Work, init=False)
    _stopping: threading.Event = attrs.field(factory=threading.Event, init=False)
    _inode: int | None = attrs.field(default=None, init=False)
    _listener: socket.socket | None = attrs.field(default=None, init=False)
    _claimed: int | None = attrs.field(default=None, init=False)
    _trim: MemoryTrim = attrs.field(factory=MemoryTrim, init=False)

    def bind(self) -> bool:
        """Listen at the socket path; ``False`` when another service holds it (running, or
        starting alongside this one)."""
        from pimem_core.doors.service_client import prepare_dir

        prepare_dir(self.path.parent)
        if not self._claim():
            return False
        # Only the claim's holder binds or removes the socket: a file there now is stale.
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # Made with no permission for anyone else from its first moment, not chmod-ed after.
        old = os.umask(0o177)
        try:
            listener.bind(str(self.path))
        finally:
            os.umask(old)
        listener.listen(BACKLOG)
        listener.settimeout(_TICK_S)
        self._inode = self.path.stat().st_ino
        self._listener = listener
        self._describe_self()
        return True

    def _describe_self(self) -> None:
        """``<socket>.json``: what this service was started with, for ``pimem service status``
        to say what sets each of the user's services apart (private, as the directory is)."""
        identity = wire.identity(os.environ, declared=self.declared)
        # Named so that `pimem service status` masks their values (as it does *_KEY and the like).
        secret = sorted(spec.env for spec in self.pimem.pm.declared_settings if spec.secret)
        record = {"pid": self.info.pid, "started": self.info.started, **identity, "secret": secret}
        text = json.dumps(record)
        write_private(self.path.with_suffix(".json"), text, root=self.path.parent)

    def serve(self) -> None:
        """Accept until stopped or idle for :attr:`idle_s` (0: never)."""
        assert self._listener is not None, "bind first"
        try:
            while not self._stopping.is_set():
                try:
                    conn, _ = self._listener.accept()
                except TimeoutError:
                    self._trim.tick(time.monotonic())
                    if self._idle():
                        log.info("idle for %s s: the service exits", self.idle_s)
                        break
                    if self._outdated(idle=True) is not None:
                        break  # a new installation: a successor will answer
                    continue
                except OSError:
                    break  # closed by a stop request
                with self._lock:
                    self._active += 1
                threading.Thread(target=self._connection, args=(conn,), daemon=True).start()
        finally:
            self._unlisten()
        self._drain()

    def _idle(self) -> bool:
        return self.idle_s > 0 and self._work.idle_for(self.idle_s)

    def _outdated(self, *, idle: bool = False) -> str | None:
        """Why this service can no longer answer as a new process would (a distribution
        installed or removed, pimem's or a plugin's code or the model changed), or ``None``.
        The first time, it stops listening: the next client starts a successor with what is
        installed now. While *idle*, the disk is looked at every few seconds only."""
        if self._retired is None:
            now = time.monotonic()
            if idle and now - self._checked < _IDLE_CHECK_S:
                return None
            self._checked = now
            changed = take_footprint(self.code, self.loaded).differs(self.footprint)
            if changed is None:
                return None
            with self._lock:
                self._retired = changed
            log.info("%s since the service started: it hands over to a new one", changed)
            self._stopping.set()
            self._unlisten()
        return self._retired

    def _claim(self) -> bool:
        """Take the socket's claim, ``<socket>.pid`` locked for as long as this service
        listens: two services started at once (or one started beside a live one) cannot both
        bind, and a killed one leaves no claim behind."""
        import fcntl

        handle = open_private(self.path.with_suffix(".pid"), os.O_RDWR, root=self.path.parent)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(handle)
            return False
        os.ftruncate(handle, 0)
        os.write(handle, f"{os.getpid()}\n".encode())
        self._claimed = handle
        return True

    def _unlisten(self) -> None:
        # Only the socket this service made: a successor may have bound the path already.
        with contextlib.suppress(OSError):
            if self._inode is not None and self.path.stat().st_ino == self._inode:
                self.path.unlink()
                self.path.with_suffix(".json").unlink()
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.close()
        # Released as soon as nothing is accepted any more: a successor need not wait for the
        # requests this one is still finishing.
        claimed, self._claimed = self._claimed, None
        if claimed is not None:
            os.close(claimed)

    def _drain(self) -> None:
        """Let running requests finish (bounded) before the process exits; a connection still
        waiting for its request is waited for no longer than its bound allows it."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with self._lock:
                if self._active == 0:
                    return
            time.sleep(0.05)

    def _connection(self, conn: socket.socket) -> None:
        try:
            with conn:
                requests = Requests(conn)
                try:
                    self._serve_connection(conn, requests)
                except wire.BadLine as error:
                    # One refusal, and the connection closed: after a line too long, what
                    # follows is the rest of it, not a request.
                    log.info("a client sent a bad request: %s", error)
                    with contextlib.suppress(OSError):
                        wire.send(conn, {"refused": f"a bad request: {error}"})
        except (OSError, ValueError) as error:
            log.info("a client connection ended: %s", error)
        finally:
            with self._lock:
                self._active -= 1
                idle = self._active == 0
            if idle:
                give_back_memory()  # a service that lives for hours keeps no busy minute

    def _serve_connection(self, conn: socket.socket, requests: Requests) -> None:
        peer = Peer.of(conn)
        if not peer_allowed(peer, os.getuid()):
            log.warning("refused a connection from user %s", peer.uid)
            return
        wire.send(conn, self.info.hello())
        while (request := requests.next()) is not None:
            with self._work:
                if request.get("op") == "attach":
                    self._attach(conn, requests.stream, peer, request)
                    return
                with _heartbeat(conn) as send:
                    send(self._answer(request, peer))
            if request.get("op") == "stop":
                return

    def _attach(
        self, conn: socket.socket, stream: BinaryIO, peer: Peer, request: dict[str, object]
    ) -> None:
        """A host session (``pimem serve`` relaying its host): served on this connection until
        the relay closes it, on the service's plugin manager, confined to the relay's directory."""
        refusal = self._refusal(request, peer)
        if refusal is not None:
            wire.send(conn, refusal)
            return
        try:
            pimem = self._for_request(request)
        except PimemError as error:
            wire.send(conn, {"refused": f"a session setting is invalid: {error}"})
            return
        wire.send(conn, {"attached": True})
        reader = io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline="\n")
        cwd = Path(str(request["cwd"])).resolve()
        # A host attaches as it starts up, and its session.start follows: the snapshot is built
        # meanwhile, not while the first prompt waits.
        server = Server(
            pimem,
            reader,
            SocketWriter(conn),
            announce=False,
            confined_to=cwd,
            relayed=True,
            prepared=prepare_snapshot(pimem, cwd),
        )
        server.serve()

    def _refusal(self, request: dict[str, object], peer: Peer) -> dict[str, object] | None:
        """Why this client's request is not served here (the reply saying so), or ``None``."""
        refused = malformed(request, peer)
        if refused is not None:
            return refused
        changed = self._outdated()
        if changed is not None:
            # The client starts a successor and asks it: nothing was run here.
            return {"refused": f"{changed} since the memory service started", "retired": True}
        if request.get("python") != sys.prefix:
            return {"refused": f"the memory service runs the pimem installed in {sys.prefix}"}
        env = request.get("env")
        assert isinstance(env, dict), "checked by malformed"
        return other_settings(env, self.declared)

    def _for_request(self, request: dict[str, object]) -> Pimem:
        """The service's pimem with the request's own session settings (auto-context, capture
        model...): one session or command, as it would run in its own process."""
        env = request.get("env")
        assert isinstance(env, dict), "checked by _refusal"
        names = wire.SESSION_ENV | self.declared.session
        if all(env.get(name) == os.environ.get(name) for name in names):
            return self.pimem
        settings = self.pimem.settings.for_session(env, names, self.pimem.pm.declared_settings)
        return self.pimem.for_session(settings)

    def _answer(self, request: dict[str, object], peer: Peer) -> dict[str, object]:
        op = request.get("op")
        if op == "stop":
            self._stopping.set()
            self._unlisten()
            return {"stopping": True}
        if op == "status":
            return self.info.hello()
        if op != "run":
            return {"refused": f"unknown op {op!r}"}
        argv = request.get("argv")
        if not isinstance(argv, list) or not all(isinstance(word, str) for word in argv):
            return {"refused": "argv must be a list of strings"}
        not_served = unrouted(argv)
        if not_served is not None:
            return {"refused": not_served}
        refusal = self._refusal(request, peer)
        if refusal is not None:
            return refusal
        cwd, stdin = Path(str(request["cwd"])), request.get("stdin")
        if stdin is not None and not isinstance(stdin, str):
            return {"refused": "stdin must be a string"}
        try:
            run = ServiceRun(lambda: self._for_request(request), self.info, stdin)
            return run.answer(*run_captured(list(argv), run.make_door, cwd=cwd))
        except Exception as error:  # a bug in one request must not end the service
            log.exception("a request failed")
            return {"exit": 1, "stdout": "", "stderr": f"pimem: internal error: {error!r}\n"}


def run_service(pimem: Pimem, *, note: Callable[[str], None]) -> int:
    """``pimem service run``: serve in the foreground until stopped or idle."""
    # Its own lines, not every library's chatter, go to the service's log file.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s pimem service: %(message)s")
    log.setLevel(logging.INFO)
    from pimem_core.doors.service_client import ServiceUnavailable, prepare_dir
    from pimem_core.runtime.scheduler import answer_promptly

    answer_promptly()

    declared = declared_of(pimem)
    try:
        prepare_dir(wire.runtime_dir())
        # Before listening: the clients that started this service look for it where these say.
        wire.publish_declared(declared)
    except (ServiceUnavailable, OSError) as error:
        note(f"pimem: cannot start the memory service: {error}")
        return 1
    service = Service(
        pimem=pimem,
        path=wire.service_file("sock", declared=declared),
        idle_s=float(pimem.settings.service_idle_s),
        declared=declared,
    )
    if not service.bind():
        note(f"pimem: another memory service holds {service.path} already")
        return 0
    log.info("pid %s listening at %s", os.getpid(), service.path)
    for record in pimem.pm.failed:
        log.warning("%s", record.failure)
    service.serve()
    return 0
