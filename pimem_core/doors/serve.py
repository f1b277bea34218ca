"""``pimem serve``: the host protocol, JSON lines on stdin and stdout.

One process per host session. The host sends requests ``{"id", "method", "params"}`` and gets
``{"id", "result"}`` or ``{"id", "error": {"type", "message"}}`` back, in whatever order they
finish. pimem may ask the host too (``complete``, for distillation with the host's model), with
the same shapes; ids of pimem's requests are strings starting with ``pimem-``. A line that is
not a request gets an error reply and the server keeps serving. End of stdin ends the server,
after the session's shutdown.

The ``memory.*`` methods are the served commands of the command table
(:mod:`pimem_core.doors.table`), run by the handlers the CLI runs; the ``session.*`` methods are
this module's own.

The first line the server writes is ``{"event": "ready", ...}``; ``pimem serve`` writes it
before importing any of pimem (:mod:`pimem_core.doors.launcher`), so the host is never kept waiting by
start-up.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any, Protocol

from pimem_core.api import Pimem
from pimem_core.command_table import Command
from pimem_core.doors import service_wire as wire
from pimem_core.doors.commands import plugin_commands
from pimem_core.doors.failures import described, error_log, keep_traceback
from pimem_core.doors.front_door import FrontDoor
from pimem_core.doors.params import Params, RequestError
from pimem_core.doors.table import CORE, served
from pimem_core.errors import PimemError
from pimem_core.runtime.budget import DistillBudget
from pimem_core.runtime.host_model import ModelRef, resolve_capture_model
from pimem_core.runtime.scheduler import answer_promptly
from pimem_core.runtime.session import Session, SessionInfo, serving
from pimem_core.runtime.snapshot_cache import PreparedSnapshot, prepare_snapshot
from pimem_core.types import HostModel, Scope

log = logging.getLogger(__name__)

MAX_LINE = 8 * 1024 * 1024
WORKERS = 8
#: Events the host sends as its turns happen; each is quick (it queues work and returns).
IN_ORDER = frozenset({"session.settled", "session.compacted"})
#: How long ``session.shutdown`` waits for the events sent before it (seconds).
EVENTS_WAIT = 2.0


class Writer(Protocol):
    """Where the server's lines go: its stdout, or a memory service's socket."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


