"""What the memory service and its clients share, light on purpose.

A client imports this before deciding whether to import the rest of pimem, so it holds only
constants, the socket's place and the line framing, with nothing of pimem imported but the
runtime directory's place (:mod:`pimem_core.private_dir`, standard library only).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from pathlib import Path
from typing import BinaryIO

from pimem_core.private_dir import runtime_dir as runtime_dir  # where the socket lives

#: Kept equal to the distribution's version by a test: reading it from the installed metadata
#: costs a client about 60 ms, more than the rest of its start-up.
VERSION = "0.1.0"
#: Bumped when a request or reply changes shape.
PROTOCOL = 2
#: While a request runs, the service says so this often (``{"working": true}``)...
HEARTBEAT_S = 2.0
#: ...and a client that hears nothing for this long takes the service for wedged.
SILENCE_S = 10.0
MAX_LINE = 8 * 1024 * 1024
#: The environment variables that change what a command answers: a client whose values differ
#: from the service's must not be answered by it.
_ENV_PREFIXES = ("PIMEM_", "PI_MEMSEARCH_", "MEMSEARCH_", "HF_", "TRANSFORMERS_")
_ENV_NAMES = ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME")
#: Knobs no answer depends on (the service's own; the pi adapter's, which pi's bridges carry
#: and a shell does not): two clients may differ in these and still share a service.
_ENV_IGNORED = ("PIMEM_SERVICE", "PIMEM_SERVICE_IDLE_S", "PIMEM_BIN", "PIMEM_PI_TIMINGS")


def service_file(suffix: str, environ: dict[str, str] | None = None) -> Path:
    """``<runtime dir>/service-<digest>.<suffix>``: one service per environment a command's
    answer depends on (:func:`env_fingerprint`), so a shell and an agent configured apart each
    get a warm one of their own instead of being turned away by the other's."""
    digest = hashlib.sha256(json.dumps(env_fingerprint(environ)).encode("utf-8")).hexdigest()
    return runtime_dir(environ) / f"service-{digest[:12]}.{suffix}"


def socket_path(environ: dict[str, str] | None = None) -> Path:
    return service_file("sock", environ)


def lock_path(environ: dict[str, str] | None = None) -> Path:
    return service_file("lock", environ)


def log_path(environ: dict[str, str] | None = None) -> Path:
    return service_file("log", environ)


def env_fingerprint(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The part of the environment a command's answer depends on."""
    env = os.environ if environ is None else environ
    return {
        name: value
        for name, value in sorted(env.items())
        if (name.startswith(_ENV_PREFIXES) or name in _ENV_NAMES) and name not in _ENV_IGNORED
    }


def send(sock: socket.socket, message: dict[str, object]) -> None:
    sock.sendall(json.dumps(message).encode("utf-8") + b"\n")


def receive(stream: BinaryIO) -> dict[str, object] | None:
    """One JSON object from a socket file, or ``None`` when the peer closed it."""
    line = stream.readline(MAX_LINE + 1)
    if not line:
        return None
    value = json.loads(line)
    if not isinstance(value, dict):
        raise ValueError("a service line must be a JSON object")
    return value
