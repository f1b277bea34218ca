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
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, NamedTuple

from pimem_core.private_dir import runtime_dir as runtime_dir  # where the socket lives
from pimem_core.private_files import write_private

if TYPE_CHECKING:
    from pimem_core.settings import SettingSpec

#: Kept equal to the distribution's version by a test: reading it from the installed metadata
#: costs a client about 60 ms, more than the rest of its start-up.
VERSION = "0.1.0"
#: Bumped when a request or reply changes shape.
PROTOCOL = 2
#: While a request runs, the service says so this often (``{"working": true}``)...
HEARTBEAT_S = 1.0
#: ...so a client that hears nothing for this long tells its user it is waiting...
QUIET_S = 2.0
#: ...and one that hears nothing for this long takes the service for wedged.
SILENCE_S = 10.0
#: The longest line either end takes (a 6 MB ``write -`` fits): a longer one is refused unread,
#: so a request cannot make the service hold more than this of it in memory.
MAX_LINE = 8 * 1024 * 1024
#: The environment variables that change what a command answers: a client whose values differ
#: from the service's must not be answered by it. Plugins add theirs (``pimem_declare_settings``),
#: which the service publishes in its settings file (:func:`declared_settings`).
_ENV_PREFIXES = ("PIMEM_", "PI_MEMSEARCH_", "MEMSEARCH_", "HF_", "TRANSFORMERS_")
_ENV_NAMES = ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "PYTHONPATH")
#: Knobs no answer depends on (the service's own; the pi adapter's, which pi's bridges carry
#: and a shell does not): two clients may differ in these and still share a service.
_ENV_IGNORED = ("PIMEM_SERVICE", "PIMEM_SERVICE_IDLE_S", "PIMEM_BIN", "PIMEM_PI_TIMINGS")
#: What any process needs, kept in a memory service's environment beside the variables its
#: answers depend on: the search path (store commands), locale, time zone, temporary directory,
#: certificates and proxies (a model endpoint), and the thread count of the embedding runtime.
_PROCESS_ENV = frozenset(
    {
        "PATH",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "USER",
        "LOGNAME",
        "XDG_RUNTIME_DIR",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "OMP_NUM_THREADS",
    }
)
#: Core settings that shape one agent session or one request, not the service: each request
#: brings its own values, so a pi session with capture off and a shell share one service. (Not
#: the snapshot switch: it decides whether the snapshot plugin is loaded at all.)
#: Plugins mark theirs ``SettingSpec(per_session=True)`` (auto-context's switch and floors).
SESSION_ENV = frozenset({"PI_MEMSEARCH_CAPTURE", "PI_MEMSEARCH_CAPTURE_MODEL"})


class Declared(NamedTuple):
    """The settings a service's plugins declare beyond pimem's prefixes: *shared* ones split
    services (each value gets its own), *session* ones travel with each request."""

    shared: frozenset[str] = frozenset()
    session: frozenset[str] = frozenset()


def declared_by(specs: Iterable[SettingSpec[Any]]) -> Declared:
    """The declared settings *specs*, split as a service's clients must know them."""
    specs = tuple(specs)
    return Declared(
        shared=frozenset(spec.env for spec in specs if not spec.per_session),
        session=frozenset(spec.env for spec in specs if spec.per_session),
    )


def service_file(
    suffix: str, environ: Mapping[str, str] | None = None, *, declared: Declared | None = None
) -> Path:
    """``<runtime dir>/service-<digest>.<suffix>``: one service per installation and environment
    a command's answer depends on (:func:`identity`), so a shell and an agent configured apart
    each get a warm one of their own instead of being turned away by the other's."""
    digest = hashlib.sha256(
        json.dumps(identity(environ, declared=declared)).encode("utf-8")
    ).hexdigest()
    return runtime_dir(environ) / f"service-{digest[:12]}.{suffix}"


def socket_path(environ: Mapping[str, str] | None = None) -> Path:
    return service_file("sock", environ)


def lock_path(environ: Mapping[str, str] | None = None) -> Path:
    return service_file("lock", environ)


def log_path(environ: Mapping[str, str] | None = None) -> Path:
    return service_file("log", environ)


def identity(
    environ: Mapping[str, str] | None = None, *, declared: Declared | None = None
) -> dict[str, object]:
    """What decides whether a service may answer a client: the Python installation it runs
    (``sys.prefix``; what is installed there the service checks itself) and the environment a
    command's answer depends on."""
    return {"python": sys.prefix, "env": env_fingerprint(environ, declared=declared)}


