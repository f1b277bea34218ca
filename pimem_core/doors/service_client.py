"""The thin client of the memory service: find it, start it when needed, hand it a command.

It runs before any of pimem is imported (:mod:`pimem_core.doors.launcher`), so it imports only
the standard library, :mod:`pimem_core.doors.service_wire`, :mod:`pimem_core.doors.service_link`
(finding and starting the service), :mod:`pimem_core.doors.routes` (the command table's light
copy: which commands it hands over, and the options it must know) and the private-file helpers;
its records are named tuples, since attrs alone would cost a client more than its whole request.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from pimem_core.doors import routes
from pimem_core.doors import service_wire as wire
from pimem_core.doors.service_link import CLOSED, SILENT
from pimem_core.doors.service_link import MASK as MASK
from pimem_core.doors.service_link import Connection as Connection
from pimem_core.doors.service_link import Hello as Hello
from pimem_core.doors.service_link import Running as Running
from pimem_core.doors.service_link import ServiceUnavailable as ServiceUnavailable
from pimem_core.doors.service_link import connect as connect
from pimem_core.doors.service_link import describe as describe
from pimem_core.doors.service_link import ensure as ensure
from pimem_core.doors.service_link import every_service as every_service
from pimem_core.doors.service_link import is_secret as is_secret
from pimem_core.doors.service_link import prepare_dir as prepare_dir
from pimem_core.doors.service_link import probe as probe
from pimem_core.doors.service_link import running as running
from pimem_core.doors.service_link import stop as stop

#: The commands a client hands to the service (the table's ``route="service"``).
ROUTED = frozenset(routes.ROUTED)
_ON = {"on", "1", "true", "yes"}


class Answer(NamedTuple):
    """A command line's answer from the service: what the command would print and exit with."""

    exit_code: int
    stdout: str
    stderr: str


def ask_memory_service(argv: Sequence[str], *, stdin: str | None = None) -> Answer:
    """Run the ``pimem`` command line *argv* in this user's memory service for the current
    directory (``--cwd`` in *argv* names another, as on the command line), starting the
    service when none answers: the way for a program embedding pimem to share the warm
    engine. *stdin* is the text a ``-`` stands for. Raises :class:`ServiceUnavailable`.

    >>> answer = ask_memory_service(["search", "which database", "--json"])  # doctest: +SKIP
    >>> answer.exit_code, json.loads(answer.stdout)["hits"][0]["content"]  # doctest: +SKIP
    """
    request = _run_request(argv)
    if stdin is not None:
        request["stdin"] = stdin
    code, stdout, stderr = _ask(request)
    return Answer(code, stdout, stderr)


def _run_request(argv: Sequence[str]) -> dict[str, object]:
    cwd = Path.cwd()
    return {"op": "run", "argv": absolute_paths(argv, cwd), "cwd": str(cwd), **introduction()}


def introduction() -> dict[str, object]:
    """What a client tells the service of itself with each request: its installation and its
    environment, which the service checks against its own and takes a session's settings from."""
    return {"python": sys.prefix, "env": dict(os.environ)}


def _ask(
    request: dict[str, object], on_quiet: Callable[[Hello], None] | None = None
) -> tuple[int, str, str]:
    handed_over = False
    try:
        line = wire.encode(request)
        if len(line) > wire.MAX_LINE:
            # The service would refuse it unread: in process, a long `write -` is run as ever.
            raise ServiceUnavailable(
                f"the request is longer than the memory service takes ({wire.MAX_LINE} bytes)"
            )
        for attempt in (1, 2):
            connection = ensure()
            try:
                connection.sock.sendall(line)
                handed_over = True
                reply = answer(connection, on_quiet)
            finally:
                connection.close()
            if "refused" not in reply:
                break
            handed_over = False  # refused before it ran anything
            if not reply.get("retired") or attempt == 2:
                raise ServiceUnavailable(str(reply["refused"]))
            # It was started before what this client runs with (a plugin installed since, its
            # settings): it has stopped listening, and a successor started now answers.
        stdout, stderr, code = reply["stdout"], reply["stderr"], reply["exit"]
        if not (isinstance(stdout, str) and isinstance(stderr, str) and isinstance(code, int)):
            raise ServiceUnavailable(f"the service answered {reply!r}")
    except (OSError, ValueError, KeyError, ServiceUnavailable) as error:
        raise ServiceUnavailable(str(error), handed_over=handed_over) from None
    return code, stdout, stderr


def answer(
    connection: Connection, on_quiet: Callable[[Hello], None] | None = None
) -> dict[str, object]:
    """The reply to the request sent last on *connection*, past the service's heartbeats, read
    here: the thin client waits for its command's answer in its own module. *on_quiet* is
    called (once) when the service has said nothing for :data:`~service_wire.QUIET_S`."""
    told = threading.Event()

    def quiet() -> None:
        if on_quiet is not None and not told.is_set():
            told.set()
            on_quiet(connection.hello)

    while True:
        timer = threading.Timer(wire.QUIET_S, quiet)
        timer.daemon = True
        timer.start()
        try:
            reply = wire.decode(connection.stream.readline(wire.MAX_LINE + 1))
        except TimeoutError:
            raise ServiceUnavailable(SILENT) from None
        finally:
            timer.cancel()
        if reply is None:
            raise ServiceUnavailable(CLOSED)
        if "working" not in reply:
            return reply


