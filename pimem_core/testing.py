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
    memsearch gives it (:func:`pimem_core.scopes.project_scope`).
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
'pimem[testing]'``).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import io
import json
import logging
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import attrs

try:
    import pytest
except ImportError as missing:  # pragma: no cover - exercised in a child process
    raise ImportError(
        "pimem_core.testing holds pytest fixtures and needs pytest: "
        "install it with `pip install 'pimem[testing]'` (or `pip install pytest`)"
    ) from missing

from pimem_core.api import Pimem
from pimem_core.day_file import list_compact_blocks, list_entries
from pimem_core.errors import NoMemoryYet, PimemError
from pimem_core.hookspecs import hookimpl
from pimem_core.manager import ENTRY_POINT_GROUP, build_plugin_manager
from pimem_core.scopes import project_scope
from pimem_core.services import MemoryIndex, MemoryStore
from pimem_core.settings import Settings
from pimem_core.testing_service import ServiceRuntimes, not_answered
from pimem_core.types import (
    Anchor,
    BackendCall,
    HostModel,
    IndexReport,
    Scope,
    SearchHit,
    SearchQuery,
    Section,
    StatusSection,
)

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

#: What a plugin given to ``make_pimem`` may be: the plugin, or a ``(name, plugin)`` pair.
PluginSpec = object | tuple[str, object]


def plugin_name(plugin: object) -> str:
    """The name ``make_pimem`` registers *plugin* under when none is given: a module's last
    dotted part, a class's name, an object's class name."""
    if isinstance(plugin, ModuleType):
        return plugin.__name__.rpartition(".")[2]
    if isinstance(plugin, type):
        return plugin.__name__
    return type(plugin).__name__


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


class RunPimem(Protocol):
    """The ``run_pimem`` fixture: runs one ``pimem`` command in this process."""

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
        ...


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


_WORD = re.compile(r"\w+")
_ANCHOR = re.compile(r"<!-- session:(\S+) turn:(\S+) transcript:(\S+) -->")


class InMemoryIndex:
    """A whole :class:`~pimem_core.services.MemoryIndex` over one scope, held in memory: the
    four methods every index has, and nothing else (no model, no similarity search).

    Each entry of a day file (and each compaction block) is a chunk, read with pimem's one
    day-file reader; a hit's score, a stand-in for a similarity, is the share of the query's
    words the chunk holds (``score_kind="similarity"``). ``operations`` records each call by name.
    :class:`SimilarInMemoryIndex` adds the optional capabilities auto-context uses.
    """

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.chunks: dict[str, SearchHit] = {}
        self.operations: list[str] = []

    def index(self, reason: str, files: tuple[Path, ...], call: BackendCall) -> IndexReport:
        self.operations.append("index")
        days = sorted(self.scope.memory_dir.glob("*.md")) if self.scope.memory_dir.is_dir() else []
        self.chunks = {hit.chunk_hash: hit for day in days for hit in _chunks(day)}
        return IndexReport(indexed_chunks=len(self.chunks), total_files=len(days))

    def search(self, query: SearchQuery, call: BackendCall) -> tuple[SearchHit, ...]:
        self.operations.append("search")
        if not self.chunks:
            raise NoMemoryYet(f"no memory yet in {self.scope.memory_dir}; write something first")
        return tuple(hit for hit, _ in self._ranked(query.text, query.top_k))

    def expand(self, chunk_hash: str, call: BackendCall) -> Section:
        self.operations.append("expand")
        hit = self.chunks.get(chunk_hash)
        if hit is None:
            raise PimemError(f"chunk {chunk_hash} is not in the in-memory index")
        found = _ANCHOR.search(hit.content)
        anchor = None
        if found is not None:
            session, turn, transcript = found.groups()
            anchor = Anchor(session=session, turn=turn, transcript=transcript)
        return Section(
            chunk_hash=chunk_hash,
            source=hit.source,
            heading=hit.heading,
            start_line=hit.start_line,
            end_line=hit.end_line,
            content=hit.content,
            anchor=anchor,
        )

    def status(self) -> tuple[StatusSection, ...]:
        self.operations.append("status")
        return (
            StatusSection(
                name="backend",
                rank=10,
                lines=(f"backend: in-memory index ({len(self.chunks)} chunks)",),
                data={"available": True, "chunks": len(self.chunks)},
            ),
        )

    def _ranked(self, text: str, top_k: int) -> tuple[tuple[SearchHit, float], ...]:
        words = set(_WORD.findall(text.lower()))
        scored = []
        for hit in self.chunks.values():
            share = len(words & set(_WORD.findall(hit.content.lower()))) / max(1, len(words))
            if share > 0:
                scored.append((attrs.evolve(hit, score=share, score_kind="similarity"), share))
        scored.sort(key=lambda pair: (-pair[1], pair[0].source, pair[0].start_line))
        return tuple(scored[:top_k])


