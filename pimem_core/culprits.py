"""Naming the plugin behind an exception: a note on a plugin's bug (an exception that is not a
:class:`~pimem_core.errors.PimemError`) saying which plugin raised it, in which hook or service
method, and reading that note back for the front doors."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping, Sequence
from types import CodeType

import pluggy

from pimem_core.errors import PimemError

#: How the note naming the plugin that raised an exception starts.
NOTE_PREFIX = "pimem plugin "


def culprit(error: BaseException) -> tuple[str, str] | None:
    """The plugin and the hook (or service method) a note on *error* names, or ``None``."""
    for note in getattr(error, "__notes__", ()):
        if isinstance(note, str) and note.startswith(NOTE_PREFIX):
            plugin, _, where = note.removeprefix(NOTE_PREFIX).partition(" raised this in ")
            return plugin.strip("'\""), where
    return None


def module_of(plugin: object) -> str:
    return plugin.__name__ if inspect.ismodule(plugin) else type(plugin).__module__


def _named(error: BaseException) -> bool:
    """Whether *error* is deliberate (a ``PimemError``) or already names its plugin."""
    return isinstance(error, PimemError) or any(
        note.startswith(NOTE_PREFIX) for note in getattr(error, "__notes__", ())
    )


def name_the_service_plugin(
    error: BaseException, where: str, plugins: Iterable[tuple[str, object]]
) -> None:
    """Note on *error*, raised by a service a plugin opened (a store, an index...), which of
    *plugins* (name, plugin) raised it: the outermost traceback frame in a plugin's module."""
    if _named(error):
        return
    modules: dict[str, str] = {}
    for name, plugin in plugins:
        modules.setdefault(module_of(plugin), name)
    frame = error.__traceback__
    while frame is not None:
        plugin_name = modules.get(frame.tb_frame.f_globals.get("__name__", ""))
        if plugin_name is not None:
            error.add_note(f"{NOTE_PREFIX}{plugin_name!r} raised this in {where}")
            return
        frame = frame.tb_next


def nothing_before(
    hook_name: str, hook_impls: Sequence[pluggy.HookImpl], kwargs: Mapping[str, object]
) -> None:
    return None


def name_the_hook_plugin(
    outcome: pluggy.Result[object],
    hook_name: str,
    hook_impls: Sequence[pluggy.HookImpl],
    kwargs: Mapping[str, object],
) -> None:
    """Note on a plugin's bug which plugin raised it (the manager's hook-call monitoring).

    The raising implementation is the outermost frame of the traceback that runs one of the
    hook's implementations; a note added by a nested hook call is kept.
    """
    error = outcome.exception
    if error is None or _named(error):
        return
    owners = {_code(impl.function): impl.plugin_name for impl in hook_impls}
    frame = error.__traceback__
    while frame is not None:
        plugin = owners.get(frame.tb_frame.f_code)
        if plugin is not None:
            error.add_note(f"{NOTE_PREFIX}{plugin!r} raised this in {hook_name}")
            return
        frame = frame.tb_next


def _code(function: object) -> CodeType | None:
    code = getattr(inspect.unwrap(function), "__code__", None)  # type: ignore[arg-type]
    return code if isinstance(code, CodeType) else None
