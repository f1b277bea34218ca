"""Test helpers for plugin authors: a pytest plugin, loaded wherever pimem and pytest are installed.

pimem registers this module in pytest's ``pytest11`` entry-point group, so its fixtures are
there in any test suite, with no import and no ``conftest.py`` line:

``make_pimem``
    Builds an isolated :class:`~pimem_core.Pimem` from the plugins you give it: modules,
    classes (instantiated once, as pimem does), objects, or ``(name, plugin)`` pairs. ``HOME``
    is a temporary directory; the settings come only from ``env`` (nothing of the test
    process's ``PIMEM_*`` variables leaks in); plugins load strictly (``PIMEM_STRICT_PLUGINS=1``,
    so a plugin that does not fit fails the test). Installed plugins (pimem's bundled ones
    included) load only with ``installed=True``.
``pimem_project``
    A temporary project whose root is a git root (its ``.git`` is a directory), with the scope
    memsearch gives it (:func:`pimem_core.scopes.project_scope`).
``fake_host_model``
    A host model that answers with scripted text and records what it was asked.

:class:`InMemoryIndex` and :class:`InMemoryIndexPlugin`
    A whole :class:`~pimem_core.services.MemoryIndex` with no database and no model: word
    overlap over the store's day files, recording every operation. Give the plugin to
    ``make_pimem`` to test a plugin that searches, or subclass the index to script one answer.
:func:`read_hits`
    A search's text (``memory_search``, ``pimem search``) read back hit by hit, as
    :class:`ShownHit`: for tests of what an agent is shown (a host adapter, an end-to-end run).

Example, for a plugin module ``my_plugin`` with a ``pimem_resolve_scope`` hook::

    import my_plugin

    def test_my_resolver_answers(make_pimem, pimem_project):
        pimem = make_pimem(my_plugin, installed=True, env={"PIMEM_NOW": "2026-08-13T22:41"})
        assert pimem.pm.answering_plugins()["pimem_resolve_scope"] == "my_plugin"
        scope = pimem.resolve_scope(pimem_project.directory)

    def test_my_distiller_uses_the_host_model(fake_host_model):
        model = fake_host_model.script("- the user prefers tabs").host_model
        ...

pytest stays out of pimem's runtime: only this module imports it, and importing it without
pytest fails with an :class:`ImportError` saying what to install (``pip install
'pimem[testing]'``).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
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
from pimem_core.errors import NoMemoryYet, PimemError
from pimem_core.hookspecs import hookimpl
from pimem_core.manager import build_plugin_manager
from pimem_core.scopes import project_scope
from pimem_core.services import MemoryIndex, MemoryStore
from pimem_core.settings import Settings
from pimem_core.types import (
    Anchor,
    BackendCall,
    CompactResult,
    HostModel,
    IndexHealth,
    IndexReport,
    Scope,
    SearchHit,
    SearchQuery,
    Section,
    StatusSection,
)

__all__ = [
    "FakeHostModel",
    "InMemoryIndex",
    "InMemoryIndexPlugin",
    "MakePimem",
    "ShownHit",
    "TempProject",
    "fake_host_model",
    "make_pimem",
    "pimem_project",
    "plugin_name",
    "read_hits",
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
        :param installed: also load every installed plugin of the ``pimem`` entry-point group.
        """
        ...


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
_HEADING = re.compile(r"^#{1,6} ")
_ANCHOR = re.compile(r"<!-- session:(\S+) turn:(\S+) transcript:(\S+) -->")


