"""Choosing a plugin by name (``PIMEM_USE``, ``PIMEM_DISTILLER``; ADR 0019): which plugins a
single-answer hook asks, the check of every choice once the plugins have loaded, a plugin group
chosen as the group's plugin that implements the hook, and the warning when alternatives
contest a hook nobody chose for.

:class:`ChoosingByName` is the plugin manager's part that does it
(:class:`pimem_core.manager.PimemPluginManager`).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import pluggy

from pimem_core.culprits import module_of
from pimem_core.errors import SettingsError
from pimem_core.hook_checks import HOOK_PREFIX
from pimem_core.hookspecs import HOOK_NAMES, SINGLE_ANSWER_HOOKS
from pimem_core.listing import PluginGroup, PluginRecord
from pimem_core.settings import PluginChoice, Settings

#: The package of pimem's own (bundled) plugins: the defaults a choice falls back to.
BUNDLED_PACKAGE = "pimem_plugins"


@attrs.frozen(kw_only=True)
class ContestedHook:
    """A single-answer hook that two or more alternative plugins (not pimem's bundled ones)
    implement, with no choice made: the order of their names decides which answers."""

    hook: str
    #: The alternative plugins, in the order they are asked.
    plugins: tuple[str, ...]

    @property
    def text(self) -> str:
        short = self.hook.removeprefix(HOOK_PREFIX)
        return (
            f"{self.hook} is implemented by {len(self.plugins)} alternative plugins "
            f"({', '.join(self.plugins)}): {self.plugins[0]} is asked first and answers unless "
            f"it passes; choose one with PIMEM_USE={short}:<name>"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "hook": self.hook,
            "plugins": list(self.plugins),
            "asked_first": self.plugins[0],
            "text": self.text,
        }


class ChoosingByName(pluggy.PluginManager):
    """The plugin manager's choices by name: what the manager keeps as it loads plugins is
    declared here and kept by :class:`~pimem_core.manager.PimemPluginManager`."""

    settings: Settings
    _records: dict[str, PluginRecord]
    #: The hooks each plugin implements, inactive ones too (a choice of one is checked).
    _implements: dict[str, frozenset[str]]
    #: The single-answer hooks each plugin answers only when chosen by name.
    _when_chosen: dict[str, frozenset[str]]
    #: The plugin groups the loaded distributions declare, by name.
    _groups: dict[str, PluginGroup]

    def caller(self, hook_name: str) -> pluggy.HookCaller:
        """The hook *hook_name* as the facade calls it. With a choice by name, a subset of it
        (pluggy's ``subset_hook_caller``) that asks the chosen plugin and the hook's defaults
        only; otherwise the hook itself. Asked afresh on every call, so a plugin registered
        later, or a choice in another session's settings, counts."""
        hook: pluggy.HookCaller = getattr(self.hook, hook_name)
        methods = hook.get_hookimpls()
        narrowed = self._narrow(hook_name, methods)
        if len(narrowed) == len(methods):
            return hook
        kept = {id(impl.plugin) for impl in narrowed}
        others = [impl.plugin for impl in methods if id(impl.plugin) not in kept]
        return self.subset_hook_caller(hook_name, others)

    def _narrow(
        self, hook_name: str, methods: Sequence[pluggy.HookImpl]
    ) -> Sequence[pluggy.HookImpl]:
        """*methods* (pluggy's call order: the last is asked first) with the choice for
        *hook_name* applied: the chosen plugin is asked first, then the hook's default plugins
        (pimem's bundled ``trylast`` implementations, which a plugin that passes leaves the
        answer to); no other alternative is asked. Wrappers are kept."""
        chosen = self.settings.chosen(hook_name)
        if chosen is None:
            # A plugin that waits to be chosen for this hook is not asked.
            return [
                impl
                for impl in methods
                if hook_name not in self._when_chosen.get(impl.plugin_name, ())
            ]
        chosen = self._member_for(chosen, hook_name) or chosen
        answering = [impl for impl in methods if not (impl.hookwrapper or impl.wrapper)]
        defaults = [
            impl
            for impl in answering
            if impl.trylast and is_bundled(impl.plugin) and impl.plugin_name != chosen
        ]
        picked = [impl for impl in answering if impl.plugin_name == chosen]
        wrappers = [impl for impl in methods if impl.hookwrapper or impl.wrapper]
        return [*defaults, *picked, *wrappers]

    def _asked(self, hook_name: str) -> list[pluggy.HookImpl]:
        """The implementations of *hook_name* that may answer, in the order they are asked."""
        impls = self._narrow(hook_name, getattr(self.hook, hook_name).get_hookimpls())
        # pluggy calls implementations from the end of this list to its start.
        return [impl for impl in reversed(impls) if not (impl.hookwrapper or impl.wrapper)]

    def _implementers(self, hook_name: str) -> list[str]:
        """Every loaded plugin that implements *hook_name*, active or not, by name."""
        return sorted(name for name, hooks in self._implements.items() if hook_name in hooks)

    def _group_implementers(self, group: PluginGroup, hook_name: str) -> list[str]:
        """The plugins of *group* that implement *hook_name*: loaded (active or not), or failed
        with a source that names it."""
        found = []
        for name in group.plugins:
            record = self._records.get(name)
            hooks = self._implements.get(name, frozenset(record.hooks if record else ()))
            if hook_name in hooks:
                found.append(name)
        return found

    def _member_for(self, name: str, hook_name: str) -> str | None:
        """The plugin of the group *name* that implements *hook_name*, when there is one only;
        ``None`` when *name* is no usable group (a plugin's name, say) or names none or many."""
        group = self._groups.get(name)
        if group is None or group.error is not None or name in self._records:
            return None
        members = self._group_implementers(group, hook_name)
        return members[0] if len(members) == 1 else None

    def resolve_choices(self, settings: Settings) -> Settings:
        """*settings* with each choice of a plugin group made the choice of the group's plugin
        that implements the hook; the setting as written is kept, for messages."""
        chosen = tuple(
            attrs.evolve(choice, plugin=member)
            if (member := self._member_for(choice.plugin, choice.hook)) is not None
            else choice
            for choice in settings.chosen_plugins
        )
        if chosen == settings.chosen_plugins:
            return settings
        return attrs.evolve(settings, chosen_plugins=chosen)

    def check_choices(self) -> None:
        """Raise :class:`SettingsError` unless every plugin chosen by name is installed, not
        blocked, and implements its hook (when it could be loaded): call it once every plugin
        is loaded. A chosen plugin that is inactive by its setting, or failed to load, is not
        asked: the hook's default answers, as when the chosen plugin passes. A plugin group
        chosen must have one plugin, exactly, that implements the hook."""
        for choice in self.settings.chosen_plugins:
            _check_single_answer(choice)
            self._check_group_choice(choice)
        self.settings = self.resolve_choices(self.settings)
        for choice in self.settings.chosen_plugins:
            record = self._records.get(choice.plugin)
            if record is None:
                raise SettingsError(
                    self._cannot_answer(choice, "no plugin of that name is installed")
                )
            if record.status == "blocked":
                raise SettingsError(
                    f"{choice.setting} chooses {choice.plugin!r}, but PIMEM_DISABLE_PLUGINS "
                    "blocks it; unblock it, or choose another plugin."
                )
            hooks = self._implements.get(choice.plugin)
            if hooks is not None and choice.hook not in hooks:
                raise SettingsError(
                    self._cannot_answer(choice, f"it does not implement {choice.hook}")
                )

    def _check_group_choice(self, choice: PluginChoice) -> None:
        group = self._groups.get(choice.plugin)
        if group is None or group.error is not None or choice.plugin in self._records:
            return
        short = choice.hook.removeprefix(HOOK_PREFIX)
        if choice.plugin in self.settings.disabled_plugins:
            raise SettingsError(
                f"{choice.setting} chooses the plugin group {group.name!r}, but "
                "PIMEM_DISABLE_PLUGINS blocks it; unblock it, or choose another plugin."
            )
        members = self._group_implementers(group, choice.hook)
        if not members:
            raise SettingsError(
                self._cannot_answer(
                    choice,
                    f"no plugin of the group {group.name!r} ({', '.join(group.plugins)}) "
                    f"implements {choice.hook}",
                )
            )
        if len(members) > 1:
            raise SettingsError(
                f"{choice.setting} names the plugin group {group.name!r}, in which "
                f"{', '.join(members)} all implement {short}: choose one of them by name "
                f"(PIMEM_USE={short}:{members[0]})."
            )

    def _cannot_answer(self, choice: PluginChoice, why: str) -> str:
        names = ", ".join(self._implementers(choice.hook)) or "none"
        if choice.variable == "PIMEM_DISTILLER":
            return (
                "PIMEM_DISTILLER must be auto, host, http, extractive or the name of an "
                f"installed distiller ({names}), got {choice.setting.partition('=')[2]!r}: {why}; "
                "unset it for auto."
            )
        short = choice.hook.removeprefix(HOOK_PREFIX)
        return (
            f"{choice.setting} names a plugin that cannot answer {short}: {why}; the plugins "
            f"implementing it are {names} (see `pimem plugins`): choose one of them, or unset "
            "PIMEM_USE to let the plugins' order decide."
        )

    def contested_hooks(self) -> tuple[ContestedHook, ...]:
        """The single-answer hooks that two or more alternative plugins implement, with no
        choice made (``pimem plugins`` warns about them)."""
        contested = []
        for hook_name in SINGLE_ANSWER_HOOKS:
            if self.settings.chosen(hook_name) is not None:
                continue
            plugins = tuple(
                impl.plugin_name for impl in self._asked(hook_name) if not is_bundled(impl.plugin)
            )
            if len(plugins) > 1:
                contested.append(ContestedHook(hook=hook_name, plugins=plugins))
        return tuple(contested)

    def implementing_plugins(self, hook_name: str) -> tuple[str, ...]:
        """The plugins that implement *hook_name*, in the order they are asked (a choice
        applied: only the chosen plugin and the defaults)."""
        return tuple(impl.plugin_name for impl in self._asked(hook_name))

    def answering_plugins(self) -> dict[str, str | None]:
        """For each single-answer hook, the plugin asked first (``None`` when none implements it)."""
        answers: dict[str, str | None] = {}
        for hook_name in SINGLE_ANSWER_HOOKS:
            asked = self._asked(hook_name)
            answers[hook_name] = asked[0].plugin_name if asked else None
        return answers


def is_bundled(plugin: object) -> bool:
    """Whether *plugin* is one of pimem's own, wherever it was registered from."""
    module = module_of(plugin)
    return module == BUNDLED_PACKAGE or module.startswith(f"{BUNDLED_PACKAGE}.")


def _check_single_answer(choice: PluginChoice) -> None:
    hook, written = choice.hook, choice.hook.removeprefix(HOOK_PREFIX)
    hooks = ", ".join(name.removeprefix(HOOK_PREFIX) for name in SINGLE_ANSWER_HOOKS)
    if hook not in HOOK_NAMES:
        raise SettingsError(
            f"PIMEM_USE names {written!r}, which is not a pimem hook; choose a plugin for one of "
            f"the single-answer hooks ({hooks}), or unset it."
        )
    if hook not in SINGLE_ANSWER_HOOKS:
        raise SettingsError(
            f"PIMEM_USE names {written!r}, a collecting hook: every plugin implementing it is "
            f"called, so there is none to choose; choose for a single-answer hook ({hooks}), "
            "or unset it."
        )
