"""The store command: ``PI_MEMSEARCH_STORE_CMD`` names the store, collection and state directory.

Opt-in and first in line: when set it outranks ``MEMSEARCH_DIR`` and any other resolver, and
when it fails resolution raises instead of falling back, because a silent fallback would write
memory to the wrong store. The command is one executable run as ``<cmd> <mode>`` (never through
a shell) in the directory being resolved; its answers are remembered per command, mode and
directory for as long as the command's file is unchanged, so it runs once per directory and
mode in a session or in the memory service, and again after the script is edited or replaced.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Literal

from pimem_core.plugin import Scope, ScopeError, Settings, SettingSpec, hookimpl
from pimem_plugins.shared.layout import discovered_store, laid_out_scope

Mode = Literal["memory-dir", "collection", "state-dir"]
TIMEOUT_SECONDS = 30
_WHAT = {
    "memory-dir": "the absolute path of the memory store",
    "collection": "the collection name",
    "state-dir": "the absolute path of the index-state directory, or nothing to decline",
}


class StoreCommand:
    """Runs one store command and remembers its answers while its file is unchanged."""

    def __init__(self, command: str) -> None:
        self.command = command
        self._answers: dict[tuple[Mode, str], tuple[object, str | None]] = {}

    def answer(self, mode: Mode, directory: Path) -> str | None:
        """The command's answer for *mode* in *directory*; ``None`` only when ``state-dir`` declines."""
        key = (mode, os.path.realpath(directory))
        version = self._version()
        remembered = self._answers.get(key)
        if remembered is None or remembered[0] != version:
            self._answers[key] = (version, self._ask(mode, key[1]))
        return self._answers[key][1]

    def _version(self) -> object:
        """What identifies the command's file now (``None`` when it cannot be found: then it
        runs, and fails with its own message)."""
        found = shutil.which(self.command)
        try:
            info = os.stat(found) if found is not None else None
        except OSError:
            info = None
        return None if info is None else (found, info.st_ino, info.st_size, info.st_mtime_ns)

    def path(self, mode: Literal["memory-dir", "state-dir"], directory: Path) -> Path | None:
        answer = self.answer(mode, directory)
        if answer is None:
            return None
        if not os.path.isabs(answer):
            raise self._error(mode, f'must print an absolute path, got "{answer}"')
        return Path(os.path.normpath(answer))

    def collection(self, directory: Path) -> str:
        answer = self.answer("collection", directory)
        if answer is None or not Scope.is_collection_name(answer):
            raise self._error(
                "collection",
                f"printed {answer!r}, which is not a collection name (letters, digits and "
                "underscores, not starting with a digit)",
            )
        return answer

    def _error(self, mode: Mode, problem: str) -> ScopeError:
        return ScopeError(f"PI_MEMSEARCH_STORE_CMD ({self.command} {mode}) {problem}")

    def _ask(self, mode: Mode, directory: str) -> str | None:
        try:
            done = self._execute(mode, directory)
        except subprocess.TimeoutExpired:
            raise self._error(
                mode,
                f"did not answer within {TIMEOUT_SECONDS} s; it must print its answer and exit",
            ) from None
        except OSError as error:
            raise self._error(
                mode,
                f"failed to run: {error.strerror or error}; the variable must name one "
                "executable file (arguments are not supported: wrap them in a script)",
            ) from None
        return self._interpret(mode, done)

    def _execute(self, mode: Mode, directory: str) -> subprocess.CompletedProcess[bytes]:
        """Run ``<cmd> <mode>`` in *directory*, in a process group of its own: at the timeout
        the whole group is killed, so a hung command's children (a ``sleep`` in a shell script)
        do not outlive the error."""
        with subprocess.Popen(
            [self.command, mode],
            cwd=directory,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        ) as process:
            try:
                stdout, stderr = process.communicate(timeout=TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                raise
        return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)

    def _interpret(self, mode: Mode, done: subprocess.CompletedProcess[bytes]) -> str | None:
        """The answer in a finished command's output, or the error it amounts to."""
        stderr = done.stderr.decode("utf-8", "replace").strip()[-1000:]
        if done.returncode < 0:
            raise self._error(mode, f"was killed by signal {-done.returncode}")
        if done.returncode != 0:
            raise self._error(mode, f"exited {done.returncode}: {stderr or '(nothing on stderr)'}")
        answer = done.stdout.decode("utf-8", "replace").strip()
        if not answer:
            if mode == "state-dir":
                return None  # the one optional mode: declining leaves everything as it was
            raise self._error(mode, f"printed nothing; this mode must print {_WHAT[mode]}")
        if "\n" in answer:
            raise self._error(
                mode, f"printed several lines; this mode must print {_WHAT[mode]} only"
            )
        if any(ord(character) < 32 for character in answer):
            # A NUL or other control character would reach every file operation on the store.
            raise self._error(
                mode, f"printed control characters ({answer!r}); it must print {_WHAT[mode]}"
            )
        return answer


def _command(raw: str) -> str:
    # A relative path is anchored where pimem started: the command later runs in other
    # directories. A bare name is left to the PATH search.
    if os.sep in raw and not os.path.isabs(raw):
        return os.path.abspath(raw)
    return raw


#: The store command: one executable, called as ``<cmd> <mode>`` (ADR 0005).
COMMAND: SettingSpec[str | None] = SettingSpec(
    plugin="store-command",
    name="command",
    env="PI_MEMSEARCH_STORE_CMD",
    parse=_command,
    default=None,
    help="one executable that names each scope's store (activates this resolver)",
)


class StoreCommandScope:
    """Scope resolution through ``PI_MEMSEARCH_STORE_CMD``."""

    @staticmethod
    @hookimpl
    def pimem_declare_settings() -> tuple[SettingSpec[str | None]]:
        return (COMMAND,)

    def __init__(self) -> None:
        self._commands: dict[str, StoreCommand] = {}

    #: The setting that turns this resolver on (shown by `pimem plugins`).
    ACTIVATION_SETTING = "PI_MEMSEARCH_STORE_CMD"

    @staticmethod
    def is_active(settings: Settings) -> bool:
        return COMMAND.read(settings) is not None

    def _command(self, settings: Settings) -> StoreCommand:
        command = COMMAND.read(settings)
        assert command is not None, "registered only when PI_MEMSEARCH_STORE_CMD is set"
        return self._commands.setdefault(command, StoreCommand(command))

    @hookimpl(tryfirst=True)
    def pimem_resolve_scope(self, cwd: Path, settings: Settings) -> Scope:
        command = self._command(settings)
        memory_dir = command.path("memory-dir", cwd)
        assert memory_dir is not None, "memory-dir never declines"
        state_dir = command.path("state-dir", cwd)
        return laid_out_scope(
            settings.memsearch_dir,
            repository_dir=Scope.find_repository_dir(cwd),
            scope_dir=memory_dir.parent,
            memory_dir=memory_dir,
            collection=command.collection(cwd),
            store_command=command.command,
            state_dir=state_dir,
        )

    @hookimpl(tryfirst=True)
    def pimem_resolve_project(self, project_dir: Path, settings: Settings) -> Scope:
        # A scanned project is a store directory: the command answers for the store it stands in.
        memory_dir, state_path = discovered_store(project_dir)
        return Scope(
            repository_dir=project_dir,
            scope_dir=project_dir,
            memory_dir=memory_dir,
            collection=self._command(settings).collection(project_dir),
            index_state_path=state_path,
            store_command=COMMAND.read(settings),
        )
