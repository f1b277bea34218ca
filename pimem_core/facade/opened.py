"""The facade's floor: the settings, the plugin manager, and the services it opens.

Every part of :class:`pimem_core.api.Pimem` stands on :class:`OpenedServices`: a service
(store, index, transcript reader, skill catalog) is opened through its hook once per scope and
checked to be whole; a single answer is checked to be of its type, and "no plugin answered"
becomes a :class:`~pimem_core.errors.NoProviderError` that says which hook went unanswered and
how to fix it.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import attrs

from pimem_core.errors import NoProviderError, PluginError
from pimem_core.manager import PimemPluginManager
from pimem_core.scrub import Scrubber
from pimem_core.services import MemoryIndex, MemoryStore, SkillCatalog, TranscriptReader
from pimem_core.settings import Settings
from pimem_core.types import BackendCall, Scope

T = TypeVar("T")


@attrs.define
class OpenedServices:
    """pimem's settings and plugin manager for one host or session, and the services opened."""

    settings: Settings
    pm: PimemPluginManager
    # Services opened for this host or session, one per scope (never shared between managers).
    _stores: dict[Scope, MemoryStore] = attrs.field(factory=dict, init=False, repr=False)
    _indexes: dict[Scope, MemoryIndex] = attrs.field(factory=dict, init=False, repr=False)

    def _require(self, hook: str, answer: object, kind: type[T]) -> T:
        if answer is None:
            blocked = sorted(self.settings.disabled_plugins)
            hint = f" (blocked by PIMEM_DISABLE_PLUGINS: {', '.join(blocked)})" if blocked else ""
            choice = self.settings.choice(hook)
            if choice is not None:
                hint += (
                    f" ({choice.setting} chose {choice.plugin!r}, which passed or is not active)"
                )
            raise NoProviderError(
                f"no plugin answered {hook}{hint}; run `pimem plugins` to see which plugins "
                "are loaded and which are blocked or failed"
            )
        if not isinstance(answer, kind):
            raise PluginError(
                f"{hook} answered with a {type(answer).__name__}, not a {kind.__name__}; "
                "the plugin that answers it (see `pimem plugins`) is broken"
            )
        return answer

    def _open(self, hook: str, answer: object, protocol: Any) -> Any:
        """*answer* if it has every method of *protocol*, a service's whole interface."""
        self._require(hook, answer, object)
        methods = sorted(name for name in vars(protocol) if not name.startswith("_"))
        missing = [name for name in methods if not callable(getattr(answer, name, None))]
        if missing:
            raise PluginError(
                f"{hook} answered with a {type(answer).__name__}, which is not a whole "
                f"{protocol.__name__}: it lacks {', '.join(missing)}; the plugin that answers "
                "it (see `pimem plugins`) is broken"
            )
        return answer

    @contextlib.contextmanager
    def _service(self, where: str) -> Iterator[None]:
        """A call into an opened service: a plugin's bug in it names the plugin."""
        try:
            yield
        except Exception as error:
            self.pm.name_the_plugin(error, where)
            raise

    def _call(
        self,
        on_wait: Callable[[str], None] | None = None,
        progress: Callable[[int, int], None] | None = None,
        *,
        read_only: bool = False,
        on_notice: Callable[[str], None] | None = None,
    ) -> BackendCall:
        return BackendCall(
            settings=self.settings,
            on_wait=on_wait,
            progress=progress,
            read_only=read_only,
            scrub=self.scrubber.scrub,
            on_notice=on_notice,
        )

    @functools.cached_property
    def scrubber(self) -> Scrubber:
        """Every plugin's secret patterns (none when ``PIMEM_SCRUB_SECRETS=off``)."""
        if not self.settings.scrub_secrets:
            return Scrubber(())
        contributions = self.pm.caller("pimem_collect_secret_patterns")()
        return Scrubber(tuple(pattern for part in contributions if part for pattern in part))

    def check_writable(self) -> None:
        """Refuse to change memory while a plugin that decides where memory goes failed to
        load: its writes would land in another store (the one the defaults choose)."""
        for record in self.pm.failed:
            if record.routes_memory:
                raise PluginError(record.failure)

    def store(self, scope: Scope) -> MemoryStore:
        """*scope*'s memory store, opened once (``pimem_open_store``)."""
        if scope not in self._stores:
            answer = self.pm.caller("pimem_open_store")(scope=scope, settings=self.settings)
            self._stores[scope] = self._open("pimem_open_store", answer, MemoryStore)
        return self._stores[scope]

    def index(self, scope: Scope) -> MemoryIndex:
        """*scope*'s search index, opened once (``pimem_open_index``)."""
        if scope not in self._indexes:
            answer = self.pm.caller("pimem_open_index")(
                scope=scope, settings=self.settings, store=self.store(scope)
            )
            self._indexes[scope] = self._open("pimem_open_index", answer, MemoryIndex)
        return self._indexes[scope]

    def _index_if_any(self, scope: Scope) -> MemoryIndex | None:
        """*scope*'s index, or ``None`` when no plugin opens one (memory without search)."""
        try:
            return self.index(scope)
        except NoProviderError:
            return None

    def transcript(self, path: Path) -> TranscriptReader:
        """A reader of the agent transcript *path* (``pimem_open_transcript``)."""
        answer = self.pm.caller("pimem_open_transcript")(path=path, settings=self.settings)
        reader: TranscriptReader = self._open("pimem_open_transcript", answer, TranscriptReader)
        return reader

    def skills(self, scope: Scope) -> SkillCatalog:
        """*scope*'s skill candidates (``pimem_open_skills``)."""
        answer = self.pm.caller("pimem_open_skills")(
            scope=scope, settings=self.settings, store=self.store(scope)
        )
        catalog: SkillCatalog = self._open("pimem_open_skills", answer, SkillCatalog)
        return catalog
