"""The server half of :mod:`warm_cli`: ``python cli_forkserver.py FD`` imports the libraries
pimem's memsearch plugin loads first and longest (numpy, scipy, bm25s, faiss, pandas: 0.3 s of
CPU in every ``pimem`` process), then forks one ``python -m pimem_core`` per request read from
the socket FD.

Nothing of pimem is imported here, so every command imports pimem and its plugins itself, in its
own environment, as a fresh interpreter does. Only libraries that read nothing of the
environment a test sets (HOME, XDG dirs, proxies, pimem's variables) at import are loaded before
the fork; a command whose environment differs from the server's in a variable they might read
(:data:`warm_cli.IMPORT_TIME_PREFIXES`) goes to a server started with its own, or to a fresh
interpreter.

A request is one message: JSON ``{"argv", "env", "cwd"}`` with four descriptors, the command's
stdin, stdout and stderr and a socket for its pid and exit status. Each command runs under a
monitor process of its own that waits for it and reports its status (the kernel reaps the
monitors), so commands may overlap.
"""

from __future__ import annotations

import gc
import io
import json
import os
import runpy
import signal
import socket
import sys
import tempfile
from typing import Any

#: What a ``pimem`` process with the memsearch plugin imports first and longest.
#: Not pymilvus: with gRPC imported before the fork, a command that exits while a search still
#: runs in the background aborts now and then ("terminate called without an active exception",
#: 4 in 100), which a fresh interpreter never does.
PRELOADED = ("numpy", "scipy.sparse", "bm25s", "faiss", "pandas")


def serve(control: socket.socket) -> dict[str, Any]:
    """Fork a command per request; returns only in a command's process, with its request."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 1 << 22, 4)
        except OSError:
            os._exit(0)
        if not message:
            os._exit(0)  # the test process is gone
        request: dict[str, Any] = json.loads(message)
        if os.fork() == 0:
            control.close()
            _monitor(request, fds)
            return request
        for fd in fds:
            os.close(fd)


def _monitor(request: dict[str, Any], fds: list[int]) -> None:
    """Fork the command and report its pid and exit status; returns only in the command."""
    stdin, stdout, stderr, result = fds
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    pid = os.fork()
    if pid == 0:
        os.close(result)
        _become(request, stdin, stdout, stderr)
        return
    for fd in (stdin, stdout, stderr):
        os.close(fd)
    try:
        os.write(result, f"{pid}\n".encode())
        _, status = os.waitpid(pid, 0)
        os.write(result, f"{os.waitstatus_to_exitcode(status)}\n".encode())
    finally:
        os._exit(0)


def _become(request: dict[str, Any], stdin: int, stdout: int, stderr: int) -> None:
    """This process as ``python -m pimem_core`` started it: its stdio, directory, environment."""
    for target, fd in ((0, stdin), (1, stdout), (2, stderr)):
        os.dup2(fd, target)
        os.close(fd)
    sys.stdin = sys.__stdin__ = _stdio(sys.stdin, 0, write=False)  # type: ignore[misc]
    sys.stdout = sys.__stdout__ = _stdio(sys.stdout, 1, write=True)  # type: ignore[misc]
    sys.stderr = sys.__stderr__ = _stdio(sys.stderr, 2, write=True)  # type: ignore[misc]
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    # `python -m` puts the working directory first on the path (this script put its own).
    sys.path[0] = os.getcwd()
    sys.argv = ["-m", *request["argv"]]
    tempfile.tempdir = None  # read from TMPDIR again, if a library asked for it already


def _stdio(old: Any, fd: int, *, write: bool) -> io.TextIOWrapper:
    """A standard stream on *fd* as the interpreter's start makes it (``create_stdio``), with
    the settings of *old*, which it made for this server's own stdio: the same environment
    decides them, but a stream made for /dev/null takes itself for seekable."""
    unbuffered = write and not isinstance(old.buffer, io.BufferedIOBase)
    buffer: Any = open(fd, "wb" if write else "rb", 0 if unbuffered else -1, closefd=False)  # noqa: SIM115
    raw = buffer if unbuffered else buffer.raw
    raw.name = old.buffer.name
    stream = io.TextIOWrapper(
        buffer,
        encoding=old.encoding,
        errors=old.errors,
        newline="\n",
        line_buffering=old.line_buffering,
        write_through=old.write_through,
    )
    stream.mode = old.mode  # type: ignore[misc]
    return stream


if __name__ == "__main__":
    for name in PRELOADED:
        __import__(name)
    # Out of the collector's sight: a collection in a command would otherwise write to every
    # object imported here, copying each page of the server's heap into the command.
    gc.freeze()
    served = serve(socket.socket(fileno=int(sys.argv[1])))
    del served
    # As `python -m pimem_core`: an exception or exit leaves the interpreter as it would there.
    runpy.run_module("pimem_core", run_name="__main__", alter_sys=True)
