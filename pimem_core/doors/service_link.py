"""Finding, starting and stopping this user's memory service: a connection and its
handshake, the start lock, the spawned ``pimem service run``, and every service in the
runtime directory, as ``pimem service status`` lists them.

Like the thin client (:mod:`pimem_core.doors.service_client`), it runs before any of pimem is
imported, so it imports only the standard library, :mod:`pimem_core.doors.service_wire`,
:mod:`pimem_core.private_dir` and :mod:`pimem_core.private_files`; its records are named
tuples.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, NamedTuple

from pimem_core.doors import service_wire as wire
from pimem_core.private_dir import NotPrivate, make_private
from pimem_core.private_files import open_private

if TYPE_CHECKING:
    import subprocess

START_TIMEOUT_S = 10.0
#: glibc's allocator for a process that lives for hours with a thread per connection: two
#: arenas instead of eight per core, and large blocks always mapped (so always given back),
#: where its adaptive threshold would otherwise grow the heap with each large search.
SERVICE_MALLOC = {"MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": "262144"}
#: How long a client waits on a service that holds the socket's claim but does not answer yet.
CLAIMED_WAIT_S = 3.0
STOP_TIMEOUT_S = 5.0
CONNECT_TIMEOUT_S = 2.0
#: Variables named like these hold secrets whatever declares them (``OPENAI_API_KEY``): where
#: a service's settings are listed, their values are shown as :data:`MASK`.
SECRET_ENDINGS = ("_KEY", "_TOKEN", "_SECRET", "_PASSWORD")
MASK = "****"
#: Why a request got no answer: the service fell silent past its heartbeats, or hung up.
SILENT = f"the service said nothing for {wire.SILENCE_S:.0f} s (wedged?)"
CLOSED = "the service closed the connection without an answer"


class ServiceUnavailable(Exception):
    """The service could not be reached or started, or failed during a request; the message
    says why. *handed_over*: the request had reached the service, so a ``write`` or ``forget``
    may have been applied."""

    def __init__(self, message: str, *, handed_over: bool = False) -> None:
        super().__init__(message)
        self.handed_over = handed_over


class Hello(NamedTuple):
    """The service's handshake line."""

    version: str
    protocol: int
    pid: int
    started: float

    @property
    def current(self) -> bool:
        return self.version == wire.VERSION and self.protocol == wire.PROTOCOL


class Connection(NamedTuple):
    sock: socket.socket
    stream: BinaryIO
    hello: Hello

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.stream.close()
        with contextlib.suppress(OSError):
            self.sock.close()

    def ask(self, message: dict[str, object]) -> dict[str, object]:
        wire.send(self.sock, message)
        return self.answer()

    def answer(self) -> dict[str, object]:
        """The reply to the request sent last, past the service's heartbeats (the thin client
        reads its command's answer itself: :func:`~pimem_core.doors.service_client.answer`)."""
        while True:
            try:
                reply = wire.receive(self.stream)
            except TimeoutError:
                raise ServiceUnavailable(SILENT) from None
            if reply is None:
                raise ServiceUnavailable(CLOSED)
            if "working" not in reply:
                return reply


