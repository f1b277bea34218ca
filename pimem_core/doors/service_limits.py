"""What the memory service takes from a connection: whose it is, how long it waits for a
request, how many connections it lets queue, and which command lines it runs.

A client has its request ready before it connects (``write -`` reads its stdin first), so a
connection that sends nothing is not a client at work: it is dropped after a few seconds
instead of holding the service past its idle time and its stop. A line that is not a request
(not JSON, nested too deep, longer than :data:`~service_wire.MAX_LINE`) gets one refusal and
the connection is closed.
"""

from __future__ import annotations

import io
import os
import socket
import struct
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import attrs

from pimem_core.doors import routes, service_client, service_wire

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

#: How long a connection has to send one whole request, from when the service starts waiting
#: for it. A real client sends within milliseconds of the handshake; the bound only matters to
#: one that sends nothing (or a byte now and then), and it is what a service stopped or idle
#: waits for such a connection at most. Short beside the ten idle minutes, long beside a
#: request's few megabytes over a local socket even on a busy machine.
REQUEST_S = 5.0
#: Connections the kernel queues until the service accepts them: every agent session of a
#: machine starting at once is queued, not refused (Linux caps it at ``net.core.somaxconn``).
BACKLOG = 256


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


class _Deadlined(io.RawIOBase):
    """A connection's reads, each given only what is left of the time for the whole request:
    one that trickles a byte at a time gets no longer than one that sends nothing."""

    def __init__(self, conn: socket.socket) -> None:
        super().__init__()
        self._conn = conn
        self.deadline: float | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer, /) -> int:
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no whole request within {REQUEST_S:.0f} s")
            self._conn.settimeout(left)
        return self._conn.recv_into(buffer)


class Requests:
    """The requests of one connection, one line each, each within :data:`REQUEST_S`."""

    def __init__(self, conn: socket.socket) -> None:
        self._conn = conn
        self._raw = _Deadlined(conn)
        #: The connection's bytes: an attached session reads on from here, where a request's
        #: read may have buffered the session's first lines.
        self.stream: BinaryIO = io.BufferedReader(self._raw)

    def next(self) -> dict[str, object] | None:
        """The next request, or ``None`` when the client closed the connection. Raises
        ``TimeoutError`` past :data:`REQUEST_S` and :class:`~service_wire.BadLine` for a line
        that is not a request."""
        self._raw.deadline = time.monotonic() + REQUEST_S
        try:
            return service_wire.receive(self.stream)
        finally:
            # Answering, or serving an attached session, has no deadline of this kind.
            self._raw.deadline = None
            self._conn.settimeout(None)


def unrouted(argv: Sequence[str]) -> str | None:
    """Why the service does not run the command line *argv*, or ``None`` when it does: only
    what the thin client hands it (:func:`~service_client.routable`), nothing a socket names."""
    if service_client.routable(argv):
        return None
    commands = ", ".join(f"`pimem {name}`" for name in routes.ROUTED)
    return (
        f"the memory service runs only {commands} (without -v, --help, --version or "
        "--in-process); run any other command line in process"
    )