def env_fingerprint(
    environ: Mapping[str, str] | None = None, *, declared: Declared | None = None
) -> dict[str, str]:
    """The part of the environment a command's answer depends on: pimem's, memsearch's and the
    model's variables, and the plugins' declared settings, less what shapes one session only."""
    env = os.environ if environ is None else environ
    if declared is None:
        declared = declared_settings(env)
    session = SESSION_ENV | declared.session
    named = declared.shared
    return {
        name: value
        for name, value in sorted(env.items())
        if (name.startswith(_ENV_PREFIXES) or name in _ENV_NAMES or name in named)
        and name not in _ENV_IGNORED
        and name not in session
    }


def service_environment(
    environ: Mapping[str, str] | None = None, *, declared: Declared | None = None
) -> dict[str, str]:
    """What a memory service started from *environ* keeps of it: the variables its answers
    depend on (:func:`env_fingerprint`, with the plugins' *declared* settings) and what any
    process needs, nothing else (an agent's API keys and the rest of a shell's environment stay
    out of a process that lives for hours). A command run in process keeps the same
    (:func:`command_environment`), so a plugin sees one environment wherever it runs."""
    env = os.environ if environ is None else environ
    kept = {
        name: value
        for name, value in env.items()
        if name in _PROCESS_ENV or name.startswith(("LC_", "PIMEM_SERVICE"))
    }
    return {**kept, **env_fingerprint(env, declared=declared)}


def command_environment(environ: Mapping[str, str], declared: Declared) -> dict[str, str]:
    """What a command run in process keeps of *environ*: what a service would, and the
    settings of one session or command (which a service takes from each request)."""
    session = SESSION_ENV | declared.session
    own = {name: value for name, value in environ.items() if name in session}
    return {**service_environment(environ, declared=declared), **own}


def _settings_file(environ: Mapping[str, str]) -> Path:
    """Where services of this installation publish their plugins' declared settings: the
    plugins depend on the installation, ``PYTHONPATH`` and the plugins blocked."""
    key = json.dumps(
        [sys.prefix, environ.get("PYTHONPATH", ""), environ.get("PIMEM_DISABLE_PLUGINS", "")]
    )
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
    return runtime_dir(environ) / f"settings-{digest[:12]}.json"


def declared_settings(environ: Mapping[str, str] | None = None) -> Declared:
    """The declared settings a service of this installation last published; none before the
    first service starts (the one it starts then listens where these say, and its clients
    look again while they wait for it)."""
    env = os.environ if environ is None else environ
    try:
        raw = json.loads(_settings_file(env).read_text(encoding="utf-8"))
        return Declared(frozenset(raw["shared"]), frozenset(raw["session"]))
    except (OSError, ValueError, KeyError, TypeError):
        return Declared()


def publish_declared(declared: Declared, environ: Mapping[str, str] | None = None) -> None:
    """Write the service's declared settings for its clients (atomically, private)."""
    env = os.environ if environ is None else environ
    path = _settings_file(env)
    if declared_settings(env) == declared:
        return
    text = json.dumps({"shared": sorted(declared.shared), "session": sorted(declared.session)})
    write_private(path, text, root=path.parent)


def encode(message: dict[str, object]) -> bytes:
    """*message* as the line that carries it."""
    return json.dumps(message).encode("utf-8") + b"\n"


def send(sock: socket.socket, message: dict[str, object]) -> None:
    sock.sendall(encode(message))


class BadLine(ValueError):
    """A line that is not one JSON object of at most :data:`MAX_LINE` bytes; the message says
    what is wrong with it, never what it holds."""


def receive(stream: BinaryIO) -> dict[str, object] | None:
    """One JSON object from a socket file, or ``None`` when the peer closed it; raise
    :class:`BadLine` for anything else (the rest of a line too long is left unread)."""
    return decode(stream.readline(MAX_LINE + 1))


def decode(line: bytes) -> dict[str, object] | None:
    """The JSON object a line read with ``readline(MAX_LINE + 1)`` carries, or ``None`` for
    no line (the peer closed the connection); :class:`BadLine` for anything else."""
    if not line:
        return None
    if len(line) > MAX_LINE:
        raise BadLine(f"a line is at most {MAX_LINE} bytes")
    try:
        value = json.loads(line)
    except RecursionError:  # the decoder's own recursion, on [[[[... a hundred thousand deep
        raise BadLine("not JSON: nested too deeply") from None
    except ValueError as error:
        raise BadLine(f"not JSON: {error}") from None
    if not isinstance(value, dict):
        raise BadLine("a service line must be a JSON object")
    return value
