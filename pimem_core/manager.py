"""Building a plugin manager: one per host or session, never a global one.

Every plugin, bundled or third-party, comes from the entry-point group ``pimem``. A plugin may
declare ``is_active(settings) -> bool``; one that says no is recorded as inactive and never
registered (its ``ACTIVATION_SETTING``, the environment variable that decides, is shown with it).
A class is instantiated once per manager, so plugins that keep state (memos, the
session-heading ledger) keep it per session.

A plugin that does not fit the hook specifications (:mod:`pimem_core.hook_checks`) is skipped,
as one that fails to import is (``PIMEM_STRICT_PLUGINS=1`` makes both errors), and recorded as
failed with the hooks its source names (:mod:`pimem_core.failed_sources`): when one of them
decides where memory goes (:data:`~pimem_core.hookspecs.ROUTING_HOOKS`), or its source cannot be
read, writes and forgets refuse until it is fixed or blocked. An exception a plugin's hook
implementation raises that is not a :class:`~pimem_core.errors.PimemError` (a bug) gets a note
naming the plugin and the hook, shown with its traceback (:mod:`pimem_core.culprits`).

``PIMEM_USE`` (and ``PIMEM_DISTILLER``, for distillers) choose by name which plugin answers a
single-answer hook; otherwise the order of the plugins' names and markers decides (ADR 0019,
:mod:`pimem_core.choosing`). A plugin that names hooks in ``ONLY_WHEN_CHOSEN`` answers them only
when chosen so: installing it changes nothing until a user asks for it. A distribution may group
its plugins under one name that both settings take (:mod:`pimem_core.groups`).
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pluggy

from pimem_core.choosing import ChoosingByName, ContestedHook
from pimem_core.culprits import (
    culprit,
    name_the_hook_plugin,
    name_the_service_plugin,
    nothing_before,
)
from pimem_core.errors import PluginLoadError, SettingsError
from pimem_core.failed_sources import hooks_named_in, source_files
from pimem_core.groups import ENTRY_POINT_GROUP, find_groups
from pimem_core.hook_checks import check_hook_names, marked_hooks, only_when_chosen
from pimem_core.hookspecs import PROJECT, ROUTING_HOOKS, PimemSpecs
from pimem_core.listing import (
    PluginGroup,
    PluginRecord,
    SettingValue,
    Status,
    shown_setting,
)
from pimem_core.settings import Settings, SettingSpec

__all__ = [
    "ACTIVATION_SETTING",
    "ENTRY_POINT_GROUP",
    # Named here for the front doors and tests that read them with the manager.
    "ContestedHook",
    "PimemPluginManager",
    "PluginRecord",
    "SettingValue",
    "build_plugin_manager",
    "culprit",
    "shown_setting",
]

log = logging.getLogger(__name__)

#: The attribute through which a plugin with ``is_active`` names the setting that decides it.
ACTIVATION_SETTING = "ACTIVATION_SETTING"


class PimemPluginManager(ChoosingByName):
    """A pluggy manager with pimem's specs, load bookkeeping and validation; its choices by
    name are :class:`~pimem_core.choosing.ChoosingByName`'s."""

    def __init__(self, settings: Settings | None = None) -> None:
        super().__init__(PROJECT)
        self.add_hookspecs(PimemSpecs)
        self._records: dict[str, PluginRecord] = {}
        self.add_hookcall_monitoring(nothing_before, name_the_hook_plugin)
        #: The settings with every loaded plugin's declared settings validated in.
        self.settings = settings if settings is not None else Settings()
        self._specs: dict[str, SettingSpec[Any]] = {}
        self._implements: dict[str, frozenset[str]] = {}
        self._when_chosen: dict[str, frozenset[str]] = {}
        #: The source files of the plugins that failed to load, which a fix edits.
        self._failed_sources: dict[str, tuple[Path, ...]] = {}
        self._groups: dict[str, PluginGroup] = {}
        #: Each grouped plugin's group, by the plugin's name.
        self._group_of: dict[str, str] = {}

    @property
    def records(self) -> tuple[PluginRecord, ...]:
        return tuple(self._records.values())

    @property
    def groups(self) -> tuple[PluginGroup, ...]:
        """The plugin groups the loaded distributions declare (``pimem plugins`` shows them)."""
        return tuple(self._groups.values())

    @property
    def failed(self) -> tuple[PluginRecord, ...]:
        """The plugins that failed to load, the ones deciding where memory goes first."""
        failed = [record for record in self._records.values() if record.status == "failed"]
        return tuple(sorted(failed, key=lambda record: not record.routes_memory))

    @property
    def failed_sources(self) -> tuple[Path, ...]:
        """The source files of the plugins that failed to load: a long-lived process watches
        them, so that a fix counts from the next request."""
        return tuple(path for paths in self._failed_sources.values() for path in paths)

    @property
    def declared_settings(self) -> tuple[SettingSpec[Any], ...]:
        """Every setting the loaded plugins declare, active or not."""
        return tuple(self._specs.values())

    def add_groups(self, groups: Iterable[PluginGroup]) -> None:
        """Know *groups* before their plugins load: each plugin of a group
        ``PIMEM_DISABLE_PLUGINS`` names is blocked (never imported) with it."""
        for group in groups:
            self._groups[group.name] = group
            if group.error is not None:
                continue
            for name in group.plugins:
                self._group_of.setdefault(name, group.name)
                if group.name in self.settings.disabled_plugins:
                    self.set_blocked(name)

    def name_the_plugin(self, error: BaseException, where: str) -> None:
        """Note on *error*, raised by a service a plugin opened (a store, an index...), which
        plugin's code raised it: the outermost traceback frame in a registered plugin's module.
        A ``PimemError`` is deliberate and left as written; an existing note is kept."""
        name_the_service_plugin(error, where, self.list_name_plugin())

    def add_plugin(
        self,
        plugin: object,
        name: str,
        *,
        distribution: str | None = None,
        version: str | None = None,
    ) -> None:
        """Validate and register *plugin*; raise :class:`PluginLoadError` if it does not fit."""
        if self.is_blocked(name):
            self._record(name, distribution, version, "blocked")
            return
        check_hook_names(plugin, name)
        when_chosen = only_when_chosen(plugin, name)
        specs = self._declare_settings(plugin, name)
        try:
            self.register(plugin, name)
        except (pluggy.PluginValidationError, ValueError) as error:
            if self.has_plugin(name):  # pluggy < 1.7 leaves a half-registered plugin behind
                self.unregister(name=name)
            raise PluginLoadError(
                f"plugin {name!r} does not fit the pimem hooks: {error}"
            ) from error
        hooks = tuple(sorted(caller.name for caller in self.get_hookcallers(plugin) or ()))
        self._implements[name] = frozenset(hooks)
        self._when_chosen[name] = when_chosen
        self._record(
            name,
            distribution,
            version,
            "active",
            hooks=hooks,
            specs=specs,
            only_when_chosen=tuple(sorted(when_chosen)),
        )

    def _declare_settings(self, plugin: object, name: str) -> tuple[SettingSpec[Any], ...]:
        """Validate the settings *plugin* declares into :attr:`settings` (idempotent)."""
        declare = getattr(plugin, "pimem_declare_settings", None)
        if not callable(declare):
            return ()
        specs = tuple(declare() or ())
        for spec in specs:
            if not isinstance(spec, SettingSpec):
                raise PluginLoadError(
                    f"plugin {name!r}: pimem_declare_settings gave a {type(spec).__name__}, "
                    "not a SettingSpec (`from pimem_core.plugin import SettingSpec`)"
                )
        self.settings = self.settings.declare(specs)
        self._specs.update((spec.env, spec) for spec in specs)
        return specs

    def load_entry_point(
        self, entry_point: importlib.metadata.EntryPoint, settings: Settings
    ) -> None:
        """Import, activate and register one plugin; record what happened."""
        name = entry_point.name
        dist = entry_point.dist
        distribution = dist.name if dist is not None else None
        version = dist.version if dist is not None else None
        if self.is_blocked(name):
            self._record(name, distribution, version, "blocked")
            return
        if name in self._records:
            # Two distributions claim one name: the first keeps it, so blocking stays unambiguous.
            sources = source_files(entry_point.value)
            hooks = None if sources is None else hooks_named_in(sources)
            self._record(
                f"{name} ({distribution})",
                distribution,
                version,
                "failed",
                hooks=tuple(sorted(hooks or ())),
                error=f"the plugin name {name!r} is already taken; rename one entry point",
                routes_memory=hooks is None or bool(hooks & set(ROUTING_HOOKS)),
            )
            return
        try:
            plugin = entry_point.load()
        except Exception as error:  # noqa: BLE001 - whatever a plugin raises while importing
            sources = source_files(entry_point.value)
            self._failed_sources[name] = sources or ()
            hooks = None if sources is None else hooks_named_in(sources)
            self._skip(name, distribution, version, settings, error, entry_point.value, hooks)
            return
        self.load_plugin(plugin, name, settings, distribution=distribution, version=version)

    def load_plugin(
        self,
        plugin: object,
        name: str,
        settings: Settings,
        *,
        distribution: str | None = None,
        version: str | None = None,
    ) -> None:
        """Activate and register one loaded plugin (a module, a class or an object); record what
        happened. A plugin that fails is skipped with a warning, unless settings are strict."""
        if self.is_blocked(name):
            self._record(name, distribution, version, "blocked")
            return
        try:
            specs = self._declare_settings(plugin, name)
            settings = settings.declare(specs)
            is_active = getattr(plugin, "is_active", None)
            active = bool(is_active(settings)) if callable(is_active) else True
            instance = plugin() if active and isinstance(plugin, type) else plugin
        except SettingsError:
            raise  # a bad value of a declared setting stops pimem, as core settings do (ADR 0004)
        except Exception as error:  # noqa: BLE001 - whatever a plugin raises while starting
            self._skip(name, distribution, version, settings, error, hooks=marked_hooks(plugin))
            return
        if not active:
            self._implements[name] = marked_hooks(plugin)
            setting = getattr(plugin, ACTIVATION_SETTING, None)
            self._record(
                name,
                distribution,
                version,
                "inactive-by-setting",
                setting=setting if isinstance(setting, str) else None,
                specs=specs,
            )
            return
        try:
            self.add_plugin(instance, name, distribution=distribution, version=version)
        except PluginLoadError as error:
            self._skip(name, distribution, version, settings, error, hooks=marked_hooks(plugin))

    def _skip(
        self,
        name: str,
        distribution: str | None,
        version: str | None,
        settings: Settings,
        error: Exception,
        value: str | None = None,
        hooks: frozenset[str] | None = None,
    ) -> None:
        """Record *name* as failed with the hooks it implements (``None``: unknown, its source
        unreadable); the front doors report it (:attr:`failed`)."""
        if isinstance(error, PluginLoadError):
            message, detail = str(error), str(error)
        else:
            where = f" ({value})" if value else ""
            message, detail = f"plugin {name!r}{where} failed to load: {error!r}", repr(error)
        if settings.strict_plugins:
            if isinstance(error, PluginLoadError):
                raise error
            raise PluginLoadError(message) from error
        # Not a warning here: every front door says it, once, where its user looks.
        log.info("%s; skipped (set PIMEM_STRICT_PLUGINS=1 to make this an error)", message)
        known = frozenset() if hooks is None else hooks
        self._record(
            name,
            distribution,
            version,
            "failed",
            hooks=tuple(sorted(known)),
            error=detail,
            routes_memory=hooks is None or bool(known & set(ROUTING_HOOKS)),
        )

    def _record(
        self,
        name: str,
        distribution: str | None,
        version: str | None,
        status: Status,
        *,
        hooks: tuple[str, ...] = (),
        error: str | None = None,
        setting: str | None = None,
        specs: tuple[SettingSpec[Any], ...] = (),
        routes_memory: bool = False,
        only_when_chosen: tuple[str, ...] = (),
    ) -> None:
        group = self._group_of.get(name)
        disabled = self.settings.disabled_plugins
        if status == "blocked" and name not in disabled and group in disabled:
            setting = f"PIMEM_DISABLE_PLUGINS={group}"
        self._records[name] = PluginRecord(
            name=name,
            distribution=distribution,
            version=version,
            status=status,
            hooks=hooks,
            error=error,
            setting=setting,
            settings=tuple(SettingValue.of(spec, self.settings) for spec in specs),
            routes_memory=routes_memory,
            only_when_chosen=only_when_chosen,
            group=group,
        )


def build_plugin_manager(
    settings: Settings,
    *,
    entry_points: Iterable[importlib.metadata.EntryPoint] | None = None,
) -> PimemPluginManager:
    """Load every plugin of the ``pimem`` entry-point group into a fresh manager, with the
    plugin groups their distributions declare.

    :param entry_points: the entry points to load instead of the installed ones (for tests and
        hosts that choose their plugins themselves).
    """
    pm = PimemPluginManager(settings)
    for name in sorted(settings.disabled_plugins):
        pm.set_blocked(name)
    found = sorted(
        importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
        if entry_points is None
        else entry_points,
        key=lambda ep: ep.name,
    )
    pm.add_groups(find_groups(found))
    for entry_point in found:
        pm.load_entry_point(entry_point, pm.settings)
    for record in pm.records:
        log.debug("plugin %s: %s", record.name, record.status)
    return pm
