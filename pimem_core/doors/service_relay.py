"""``pimem serve`` through the memory service: the host's session, served by the service.

With ``PIMEM_SERVICE=on`` the process an agent host spawns stays thin: it attaches to the
user's memory service and copies the host protocol's lines both ways, so every session shares
the service's embedding model, read models and backend queue instead of loading its own. Like
the CLI's thin client it imports only the standard library and the service's wire module.

It keeps what it needs to outlive the service: the session's ``session.start`` and the
requests still unanswered. When the service goes away mid-session, the relay attaches to a
new one (starting it), starts the session there again (the capture journal then brings back
an exchange the old service was capturing) and sends the lifecycle requests in flight again;
a ``memory.*`` request in flight is answered with an ``unavailable`` error instead, since a
write may have been applied. When no service can be had, the session is served in this
process, as without the setting.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from pimem_core.doors import service_client as client
from pimem_core.doors import service_wire as wire

#: Requests sent again to a new service: the session's own lifecycle, which the new service
#: needs to carry the session on and which change no memory twice.
RESENT = frozenset(
    {
        "session.start",
        "session.before_prompt",
        "session.settled",
        "session.compacted",
        "session.shutdown",
        "ping",
    }
)
#: How many times a session attaches again before it is served in process instead: a service
#: that dies on every attempt must not keep the host's requests going round.
MAX_REATTACH = 3


def attach(cwd: Path, *, start: bool = True) -> client.Connection | None:
    """A connection to the service (started when needed), attached as a host session. Without
    *start*, only a current service already listening is attached to: ``None`` otherwise."""
    for attempt in (1, 2):
        connection = client.ensure() if start else client.running()
        if connection is None:
            return None
        try:
            reply = connection.ask({"op": "attach", "cwd": str(cwd), **client.introduction()})
        except (OSError, ValueError) as error:
            connection.close()
            raise client.ServiceUnavailable(f"the service failed to attach ({error})") from None
        if reply.get("attached") is True:
            connection.sock.settimeout(None)  # a host session may be quiet for long
            return connection
        connection.close()
        # A service started before this session's installation or settings has stopped
        # listening: a successor started now serves the session.
        if reply.get("retired") and not start:
            return None
        if not reply.get("retired") or attempt == 2:
            raise client.ServiceUnavailable(str(reply.get("refused", reply)))
    raise AssertionError("unreachable: the second refusal raises")


def _message(line: bytes) -> dict[str, object] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class Relay:
    """One host session's lines, between the host's pipes and the service's socket."""

    def __init__(self, stdin: BinaryIO, stdout: BinaryIO, cwd: Path) -> None:
        self._stdin = stdin
        self._stdout = stdout
        self._cwd = cwd
        self._lock = threading.Lock()  # the connection and the bookkeeping below
        self._answered = threading.Condition(self._lock)
        self._out_lock = threading.Lock()
        self._connection: client.Connection | None = None
        #: The host's requests not answered yet, by their id as JSON, in the order sent.
        self._in_flight: dict[str, tuple[str, bytes]] = {}
        #: The service's requests to the host (``complete``) on the current connection: the
        #: id the host sees (as JSON) to the service's own. A new service numbers its requests
        #: from 1 again, so after a re-attach the host sees them renamed: an answer the host
        #: still owes the old service can never be taken for one to the new.
        self._asked: dict[str, str] = {}
        #: Ids of the relay's own requests, whose answers the host never sees.
        self._own: set[str] = set()
        self._start: dict[str, object] | None = None
        #: Lines held back until a new service has started the session again, as a host
        #: waits for ``session.start`` before anything else.
        self._held: list[bytes] | None = None
        self._host_done = False
        self._reattached = 0
        self._in_process: BinaryIO | None = None
        self.fallback: threading.Thread | None = None

    # -- the host's side --------------------------------------------------------------------

    def run(self) -> bool:
        """Relay until the host ends the session; ``False`` when no service could be attached
        to and nothing was read (serve in process instead).

        A service already listening is attached to at once. One that must be started waits
        for the host's first line: a host may start its bridge ahead of a session that never
        comes (``pi --help``), and that must start nothing."""
        first = b""
        try:
            self._connection = attach(self._cwd, start=False)
            if self._connection is None:
                first = self._stdin.readline()
                if not first:
                    return True  # the host left without a word: nothing to serve
                self._connection = attach(self._cwd)
        except (OSError, ValueError, client.ServiceUnavailable) as error:
            said = f"serving this session in process, the memory service is unavailable: {error}"
            if not first:
                _warn(said)
                return False
            self._serve_in_process(said)
        reader = None
        if self._connection is not None:
            self._announce(self._connection)
            reader = threading.Thread(target=self._read_service, name="pimem-relay", daemon=True)
            reader.start()
        if first:
            self._from_host(first)
        for line in iter(self._stdin.readline, b""):
            self._from_host(line)
        with self._answered:
            self._host_done = True
            if self._held is None:  # else once the session is started again
                self._end_input()
            # Done when every request is answered: what the session has left to do (its last
            # index run) the service finishes on its own, with nobody waiting.
            while (self._in_flight or self._held is not None) and reader and reader.is_alive():
                self._answered.wait(0.1)
        if self.fallback is not None:
            self.fallback.join()
        return True

    def _from_host(self, line: bytes) -> None:
        message = _message(line)
        with self._lock:
            if message is not None:
                request_id, method = message.get("id"), message.get("method")
                key = json.dumps(request_id)
                if isinstance(method, str):
                    if request_id is not None:
                        self._in_flight[key] = (method, line)
                    if method == "session.start":
                        self._start = message
                elif isinstance(request_id, str):
                    original = self._asked.pop(key, None)
                    if original is None:
                        return  # the answer to a service that has gone: nobody waits for it
                    if original != request_id:
                        line = _renamed(message, original)
            self._send(line)

    def _send(self, line: bytes) -> None:
        """To the service, or to the in-process server after a fallback (lock held). A send
        that fails is left to the reader, which sees the connection end and attaches again."""
        if self._held is not None:
            self._held.append(line)
        elif self._in_process is not None:
            self._in_process.write(line)
            self._in_process.flush()
        elif self._connection is not None:
            with contextlib.suppress(OSError):
                self._connection.sock.sendall(line)

    def _end_input(self) -> None:
        if self._in_process is not None:
            self._in_process.close()
        elif self._connection is not None:
            with contextlib.suppress(OSError):
                self._connection.sock.shutdown(socket.SHUT_WR)

    def _to_host(self, line: bytes) -> None:
        with self._out_lock, contextlib.suppress(OSError, ValueError):
            self._stdout.write(line)
            self._stdout.flush()

    def _announce(self, connection: client.Connection) -> None:
        """Tell the host where the service listens: it may attach its next sessions itself,
        with no relay process (docs/host-protocol.md, "Attaching to the memory service")."""
        with contextlib.suppress(OSError):
            event = {
                "event": "service",
                "socket": connection.sock.getpeername(),
                "python": sys.prefix,
                "version": wire.VERSION,
                "protocol": wire.PROTOCOL,
            }
            self._to_host(json.dumps(event).encode("utf-8") + b"\n")

    # -- the service's side -----------------------------------------------------------------

    def _read_service(self) -> None:
        while True:
            connection = self._connection
            assert connection is not None
            with contextlib.suppress(OSError, ValueError):
                for line in iter(connection.stream.readline, b""):
                    self._from_service(line)
            connection.close()
            with self._lock:
                if self._host_done and not self._in_flight:
                    return  # the session ended and every request was answered
                if not self._reattach():
                    return

    def _from_service(self, line: bytes) -> None:
        """A line of the service's (or, after a fallback, of the in-process server's)."""
        message = _message(line)
        if message is not None:
            request_id = message.get("id")
            key = json.dumps(request_id)
            with self._lock:
                if "method" in message and isinstance(request_id, str):
                    seen = (
                        request_id if self._reattached == 0 else f"{request_id}.{self._reattached}"
                    )
                    self._asked[json.dumps(seen)] = request_id
                    if seen != request_id:
                        line = _renamed(message, seen)
                elif "result" in message or "error" in message:
                    self._in_flight.pop(key, None)
                    self._answered.notify_all()
                    if self._own_answered(key):
                        return
        self._to_host(line)

    def _own_answered(self, key: str) -> bool:
        """Whether *key* answers one of the relay's own requests (lock held); the restarted
        session is then ready for the host's lines held back meanwhile."""
        if key not in self._own:
            return False
        self._own.discard(key)
        held, self._held = self._held or [], None
        for waiting in held:
            self._send(waiting)
        if self._host_done:
            self._end_input()
        return True

    def _reattach(self) -> bool:
        """After the service went away (lock held): answer what cannot be sent again, then go
        on with a new service, or in process. ``False`` when the reader's work is over."""
        for key, (method, _line) in list(self._in_flight.items()):
            if method not in RESENT:
                del self._in_flight[key]
                self._to_host(_unavailable(key, method))
        self._asked.clear()
        self._held = None
        lines = [line for _method, line in self._in_flight.values()]
        restart: bytes | None = None
        if self._start is not None and not any(
            method == "session.start" for method, _line in self._in_flight.values()
        ):
            # The new service must know the session before anything else of it.
            message = dict(self._start, id=f"relay-{self._reattached + 1}")
            self._own.add(json.dumps(message["id"]))
            restart = json.dumps(message).encode("utf-8") + b"\n"
        self._reattached += 1
        self._connection = None
        if self._reattached <= MAX_REATTACH:
            try:
                self._connection = attach(self._cwd)
            except (OSError, ValueError, client.ServiceUnavailable) as error:
                _warn(f"the memory service went away and could not be reattached: {error}")
        if self._connection is None:
            self._serve_in_process()
        else:
            self._announce(self._connection)
        if restart is not None:
            self._send(restart)
            self._held = []
        for line in lines:
            self._send(line)
        if self._host_done and self._held is None:
            self._end_input()
        return self._connection is not None

    def _serve_in_process(self, said: str = "serving the rest of this session in process") -> None:
        """The rest of the session in this process: a pipe feeds its server the host's lines,
        and the server answers the host directly. *said* is the one line the user is told."""
        _warn(said)
        read_end, write_end = os.pipe()
        self._in_process = os.fdopen(write_end, "wb")

        def serve() -> None:
            from pimem_core.api import Pimem
            from pimem_core.doors.serve import Server

            reader = io.TextIOWrapper(os.fdopen(read_end, "rb"), encoding="utf-8", errors="replace")
            writer = _ServerWriter(self._from_service)
            try:
                pimem = Pimem.from_env()
            except Exception as error:  # noqa: BLE001 - the host gets errors, not a dead pipe
                _warn(f"pimem could not start in process: {error}")
                return
            Server(pimem, reader, writer, announce=False).serve()

        self.fallback = threading.Thread(target=serve, name="pimem-in-process")
        self.fallback.start()


class _ServerWriter(io.TextIOBase):
    """The in-process server's lines, handed to the relay as a service's would be."""

    def __init__(self, relay: Callable[[bytes], None]) -> None:
        super().__init__()
        self._relay = relay

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._relay(text.encode("utf-8"))
        return len(text)


def _renamed(message: dict[str, object], request_id: str) -> bytes:
    return json.dumps({**message, "id": request_id}).encode("utf-8") + b"\n"


def _unavailable(key: str, method: str) -> bytes:
    error = {
        "type": "unavailable",
        "message": f"the memory service stopped during {method}; it may or may not have been "
        "applied: check before running it again",
    }
    return json.dumps({"id": json.loads(key), "error": error}).encode("utf-8") + b"\n"


def _warn(text: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(f"pimem: {text} (PIMEM_SERVICE=off silences this)", file=sys.stderr, flush=True)


def relay_session() -> bool:
    """``pimem serve`` through the service, on this process's stdin and stdout; ``False`` when
    the session must be served in process instead (nothing of stdin was read)."""
    return Relay(sys.stdin.buffer, sys.stdout.buffer, Path.cwd()).run()
