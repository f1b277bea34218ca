"""How the test kit builds a pimem from the plugins a test gives (part of
:mod:`pimem_core.testing`): each given plugin loaded as pimem loads it, an installed one once,
under its entry point's name, in its place among the installed ones."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping, Sequence
from types import ModuleType

from pimem_core.api import Pimem
from pimem_core.manager import ENTRY_POINT_GROUP, build_plugin_manager
from pimem_core.settings import Settings

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


def build_pimem(plugins: Sequence[PluginSpec], env: Mapping[str, str], *, installed: bool) -> Pimem:
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


def check_installed(plugins: Sequence[PluginSpec]) -> None:
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