class InMemoryIndex:
    """A :class:`~pimem_core.services.MemoryIndex` over one scope, held in memory.

    Each section of a day file (from a heading to the next) is a chunk; a hit's score is the
    share of the query's words the chunk holds. ``operations`` records each call by name.
    It does not compact: :meth:`compact` refuses, as an index without a model would.
    """

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.chunks: dict[str, SearchHit] = {}
        self.operations: list[str] = []

    def index(self, reason: str, files: tuple[Path, ...], call: BackendCall) -> IndexReport:
        self.operations.append("index")
        days = sorted(self.scope.memory_dir.glob("*.md")) if self.scope.memory_dir.is_dir() else []
        self.chunks = {hit.chunk_hash: hit for day in days for hit in self._chunk(day)}
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

    def compact(self, call: BackendCall) -> CompactResult:
        self.operations.append("compact")
        raise PimemError("the in-memory index has no model to compact with")

    def similar(self, text: str, top_k: int) -> Sequence[tuple[SearchHit, float]]:
        self.operations.append("similar")
        return self._ranked(text, top_k)

    def warm(self) -> None:
        self.operations.append("warm")

    def pending_operations(self) -> int:
        return 0

    def health(self) -> IndexHealth:
        return IndexHealth(state_path=None)

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

    def _chunk(self, day: Path) -> list[SearchHit]:
        lines = day.read_text(encoding="utf-8").splitlines()
        starts = [number for number, line in enumerate(lines) if _HEADING.match(line)]
        hits = []
        for first, end in zip(starts, [*starts[1:], len(lines)], strict=True):
            body = "\n".join(lines[first:end]).strip()
            if "\n" not in body:
                continue  # a heading alone (the day's title, a session heading)
            hits.append(
                SearchHit(
                    chunk_hash=hashlib.sha256(body.encode()).hexdigest()[:16],
                    content=body,
                    source=str(day),
                    heading=lines[first].lstrip("#").strip(),
                    heading_level=len(lines[first]) - len(lines[first].lstrip("#")),
                    start_line=first + 1,
                    end_line=first + body.count("\n") + 1,
                    score=0.0,
                    score_kind="similarity",
                )
            )
        return hits


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


_HIT_LINE = re.compile(
    r"^(?P<number>\d+)\. (?:(?P<when>[^|\n]+?) \| )?(?P<label>[a-z][a-z ]*?) "
    r"(?P<score>-?\d+\.\d+) \| chunk (?P<hash>[0-9a-f]+)(?: \| project (?P<project>[^\n]+))?$",
    re.MULTILINE,
)
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_LEG_LINE = re.compile(r"   \S[^\n]*: (?:rank \d+|not among its candidates)[^\n]*")
# What cross-repo recall says after its last hit is an account of the search, not content.
_ACCOUNT = re.compile(r"\n\n(?:skipped, never indexed|collapsed, sharing the collection)")


def read_hits(text: str) -> tuple[ShownHit, ...]:
    """The hits of a search's text, best first: each metadata line read into its fields and
    the lines under it, up to the next hit, as its content."""
    found = list(_HIT_LINE.finditer(text))
    hits = []
    for match, after in zip(found, [*found[1:], None], strict=True):
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
            )
        )
    return tuple(hits)


class InMemoryIndexPlugin:
    """Opens an :class:`InMemoryIndex` per scope, before any installed index; ``indexes``
    keeps each one, by collection, for the test to look into."""

    def __init__(self) -> None:
        self.indexes: dict[str, InMemoryIndex] = {}

    @hookimpl(tryfirst=True)
    def pimem_open_index(self, scope: Scope, store: MemoryStore) -> MemoryIndex:
        return self.indexes.setdefault(scope.collection, InMemoryIndex(scope))


@pytest.fixture
def make_pimem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> MakePimem:
    """A factory of isolated pimems; see the module's documentation."""
    home = tmp_path / "pimem-home"
    home.mkdir(exist_ok=True)
    # memsearch, platformdirs and child processes read HOME from the process environment.
    monkeypatch.setenv("HOME", str(home))

    def make(
        *plugins: PluginSpec,
        env: Mapping[str, str] | None = None,
        installed: bool = False,
    ) -> Pimem:
        settings = Settings.from_env(
            {"HOME": str(home), "PIMEM_STRICT_PLUGINS": "1", **(env or {})}
        )
        chosen: tuple[importlib.metadata.EntryPoint, ...] | None = None if installed else ()
        pm = build_plugin_manager(settings, entry_points=chosen)
        for spec in plugins:
            name, plugin = spec if isinstance(spec, tuple) else (plugin_name(spec), spec)
            if pm.is_registered(plugin):
                continue  # an installed module plugin, already loaded through its entry point
            pm.load_plugin(plugin, name, settings)
        return Pimem(settings, pm)

    return make


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