def enabled(environ: dict[str, str] | None = None) -> bool:
    """``PIMEM_SERVICE`` is on, or unset (the default). A value that is neither on nor off
    leaves the command in process, where the settings refuse it with their message."""
    env = os.environ if environ is None else environ
    return env.get("PIMEM_SERVICE", "on").lower() in _ON


def _read_words(argv: Sequence[str]) -> tuple[str | None, bool]:
    """The command word of *argv* (``None``: none), found without the parser, and whether
    every option before it is one the service takes (:data:`routes.COMMAND_OPTIONS`), spelled
    out: an abbreviation the parser would accept (``--cw``) could make another word the
    command."""
    skip, plain = False, True
    for word in argv:
        if skip:
            skip = False
        elif word in routes.VALUED:
            skip = True
        elif word.startswith("-"):
            name, eq, _ = word.partition("=")
            taken = name in routes.VALUED if eq else word in routes.COMMAND_OPTIONS
            plain = plain and taken
        else:
            return word, plain
    return None, plain


def command_word(argv: Sequence[str]) -> str | None:
    return _read_words(argv)[0]


def routed(argv: Sequence[str], environ: dict[str, str] | None = None) -> bool:
    """This command line goes to the service."""
    return enabled(environ) and routable(argv)


def routable(argv: Sequence[str]) -> bool:
    """A command line the service runs: a routed command, and nothing of this process's own.
    Help, the version, --in-process and -v (its log goes to this process's stderr) are the
    local process's to answer (:data:`routes.LOCAL`)."""
    if any(word in routes.LOCAL or word.startswith("-vv") for word in argv):
        return False
    word, plain = _read_words(argv)
    return plain and word in routes.ROUTED


def absolute_paths(argv: Sequence[str], cwd: Path) -> list[str]:
    """*argv* with the paths of its options made absolute: the service runs elsewhere."""
    out: list[str] = []
    pending = False
    for word in argv:
        if pending:
            word = str(cwd / Path(word).expanduser())
            pending = False
        elif word in routes.PATHS:
            pending = True
        else:
            name, eq, value = word.partition("=")
            if eq and name in routes.PATHS:
                word = f"{name}={cwd / Path(value).expanduser()}"
        out.append(word)
    return out


def run_through_service(argv: Sequence[str]) -> int | None:
    """Run the command line *argv* in the service and print its answer; its exit code, or
    ``None`` (after one warning line) when the command must run in process instead."""
    request = _run_request(argv)
    piped = _read_piped_content(argv, request)
    changes = command_word(argv) in routes.CHANGES

    def waiting(hello: Hello) -> None:
        then = (
            "at 10 s it stops waiting and says the change may or may not have been applied"
            if changes
            else "at 10 s it asks a new memory service"
        )
        print(
            f"pimem: waiting for the memory service (pid {hello.pid}), silent for "
            f"{wire.QUIET_S:.0f} s; {then}",
            file=sys.stderr,
            flush=True,
        )

    try:
        if piped is not None and "stdin" not in request:
            raise ServiceUnavailable("the content read from stdin is not UTF-8 text")
        try:
            code, stdout, stderr = _ask(request, waiting)
        except ServiceUnavailable as error:
            if not error.handed_over or changes:
                raise
            # A read (search, status, index) the service died during is asked once more, of
            # a new service: it changes nothing, and in process it would hold the database
            # the new service's other clients are waiting for.
            code, stdout, stderr = _ask(request, waiting)
    except ServiceUnavailable as error:
        if error.handed_over and command_word(argv) in routes.CHANGES:
            print(
                f"pimem: error: the memory service failed during the command ({error}); it "
                "may or may not have been applied: check the day file before running it again",
                file=sys.stderr,
            )
            return 1
        if piped is not None:  # the command in process reads it again
            import io

            sys.stdin = io.TextIOWrapper(io.BytesIO(piped), encoding="utf-8")
        print(
            f"pimem: running in process, the memory service is unavailable: {error} "
            "(PIMEM_SERVICE=off or --in-process silences this)",
            file=sys.stderr,
        )
        return None
    sys.stderr.write(stderr)
    sys.stderr.flush()
    try:
        sys.stdout.write(stdout)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return code


def _read_piped_content(argv: Sequence[str], request: dict[str, object]) -> bytes | None:
    """For ``write -``: this process's stdin, read here and sent with the request as text (the
    service has no stdin of the client's to read). ``None`` for any other command."""
    if command_word(argv) not in routes.FROM_STDIN or "-" not in argv:
        return None
    data = sys.stdin.buffer.read()
    # Not UTF-8: the write is left to run in process, which refuses it with its own message.
    with contextlib.suppress(UnicodeDecodeError):
        request["stdin"] = data.decode("utf-8")
    return data
