"""Building a plugin manager: one per host or session, never a global one.

Every plugin, bundled or third-party, comes from the entry-point group ``pimem``. A plugin may
declare ``is_active(settings) -> bool``; one that says no is recorded as inactive and never
registered (its ``ACTIVATION_SETTING``, the environment variable that decides, is shown with it).
A class is instantiated once per manager, so plugins that keep state (memos, the
session-heading ledger) keep it per session.

A plugin that does not fit the hook specifications is skipped, as one that fails to import is
(``PIMEM_STRICT_PLUGINS=1`` makes both errors), and recorded as failed with the hooks its source
names: when one of them decides where memory goes (:data:`~pimem_core.hookspecs.ROUTING_HOOKS`),
or its source cannot be read, writes and forgets refuse until it is fixed or blocked. An exception a plugin's hook
implementation raises that is not a :class:`~pimem_core.errors.PimemError` (a bug) gets a note
naming the plugin and the hook, shown with its traceback.

``PIMEM_USE`` (and ``PIMEM_DISTILLER``, for distillers) choose by name which plugin answers a
single-answer hook; otherwise the order of the plugins' names and markers decides (ADR 0019).
A plugin that names hooks in ``ONLY_WHEN_CHOSEN`` answers them only when chosen so: installing
it changes nothing until a user asks for it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import inspect
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import CodeType
from typing import Any, Literal

import attrs
import pluggy

from pimem_core.errors import PimemError, PluginLoadError, SettingsError
from pimem_core.hookspecs import (
    HOOK_NAMES,
    PROJECT,
    ROUTING_HOOKS,
    SINGLE_ANSWER_HOOKS,
    PimemSpecs,
)
from pimem_core.settings import PluginChoice, Settings, SettingSpec

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "pimem"
HOOK_PREFIX = "pimem_"
#: The attribute through which a plugin with ``is_active`` names the setting that decides it.
ACTIVATION_SETTING = "ACTIVATION_SETTING"
#: The attribute through which a plugin names the single-answer hooks it answers only when
#: ``PIMEM_USE`` (or ``PIMEM_DISTILLER``) chooses it.
ONLY_WHEN_CHOSEN = "ONLY_WHEN_CHOSEN"
#: How the note naming the plugin that raised an exception starts.
NOTE_PREFIX = "pimem plugin "
#: The package of pimem's own (bundled) plugins: the defaults a choice falls back to.
BUNDLED_PACKAGE = "pimem_plugins"
#: How many source files of a plugin that failed to import are read for the hooks they name.
_SOURCE_FILES_READ = 500
_HOOK_WORD = re.compile(r"\bpimem_[a-z_]+\b")

Status = Literal["active", "inactive-by-setting", "blocked", "failed"]


@attrs.frozen(kw_only=True)
class PluginRecord:
    """What ``pimem plugins`` shows about one plugin."""

    name: str
    distribution: str | None
    version: str | None
    status: Status
    hooks: tuple[str, ...] = ()
    error: str | None = None
    #: For an inactive plugin, the setting (environment variable) that deactivated it.
    setting: str | None = None
    #: The settings the plugin declares (``pimem_declare_settings``), with their values.
    settings: tuple[SettingValue, ...] = ()
    #: A failed plugin that implements a hook deciding where memory goes, or might (its
    #: source could not be read): writes and forgets refuse while it is failed.
    routes_memory: bool = False
    #: The single-answer hooks it answers only when chosen by name (``ONLY_WHEN_CHOSEN``).
    only_when_chosen: tuple[str, ...] = ()

    @property
    def status_text(self) -> str:
        """The status as ``pimem plugins`` shows it: ``inactive-by-setting (NAME)`` names the
        setting."""
        if self.status == "inactive-by-setting" and self.setting:
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


def shown_setting(value: object) -> str:
    """A setting's value as ``pimem status`` prints it (``on``/``off`` for switches)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None:
        return "(unset)"
    if isinstance(value, list):
        return ",".join(str(part) for part in value) or "(none)"
    return str(value)


