"""``pimem status``'s parts that come from plugins: the index's sections, every plugin's
(``pimem_collect_status``), and the settings the plugins declare, secrets masked. A plugin
whose section raises costs its own section only, replaced by one line saying so."""

from __future__ import annotations

from typing import Any

from pimem_core.culprits import culprit
from pimem_core.errors import PimemError
from pimem_core.facade.opened import OpenedServices
from pimem_core.listing import SettingValue, shown_setting
from pimem_core.services import MemoryIndex
from pimem_core.settings import SettingSpec
from pimem_core.types import Scope, StatusSection


class Status(OpenedServices):
    """``pimem_collect_status``, the index's ``status()`` and ``pimem_declare_settings``."""

    __slots__ = ()

    def collect_status(self, scope: Scope) -> tuple[StatusSection, ...]:
        """The index's and every plugin's status sections, in rank order."""
        index: MemoryIndex | None = None
        unavailable: PimemError | None = None
        try:
            index = self.index(scope)
        except PimemError as error:  # status answers whatever is broken
            unavailable = error
        sections = self._status_of_plugins(scope, index)
        if index is not None:
            try:
                with self._service("MemoryIndex.status"):
                    sections += index.status()
            except PimemError as error:
                unavailable = error
            except Exception as error:  # noqa: BLE001 - a bug costs the index's section only
                self.pm.name_the_plugin(error, "MemoryIndex.status")
                plugin = culprit(error)
                sections.append(
                    failed_section("MemoryIndex.status", error, plugin[0] if plugin else None)
                )
        if unavailable is not None:
            sections.append(
                StatusSection(
                    name="backend",
                    rank=8,
                    lines=(f"backend: unavailable ({unavailable})",),
                    data={"available": False, "reason": str(unavailable)},
                )
            )
        return tuple(sorted(sections, key=lambda section: (section.rank, section.name)))

    def _status_of_plugins(self, scope: Scope, index: MemoryIndex | None) -> list[StatusSection]:
        """Every plugin's status sections; a plugin whose hook raises costs its own sections
        only (one line saying so), not the report."""
        kwargs: dict[str, object] = {"scope": scope, "settings": self.settings, "index": index}
        hook = self.pm.caller("pimem_collect_status")
        try:
            contributions = hook(**kwargs)
        except Exception:  # noqa: BLE001 - asked again one plugin at a time, below
            contributions = []
            for impl in reversed(hook.get_hookimpls()):
                if impl.hookwrapper or impl.wrapper:
                    continue
                try:
                    contributions.append(impl.function(*(kwargs[n] for n in impl.argnames)))
                except Exception as error:  # noqa: BLE001 - reported in its place
                    failed = failed_section("pimem_collect_status", error, impl.plugin_name)
                    contributions.append([failed])
        return [section for part in contributions if part for section in part]

    def declared_settings(self) -> tuple[SettingSpec[Any], ...]:
        """The settings the registered plugins declare, by plugin, each in its declared order."""
        contributions = self.pm.caller("pimem_declare_settings")()
        specs = [spec for part in contributions if part for spec in part]
        return tuple(sorted(specs, key=lambda spec: spec.plugin))

    def settings_status(self) -> StatusSection:
        """``pimem status``'s section of the active plugins' settings, secrets masked."""
        by_plugin: dict[str, list[SettingValue]] = {}
        for spec in self.declared_settings():
            by_plugin.setdefault(spec.plugin, []).append(SettingValue.of(spec, self.settings))
        lines = ["plugin settings:" if by_plugin else "plugin settings: none declared"]
        lines += [
            f"  {plugin}: "
            + ", ".join(f"{value.env}={shown_setting(value.value)}" for value in values)
            for plugin, values in by_plugin.items()
        ]
        return StatusSection(
            name="plugin_settings",
            rank=90,
            lines=tuple(lines),
            data={
                plugin: [value.to_json() for value in values]
                for plugin, values in by_plugin.items()
            },
        )


def failed_section(where: str, error: BaseException, plugin: str | None = None) -> StatusSection:
    """A status section in place of one that raised: who raised what, and the way out."""
    who = f"plugin {plugin!r} raised" if plugin else "raised"
    fix = f" (fix the plugin, or set PIMEM_DISABLE_PLUGINS={plugin})" if plugin else ""
    return StatusSection(
        name=f"failed {plugin or where}",
        rank=1,
        lines=(f"warning: {who} {error!r} in {where}; its section is left out{fix}",),
        data={"failed": where, "plugin": plugin, "error": repr(error)},
    )
