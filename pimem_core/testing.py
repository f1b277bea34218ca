"""Test helpers for plugin authors: a pytest plugin, loaded wherever pimem and pytest are installed.

pimem registers this module in pytest's ``pytest11`` entry-point group, so its fixtures are
there in any test suite, with no import and no ``conftest.py`` line:

``make_pimem``
    Builds an isolated :class:`~pimem_core.Pimem` from the plugins you give it: modules,
    classes (instantiated once, as pimem does), objects, or ``(name, plugin)`` pairs. ``HOME``
    is a temporary directory; the settings come only from ``env`` (nothing of the test
    process's ``PIMEM_*`` variables leaks in), parsed with every setting the plugins declare;
    plugins load strictly (``PIMEM_STRICT_PLUGINS=1``, so a plugin that does not fit fails the
    test). Installed plugins (pimem's bundled ones included) load only with ``installed=True``;
    a plugin given that is installed too is registered once, under its entry-point name.
``run_pimem``
    Runs one ``pimem`` command in this process, through the command line's own entry function,
    with the plugins chosen as for ``make_pimem`` and an environment of its own (the temporary
    ``HOME``, ``env``, and nothing else of the test process's but ``PATH`` and the locale);
    returns a :class:`CliResult`: ``exit_code``, ``stdout``, ``stderr``, and ``json``, the
    parsed output of a ``--json`` command. With ``service=True`` it runs as ``pimem`` does with
    the memory service on: the commands the service answers go to a real one, which loads the
    installed plugins and keeps them for the test's next commands, in the test's own runtime
    directory; the service is stopped, and the directory removed, when the test ends.
``pimem_project``
    A temporary project whose root is a git root (its ``.git`` is a directory), with the scope
    memsearch gives it (:meth:`pimem_core.scope.Scope.for_project`).
``fake_host_model``
    A host model that answers with scripted text and records what it was asked.

:class:`InMemoryIndex`, :class:`SimilarInMemoryIndex` and :class:`InMemoryIndexPlugin`
    A whole :class:`~pimem_core.services.MemoryIndex` in its four methods, with no database and
    no model: word overlap over the store's day files, recording every operation;
    ``SimilarInMemoryIndex`` adds the similarity search auto-context uses
    (``InMemoryIndexPlugin(similar=True)``). Give the plugin to ``make_pimem`` or
    ``run_pimem`` to test a plugin that searches, or subclass the index to script one answer.
:func:`ask_pimem_serve`
    Requests sent to a real ``pimem serve`` child one at a time, as an agent's bridge sends
    them, and the answers by id: for a plugin's served method (``hello.greet``). The memory
    service the child relays to runs in a runtime directory of the call's own, stopped and
    removed before the call returns.
:func:`read_hits`
    A search's text (``memory_search``, ``pimem search``) read back hit by hit, as
    :class:`ShownHit`: for tests of what an agent is shown (a host adapter, an end-to-end run).

Example, for a plugin module ``my_plugin`` installed under the entry-point name ``my-plugin``
(``my-plugin = "my_plugin"`` in the ``pimem`` group of its ``pyproject.toml``), whose
``pimem_resolve_scope`` (``tryfirst``) keeps every project under ``~/notes`` in one store::

    from pathlib import Path

    import my_plugin
    from pimem_core.testing import (
        FakeHostModel,
        InMemoryIndexPlugin,
        MakePimem,
        RunPimem,
        TempProject,
        read_hits,
    )


    def test_my_resolver_answers_first(make_pimem: MakePimem, pimem_project: TempProject) -> None:
        # Given and installed: loaded once, through its entry point, under that name.
        pimem = make_pimem(my_plugin, installed=True, env={"PIMEM_NOW": "2026-08-13T22:41"})
        assert pimem.pm.answering_plugins()["pimem_resolve_scope"] == "my-plugin"
        notes = Path.home() / "notes"  # HOME is the test's own
        assert pimem.resolve_scope(notes / "todo").memory_dir == notes / ".memsearch" / "memory"
        assert pimem.resolve_scope(pimem_project.directory) == pimem_project.scope


    def test_the_command_line_writes_and_finds(run_pimem: RunPimem) -> None:
        notes = Path.home() / "notes"
        notes.mkdir()
        index = InMemoryIndexPlugin()  # no database, no model
        anchor = ["--session", "s1", "--turn", "t1", "--transcript", "/t/s1.jsonl"]
        written = run_pimem(
            "write", "-", *anchor, "--json",
            plugins=[index], installed=True, cwd=notes, stdin="- the build needs node 22",
        )
        assert written.exit_code == 0, written.stderr
        assert Path(written.json["file"]).parent == notes / ".memsearch" / "memory"
        # The in-memory index reads the day files when told to, as `pimem index` does.
        assert run_pimem("index", plugins=[index], installed=True, cwd=notes).exit_code == 0
        found = run_pimem("search", "node", plugins=[index], installed=True, cwd=notes)
        assert [hit.content for hit in read_hits(found.stdout)] == ["- the build needs node 22"]


    def test_my_distiller_asks_the_host_model(fake_host_model: FakeHostModel) -> None:
        model = fake_host_model.script("- the user prefers tabs").host_model
        assert model.complete("distil this", "use tabs", 5.0) == "- the user prefers tabs"
        assert fake_host_model.calls == [("distil this", "use tabs")]

pimem's own suite runs every example of this module's documentation (a block after ``::``)
against such a plugin, so an example here that breaks fails a test.

pytest stays out of pimem's runtime: only this module imports it, and importing it without
pytest fails with an :class:`ImportError` saying what to install (``pip install
'pimem[testing]'``). This module holds the fixtures; the kit's work is in modules of its own,
whose names it exports: ``testing_build`` (a pimem from the plugins given), ``testing_run`` (a
command run, ``pimem serve`` asked), ``testing_service`` (the memory services a test starts),
``testing_index`` (the in-memory index) and ``testing_hits`` (a search's text read back).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import attrs

try:
    import pytest
except ImportError as missing:  # pragma: no cover - exercised in a child process
    raise ImportError(
        "pimem_core.testing holds pytest fixtures and needs pytest: "
        "install it with `pip install 'pimem[testing]'` (or `pip install pytest`)"
    ) from missing

from pimem_core.api import Pimem
from pimem_core.testing_build import PluginSpec, build_pimem, plugin_name
from pimem_core.testing_hits import ShownHit, read_hits
from pimem_core.testing_index import InMemoryIndex, InMemoryIndexPlugin, SimilarInMemoryIndex
from pimem_core.testing_run import CliResult, KitUser, ask_pimem_serve, run_command
from pimem_core.testing_service import ServiceRuntimes
from pimem_core.types import HostModel, Scope

__all__ = [
    "CliResult",
    "FakeHostModel",
    "InMemoryIndex",
    "InMemoryIndexPlugin",
    "MakePimem",
    "RunPimem",
    "ShownHit",
    "SimilarInMemoryIndex",
    "TempProject",
    "ask_pimem_serve",
    "fake_host_model",
    "make_pimem",
    "pimem_project",
    "plugin_name",
    "read_hits",
    "run_pimem",
]


class MakePimem(Protocol):
    """The ``make_pimem`` fixture: builds an isolated pimem from chosen plugins."""

    def __call__(
        self,
        *plugins: PluginSpec,
        env: Mapping[str, str] | None = None,
        installed: bool = False,
    ) -> Pimem:
        """:param plugins: modules, classes, objects or ``(name, plugin)`` pairs, loaded in order
            after the installed plugins (so a ``tryfirst`` answer of theirs is asked first); a
            module already loaded through its entry point is not loaded twice.
        :param env: the environment pimem's settings are read from (nothing else is read).
        :param installed: also load every installed plugin of the ``pimem`` entry-point group;
            a plugin given that one of them loads (its module, its class, or an instance of its
            class) takes that entry point's place, under its name, instead of loading twice.
        """
        ...


@attrs.frozen
class RunPimem:
    """The ``run_pimem`` fixture: runs one ``pimem`` command in this process, as the test's own
    user, in the test's temporary directory unless told another."""

    _user: KitUser
    _directory: Path

    def __call__(
        self,
        *args: str | os.PathLike[str],
        plugins: Sequence[PluginSpec] = (),
        installed: bool = False,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stdin: str | bytes | None = None,
        service: bool = False,
    ) -> CliResult:
        """:param args: the command line after ``pimem`` (``"search", "node", "--json"``).
        :param plugins: as ``make_pimem``'s: objects given are the same in every run (state
            kept), classes are instantiated afresh for each run, as a new process would.
        :param installed: also load the installed plugins, as ``make_pimem``'s.
        :param env: the command's environment on top of a temporary ``HOME`` and
            ``XDG_RUNTIME_DIR``, ``PIMEM_STRICT_PLUGINS=1`` and ``PIMEM_SERVICE=off``; of the
            test process's only ``PATH``, the temporary directory and the locale are kept.
        :param cwd: the directory the command runs in (default: the test's temporary directory,
            never the directory pytest was started in, a real checkout).
        :param stdin: what the command reads from stdin (``pimem write -``); default nothing.
        :param service: run it as ``pimem`` runs with the memory service on
            (``PIMEM_SERVICE=on``): a command the service answers (``search``, ``expand``,
            ``status``, ``index``, ``write``, ``forget``) is handed by the command line's thin
            client to a real service, a process of its own that loads the installed plugins
            (``installed=True`` is implied; a plugin given must be installed, as a module or a
            class) and stays up for the test's next commands; the others run in this process.
            The service runs in the test's own runtime directory, and is stopped, and the
            directory removed, when the test ends. The test's ``PYTHONPATH`` is kept too.

        An exception the command line does not turn into an exit code (a plugin's bug) is
        raised, with its traceback, rather than hidden in the result; through the service it is
        an exit code and a line on stderr, as the user sees it, with the traceback in the
        service's log. A command the service should answer but the thin client ran in process
        (the service did not start) fails the test, with the end of the service's log.
        """
        return run_command(
            self._user,
            tuple(os.fspath(arg) for arg in args),
            plugins=plugins,
            installed=installed,
            env=env,
            cwd=self._directory if cwd is None else cwd,
            stdin=stdin,
            service=service,
        )


