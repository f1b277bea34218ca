"""The ``pimem`` command: pimem and its plugins loaded, one command line run in this process
(:func:`pimem_core.doors.command_line.execute`), its door the command line's own
(:class:`CliDoor`: the scope of ``--cwd``, waiting and notes on stderr).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from pimem_core.api import Pimem
from pimem_core.command_table import Command
from pimem_core.doors.command_line import build_parser, execute
from pimem_core.doors.commands import plugin_commands
from pimem_core.doors.front_door import FrontDoor
from pimem_core.errors import PimemError, StoreError
from pimem_core.types import Scope

__all__ = ["CliDoor", "build_parser", "main"]


class CliDoor(FrontDoor):
    """The command line: the scope of ``--cwd``, waiting and notes on stderr."""

    def __init__(self, pimem: Pimem, cwd: Path, *, ready_written: bool = False) -> None:
        super().__init__(pimem)
        self._cwd = cwd
        self._scope: Scope | None = None
        self.ready_written = ready_written

    def scope(self) -> Scope:
        if self._scope is None:
            self._scope = self.pimem.resolve_scope(self._cwd)
        return self._scope

    def base_dir(self) -> Path:
        return Path.cwd()

    def on_wait(self, holder: str) -> None:
        print(f"pimem: waiting on {holder}...", file=sys.stderr)

    def note(self, line: str) -> None:
        print(line, file=sys.stderr)

    def notice(self, line: str) -> None:
        # Now, before the result: a search that indexed first took longer, and this says why.
        print(f"pimem: {line}", file=sys.stderr, flush=True)

    def service_line(self) -> str | None:
        if not self.pimem.settings.service:
            return None
        from pimem_core.doors.service_client import describe

        return describe()

    def content(self, value: str) -> str:
        if value != "-":
            return value
        try:
            return sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError:
            raise StoreError("the content read from stdin is not UTF-8 text") from None

    def serve_host(self) -> None:
        from pimem_core.doors.serve import serve

        serve(self.pimem, announce=not self.ready_written)

    def run_service(self) -> None:
        from pimem_core.doors.service import run_service

        run_service(self.pimem, note=self.note)


def _log_to_stderr(verbosity: int) -> None:
    if verbosity <= 0:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("pimem: %(levelname)s %(name)s: %(message)s"))
    for name in ("pimem_core", "pimem_plugins"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.INFO if verbosity == 1 else logging.DEBUG)
        logger.addHandler(handler)


def _load(open_pimem: Callable[[], Pimem]) -> tuple[Pimem | PimemError, tuple[Command, ...]]:
    """pimem as *open_pimem* sets it up, and the commands its plugins add; a load that fails is
    reported by the command (``pimem --help`` still answers, without them)."""
    try:
        pimem = open_pimem()
    except PimemError as error:
        return error, ()
    try:
        added = plugin_commands(pimem)
    except PimemError as error:
        print(f"pimem: warning: plugin commands left out: {error}", file=sys.stderr)
        return pimem, ()
    return pimem, added.commands


def _as_the_service_would(pimem: Pimem, words: Sequence[str]) -> None:
    """A command the memory service could have run sees the environment it would have: what
    the service keeps, the plugins' declared settings among it (docs/plugin-hooks.md, "Your
    plugin in the memory service"). Only this process's own command line narrows it."""
    from pimem_core.doors import service_client
    from pimem_core.doors import service_wire as wire

    if not service_client.routable(words):
        return
    kept = wire.command_environment(os.environ, wire.declared_by(pimem.pm.declared_settings))
    for name in set(os.environ) - set(kept):
        del os.environ[name]


def _verbosity(argv: Sequence[str]) -> int:
    """``-v``'s count, read before the parser exists: loading the plugins it needs logs too."""
    return sum(
        len(word) - 1 if word.startswith("-v") and set(word[1:]) == {"v"} else word == "--verbose"
        for word in argv
    )


def main(
    argv: Sequence[str] | None = None,
    *,
    ready_written: bool = False,
    open_pimem: Callable[[], Pimem] | None = None,
) -> int:
    """Run one command. *ready_written*: the launcher wrote ``pimem serve``'s ready line.

    *open_pimem* builds the facade (default :meth:`Pimem.from_env`: the process environment and
    the installed plugins); the test kit's ``run_pimem`` chooses its plugins here. It is called
    before the command line is parsed, since plugins add commands to it; a plugin that fails to
    load or a bad setting is still an error exit of the command, not an exception.
    """
    if hasattr(sys.stdout, "reconfigure"):
        # Memory text is UTF-8; a narrower terminal encoding must not crash the command.
        sys.stdout.reconfigure(errors="backslashreplace")
    words = sys.argv[1:] if argv is None else list(argv)
    _log_to_stderr(_verbosity(words))
    pimem, added = _load(Pimem.from_env if open_pimem is None else open_pimem)
    if argv is None and open_pimem is None and isinstance(pimem, Pimem):
        _as_the_service_would(pimem, words)

    def make_door(cwd: Path) -> FrontDoor:
        if isinstance(pimem, PimemError):
            raise pimem
        return CliDoor(pimem, cwd, ready_written=ready_written)

    return execute(
        build_parser(added=added),
        argv,
        make_door,
        out=sys.stdout,
        err=sys.stderr,
    )


if __name__ == "__main__":
    sys.exit(main())