class PimemPluginManager(pluggy.PluginManager):
    """A pluggy manager with pimem's specs, load bookkeeping and validation."""

    def __init__(self, settings: Settings | None = None) -> None:
        super().__init__(PROJECT)
        self.add_hookspecs(PimemSpecs)
        self._records: dict[str, PluginRecord] = {}
        self.add_hookcall_monitoring(_nothing_before, _name_the_plugin)
        #: The settings with every loaded plugin's declared settings validated in.
        self.settings = settings if settings is not None else Settings()
        self._specs: dict[str, SettingSpec[Any]] = {}
        #: The hooks each plugin implements, inactive ones too (a choice of one is checked).
        self._implements: dict[str, frozenset[str]] = {}
        #: The single-answer hooks each plugin answers only when chosen by name.
        self._when_chosen: dict[str, frozenset[str]] = {}
        #: The source files of the plugins that failed to load, which a fix edits.
        self._failed_sources: dict[str, tuple[Path, ...]] = {}

    @property
    def records(self) -> tuple[PluginRecord, ...]:
        return tuple(self._records.values())

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
        _check_hook_names(plugin, name)
        when_chosen = _only_when_chosen(plugin, name)
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
            sources = _source_files(entry_point.value)
            hooks = None if sources is None else _hooks_named_in(sources)
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
            sources = _source_files(entry_point.value)
            self._failed_sources[name] = sources or ()
            hooks = None if sources is None else _hooks_named_in(sources)
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
            self._skip(name, distribution, version, settings, error, hooks=_marked_hooks(plugin))
            return
        if not active:
            self._implements[name] = _marked_hooks(plugin)
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
            self._skip(name, distribution, version, settings, error, hooks=_marked_hooks(plugin))

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

    # -- choosing a plugin by name (PIMEM_USE, PIMEM_DISTILLER; ADR 0019) ---------------------

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
        answering = [impl for impl in methods if not (impl.hookwrapper or impl.wrapper)]
        defaults = [
            impl
            for impl in answering
            if impl.trylast and _is_bundled(impl.plugin) and impl.plugin_name != chosen
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

    def check_choices(self) -> None:
        """Raise :class:`SettingsError` unless every plugin chosen by name is installed, not
        blocked, and implements its hook (when it could be loaded): call it once every plugin
        is loaded. A chosen plugin that is inactive by its setting, or failed to load, is not
        asked: the hook's default answers, as when the chosen plugin passes."""
        for choice in self.settings.chosen_plugins:
            _check_single_answer(choice)
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
                impl.plugin_name for impl in self._asked(hook_name) if not _is_bundled(impl.plugin)
            )
            if len(plugins) > 1:
                contested.append(ContestedHook(hook=hook_name, plugins=plugins))
        return tuple(contested)

    def name_the_plugin(self, error: BaseException, where: str) -> None:
        """Note on *error*, raised by a service a plugin opened (a store, an index...), which
        plugin's code raised it: the outermost traceback frame in a registered plugin's module.
        A ``PimemError`` is deliberate and left as written; an existing note is kept."""
        if isinstance(error, PimemError) or any(
            note.startswith(NOTE_PREFIX) for note in getattr(error, "__notes__", ())
        ):
            return
        modules: dict[str, str] = {}
        for name, plugin in self.list_name_plugin():
            modules.setdefault(_module_of(plugin), name)
        frame = error.__traceback__
        while frame is not None:
            plugin_name = modules.get(frame.tb_frame.f_globals.get("__name__", ""))
            if plugin_name is not None:
                error.add_note(f"{NOTE_PREFIX}{plugin_name!r} raised this in {where}")
                return
            frame = frame.tb_next

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
        )


def culprit(error: BaseException) -> tuple[str, str] | None:
    """The plugin and the hook (or service method) a note on *error* names, or ``None``."""
    for note in getattr(error, "__notes__", ()):
        if isinstance(note, str) and note.startswith(NOTE_PREFIX):
            plugin, _, where = note.removeprefix(NOTE_PREFIX).partition(" raised this in ")
            return plugin.strip("'\""), where
    return None


def _nothing_before(
    hook_name: str, hook_impls: Sequence[pluggy.HookImpl], kwargs: Mapping[str, object]
) -> None:
    return None


