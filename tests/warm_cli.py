"""``python -m pimem_core`` in a child process, started warm: forked from a server that has
imported the numeric libraries already (:mod:`cli_forkserver`), rather than exec'd.

The command is the real one all the same: a process of its own, the whole environment it is
given, its working directory, its stdin, stdout and stderr on pipes, its exit status; pimem and
its plugins are imported in it, as in a fresh interpreter. What differs: the libraries in
:data:`cli_forkserver.PRELOADED` were imported before the environment was set, the command's
parent is a monitor process rather than the test, and every command of a test process shares
one hash seed. ``pytest --warm-cli`` turns it on (``make test-fast``); ``make unit`` exec's every
command.
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

SERVER = Path(__file__).with_name("cli_forkserver.py")

#: Variables the preloaded libraries, or the interpreter's own start, may read: a command whose
#: environment differs from the server's in one of them gets a fresh interpreter.
IMPORT_TIME_PREFIXES = (
    "PYTHON",
    "LANG",
    "LC_",
    "NPY_",
    "NUMPY_",
    "SCIPY_",
    "OPENBLAS_",
    "GOTO",
    "OMP_",
    "KMP_",
    "MKL_",
    "FAISS_",
    "ARROW_",
    "MILVUS_",
    "GRPC_",
    "PROTOCOL_BUFFERS_",
)


def _import_time(env: Mapping[str, str]) -> dict[str, str]:
    return {name: value for name, value in env.items() if name.startswith(IMPORT_TIME_PREFIXES)}


class ForkServer:
    """One :mod:`cli_forkserver` for this process, started on first use."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._lock = threading.Lock()
        self._control: socket.socket | None = None
        self._process: subprocess.Popen[bytes] | None = None
        #: The server's environment: what a command's import-time variables are compared to.
        self._env = dict(env)
        self.broken = False

    def _start(self) -> socket.socket:
        if self._control is not None:
            return self._control
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._process = subprocess.Popen(
            [sys.executable, str(SERVER), str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=self._env,
            cwd=SERVER.parent,
        )
        theirs.close()
        self._control = ours
        atexit.register(self.close)
        return ours

    def close(self) -> None:
        if self._control is not None:
            self._control.close()
            self._control = None
        if self._process is not None:
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        stdin: bytes,
        cwd: Path | None,
        timeout: float,
    ) -> tuple[int, bytes, bytes] | None:
        """``python -m pimem_core *argv``'s exit status, stdout and stderr; ``None`` when the
        server cannot take the request (then the caller exec's the command)."""
        request = json.dumps(
            {"argv": list(argv), "env": dict(env), "cwd": str(cwd or Path.cwd())}
        ).encode()
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        result_ours, result_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        theirs = [stdin_r, stdout_w, stderr_w, result_theirs.fileno()]
        try:
            with self._lock:
                control = self._start()
                socket.send_fds(control, [request], theirs)
        except OSError:
            self.broken = True  # too big a request, or the server is gone: exec from now on
            for fd in (stdin_w, stdout_r, stderr_r):
                os.close(fd)
            result_ours.close()
            return None
        finally:
            for fd in theirs[:3]:
                os.close(fd)
            result_theirs.close()
        return _collect(argv, stdin, stdin_w, stdout_r, stderr_r, result_ours, timeout)


def _collect(
    argv: Sequence[str],
    stdin: bytes,
    stdin_w: int,
    stdout_r: int,
    stderr_r: int,
    result: socket.socket,
    timeout: float,
) -> tuple[int, bytes, bytes]:
    """What ``subprocess.run(..., input=stdin, capture_output=True, timeout=timeout)`` does:
    feed stdin, read both outputs to their end, then the exit status."""
    deadline = time.monotonic() + timeout
    outputs: dict[int, bytearray] = {stdout_r: bytearray(), stderr_r: bytearray()}
    status = bytearray()
    pending = memoryview(stdin)
    selector = selectors.DefaultSelector()
    os.set_blocking(stdin_w, False)
    if pending:
        selector.register(stdin_w, selectors.EVENT_WRITE)
    else:
        os.close(stdin_w)
    for fd in outputs:
        selector.register(fd, selectors.EVENT_READ)
    selector.register(result, selectors.EVENT_READ)
    try:
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                pid = status.decode().split("\n")[0]
                if pid.isdigit():
                    os.kill(int(pid), signal.SIGKILL)
                raise subprocess.TimeoutExpired(
                    [sys.executable, "-m", "pimem_core", *argv], timeout
                )
            for key, _ in selector.select(left):
                if key.fd == stdin_w:
                    try:
                        written = os.write(stdin_w, pending[:65536])
                    except BrokenPipeError:
                        written = len(pending)
                    pending = pending[written:]
                    if not pending:
                        selector.unregister(stdin_w)
                        os.close(stdin_w)
                    continue
                chunk = result.recv(4096) if key.fileobj is result else os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fileobj)
                elif key.fileobj is result:
                    status += chunk
                else:
                    outputs[key.fd] += chunk
    finally:
        selector.close()
        if pending:
            os.close(stdin_w)
        os.close(stdout_r)
        os.close(stderr_r)
        result.close()
    reported = status.decode().split()
    if len(reported) != 2:
        raise RuntimeError(f"the fork server reported no exit status for pimem {argv}")
    return int(reported[1]), bytes(outputs[stdout_r]), bytes(outputs[stderr_r])


#: The test process's environment as it started, before any test changed it.
BASE_ENV = dict(os.environ)
#: At most this many servers, one for each set of import-time variables commands come with
#: (in-process memsearch sets OPENBLAS_NUM_THREADS in the test process's environment).
MAX_SERVERS = 3
_servers: dict[tuple[tuple[str, str], ...], ForkServer] = {}
_servers_lock = threading.Lock()


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    stdin: bytes,
    cwd: Path | None,
    timeout: float,
) -> tuple[int, bytes, bytes] | None:
    """``python -m pimem_core *argv``'s exit status, stdout and stderr, started warm; ``None``
    when it must start in a fresh interpreter (a PYTHONPATH of its own puts more on
    ``sys.path``), or no server can take it."""
    server = _server_for(env)
    if server is None:
        return None
    return server.run(argv, env=env, stdin=stdin, cwd=cwd, timeout=timeout)


def _server_for(env: Mapping[str, str]) -> ForkServer | None:
    wanted, base = _import_time(env), _import_time(BASE_ENV)
    if wanted.get("PYTHONPATH") != base.get("PYTHONPATH"):
        return None
    key = tuple(sorted(wanted.items()))
    with _servers_lock:
        server = _servers.get(key)
        if server is None:
            if len(_servers) >= MAX_SERVERS:
                return None
            rest = {name: value for name, value in BASE_ENV.items() if name not in base}
            server = _servers[key] = ForkServer({**rest, **wanted})
    return None if server.broken else server