@attrs.frozen(kw_only=True)
class TempProject:
    """A temporary project directory that is a git root, and the scope memsearch gives it."""

    directory: Path
    scope: Scope


@attrs.define
class FakeHostModel:
    """A host model for tests: answers each ``complete`` call with the next scripted reply.

    ``calls`` records ``(system, prompt)`` of every call. Running out of replies raises
    :class:`LookupError`, as a failing host model would raise.
    """

    name: str = "fake/model"
    replies: list[str] = attrs.field(factory=list)
    calls: list[tuple[str, str]] = attrs.field(factory=list)

    def script(self, *replies: str) -> FakeHostModel:
        """Queue *replies*, in order; returns the model, for chaining."""
        self.replies.extend(replies)
        return self

    def complete(self, system: str, prompt: str, timeout_seconds: float) -> str:
        self.calls.append((system, prompt))
        if not self.replies:
            raise LookupError(f"the fake host model {self.name} has no scripted reply left")
        return self.replies.pop(0)

    @property
    def host_model(self) -> HostModel:
        """The model as pimem's hooks receive it (``DistillRequest.host_model``...)."""
        return HostModel(name=self.name, complete=self.complete)


#: Where pimem's files (data, cache, state, sockets) go when these are set: from the test
#: process's environment they would lead to the user's own, so the kit unsets them.
_USER_DIRS = ("PIMEM_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME")


