"""Plugin groups: a distribution's plugins under one name, for the settings that take names.

A distribution declares a group in the entry-point group ``pimem.groups``: the entry point's
name is the group's, its value a package of the distribution::

    [project.entry-points."pimem.groups"]
    memsearch = "pimem_plugins.memsearch"

The group's plugins are the distribution's own ``pimem`` entry points whose object lies in that
package (the package itself, or a module or class inside it), found from the installed metadata
without importing anything. ``PIMEM_DISABLE_PLUGINS=memsearch`` blocks every one of them (none is
imported), and ``PIMEM_USE=open_index:memsearch`` chooses the group's plugin that implements
``pimem_open_index`` (:meth:`pimem_core.choosing.ChoosingByName.resolve_choices`).

A group's name shares the plugins' names: a group named like a plugin, or like an earlier
distribution's group, is listed with the reason and not used.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Iterable, Sequence

from pimem_core.listing import PluginGroup

#: The entry-point group every plugin joins.
ENTRY_POINT_GROUP = "pimem"
#: The entry-point group a distribution declares its plugin groups in.
GROUPS_ENTRY_POINT_GROUP = "pimem.groups"
_PACKAGE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def find_groups(entry_points: Sequence[importlib.metadata.EntryPoint]) -> tuple[PluginGroup, ...]:
    """The plugin groups the distributions of *entry_points* (the plugins to load) declare,
    each distribution read once, in the order of the distributions' names."""
    plugins = {entry_point.name for entry_point in entry_points}
    distributions: dict[str, importlib.metadata.Distribution] = {}
    for entry_point in entry_points:
        if entry_point.dist is not None:
            distributions.setdefault(entry_point.dist.name, entry_point.dist)
    groups: dict[str, PluginGroup] = {}
    for name in sorted(distributions):
        declared = distributions[name].entry_points
        own = declared.select(group=ENTRY_POINT_GROUP)
        for entry_point in sorted(
            declared.select(group=GROUPS_ENTRY_POINT_GROUP), key=lambda ep: ep.name
        ):
            group = _group(entry_point, name, own)
            taken = _taken(group.name, plugins, groups)
            if taken is not None:
                key = f"{group.name} ({name})"
                groups[key] = PluginGroup(
                    name=key,
                    distribution=name,
                    package=group.package,
                    plugins=group.plugins,
                    error=taken,
                )
            else:
                groups[group.name] = group
    return tuple(groups.values())


def _group(
    entry_point: importlib.metadata.EntryPoint,
    distribution: str,
    own: Iterable[importlib.metadata.EntryPoint],
) -> PluginGroup:
    package = entry_point.value.strip()
    if not _PACKAGE.fullmatch(package):
        return PluginGroup(
            name=entry_point.name,
            distribution=distribution,
            package=package,
            plugins=(),
            error=f"{package!r} is not a package name (write the package its plugins lie in)",
        )
    plugins = tuple(
        sorted(
            plugin.name
            for plugin in own
            if _lies_in(plugin.value.partition(":")[0].strip(), package)
        )
    )
    return PluginGroup(
        name=entry_point.name,
        distribution=distribution,
        package=package,
        plugins=plugins,
        error=None if plugins else f"no plugin of {distribution} lies in {package}",
    )


def _lies_in(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def _taken(name: str, plugins: set[str], groups: dict[str, PluginGroup]) -> str | None:
    """Why *name* cannot be a group's, or ``None``: names block and choose, so they are unique."""
    if name in plugins:
        return f"the name {name!r} is a plugin's; rename the group"
    if name in groups:
        return f"the name {name!r} is already a group of {groups[name].distribution}"
    return None