def _module_of(plugin: object) -> str:
    return plugin.__name__ if inspect.ismodule(plugin) else type(plugin).__module__


def _is_bundled(plugin: object) -> bool:
    """Whether *plugin* is one of pimem's own, wherever it was registered from."""
    module = _module_of(plugin)
    return module == BUNDLED_PACKAGE or module.startswith(f"{BUNDLED_PACKAGE}.")


def _marked_hooks(plugin: object) -> frozenset[str]:
    """The hooks *plugin* (a module, a class or an object) marks implementations of."""
    return frozenset(
        attr
        for attr in dir(plugin)
        if attr.startswith(HOOK_PREFIX) and hasattr(getattr(plugin, attr, None), f"{PROJECT}_impl")
    )


def _source_files(value: str) -> tuple[Path, ...] | None:
    """The source files of the package an entry point's module belongs to, found without
    importing anything (a plugin that failed to import is not run again); ``None`` when they
    cannot be found."""
    top = value.partition(":")[0].strip().partition(".")[0]
    try:
        spec = importlib.util.find_spec(top)  # a top-level name: nothing is executed
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        files = sorted(
            path
            for location in spec.submodule_search_locations
            for path in Path(location).rglob("*.py")
            if "__pycache__" not in path.parts
        )
        return tuple(files[:_SOURCE_FILES_READ]) or None
    if spec.origin and spec.origin.endswith(".py"):
        return (Path(spec.origin),)
    return None


def _hooks_named_in(sources: tuple[Path, ...]) -> frozenset[str] | None:
    """The pimem hooks *sources* name (define, import or mention); ``None`` when one cannot
    be read, since what it holds is not known."""
    named: set[str] = set()
    for path in sources:
        try:
            named.update(_HOOK_WORD.findall(path.read_text(encoding="utf-8", errors="replace")))
        except OSError:
            return None
    return frozenset(named & set(HOOK_NAMES))


def _code(function: object) -> CodeType | None:
    code = getattr(inspect.unwrap(function), "__code__", None)  # type: ignore[arg-type]
    return code if isinstance(code, CodeType) else None


def _name_the_plugin(
    outcome: pluggy.Result[object],
    hook_name: str,
    hook_impls: Sequence[pluggy.HookImpl],
    kwargs: Mapping[str, object],
) -> None:
    """Note on a plugin's bug (an exception that is not a ``PimemError``) which plugin raised it.

    The raising implementation is the outermost frame of the traceback that runs one of the
    hook's implementations; a note added by a nested hook call is kept.
    """
    error = outcome.exception
    if error is None or isinstance(error, PimemError):
        return
    if any(note.startswith(NOTE_PREFIX) for note in getattr(error, "__notes__", ())):
        return
    owners = {_code(impl.function): impl.plugin_name for impl in hook_impls}
    frame = error.__traceback__
    while frame is not None:
        plugin = owners.get(frame.tb_frame.f_code)
        if plugin is not None:
            error.add_note(f"{NOTE_PREFIX}{plugin!r} raised this in {hook_name}")
            return
        frame = frame.tb_next


def _only_when_chosen(plugin: object, name: str) -> frozenset[str]:
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


def _check_hook_names(plugin: object, name: str) -> None:
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


def build_plugin_manager(
    settings: Settings,
    *,
    entry_points: Iterable[importlib.metadata.EntryPoint] | None = None,
) -> PimemPluginManager:
    """Load every plugin of the ``pimem`` entry-point group into a fresh manager.

    :param entry_points: the entry points to load instead of the installed ones (for tests and
        hosts that choose their plugins themselves).
    """
    pm = PimemPluginManager(settings)
    for name in sorted(settings.disabled_plugins):
        pm.set_blocked(name)
    found = (
        importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
        if entry_points is None
        else entry_points
    )
    for entry_point in sorted(found, key=lambda ep: ep.name):
        pm.load_entry_point(entry_point, pm.settings)
    for record in pm.records:
        log.debug("plugin %s: %s", record.name, record.status)
    return pm


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
