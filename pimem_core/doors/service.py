"""``pimem service run``: one warm memory service per user, on a Unix socket.

The service owns one :class:`~pimem_core.api.Pimem` (one plugin manager, so one embedder, one
read model per collection and one backend queue) and answers the command lines its clients
(:mod:`pimem_core.doors.service_client`) hand it, with the handlers the CLI runs, for the scope
of each client's directory. It listens in a directory only its user may enter, checks each
peer's user id, and exits after an idle time.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import json
import logging
import os
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, BinaryIO, NoReturn, Protocol, TextIO

import attrs

from pimem_core.allocator import give_back_memory, resident_kb
from pimem_core.api import Pimem
from pimem_core.command_table import UsageError
from pimem_core.doors import service_wire as wire
from pimem_core.doors.commands import FrontDoor
from pimem_core.doors.installation import Footprint
from pimem_core.doors.serve import Server
from pimem_core.doors.service_limits import BACKLOG, Requests, unrouted
from pimem_core.errors import PimemError
from pimem_core.private_files import open_private, write_private
from pimem_core.types import Scope

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

log = logging.getLogger(__name__)

#: How often the accept loop wakes to check the idle time and a stop request...
_TICK_S = 0.2
#: ...and how often, while no request comes, whether what it loaded changed on disk.
_IDLE_CHECK_S = 5.0


@attrs.frozen(kw_only=True)
class ServiceInfo:
    """What a service says of itself, in its handshake and in ``pimem status``."""

    pid: int
    #: Wall-clock start, seconds since the epoch (a client computes the uptime from it).
    started: float

    def hello(self) -> dict[str, object]:
        return {
            "service": "pimem",
            "version": wire.VERSION,
            "protocol": wire.PROTOCOL,
            "pid": self.pid,
            "started": self.started,
        }

    def describe(self) -> str:
        return f"running, pid {self.pid}, up {max(0, int(time.time() - self.started))} s"


@attrs.frozen
class Peer:
    """The process at the other end of a connection, as the kernel tells it; ``None`` where
    the platform does not say (there the 0700 directory is what keeps other users out)."""

    pid: int | None
    uid: int | None

    @classmethod
    def of(cls, conn: socket.socket) -> Peer:
        option = getattr(socket, "SO_PEERCRED", None)
        if option is None:
            return cls(None, None)
        raw = conn.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
        pid, uid, _gid = struct.unpack("3i", raw)
        return cls(int(pid) or None, int(uid))

    def cwd(self) -> Path | None:
        """The peer's working directory, where the system shows it (``/proc``)."""
        if self.pid is None:
            return None
        try:
            return Path(os.readlink(f"/proc/{self.pid}/cwd"))
        except OSError:
            return None

    def confines(self, claimed: Path) -> bool:
        """*claimed* is the peer's own working directory: a client is served for the scopes
        of where it runs, not of a directory it names."""
        actual = self.cwd()
        return actual is None or actual == claimed.resolve()


def peer_allowed(peer: Peer, own: int) -> bool:
    """Only the service's own user may use it."""
    return peer.uid is None or peer.uid == own


class ServiceDoor(FrontDoor):
    """One request of a client: its directory's scope, its notes gathered for its stderr."""

    def __init__(
        self, pimem: Pimem, cwd: Path, info: ServiceInfo, stdin: str | None = None
    ) -> None:
        super().__init__(pimem)
        self._cwd = cwd
        self._stdin = stdin
        self._scope: Scope | None = None
        self._info = info
        self.lines: list[str] = []

    def scope(self) -> Scope:
        if self._scope is None:
            self._scope = self.pimem.resolve_scope(self._cwd)
        return self._scope

    def base_dir(self) -> Path:
        return self._cwd

    def on_wait(self, holder: str) -> None:
        self.lines.append(f"pimem: waiting on {holder}...")

    def note(self, line: str) -> None:
        self.lines.append(line)

    def notice(self, line: str) -> None:
        self.lines.append(f"pimem: {line}")

    def content(self, value: str) -> str:
        if value != "-":
            return value
        if self._stdin is None:
            raise UsageError("the client sent no content for `-`: pass --in-process")
        return self._stdin

    def service_line(self) -> str | None:
        return self._info.describe()

    def keep_traceback(self, error: BaseException) -> Path | None:
        log.error("a request failed", exc_info=error)
        return wire.log_path()


class SocketWriter(io.TextIOBase):
    """A served session's way back to its relay. Once the relay is gone, what is still written
    (a late reply, a log of the last index run) is dropped: the session finishes without it."""

    def __init__(self, conn: socket.socket) -> None:
        super().__init__()
        self._conn = conn
        self._gone = False

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not self._gone:
            try:
                self._conn.sendall(text.encode("utf-8"))
            except OSError:
                self._gone = True
        return len(text)