@pytest.fixture
def _pimem_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[KitUser]:
    """One user per test, shared by ``make_pimem`` and ``run_pimem``, and the test process's
    ``HOME`` for the test (``Path.home()`` in the test is the commands' home). At the end every
    memory service the test started is stopped and its runtime directory removed."""
    services = ServiceRuntimes()
    user = KitUser(home=tmp_path / "pimem-home", runtime=services.make(), services=services)
    user.home.mkdir(exist_ok=True)
    # memsearch, platformdirs, pimem's own paths and child processes read these from the
    # process environment, not from the settings.
    monkeypatch.setenv("HOME", str(user.home))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(user.runtime))
    for name in _USER_DIRS:
        monkeypatch.delenv(name, raising=False)
    try:
        yield user
    finally:
        services.close()


@pytest.fixture
def make_pimem(_pimem_user: KitUser) -> MakePimem:
    """A factory of isolated pimems; see the module's documentation."""

    def make(
        *plugins: PluginSpec,
        env: Mapping[str, str] | None = None,
        installed: bool = False,
    ) -> Pimem:
        return build_pimem(
            plugins,
            {"HOME": str(_pimem_user.home), "PIMEM_STRICT_PLUGINS": "1", **(env or {})},
            installed=installed,
        )

    return make


@pytest.fixture
def run_pimem(tmp_path: Path, _pimem_user: KitUser) -> RunPimem:
    """Runs ``pimem`` commands in this process, or through a real memory service
    (``service=True``); see the module's documentation."""

    return RunPimem(_pimem_user, tmp_path)


@pytest.fixture
def pimem_project(tmp_path: Path) -> TempProject:
    """A project directory ``<tmp>/project`` with a ``.git`` directory, and its scope."""
    directory = tmp_path / "project"
    (directory / ".git").mkdir(parents=True)
    return TempProject(directory=directory, scope=Scope.for_project(directory))


@pytest.fixture
def fake_host_model() -> FakeHostModel:
    """A host model with no reply scripted yet: ``fake_host_model.script("text", ...)``."""
    return FakeHostModel()