class SimilarInMemoryIndex(InMemoryIndex):
    """:class:`InMemoryIndex` with the capabilities per-prompt recall uses
    (:class:`~pimem_core.services.SimilaritySearch`, :class:`~pimem_core.services.Warming`):
    the same word-overlap score, recorded as ``"similar"`` and ``"warm"``."""

    def similar(self, text: str, top_k: int) -> Sequence[tuple[SearchHit, float]]:
        self.operations.append("similar")
        return self._ranked(text, top_k)

    def warm(self) -> None:
        self.operations.append("warm")


def _chunks(day: Path) -> list[SearchHit]:
    """The chunks of one day file: its entries and compaction blocks."""
    text = day.read_text(encoding="utf-8")
    places = [(entry.start, entry.text, entry.time) for entry in list_entries(text)]
    places += [(block.start, block.text, block.headings[0]) for block in list_compact_blocks(text)]
    return [
        SearchHit(
            chunk_hash=hashlib.sha256(body.encode()).hexdigest()[:16],
            content=body,
            source=str(day),
            heading=heading,
            heading_level=len(body) - len(body.lstrip("#")),
            start_line=start + 1,
            end_line=start + body.count("\n") + 1,
            score=0.0,
            score_kind="similarity",
        )
        for start, body, heading in sorted(places)
    ]


@attrs.frozen(kw_only=True)
class ShownHit:
    """One hit of a search's text, as the agent reads it (:func:`read_hits`)."""

    number: int
    #: The day its daily memory file is named for; ``None`` for another file.
    day: str | None
    #: Its entry's time, or its heading when that is short; ``None`` when none is shown.
    heading: str | None
    #: What the line calls the score: ``relevance``, ``rank fusion``, ``similarity``...
    score_label: str
    score: float
    chunk_hash: str
    project: str | None
    #: The ``--explain`` lines, one per leg, as shown (``dense: rank 1, score 0.712``).
    legs: tuple[str, ...]
    #: The text under the line: the chunk without its anchor and its repeated heading.
    content: str
    #: The hit above it this one shows the same score as (``(tied with 1)``), if any.
    tied_with: int | None = None


_HIT_LINE = re.compile(
    r"^(?P<number>\d+)\. (?:(?P<when>[^|\n]+?) \| )?(?P<label>[a-z][a-z ]*?) "
    r"(?P<score>-?\d+\.\d+)(?: \(tied with (?P<tied>\d+)\))? \| chunk (?P<hash>[0-9a-f]+)"
    r"(?: \| project (?P<project>[^\n]+))?$",
    re.MULTILINE,
)
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_LEG_LINE = re.compile(r"   \S[^\n]*: (?:rank \d+|not among its candidates)[^\n]*")
# What cross-repo recall says after its last hit is an account of the search, not content.
_ACCOUNT = re.compile(r"\n\n(?:skipped, never indexed|collapsed, sharing the collection)")


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


def read_hits(text: str) -> tuple[ShownHit, ...]:
    """The hits of a search's text, best first: each metadata line read into its fields and
    the lines under it, up to the next hit, as its content."""
    found = list(_HIT_LINE.finditer(text))
    hits = []
    # Each hit's block ends where the next starts; the last one's at the end of the text.
    ends: list[re.Match[str] | None] = [*found[1:], None] if found else []
    for match, after in zip(found, ends, strict=True):
        block = text[match.end() : after.start() if after else len(text)]
        account = _ACCOUNT.search(block)
        lines = block[: account.start() if account else len(block)].strip("\n").split("\n")
        legs = []
        while lines and _LEG_LINE.fullmatch(lines[0]):
            legs.append(lines.pop(0).strip())
        day, _, heading = (match["when"] or "").partition(" ")
        if not _DAY.fullmatch(day):
            day, heading = "", match["when"] or ""
        hits.append(
            ShownHit(
                number=int(match["number"]),
                day=day or None,
                heading=heading or None,
                score_label=match["label"],
                score=float(match["score"]),
                chunk_hash=match["hash"],
                project=match["project"],
                legs=tuple(legs),
                content="\n".join(lines).strip("\n"),
                tied_with=int(match["tied"]) if match["tied"] else None,
            )
        )
    return tuple(hits)


