"""The test kit's memory services: a test's run in runtime directories of its own, and are
stopped, and the directories removed, at its end.

Part of :mod:`pimem_core.testing`: ``run_pimem(..., service=True)`` hands its commands to a real
memory service through the command line's own thin client, and :func:`ask_pimem_serve`'s
``pimem serve`` relays to one; neither may leave a service running, nor meet one of the user's
or of another test. A service is found by its socket, as ``pimem service status`` finds it, and
by its claim file (``service-*.pid``), which also names one that stopped listening on its own
(an installation changed) and is still finishing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import attrs

from pimem_core.doors import service_client
from pimem_core.doors import service_wire as wire

#: How long a service is given to exit once asked to stop, then terminated, then killed.
_EXIT_S = 10.0


def make_runtime_dir() -> Path:
    """A new private runtime directory, short enough for a socket's path (at most 107 bytes
    on Linux), under the temporary directory: not under a test's ``tmp_path``, which can be
    nearly that long itself."""
    return Path(tempfile.mkdtemp(prefix="pimem-run-"))


@attrs.frozen
class _Place:
    """A runtime directory the kit's services run in: an environment that leads there, and
    the services that already ran there (pids), which are not the kit's to stop."""

    environ: dict[str, str]
    before: frozenset[int]


@attrs.define
class ServiceRuntimes:
    """The runtime directories a test's services run in: :meth:`enter` each environment a
    command runs with before it runs, :meth:`close` at the end of the test."""

    _places: dict[Path, _Place] = attrs.field(factory=dict)
    #: Directories the kit made for the test, removed by :meth:`close`.
    _made: list[Path] = attrs.field(factory=list)

    def make(self) -> Path:
        """A runtime directory of the test's own (``XDG_RUNTIME_DIR``), removed at the end,
        with every service started in it stopped, whoever started it."""
        directory = make_runtime_dir()
        self._made.append(directory)
        self.enter({"XDG_RUNTIME_DIR": str(directory)})
        return directory

    def enter(self, environ: Mapping[str, str]) -> Path:
        """Note the runtime directory *environ* leads to (made by the kit, when it is not there
        yet, and then removed at the end) and the services already running there; return it."""
        directory = wire.runtime_dir(environ)
        if directory not in self._places:
            if not directory.exists():
                self._made.append(directory)
            before = frozenset(_service_pids(directory))
            self._places[directory] = _Place(dict(environ), before)
        return directory

    @contextlib.contextmanager
    def own(self, environ: Mapping[str, str]) -> Iterator[dict[str, str]]:
        """*environ* in a runtime directory of its own for the block (a new one, unless a
        ``PIMEM_HOME`` in it names the place), every service started there stopped after it,
        and what the kit made removed."""
        env = dict(environ)
        if not env.get("PIMEM_HOME"):
            env["XDG_RUNTIME_DIR"] = str(self.make())
        self.enter(env)
        try:
            yield env
        finally:
            self.close()

    def close(self) -> None:
        """Stop every service the test started, and remove the directories the kit made."""
        for directory, place in self._places.items():
            _stop_services(directory, place)
        for directory in reversed(self._made):
            shutil.rmtree(directory, ignore_errors=True)
        self._places.clear()
        self._made.clear()


def _service_pids(directory: Path) -> set[int]:
    """The services that claimed a socket in *directory* and still run, by their claim files."""
    pids = set()
    for claim in directory.glob("service-*.pid") if directory.is_dir() else []:
        with contextlib.suppress(OSError, ValueError):
            pid = int(claim.read_text(encoding="utf-8").strip() or "0")
            if pid > 0 and _is_service(pid, exiting=True):
                pids.add(pid)
    return pids


def _stop_services(directory: Path, place: _Place) -> None:
    """Ask each service the test started in *directory* to stop, then make sure it exited."""
    for running in service_client.every_service(place.environ):
        if running.hello.pid in place.before:
            continue
        found = service_client.probe(running.path)
        if found is not None:
            service_client.stop(found, running.path)
    for pid in _service_pids(directory) - place.before:
        _end(pid)


def _end(pid: int) -> None:
    """Wait for *pid* to exit; terminate it, then kill it, when it does not."""
    for sent in (None, signal.SIGTERM, signal.SIGKILL):
        if sent is not None and _is_service(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, sent)
        deadline = time.monotonic() + _EXIT_S
        while time.monotonic() < deadline:
            if _state(pid) in (None, "Z"):
                return
            time.sleep(0.05)


def _state(pid: int) -> str | None:
    """*pid*'s state (``R``, ``S``, ``Z`` for one that exited, ...), ``None`` when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _is_service(pid: int, *, exiting: bool = False) -> bool:
    """*pid* runs (a zombie does not) and is a ``pimem service run`` of this user; with
    *exiting*, also a process of this user exiting (its command line is empty by then)."""
    proc = Path(f"/proc/{pid}")
    try:
        words = [word for word in (proc / "cmdline").read_bytes().split(b"\0") if word]
        owner = proc.stat().st_uid
    except OSError:
        return False
    if _state(pid) in (None, "Z") or owner != os.getuid():
        return False
    return (b"service" in words and b"run" in words) or (exiting and not words)


#: How much of the service's log a failure shows: its last lines, where a start-up error is.
_LOG_LINES = 20


def not_answered(argv: Sequence[str], stderr: str, environ: Mapping[str, str]) -> str:
    """Why a run through the service fails its test when the thin client ran the command in
    process instead (the service did not start, refused, or died): what the client said and
    the end of the service's log."""
    log = wire.log_path(dict(environ))
    try:
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-_LOG_LINES:]
    except OSError:
        tail = ["(no log)"]
    shown = "\n".join(f"    {line}" for line in tail)
    return (
        f"`pimem {' '.join(argv)}` was not answered by the memory service but in process:\n"
        f"{stderr.strip()}\nthe service's log, {log}:\n{shown}"
    )