def connect(path: Path) -> Connection:
    """A connection to the service at *path* with its handshake read; raise ``OSError`` when
    nothing answers there, :class:`ServiceUnavailable` when something else does."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT_S)
        sock.connect(str(path))
        stream = sock.makefile("rb")
        raw = wire.receive(stream)  # a service that accepts but never says hello times out
        sock.settimeout(wire.SILENCE_S)
    except (OSError, ValueError):
        sock.close()
        raise
    try:
        if raw is None or raw.get("service") != "pimem":
            raise ValueError(f"not a pimem service: {raw!r}")
        hello = Hello(
            version=str(raw["version"]),
            protocol=int(str(raw["protocol"])),
            pid=int(str(raw["pid"])),
            started=float(str(raw["started"])),
        )
    except (KeyError, ValueError) as error:
        sock.close()
        raise ServiceUnavailable(f"{path} answers, but not as a pimem service ({error})") from None
    return Connection(sock=sock, stream=stream, hello=hello)


def probe(path: Path) -> Connection | None:
    """The service answering at *path*, or ``None`` when none does."""
    try:
        return connect(path)
    except (OSError, ValueError):
        return None


def prepare_dir(directory: Path) -> None:
    """Make the runtime directory, private to this user; refuse one that is not."""
    try:
        make_private(directory)
    except NotPrivate as error:
        raise ServiceUnavailable(str(error)) from None


@contextlib.contextmanager
def start_lock(path: Path) -> Iterator[None]:
    """Held by the one client that may start or replace the service."""
    try:
        handle = open_private(path, os.O_RDWR, root=path.parent)
    except OSError as error:
        raise ServiceUnavailable(f"cannot open the start lock {path}: {error}") from None
    try:
        import fcntl

        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)


def _wait_gone(path: Path, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = probe(path)
        if found is None:
            return True
        found.close()
        time.sleep(0.05)
    return False


def stop(connection: Connection, path: Path) -> None:
    """Ask the service to stop and wait (bounded) until it no longer answers; one that does
    not listen (an old release, a wedged one) is terminated."""
    with contextlib.suppress(OSError, ServiceUnavailable, ValueError):
        connection.sock.settimeout(STOP_TIMEOUT_S / 2)
        connection.ask({"op": "stop"})
    connection.close()
    if not _wait_gone(path, STOP_TIMEOUT_S / 2) and _is_service(connection.hello.pid):
        import signal

        with contextlib.suppress(OSError):
            os.kill(connection.hello.pid, signal.SIGTERM)
        _wait_gone(path, STOP_TIMEOUT_S / 2)


def _is_service(pid: int) -> bool:
    """*pid* is a ``pimem service run`` of this user (not a process that took its number)."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        owner = Path(f"/proc/{pid}").stat().st_uid
    except OSError:
        return False
    return owner == os.getuid() and b"service" in words and b"run" in words


def _spawn(log_path: Path, environment: dict[str, str]) -> subprocess.Popen[bytes]:
    import subprocess

    log = os.fdopen(open_private(log_path, os.O_WRONLY | os.O_APPEND, root=log_path.parent), "ab")
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "pimem_core", "service", "run"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
            # Every request brings its own directory; the service must not pin the first one's.
            cwd="/",
            env={**environment, **SERVICE_MALLOC},
        )
    except OSError as error:
        raise ServiceUnavailable(f"cannot start `pimem service run`: {error}") from None
    finally:
        log.close()
    # Waited for in the background: its exit code tells a start that failed, and the service,
    # which outlives a short client, is still reaped by a long-lived one (a relay, a program).
    threading.Thread(target=child.wait, name="pimem-service-reaper", daemon=True).start()
    return child


def _last_line(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1] if lines else ""


def running(environ: dict[str, str] | None = None) -> Connection | None:
    """A connection to a current service already listening, or ``None``."""
    if os.name == "nt":
        return None
    found = probe(wire.socket_path(environ))
    if found is not None and not found.hello.current:
        found.close()
        return None
    return found