class InMemoryIndexPlugin:
    """Opens an :class:`InMemoryIndex` per scope (a :class:`SimilarInMemoryIndex` with
    ``similar=True``), before any installed index; ``indexes`` keeps each one, by collection,
    for the test to look into."""

    def __init__(self, *, similar: bool = False) -> None:
        self.indexes: dict[str, InMemoryIndex] = {}
        self._kind = SimilarInMemoryIndex if similar else InMemoryIndex

    @hookimpl(tryfirst=True)
    def pimem_open_index(self, scope: Scope, store: MemoryStore) -> MemoryIndex:
        return self.indexes.setdefault(scope.collection, self._kind(scope))


class _GivenEntryPoint(importlib.metadata.EntryPoint):
    """An installed plugin's entry point that loads the object the test gave instead, so the
    plugin is registered once, under the entry point's name, in its place among the installed
    ones (the order pluggy asks them in), exactly as pimem would load it."""

    def __init__(self, entry_point: importlib.metadata.EntryPoint, plugin: object) -> None:
        super().__init__(entry_point.name, entry_point.value, entry_point.group)
        # EntryPoint refuses attribute assignment; its own code sets `dist` this way too.
        vars(self).update(dist=entry_point.dist, _plugin=plugin)

    def load(self) -> object:
        return vars(self)["_plugin"]


def _is_installed_as(plugin: object, entry_point: importlib.metadata.EntryPoint) -> bool:
    """Whether *entry_point* loads *plugin*: its module, its class, or the class of an object."""
    try:
        loaded = entry_point.load()
    except Exception:  # noqa: BLE001 - a broken entry point is the manager's to report
        return False
    return loaded is plugin or (isinstance(loaded, type) and type(plugin) is loaded)


def _build_pimem(
    plugins: Sequence[PluginSpec], env: Mapping[str, str], *, installed: bool
) -> Pimem:
    """The facade over *plugins* (and the installed ones, with *installed*), settings from *env*."""
    # (name, plugin, whether the test named it)
    given = [
        (*spec, True) if isinstance(spec, tuple) else (plugin_name(spec), spec, False)
        for spec in plugins
    ]
    chosen: list[importlib.metadata.EntryPoint] = []
    if installed:
        for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            match = next(
                (
                    (index, name, plugin, named)
                    for index, (name, plugin, named) in enumerate(given)
                    if _is_installed_as(plugin, entry_point)
                ),
                None,
            )
            if match is None:
                chosen.append(entry_point)
                continue
            index, name, plugin, named = match
            if named and name != entry_point.name:
                raise ValueError(
                    f"{plugin!r} is installed as {entry_point.name!r} and is registered under "
                    f"that name: give it without the name {name!r}, or without installed=True"
                )
            chosen.append(_GivenEntryPoint(entry_point, plugin))
            del given[index]
    pm = build_plugin_manager(Settings.from_env(env), entry_points=chosen)
    for name, plugin, _ in given:
        if pm.is_registered(plugin):
            continue  # given twice: pluggy registers an object once
        # The manager's settings, not the ones parsed before: they carry the settings every
        # plugin loaded so far declared, as build_plugin_manager passes them.
        pm.load_plugin(plugin, name, pm.settings)
    # pm.settings, as Pimem.from_env uses: the settings parsed before any plugin declared its
    # own would leave a plugin's setting unvalidated and out of the facade's settings.
    return Pimem(pm.settings, pm)


#: Where pimem's files (data, cache, state, sockets) go when these are set: from the test
#: process's environment they would lead to the user's own, so the kit unsets them.
_USER_DIRS = ("PIMEM_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME")


