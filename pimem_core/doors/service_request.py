"""One request of a memory-service client: its command line run as the command line runs it
(:func:`~pimem_core.doors.command_line.execute`), in a door of the client's directory, its
answer gathered for the client; and the checks a request passes first.
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, NoReturn

import attrs

from pimem_core.api import Pimem
from pimem_core.command_table import UsageError
from pimem_core.doors import service_wire as wire
from pimem_core.doors.command_line import build_parser, execute
from pimem_core.doors.front_door import FrontDoor
from pimem_core.doors.service_limits import Peer
from pimem_core.types import Scope

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

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


def run_command_line(
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
        parser = build_parser(_capturing_parser(out, err))
        code = execute(parser, argv, make_door, out=out, err=err, default_cwd=cwd)
    except _ParserExit as exit:
        code = exit.status
    notes = "".join(f"{line}\n" for line in door.lines) if door is not None else ""
    return {"exit": code, "stdout": out.getvalue(), "stderr": notes + err.getvalue()}


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
