"""What ``pimem plugins`` shows: one record per plugin (its status, hooks, settings and the
group it belongs to), each declared setting with its value, and the plugin groups.

The plugin manager (:mod:`pimem_core.manager`) writes these as it loads plugins; the front doors
read them.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from pimem_core.settings import Settings, SettingSpec

Status = Literal["active", "inactive-by-setting", "blocked", "failed"]


@attrs.frozen(kw_only=True)
class SettingValue:
    """One declared plugin setting and its current value, secrets masked."""

    name: str
    env: str
    value: str | int | float | bool | list[str] | None
    default: str | int | float | bool | list[str] | None
    help: str

    @classmethod
    def of(cls, spec: SettingSpec[Any], settings: Settings) -> SettingValue:
        return cls(
            name=spec.name,
            env=spec.env,
            value=spec.show(spec.read(settings)),
            default=spec.show(spec.default),
            help=spec.help,
        )

    def to_json(self) -> dict[str, object]:
        return attrs.asdict(self)


@attrs.frozen(kw_only=True)
class PluginRecord:
    """What ``pimem plugins`` shows about one plugin."""

    name: str
    distribution: str | None
    version: str | None
    status: Status
    hooks: tuple[str, ...] = ()
    error: str | None = None
    #: For an inactive plugin, the setting (environment variable) that deactivated it; for a
    #: plugin blocked by its group's name, ``PIMEM_DISABLE_PLUGINS=<group>``.
    setting: str | None = None
    #: The settings the plugin declares (``pimem_declare_settings``), with their values.
    settings: tuple[SettingValue, ...] = ()
    #: A failed plugin that implements a hook deciding where memory goes, or might (its
    #: source could not be read): writes and forgets refuse while it is failed.
    routes_memory: bool = False
    #: The single-answer hooks it answers only when chosen by name (``ONLY_WHEN_CHOSEN``).
    only_when_chosen: tuple[str, ...] = ()
    #: The plugin group it belongs to (:class:`PluginGroup`), if any.
    group: str | None = None

    @property
    def status_text(self) -> str:
        """The status as ``pimem plugins`` shows it: ``inactive-by-setting (NAME)`` names the
        setting, ``blocked (PIMEM_DISABLE_PLUGINS=GROUP)`` the group that blocked it."""
        if self.status in ("inactive-by-setting", "blocked") and self.setting:
            return f"{self.status} ({self.setting})"
        return self.status

    def to_json(self) -> dict[str, object]:
        return attrs.asdict(self, recurse=False) | {
            "hooks": list(self.hooks),
            "only_when_chosen": list(self.only_when_chosen),
            "settings": [value.to_json() for value in self.settings],
        }

    @property
    def failure(self) -> str:
        """One line on a failed plugin: what failed, what it costs and how to go on."""
        cost = (
            ", and it decides where memory goes: writes and forgets are refused"
            if self.routes_memory
            else ""
        )
        return (
            f"plugin {self.name!r} failed to load ({self.error}){cost}; fix it, or set "
            f"PIMEM_DISABLE_PLUGINS={self.name} to go on without it"
        )


@attrs.frozen(kw_only=True)
class PluginGroup:
    """Plugins of one distribution under one name (``[project.entry-points."pimem.groups"]``):
    every plugin of the distribution whose entry point lies in the package the group names.
    ``PIMEM_DISABLE_PLUGINS`` blocks them all by that name, and ``PIMEM_USE=<hook>:<group>``
    chooses the group's plugin that implements the hook."""

    name: str
    distribution: str | None
    #: The package the group names: its plugins' entry points lie in it.
    package: str
    #: The group's plugins, by name.
    plugins: tuple[str, ...]
    #: Why the group is not used (its name is taken, it names no package...), or ``None``.
    error: str | None = None

    @property
    def text(self) -> str:
        """One line for ``pimem plugins``."""
        if self.error is not None:
            return f"{self.name}: not used: {self.error}"
        return f"{self.name} ({self.package}): {', '.join(self.plugins)}"

    def to_json(self) -> dict[str, object]:
        return attrs.asdict(self, recurse=False) | {"plugins": list(self.plugins)}


def shown_setting(value: object) -> str:
    """A setting's value as ``pimem status`` prints it (``on``/``off`` for switches)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None:
        return "(unset)"
    if isinstance(value, list):
        return ",".join(str(part) for part in value) or "(none)"
    return str(value)