@attrs.frozen
class _User:
    """The test's own user: its ``HOME``, its runtime directory (pimem's sockets) and the
    memory services its commands start there."""

    home: Path
    runtime: Path
    services: ServiceRuntimes


@pytest.fixture
def _pimem_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[_User]:
    """One user per test, shared by ``make_pimem`` and ``run_pimem``, and the test process's
    ``HOME`` for the test (``Path.home()`` in the test is the commands' home). At the end every
    memory service the test started is stopped and its runtime directory removed."""
    services = ServiceRuntimes()
    user = _User(home=tmp_path / "pimem-home", runtime=services.make(), services=services)
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
def make_pimem(_pimem_user: _User) -> MakePimem:
    """A factory of isolated pimems; see the module's documentation."""

    def make(
        *plugins: PluginSpec,
        env: Mapping[str, str] | None = None,
        installed: bool = False,
    ) -> Pimem:
        return _build_pimem(
            plugins,
            {"HOME": str(_pimem_user.home), "PIMEM_STRICT_PLUGINS": "1", **(env or {})},
            installed=installed,
        )

    return make


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


@pytest.fixture
def run_pimem(tmp_path: Path, _pimem_user: _User) -> RunPimem:
    """Runs ``pimem`` commands in this process, or through a real memory service
    (``service=True``); see the module's documentation."""
    # Here, not at the top: pytest loads this module in every run where pimem is installed,
    # and most suites never run the command line.
    from pimem_core.doors import cli, service_client

    def run(
        *args: str | os.PathLike[str],
        plugins: Sequence[PluginSpec] = (),
        installed: bool = False,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stdin: str | bytes | None = None,
        service: bool = False,
    ) -> CliResult:
        argv = tuple(os.fspath(arg) for arg in args)
        if service:
            _check_installed(plugins)
            installed = True  # a service loads what is installed, and nothing else
        passed = _PASSED + (("PYTHONPATH",) if service else ())
        command_env = {
            **{name: os.environ[name] for name in passed if name in os.environ},
            "HOME": str(_pimem_user.home),
            "XDG_RUNTIME_DIR": str(_pimem_user.runtime),
            "PIMEM_STRICT_PLUGINS": "1",
            # The in-process run never goes through the memory service; off says so to the
            # commands that report on it (`pimem status`), and starts none.
            "PIMEM_SERVICE": "on" if service else "off",
            **(env or {}),
        }
        routed = service_client.routed(argv, command_env)
        if routed:
            _pimem_user.services.enter(command_env)

        def open_pimem() -> Pimem:
            return _build_pimem(plugins, command_env, installed=installed)

        data = stdin.encode("utf-8") if isinstance(stdin, str) else (stdin or b"")
        out, err, given = _stream(), _stream(), _stream(data)
        saved_stdin = sys.stdin
        answered: int | None = None
        with (
            _process_environment(command_env),
            contextlib.chdir(tmp_path if cwd is None else cwd),
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

    return run


def _check_installed(plugins: Sequence[PluginSpec]) -> None:
    """A memory service loads plugins through their entry points: one given to a run through
    it must be installed, as a module or a class (an object's state stays in this process)."""
    entry_points = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    for spec in plugins:
        plugin = spec[1] if isinstance(spec, tuple) else spec
        if not isinstance(plugin, ModuleType | type) or not any(
            _is_installed_as(plugin, entry_point) for entry_point in entry_points
        ):
            raise ValueError(
                f"{plugin!r} cannot be given to a run through the memory service: the service "
                "loads installed plugins, through their entry points, in a process of its own. "
                "Install its distribution and give its module or class (or nothing: "
                "installed plugins load anyway), or run it with service=False"
            )


@pytest.fixture
def pimem_project(tmp_path: Path) -> TempProject:
    """A project directory ``<tmp>/project`` with a ``.git`` directory, and its scope."""
    directory = tmp_path / "project"
    (directory / ".git").mkdir(parents=True)
    return TempProject(directory=directory, scope=project_scope(directory))


@pytest.fixture
def fake_host_model() -> FakeHostModel:
    """A host model with no reply scripted yet: ``fake_host_model.script("text", ...)``."""
    return FakeHostModel()
