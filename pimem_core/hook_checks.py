"""What a plugin must be to load, read from the plugin object before it is registered: hook
implementations that name hooks and carry the marker, and an ``ONLY_WHEN_CHOSEN`` that names
single-answer hooks. A plugin that breaks a rule fails at load, with the fix in the message."""

from __future__ import annotations

from pimem_core.errors import PluginLoadError
from pimem_core.hookspecs import PROJECT, SINGLE_ANSWER_HOOKS, PimemSpecs

HOOK_PREFIX = "pimem_"
#: The attribute through which a plugin names the single-answer hooks it answers only when
#: ``PIMEM_USE`` (or ``PIMEM_DISTILLER``) chooses it.
ONLY_WHEN_CHOSEN = "ONLY_WHEN_CHOSEN"


def marked_hooks(plugin: object) -> frozenset[str]:
    """The hooks *plugin* (a module, a class or an object) marks implementations of."""
    return frozenset(
        attr
        for attr in dir(plugin)
        if attr.startswith(HOOK_PREFIX) and hasattr(getattr(plugin, attr, None), f"{PROJECT}_impl")
    )


def only_when_chosen(plugin: object, name: str) -> frozenset[str]:
    """The single-answer hooks *plugin* answers only when chosen (``ONLY_WHEN_CHOSEN``: hook
    names, with or without ``pimem_``); a name that is not one is refused at load."""
    given = getattr(plugin, ONLY_WHEN_CHOSEN, ())
    if isinstance(given, str) or not all(isinstance(hook, str) for hook in given):
        raise PluginLoadError(
            f"plugin {name!r}: {ONLY_WHEN_CHOSEN} must be a tuple of hook names, got {given!r}"
        )
    hooks = frozenset(HOOK_PREFIX + hook.removeprefix(HOOK_PREFIX) for hook in given)
    unknown = sorted(hooks - set(SINGLE_ANSWER_HOOKS))
    if unknown:
        raise PluginLoadError(
            f"plugin {name!r}: {ONLY_WHEN_CHOSEN} names {unknown[0]}, which is not a single-answer "
            "hook (only those can be chosen by name); fix the plugin, or block it with "
            f"PIMEM_DISABLE_PLUGINS={name}"
        )
    return hooks


def check_hook_names(plugin: object, name: str) -> None:
    """Refuse hook implementations pluggy would otherwise ignore or defer: typos fail at load.

    An unmarked function whose name starts with ``pimem_`` but names no hook is a helper, and
    left alone; an unmarked one named like a hook would never be called, and is refused.
    """
    specs = {attr for attr in dir(PimemSpecs) if attr.startswith(HOOK_PREFIX)}
    for attr in dir(plugin):
        function = getattr(plugin, attr, None)
        marked = hasattr(function, f"{PROJECT}_impl")
        if not callable(function) or not (marked or attr.startswith(HOOK_PREFIX)):
            continue
        if not marked and attr not in specs:
            continue
        if attr not in specs:
            raise PluginLoadError(
                f"plugin {name!r} defines {attr}, which is not a pimem hook (misspelled?); "
                f"fix the plugin or block it with PIMEM_DISABLE_PLUGINS={name}"
            )
        if not marked:
            raise PluginLoadError(
                f"plugin {name!r} defines {attr} without @hookimpl, so it would never be called; "
                "mark it (`from pimem_core.plugin import hookimpl`) or block the plugin with "
                f"PIMEM_DISABLE_PLUGINS={name}"
            )
