"""How the test kit runs pimem's front doors (part of :mod:`pimem_core.testing`): one ``pimem``
command in this process, or handed to a real memory service by the command line's thin client
(``run_pimem``), and requests to a real ``pimem serve`` child (:func:`ask_pimem_serve`)."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from pimem_core.api import Pimem
from pimem_core.testing_build import PluginSpec, build_pimem, check_installed
from pimem_core.testing_service import ServiceRuntimes, not_answered


@attrs.frozen(kw_only=True)
class CliResult:
    """What one ``run_pimem`` run gave."""

    #: The command line after ``pimem``, as run.
    args: tuple[str, ...]
    #: 0 success, 1 a user-facing error (one line on stderr), 2 a usage error.
    exit_code: int
    stdout: str
    stderr: str
    #: ``stdout`` parsed when it is JSON (a ``--json`` command), else ``None``. Typed ``Any``
    #: because a test indexes into it directly (``result.json["plugins"]``).
    json: Any = attrs.field(
        init=False, default=attrs.Factory(lambda self: _json_or_none(self.stdout), takes_self=True)
    )


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


@attrs.frozen
class KitUser:
    """The test's own user: its ``HOME``, its runtime directory (pimem's sockets) and the
    memory services its commands start there."""

    home: Path
    runtime: Path
    services: ServiceRuntimes


#: What a command needs of the test process's environment: finding programs (git, a store
#: command), a temporary directory and the locale. Nothing else passes, pimem's own least.
_PASSED = ("PATH", "TMPDIR", "TEMP", "TMP", "LANG", "LC_ALL", "LC_CTYPE", "SYSTEMROOT")
#: The loggers ``pimem -v`` adds a handler to.
_LOGGERS = ("pimem_core", "pimem_plugins")


@contextlib.contextmanager
def _process_environment(env: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` is *env* for the block, and what it was after (not only at teardown,
    so the test between two runs sees its own environment)."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _logging_kept() -> Iterator[None]:
    """``-v`` adds a handler writing to this run's stderr; the next run must not write there."""
    loggers = [logging.getLogger(name) for name in _LOGGERS]
    saved = [(logger.level, list(logger.handlers)) for logger in loggers]
    try:
        yield
    finally:
        for logger, (level, handlers) in zip(loggers, saved, strict=True):
            logger.setLevel(level)
            logger.handlers[:] = handlers


def _exit_code(code: object) -> int:
    """A ``SystemExit``'s code as the process's exit status (``None`` is 0, a message 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _stream(data: bytes = b"") -> io.TextIOWrapper:
    # A real text stream over bytes, as a process's standard streams are: the CLI reconfigures
    # stdout's errors and reads stdin's `buffer`.
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", newline="")


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue().decode("utf-8", errors="replace")


def run_command(
    user: KitUser,
    argv: tuple[str, ...],
    *,
    plugins: Sequence[PluginSpec],
    installed: bool,
    env: Mapping[str, str] | None,
    cwd: str | os.PathLike[str],
    stdin: str | bytes | None,
    service: bool,
) -> CliResult:
    """Run ``pimem *argv`` as *user*, in this process or through a real memory service
    (``run_pimem``'s work; its documentation says what each argument does)."""
    # Here, not at the top: pytest loads the kit in every run where pimem is installed, and
    # most suites never run the command line.
    from pimem_core.doors import cli, service_client

    if service:
        check_installed(plugins)
        installed = True  # a service loads what is installed, and nothing else
    passed = _PASSED + (("PYTHONPATH",) if service else ())
    command_env = {
        **{name: os.environ[name] for name in passed if name in os.environ},
        "HOME": str(user.home),
        "XDG_RUNTIME_DIR": str(user.runtime),
        "PIMEM_STRICT_PLUGINS": "1",
        # The in-process run never goes through the memory service; off says so to the
        # commands that report on it (`pimem status`), and starts none.
        "PIMEM_SERVICE": "on" if service else "off",
        **(env or {}),
    }
    routed = service_client.routed(argv, command_env)
    if routed:
        user.services.enter(command_env)

    def open_pimem() -> Pimem:
        return build_pimem(plugins, command_env, installed=installed)

    data = stdin.encode("utf-8") if isinstance(stdin, str) else (stdin or b"")
    out, err, given = _stream(), _stream(), _stream(data)
    saved_stdin = sys.stdin
    answered: int | None = None
    with (
        _process_environment(command_env),
        contextlib.chdir(cwd),
        _logging_kept(),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        sys.stdin = given
        try:
            if routed:  # as the launcher does: handed to the service by the thin client
                answered = service_client.run_through_service(list(argv))
                code = 1 if answered is None else answered
            else:
                code = cli.main(list(argv), open_pimem=open_pimem)
        except SystemExit as stop:  # argparse's usage errors, --help, --version
            code = _exit_code(stop.code)
        finally:
            sys.stdin = saved_stdin
    if routed and answered is None:
        raise AssertionError(not_answered(argv, _text(err), command_env))
    return CliResult(args=argv, exit_code=code, stdout=_text(out), stderr=_text(err))


def ask_pimem_serve(
    requests: Sequence[Mapping[str, Any]],
    *,
    env: Mapping[str, str],
    cwd: str | os.PathLike[str] | None = None,
) -> dict[object, dict[str, Any]]:
    """Send *requests* to a ``pimem serve`` child, one at a time as a host does (each waits for
    its answer), and return every answer by its request's ``id``; progress lines are skipped.
    The child's environment is *env* alone, but for its runtime directory (``XDG_RUNTIME_DIR``):
    one of this call's own, so the memory service the child relays to (unless *env* has
    ``PIMEM_SERVICE=off``) is started there, never met in the user's, and is stopped, and the
    directory removed, before the call returns. (With ``PIMEM_HOME`` in *env*, the runtime
    directory is ``$PIMEM_HOME/run``: the services the call started there are stopped.) The
    child gets end of input after the last request.
    """
    with ServiceRuntimes().own(env) as own_env:
        return _ask_serve(requests, own_env, cwd)


def _ask_serve(
    requests: Sequence[Mapping[str, Any]],
    env: Mapping[str, str],
    cwd: str | os.PathLike[str] | None,
) -> dict[object, dict[str, Any]]:
    import subprocess

    bridge = subprocess.Popen(
        [sys.executable, "-m", "pimem_core", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=dict(env),
        cwd=cwd,
    )
    assert bridge.stdin is not None
    assert bridge.stdout is not None
    answers: dict[object, dict[str, Any]] = {}
    with bridge:
        for request in requests:
            bridge.stdin.write(json.dumps(request) + "\n")
            bridge.stdin.flush()
            while request["id"] not in answers:
                line = bridge.stdout.readline()
                if not line:
                    raise AssertionError(f"pimem serve ended before answering {request}")
                message = json.loads(line)
                if message.get("id") == request["id"] and "progress" not in message:
                    answers[request["id"]] = message
        bridge.stdin.close()
    return answers