class Server:
    """Serves one host session over a pair of streams."""

    def __init__(
        self,
        pimem: Pimem,
        reader: IO[str],
        writer: Writer,
        *,
        announce: bool = True,
        on_host_gone: Callable[[], None] = lambda: None,
        confined_to: Path | None = None,
        relayed: bool = False,
        prepared: PreparedSnapshot | None = None,
    ) -> None:
        self._pimem = pimem
        #: The one directory a session may start in (the memory service: its client's own).
        self._confined_to = confined_to
        #: Served for a relay (the memory service): an end of input before ``session.shutdown``
        #: means the host's bridge was killed, and the session is left as it would have left it.
        self._relayed = relayed
        self._shutdown_asked = False
        self._announce = announce
        self._on_host_gone = on_host_gone
        self._reader = reader
        self._writer = writer
        self._write_lock = threading.Lock()
        self._asked: dict[str, Future[Any]] = {}
        self._ids = itertools.count(1)
        self._capture_model: ModelRef | PimemError = PimemError(
            "the host lent no model: session.start had no model catalog"
        )
        #: The snapshot built as the host attached, for its session.start (taken once).
        self._prepared = prepared
        self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="pimem-serve")
        # The host's events about its own turns are handled one after another, in the order
        # sent: capture windows and the journal follow the order exchanges settled in.
        self._in_order = ThreadPoolExecutor(1, thread_name_prefix="pimem-serve-events")
        self.session = Session(
            pimem,
            host_model=HostModel(name="host", complete=self._complete),
            on_notice=self._notice,
        )
        self._methods: Mapping[str, Callable[[Params], object]] = {
            "session.start": self._start,
            "session.before_prompt": self._before_prompt,
            "session.settled": self._settled,
            "session.compacted": self._compacted,
            "session.shutdown": self._shutdown,
            "ping": lambda params: {"pong": True},
            **{method: self._command(commands) for method, commands in served(CORE).items()},
            **{
                method: self._command(commands)
                for method, commands in served(_plugin_commands(pimem)).items()
            },
        }

    # -- the wire -----------------------------------------------------------------------

    def serve(self) -> None:
        if self._announce:  # else `pimem serve` said it is ready before importing pimem
            self._send({"event": "ready", "methods": sorted(self._methods)})
        for line in iter(self._reader.readline, ""):
            self._receive(line)
        # The host has said all it will: nothing it was asked can be answered any more, and
        # what is left (an index run the host did not wait for) finishes without it.
        self._on_host_gone()
        started = self.session.info is not None
        # Relayed, an end before `session.shutdown` is a killed bridge: the session is left
        # as one leaves it, before the questions it asked the host fail into markers.
        vanished = started and self._relayed and not self._shutdown_asked
        if vanished:
            self.session.leave()
        for request_id in list(self._asked):
            self._answered(request_id, {"error": "the host ended the session"})
        self._in_order.shutdown(wait=True)
        self._pool.shutdown(wait=True)
        if started and not vanished:
            self.session.shutdown()
        self.session.close()

    def _send(self, message: Mapping[str, object]) -> None:
        data = json.dumps(message, ensure_ascii=False)
        if not data.isascii():
            try:
                data.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate (echoed from a request's \ud800)
                data = json.dumps(message)  # escaped: still the same JSON, and valid UTF-8
        with self._write_lock:
            self._writer.write(data + "\n")
            self._writer.flush()

    def _fail(self, request_id: object, kind: str, message: str) -> None:
        self._send({"id": request_id, "error": {"type": kind, "message": message}})

    def _receive(self, line: str) -> None:
        if not line.strip():
            return
        if len(line) > MAX_LINE:
            self._fail(
                None, "request", f"line too long ({len(line)} characters, at most {MAX_LINE})"
            )
            return
        try:
            message = json.loads(line)
        except ValueError as error:
            self._fail(None, "request", f"not JSON: {error}")
            return
        except RecursionError:
            self._fail(None, "request", "not JSON: nested too deeply")
            return
        if not isinstance(message, dict):
            self._fail(None, "request", "a message must be a JSON object")
            return
        request_id = message.get("id")
        if isinstance(request_id, str) and request_id in self._asked:
            self._answered(request_id, message)
            return
        method = message.get("method")
        handler = self._methods.get(method) if isinstance(method, str) else None
        if handler is None:
            self._fail(request_id, "request", f"unknown method {method!r}")
            return
        if method == "session.shutdown":
            # Known before the end of input that may follow at once (a host that does not wait
            # for the answer): the session is then shut down, not left as a killed bridge's.
            self._shutdown_asked = True
        lane = self._in_order if method in IN_ORDER else self._pool
        lane.submit(self._handle, request_id, handler, message.get("params"))

    def _handle(self, request_id: object, handler: Callable[[Params], object], raw: object) -> None:
        token = serving.set(self.session)
        try:
            result = handler(Params(raw, lambda text: self._progress(request_id, text)))
        except RequestError as error:
            self._fail(request_id, "request", str(error))
        except PimemError as error:
            kind = "unavailable" if type(error).__name__ == "BackendUnavailable" else "memory"
            self._fail(request_id, kind, str(error))
        except Exception as error:  # a bug: reported, never fatal to the host's session
            log.exception("request %s failed", request_id)
            # Relayed, the log above is the memory service's; else pimem's error log keeps it.
            kept = wire.log_path() if self._relayed else keep_traceback(error, error_log())
            self._fail(request_id, "internal", described(error, kept))
        else:
            self._send({"id": request_id, "result": result})
        finally:
            serving.reset(token)

    def _notice(self, text: str, key: str | None = None) -> None:
        """Tell the host something its user should see, once it happened (a secret redacted
        from a captured exchange, a line added to ``.gitattributes``): an event, unanswered."""
        self._send({"event": "notice", "text": text, **({"key": key} if key else {})})

    def _progress(self, request_id: object, holder: str) -> None:
        self._send({"id": request_id, "progress": f"waiting for {holder}"})

    # -- asking the host ----------------------------------------------------------------

    def _complete(self, system: str, prompt: str, timeout: float) -> str:
        model = self._capture_model
        if isinstance(model, PimemError):
            raise model
        request_id = f"pimem-{next(self._ids)}"
        answer: Future[Any] = Future()
        self._asked[request_id] = answer
        try:
            self._send(
                {
                    "id": request_id,
                    "method": "complete",
                    "params": {
                        "model": {"provider": model.provider, "id": model.id},
                        "system": system,
                        "prompt": prompt,
                        "timeout_ms": int(timeout * 1000),
                    },
                }
            )
            result = answer.result(timeout=timeout)
        finally:
            self._asked.pop(request_id, None)
        if not isinstance(result, dict) or not isinstance(result.get("text"), str):
            raise PimemError('the host answered "complete" without a "text"')
        return str(result["text"])

    def _answered(self, request_id: str, message: Mapping[str, object]) -> None:
        answer = self._asked.get(request_id)
        if answer is None or answer.done():
            return
        error = message.get("error")
        if error is not None:
            text = error.get("message") if isinstance(error, dict) else error
            answer.set_exception(PimemError(f"the host's model failed: {text}"))
        else:
            answer.set_result(message.get("result"))

    # -- lifecycle ------------------------------------------------------------------------

    def _scope(self) -> Scope:
        if self.session.scope is None:
            raise RequestError("call session.start first")
        return self.session.scope

    def _start(self, params: Params) -> object:
        info = SessionInfo(
            session_id=params.text("session_id"),
            cwd=params.path("cwd"),
            transcript=params.optional_path("transcript"),
        )
        if self._confined_to is not None and info.cwd.resolve() != self._confined_to:
            raise RequestError(
                f'"cwd" must be the directory `pimem serve` runs in ({self._confined_to}), '
                f"got {info.cwd}"
            )
        session_model, catalog = params.model("model"), params.models("models")
        try:
            self._capture_model = resolve_capture_model(
                self._pimem.settings.capture_model, session_model, catalog
            )
        except PimemError as error:  # surfaces as a marker entry when an exchange is captured
            self._capture_model = error
        prepared, self._prepared = self._prepared, None
        self.session.start(info, prepared)
        record = self.session.record
        # Where the host records its bridges' deaths: pimem status names them from there.
        return {"scope": self._scope().to_json(), "failure_record": str(record) if record else None}

    def _before_prompt(self, params: Params) -> object:
        self._scope()  # a request error before session.start, not a crash
        additions = self.session.before_prompt(params.text("prompt", required=False))
        return {
            "snapshot": additions.snapshot,
            "hidden": [
                {"text": injection.text, "source": injection.source}
                for injection in additions.hidden
            ],
        }

    def _settled(self, params: Params) -> object:
        queued = self.session.settled(leaf=params.optional_text("leaf"), branch=params.branch())
        return {"queued": queued}

    def _compacted(self, params: Params) -> object:
        self.session.compacted()
        return {}

    def _shutdown(self, params: Params) -> object:
        self._shutdown_asked = True
        wait = params.raw.get("capture_wait_ms")
        if wait is not None and (isinstance(wait, bool) or not isinstance(wait, int) or wait < 0):
            raise RequestError('"capture_wait_ms" must be a whole number of milliseconds')
        # The host's events sent before the shutdown are handled first (a settle sent just
        # before: its exchange is journaled, not lost), each a matter of milliseconds.
        with contextlib.suppress(Exception):
            self._in_order.submit(lambda: None).result(timeout=EVENTS_WAIT)
        report = self.session.shutdown(
            wait_for_index=params.flag("wait_for_index", True),
            capture_wait=None if wait is None else wait / 1000,
        )
        return {
            "captured_in_time": report.captured_in_time,
            "indexed_in_time": report.indexed_in_time,
            "seconds": round(report.seconds, 3),
            "handed_over": report.handed_over,
        }

    # -- the command table's methods ----------------------------------------------------------

    def _command(self, commands: tuple[Command, ...]) -> Callable[[Params], object]:
        """The handler of a served method: its command (by ``action`` when several share it),
        run with its params read from the request."""
        actions = {command.action: command for command in commands}

        def handle(params: Params) -> object:
            command = commands[0]
            if len(commands) > 1:
                action = params.optional_text("action") or commands[0].action
                if action not in actions:
                    *rest, last = (str(name) for name in actions)
                    names = f"{', '.join(rest)} or {last}"
                    raise RequestError(f'"action" must be {names}, got {action!r}')
                command = actions[action]
            info = self.session.info
            args = {param.name: param.from_request(params.raw, info) for param in command.params}
            door = _ServedDoor(self, params.progress)
            result = command.run(door, args).served()
            self.session.usage.served(command.path, args, result)
            for line in _listed(result.get("notices")):
                self._notice(line)  # what a write did beside it: the user is told too
            text = result.get("text")
            if door.notices and isinstance(text, str):
                # The agent reads the text only: what the command did first belongs in it.
                result["text"] = "\n".join(door.notices) + "\n\n" + text
            return result

        return handle


def _listed(value: object) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _plugin_commands(pimem: Pimem) -> tuple[Command, ...]:
    """The commands plugins add, as the command line has them; a plugin that fails to give
    its commands costs them, never the session."""
    try:
        return plugin_commands(pimem).commands
    except PimemError as error:
        log.warning("plugin commands left out: %s", error)
        return ()


class _ServedDoor(FrontDoor):
    """A served request: the session's scope and budget; waiting goes to the host."""

    def __init__(self, server: Server, progress: Callable[[str], None]) -> None:
        super().__init__(server._pimem)
        self._server = server
        self._progress = progress
        self.notices: list[str] = []

    def scope(self) -> Scope:
        return self._server._scope()

    def base_dir(self) -> Path:
        return self.scope().repository_dir  # the bridge works at the repository

    def on_wait(self, holder: str) -> None:
        self._progress(holder)

    def note(self, line: str) -> None:
        log.warning("%s", line)

    def notice(self, line: str) -> None:
        self.notices.append(line)

    def budget(self) -> DistillBudget:
        return self._server.session.budget


def serve(pimem: Pimem, *, announce: bool = True) -> None:
    """Serve the host on this process's stdin and stdout; *announce*: write the ready line
    (``False`` when the launcher wrote it already)."""
    stdin = sys.stdin
    stdout = sys.stdout
    if hasattr(stdin, "reconfigure"):
        stdin.reconfigure(encoding="utf-8", errors="replace")
    if hasattr(stdout, "reconfigure"):
        stdout.reconfigure(encoding="utf-8")
    for record in pimem.pm.failed:
        log.warning("%s", record.failure)  # the host's log; memory_status says it too
    answer_promptly()
    # A host starts its bridge as it starts up, as it attaches to the memory service: either
    # way the session's snapshot is built now, while the host is still busy, and is the same.
    prepared = prepare_snapshot(pimem, Path.cwd())
    Server(
        pimem, stdin, stdout, announce=announce, on_host_gone=_let_host_go, prepared=prepared
    ).serve()


def _let_host_go() -> None:
    """Point stdout and stderr at the null device once stdin has ended: a host that does not
    wait for the last index run closes its ends of the pipes, and a log line written then
    must not fail."""
    if sys.stdout.isatty() or sys.stderr.isatty():
        return  # a person at a terminal still reads what follows
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
        sys.stderr.flush()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