class _ParserExit(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def _capturing_parser(out: IO[str], err: IO[str]) -> type[argparse.ArgumentParser]:
    """A parser class that writes to *out* and *err* and raises instead of exiting: a usage
    error in one request must not end the service."""

    class CapturingParser(argparse.ArgumentParser):
        def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
            if message:
                (err if file is sys.stderr else out).write(message)

        def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
            if message:
                err.write(message)
            raise _ParserExit(status)

    return CapturingParser


class LineRunner(Protocol):
    """How the command line runs one command (:func:`pimem_core.doors.cli.run_line`), handed in
    by the CLI so this module does not import it back."""

    def __call__(
        self,
        argv: list[str],
        make_door: Callable[[Path], FrontDoor],
        *,
        out: TextIO,
        err: TextIO,
        cwd: Path,
        parser_class: type[argparse.ArgumentParser],
    ) -> int: ...


def run_command_line(
    run_line: LineRunner,
    pimem: Callable[[], Pimem],
    info: ServiceInfo,
    argv: list[str],
    cwd: Path,
    stdin: str | None = None,
) -> dict[str, object]:
    """Run one client's command line (with the text it read from its stdin for ``-``); its
    stdout, stderr and exit code. *pimem* gives the request's pimem (its settings are checked
    where the command line's are, so a bad one is reported as in process)."""
    out, err = io.StringIO(), io.StringIO()
    door: ServiceDoor | None = None

    def make_door(directory: Path) -> FrontDoor:
        nonlocal door
        door = ServiceDoor(pimem(), directory, info, stdin)
        return door

    try:
        code = run_line(
            argv,
            make_door,
            out=out,
            err=err,
            cwd=cwd,
            parser_class=_capturing_parser(out, err),
        )
    except _ParserExit as exit:
        code = exit.status
    notes = "".join(f"{line}\n" for line in door.lines) if door is not None else ""
    return {"exit": code, "stdout": out.getvalue(), "stderr": notes + err.getvalue()}


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
    run_line: LineRunner
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
    #: Connections open, and of those the ones running a request or an attached session: only
    #: a busy one holds off the idle exit; one still waiting for its request is given at most
    #: its bound (``service_limits.REQUEST_S``) by the drain.
    _active: int = attrs.field(default=0, init=False)
    _busy: int = attrs.field(default=0, init=False)
    #: When the last request or session ended: what the idle time counts from.
    _last: float = attrs.field(factory=time.monotonic, init=False)
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
        with self._lock:
            return (
                self.idle_s > 0 and self._busy == 0 and time.monotonic() - self._last >= self.idle_s
            )

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
            with self._working():
                if request.get("op") == "attach":
                    self._attach(conn, requests.stream, peer, request)
                    return
                with _heartbeat(conn) as send:
                    send(self._answer(request, peer))
            if request.get("op") == "stop":
                return

    @contextlib.contextmanager
    def _working(self) -> Iterator[None]:
        """A request or an attached session running: the idle time starts again at its end."""
        with self._lock:
            self._busy += 1
        try:
            yield
        finally:
            with self._lock:
                self._busy -= 1
                self._last = time.monotonic()

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
        server = Server(
            pimem,
            reader,
            SocketWriter(conn),
            announce=False,
            confined_to=Path(str(request["cwd"])).resolve(),
            relayed=True,
        )
        server.serve()

    def _refusal(self, request: dict[str, object], peer: Peer) -> dict[str, object] | None:
        """Why this client's request is not served here (the reply saying so), or ``None``."""
        cwd, env = request.get("cwd"), request.get("env")
        if not isinstance(cwd, str) or not Path(cwd).is_absolute():
            return {"refused": "cwd must be an absolute path"}
        if not peer.confines(Path(cwd)):
            return {"refused": "cwd must be the client's own working directory"}
        if not isinstance(env, dict) or not all(
            isinstance(key, str) and isinstance(value, str) for key, value in env.items()
        ):
            return {"refused": "env must be an object of strings"}
        changed = self._outdated()
        if changed is not None:
            # The client starts a successor and asks it: nothing was run here.
            return {"refused": f"{changed} since the memory service started", "retired": True}
        if request.get("python") != sys.prefix:
            return {"refused": f"the memory service runs the pimem installed in {sys.prefix}"}
        own = wire.env_fingerprint(os.environ, declared=self.declared)
        theirs = wire.env_fingerprint(env, declared=self.declared)
        if theirs != own:
            differing = sorted(
                name for name in own.keys() | theirs.keys() if own.get(name) != theirs.get(name)
            )
            return {
                "refused": f"the client's settings differ from the memory service's ({', '.join(differing)})",
                "retired": True,
            }
        return None

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
            return run_command_line(
                self.run_line, lambda: self._for_request(request), self.info, list(argv), cwd, stdin
            )
        except Exception as error:  # a bug in one request must not end the service
            log.exception("a request failed")
            return {"exit": 1, "stdout": "", "stderr": f"pimem: internal error: {error!r}\n"}


def run_service(pimem: Pimem, run_line: LineRunner, *, note: Callable[[str], None]) -> int:
    """``pimem service run``: serve in the foreground until stopped or idle."""
    # Its own lines, not every library's chatter, go to the service's log file.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s pimem service: %(message)s")
    log.setLevel(logging.INFO)
    from pimem_core.doors.service_client import ServiceUnavailable, prepare_dir

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
        run_line=run_line,
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