def ensure(environ: dict[str, str] | None = None) -> Connection:
    """A connection to a current service, started (or replaced) when needed."""
    if os.name == "nt":
        raise ServiceUnavailable("it needs Unix sockets and flock, not available on Windows yet")
    found = running(environ)
    if found is not None:
        return found
    directory = wire.runtime_dir(environ)
    path, log = wire.socket_path(environ), wire.log_path(environ)
    prepare_dir(directory)
    with start_lock(wire.lock_path(environ)):
        # Another client may have started it while this one waited for the lock.
        found = probe(path)
        if found is not None and found.hello.current:
            return found
        if found is not None:
            stop(found, path)
        given = wire.service_environment()
        child = _spawn(log, given)
        deadline = time.monotonic() + START_TIMEOUT_S
        claimed_elsewhere = False
        while time.monotonic() < deadline:
            if wire.service_environment() != given:
                # Its plugins declare settings this client did not know of (one was installed
                # since the last service started), so it was started without their values: it
                # listens for a configuration of its own, and one started now gets them.
                given = wire.service_environment()
                child = _spawn(log, given)
            # Looked up again: a service listens where its plugins' settings say
            # (service_wire.declared_settings), which it publishes as it starts.
            path = wire.socket_path(environ)
            found = probe(path)
            if found is not None and found.hello.current:
                return found
            if found is not None:
                found.close()
            code = None if claimed_elsewhere else child.returncode
            if code:
                # A service that cannot start (a bad setting) says why in its log.
                why = _last_line(log)
                raise ServiceUnavailable(f"`pimem service run` exited: {why}")
            if code == 0:
                # Another service holds the socket: one starting alongside gets a moment to
                # answer; one that never does (stopped, wedged) is not waited for in full.
                claimed_elsewhere = True
                deadline = min(deadline, time.monotonic() + CLAIMED_WAIT_S)
            time.sleep(0.02)
    raise ServiceUnavailable(
        f"`pimem service run` did not answer within {START_TIMEOUT_S:.0f} s (see {log})"
    )


class Running(NamedTuple):
    """One of this user's services in the runtime directory, as ``pimem service status``
    lists them."""

    path: Path
    hello: Hello
    #: The environment it was started with (the part its answers depend on), when it says.
    env: dict[str, str] | None
    #: The settings its plugins declare secret (``SettingSpec(secret=True)``).
    secret: frozenset[str] = frozenset()

    def differences(
        self, environ: dict[str, str] | None = None, *, secret: Collection[str] = ()
    ) -> list[str]:
        """What sets it apart from *environ*'s service: ``NAME=value`` for a value it has
        that *environ* has not (``NAME unset`` for one it lacks), the value of a secret
        (:func:`is_secret`; *secret*: this installation's declared ones) masked."""
        if self.env is None:
            return ["started by an older pimem"]
        here = wire.env_fingerprint(environ)
        names = sorted(self.env.keys() | here.keys())
        hidden = self.secret | frozenset(secret)
        return [
            f"{name}={MASK if is_secret(name, hidden) else self.env[name]}"
            if name in self.env
            else f"{name} unset"
            for name in names
            if self.env.get(name) != here.get(name)
        ]


def is_secret(name: str, declared: Collection[str] = ()) -> bool:
    """Whether the variable *name* holds a secret: declared so by a plugin, or named like one."""
    return name in declared or name.upper().endswith(SECRET_ENDINGS)


def every_service(environ: dict[str, str] | None = None) -> list[Running]:
    """Every service answering in this user's runtime directory, whatever it was started with."""
    import json

    found: list[Running] = []
    for path in sorted(wire.runtime_dir(environ).glob("service-*.sock")):
        connection = probe(path)
        if connection is None:
            continue
        connection.close()
        secret: frozenset[str] = frozenset()
        try:
            record = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
            env = {str(key): str(value) for key, value in dict(record["env"]).items()}
            secret = frozenset(str(name) for name in record.get("secret", ()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            env = None
        found.append(Running(path, connection.hello, env, secret))
    return found


def describe(environ: dict[str, str] | None = None) -> str:
    """One line on the service: running (pid, uptime) or not."""
    path = wire.socket_path(environ)
    found = probe(path)
    if found is None:
        return f"not running (socket {path})"
    found.close()
    uptime = max(0, int(time.time() - found.hello.started))
    stale = "" if found.hello.current else f", pimem {found.hello.version} (outdated)"
    return f"running, pid {found.hello.pid}, up {uptime} s{stale}"
