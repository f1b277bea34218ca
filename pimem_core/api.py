"""The typed facade: the one place that calls ``pm.hook``.

pluggy's hook calls are untyped (``Any``); each method of :class:`Pimem` gives one hook a typed
signature and turns "no plugin answered" into a :class:`~pimem_core.errors.NoProviderError`
that says which hook went unanswered and how to fix it. The methods come in groups, each a part
of its own in :mod:`pimem_core.facade` (writing, recall, the host session, upkeep, status) on
the floor that opens the services (:class:`~pimem_core.facade.opened.OpenedServices`); this
module puts them together and resolves a directory's scope.
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Self

import attrs

from pimem_core.facade.host import HostSession
from pimem_core.facade.recall import Recall
from pimem_core.facade.status import Status
from pimem_core.facade.upkeep import Upkeep
from pimem_core.manager import build_plugin_manager
from pimem_core.settings import Settings
from pimem_core.types import Scope

log = logging.getLogger(__name__)


@attrs.define
class Pimem(Recall, HostSession, Upkeep, Status):
    """pimem for one host or session: its settings and its own plugin manager."""

    def __attrs_post_init__(self) -> None:
        # Every plugin has loaded before a facade is built (here, in the test kit, in a host):
        # the one point, still at the edge, where a plugin chosen by name can be checked. A
        # plugin group chosen by name is the group's plugin that implements the hook.
        self.pm.check_choices()
        self.settings = self.pm.resolve_choices(self.settings)

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        entry_points: Iterable[importlib.metadata.EntryPoint] | None = None,
    ) -> Self:
        """Parse the environment and load the installed plugins (or *entry_points*)."""
        pm = build_plugin_manager(Settings.from_env(environ), entry_points=entry_points)
        # The manager's settings carry the plugins' declared settings, validated as it loaded them.
        return cls(pm.settings, pm)

    def for_session(self, settings: Settings) -> Self:
        """This pimem with *settings* for one session or command in a process that serves
        many: the same plugins and the services already opened, which settings that shape one
        session (:attr:`SettingSpec.per_session`) do not change."""
        view = type(self)(settings, self.pm)
        view._stores = self._stores
        view._indexes = self._indexes
        return view

    def resolve_scope(self, cwd: Path) -> Scope:
        """The scope of the directory *cwd* (``pimem_resolve_scope``)."""
        answer = self.pm.caller("pimem_resolve_scope")(cwd=cwd.absolute(), settings=self.settings)
        scope = self._require("pimem_resolve_scope", answer, Scope)
        log.info(
            "scope of %s: memory directory %s, collection %s",
            cwd,
            scope.memory_dir,
            scope.collection,
        )
        return scope
