"""One request of a memory-service client: the door its command line runs in (the client's
directory), its answer gathered for the client (the command line itself is run by
:func:`~pimem_core.doors.command_line.run_captured`), and the checks a request passes first.
"""

from __future__ import annotations

import io
import logging
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

import attrs

from pimem_core.api import Pimem
from pimem_core.command_table import UsageError
from pimem_core.doors import service_wire as wire
from pimem_core.doors.front_door import FrontDoor
from pimem_core.doors.service_limits import Peer
from pimem_core.types import Scope

log = logging.getLogger("pimem_core.doors.service")


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


@attrs.define
class ServiceRun:
    """One client's command line as the service runs it: the door it is run in (a
    :class:`ServiceDoor` of the directory it names), and its answer gathered for the client.
    *pimem* gives the request's pimem (its settings are checked where the command line's are,
    so a bad one is reported as in process)."""

    pimem: Callable[[], Pimem]
    info: ServiceInfo
    stdin: str | None = None
    door: ServiceDoor | None = None

    def make_door(self, directory: Path) -> FrontDoor:
        self.door = ServiceDoor(self.pimem(), directory, self.info, self.stdin)
        return self.door

    def answer(self, code: int, stdout: str, stderr: str) -> dict[str, object]:
        """The reply to the client: what the command printed, the door's notes first on its
        stderr, and its exit code."""
        notes = "".join(f"{line}\n" for line in self.door.lines) if self.door is not None else ""
        return {"exit": code, "stdout": stdout, "stderr": notes + stderr}


def malformed(request: dict[str, object], peer: Peer) -> dict[str, object] | None:
    """The refusal of a request whose directory or environment is not one the service takes:
    an absolute path, the client's own working directory, an object of strings."""
    cwd, env = request.get("cwd"), request.get("env")
    if not isinstance(cwd, str) or not Path(cwd).is_absolute():
        return {"refused": "cwd must be an absolute path"}
    if not peer.confines(Path(cwd)):
        return {"refused": "cwd must be the client's own working directory"}
    if not isinstance(env, dict) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in env.items()
    ):
        return {"refused": "env must be an object of strings"}
    return None


def other_settings(env: dict[str, str], declared: wire.Declared) -> dict[str, object] | None:
    """The refusal of a client whose settings differ from the service's (it starts a
    successor for its own), or ``None``."""
    own = wire.env_fingerprint(os.environ, declared=declared)
    theirs = wire.env_fingerprint(env, declared=declared)
    if theirs == own:
        return None
    differing = sorted(
        name for name in own.keys() | theirs.keys() if own.get(name) != theirs.get(name)
    )
    return {
        "refused": f"the client's settings differ from the memory service's ({', '.join(differing)})",
        "retired": True,
    }
