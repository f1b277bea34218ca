"""Settings: every environment variable pimem reads, parsed and validated once, at the edge.

The variable names are the original pi extension's (``PI_MEMSEARCH_*``) and memsearch's own
(``MEMSEARCH_DIR``), so existing setups and store commands keep working; pimem's own knobs are
``PIMEM_*``. Nothing else in pimem reads its behaviour from ``os.environ``; where pimem
keeps its own files (``PIMEM_HOME``) is read by :mod:`pimem_core.paths`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Generic, Required, TypedDict, TypeVar, Unpack, cast

import attrs

from pimem_core.errors import SettingsError

DEFAULT_SEARCH_TIMEOUT_MS = 30_000
DEFAULT_COMPACT_TIMEOUT_MS = 300_000
DEFAULT_DISTILL_TIMEOUT_MS = 30_000
DEFAULT_DISTILL_BUDGET = 500
#: ``PIMEM_DISTILLER``'s short names for the bundled distillers (any distiller's plugin name works).
DISTILLER_NAMES = {
    "host": "distill-host",
    "http": "distill-http",
    "extractive": "distill-extractive",
}
DISTILL_HOOK = "pimem_distill_exchange"
#: How hook names are written in ``PIMEM_USE`` and messages: without it.
_HOOK_PREFIX = "pimem_"
DEFAULT_MAINTENANCE_INTERVAL_HOURS = 24
DEFAULT_SERVICE_IDLE_S = 600
#: The maintenance tasks pimem bundles (plugins may add others under their own names).
BUNDLED_MAINTENANCE_TASKS = ("project_review", "user_profile", "memory_to_skill")
_TASK_NAME = re.compile(r"[a-z][a-z0-9_]*")
T = TypeVar("T")


@attrs.frozen(kw_only=True)
class PluginChoice:
    """One plugin chosen by name to answer one single-answer hook (``PIMEM_USE``,
    ``PIMEM_DISTILLER``). Its name is checked against the loaded plugins once they have all
    loaded (:meth:`pimem_core.manager.PimemPluginManager.check_choices`)."""

    #: The hook's full name, ``pimem_open_index``.
    hook: str
    #: The plugin's name as ``pimem plugins`` shows it (its entry-point name).
    plugin: str
    #: The setting as the user wrote it, for messages: ``PIMEM_USE=open_index:grep-index``.
    setting: str

    @property
    def variable(self) -> str:
        """The environment variable that made the choice."""
        return self.setting.partition("=")[0]

    def to_json(self) -> dict[str, str]:
        return attrs.asdict(self)


@attrs.frozen(kw_only=True)
class Settings:
    """What the environment asked for. Build it with :meth:`from_env`."""

    #: Automatic capture of settled exchanges (``PI_MEMSEARCH_CAPTURE=off`` turns it off).
    capture: bool = True
    #: Model used for distillation, ``<id>`` or ``<provider>/<id>`` (``PI_MEMSEARCH_CAPTURE_MODEL``).
    capture_model: str | None = None
    #: The stable snapshot in the system prompt (``PI_MEMSEARCH_SNAPSHOT=off`` turns it off):
    #: core's, since any snapshot plugin honours it.
    snapshot: bool = True
    search_timeout_ms: int = DEFAULT_SEARCH_TIMEOUT_MS
    compact_timeout_ms: int = DEFAULT_COMPACT_TIMEOUT_MS
    #: memsearch's ``MEMSEARCH_DIR`` as given; a relative value resolves at the repository directory.
    memsearch_dir: str | None = None
    #: Plugin names blocked by ``PIMEM_DISABLE_PLUGINS``.
    disabled_plugins: frozenset[str] = frozenset()
    #: ``PIMEM_STRICT_PLUGINS=1``: a plugin that fails to import raises instead of being skipped.
    strict_plugins: bool = False
    #: Scrub secrets before distilling or writing (``PIMEM_SCRUB_SECRETS=off`` turns it off).
    scrub_secrets: bool = True
    #: ``PIMEM_DISTILLER`` as written: ``auto`` (the distillers' order decides: the host's model,
    #: else the HTTP endpoint when configured, else the extractive distiller), or a distiller's
    #: name, which :attr:`chosen_plugins` holds as the choice for ``pimem_distill_exchange``.
    distiller: str = "auto"
    #: How long one distillation may take (``PIMEM_DISTILL_TIMEOUT_MS``).
    distill_timeout_ms: int = DEFAULT_DISTILL_TIMEOUT_MS
    #: Model distillations per day before capture falls back to the extractive distiller
    #: (``PIMEM_DISTILL_BUDGET``; 0 means no limit).
    distill_budget: int = DEFAULT_DISTILL_BUDGET
    #: The background maintenance tasks switched on (``PIMEM_MAINTENANCE``, names separated by
    #: commas); every task is off until named here.
    maintenance: frozenset[str] = frozenset()
    #: The least time between two runs of one maintenance task
    #: (``PIMEM_MAINTENANCE_INTERVAL_HOURS``; 0: whenever the day files changed).
    maintenance_interval_hours: int = DEFAULT_MAINTENANCE_INTERVAL_HOURS
    #: ``PIMEM_SERVICE`` (on unless set off): the CLI hands its commands, and ``pimem serve``
    #: its session, to this user's memory service (started when absent). The thin client reads
    #: the variable itself, before pimem loads.
    service: bool = True
    #: Seconds without a request before the memory service exits (``PIMEM_SERVICE_IDLE_S``; 0:
    #: never).
    service_idle_s: int = DEFAULT_SERVICE_IDLE_S
    #: ``PIMEM_NOW``: a fixed local time, so behaviour around midnight can be tested.
    fixed_now: datetime | None = None
    #: The plugins chosen by name to answer single-answer hooks (``PIMEM_USE``, and
    #: ``PIMEM_DISTILLER`` naming a distiller), at most one per hook.
    chosen_plugins: tuple[PluginChoice, ...] = ()
    #: The environment as given: plugins' declared settings (:class:`SettingSpec`) are parsed
    #: from it when the plugin manager loads them.
    environ: Mapping[str, str] = attrs.field(factory=dict, repr=False, eq=False)
    #: Plugins' declared settings, validated at load, by environment variable.
    plugin_values: Mapping[str, object] = attrs.field(factory=dict, repr=False)

    def declare(self, specs: Iterable[SettingSpec[Any]]) -> Settings:
        """These settings with *specs* parsed and validated; raise :class:`SettingsError`."""
        values = {spec.env: spec.parse_env(self.environ) for spec in specs}
        return attrs.evolve(self, plugin_values={**self.plugin_values, **values})

    def with_values(self, *pairs: tuple[SettingSpec[Any], object]) -> Settings:
        """These settings with plugin settings set directly (for tests and embedding hosts)."""
        values = {spec.env: value for spec, value in pairs}
        return attrs.evolve(self, plugin_values={**self.plugin_values, **values})

    def for_session(
        self,
        session_env: Mapping[str, str],
        names: Iterable[str],
        specs: Iterable[SettingSpec[Any]],
    ) -> Settings:
        """These settings with the variables *names* taken from *session_env* instead (set
        there or not), and *specs* parsed again: one session's or command's settings in a
        process that serves many. Raise :class:`SettingsError` on a bad value, as at start."""
        names = frozenset(names)
        env = {name: value for name, value in self.environ.items() if name not in names}
        env.update((name, value) for name, value in session_env.items() if name in names)
        return Settings.from_env(env).declare(specs)

    def chosen(self, hook: str) -> str | None:
        """The plugin chosen to answer *hook* (``pimem_open_index``), or ``None``: the plugins'
        order decides."""
        return next((choice.plugin for choice in self.chosen_plugins if choice.hook == hook), None)

    def choice(self, hook: str) -> PluginChoice | None:
        """The choice made for *hook*, with the setting that made it."""
        return next((choice for choice in self.chosen_plugins if choice.hook == hook), None)

    def now(self) -> datetime:
        """The current local time (naive), or the fixed time of ``PIMEM_NOW``."""
        return self.fixed_now if self.fixed_now is not None else datetime.now()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Parse *environ* (default: the process environment); raise :class:`SettingsError` on bad values."""
        env = os.environ if environ is None else environ

        def get(name: str) -> str | None:
            value = env.get(name)
            return value if value else None

        return cls(
            capture=_switch(env, "PI_MEMSEARCH_CAPTURE", default=True),
            capture_model=get("PI_MEMSEARCH_CAPTURE_MODEL"),
            snapshot=_switch(env, "PI_MEMSEARCH_SNAPSHOT", default=True),
            search_timeout_ms=_milliseconds(
                env, "PI_MEMSEARCH_SEARCH_TIMEOUT_MS", DEFAULT_SEARCH_TIMEOUT_MS
            ),
            compact_timeout_ms=_milliseconds(
                env, "PI_MEMSEARCH_COMPACT_TIMEOUT_MS", DEFAULT_COMPACT_TIMEOUT_MS
            ),
            memsearch_dir=get("MEMSEARCH_DIR"),
            disabled_plugins=frozenset(
                name.strip()
                for name in (get("PIMEM_DISABLE_PLUGINS") or "").split(",")
                if name.strip()
            ),
            strict_plugins=_switch(env, "PIMEM_STRICT_PLUGINS", default=False),
            scrub_secrets=_switch(env, "PIMEM_SCRUB_SECRETS", default=True),
            distiller=env.get("PIMEM_DISTILLER", "") or "auto",
            distill_timeout_ms=_milliseconds(
                env, "PIMEM_DISTILL_TIMEOUT_MS", DEFAULT_DISTILL_TIMEOUT_MS
            ),
            distill_budget=_count(env, "PIMEM_DISTILL_BUDGET", DEFAULT_DISTILL_BUDGET),
            maintenance=_task_names(env.get("PIMEM_MAINTENANCE", "")),
            maintenance_interval_hours=_count(
                env,
                "PIMEM_MAINTENANCE_INTERVAL_HOURS",
                DEFAULT_MAINTENANCE_INTERVAL_HOURS,
                unit="hours",
            ),
            service=_switch(env, "PIMEM_SERVICE", default=True),
            service_idle_s=_count(
                env, "PIMEM_SERVICE_IDLE_S", DEFAULT_SERVICE_IDLE_S, unit="seconds"
            ),
            fixed_now=_local_time(env, "PIMEM_NOW"),
            chosen_plugins=_chosen_plugins(env),
            environ=dict(env),
        )


class Named(TypedDict, total=False):
    """What a setting says besides its value (:class:`SettingSpec`'s constructors take it)."""

    plugin: Required[str]
    name: Required[str]
    env: Required[str]
    help: Required[str]
    secret: bool
    per_session: bool


@attrs.frozen(kw_only=True)
class SettingSpec(Generic[T]):
    """A setting a plugin declares (hook ``pimem_declare_settings``) and reads with :meth:`read`.

    The plugin manager validates it once, when it loads the plugin and before ``is_active``; a
    bad value raises :class:`SettingsError` and stops pimem, as core settings do (ADR 0004).
    """

    #: The plugin that owns the setting (its entry-point name).
    plugin: str
    #: A short name, shown by ``pimem plugins`` and ``pimem status``.
    name: str
    #: The environment variable it is read from.
    env: str
    #: Turns the (non-empty) raw value into the setting; raises :class:`SettingsError` with its
    #: own message, or ``ValueError`` for the message built from ``invalid``.
    parse: Callable[[str], T] = attrs.field(eq=False)
    #: The value when the variable is unset or empty.
    default: T
    #: One line for ``pimem plugins``.
    help: str
    #: What a good value is, for the error: ``{env} must be {invalid}, got {raw!r}; ...``.
    invalid: str = "a valid value"
    #: Masked wherever it is shown (API keys, tokens).
    secret: bool = False
    #: Shapes one agent session or one command, not what the plugin loads: each session and
    #: command through the memory service brings its own value (auto-context's switch), where
    #: any other setting gets a service of its own for each value (docs/service.md).
    per_session: bool = False

    @staticmethod
    def choice(*, values: tuple[T, ...], default: T, **named: Unpack[Named]) -> SettingSpec[T]:
        """One of *values*, in any case (``PIMEM_RANKER=memsearch``)."""
        return SettingSpec(
            # tuple.index raises the ValueError for the message that lists the values.
            parse=lambda raw: values[values.index(raw.strip().lower())],
            default=default,
            invalid=" or ".join(f'"{value}"' for value in values),
            **named,
        )

    @staticmethod
    def switch(*, default: bool, **named: Unpack[Named]) -> SettingSpec[bool]:
        """An ``on``/``off`` setting (also ``1``/``0``, ``true``/``false``, ``yes``/``no``).

        >>> SettingSpec.switch(plugin="mine", name="on", env="MINE_ON", default=False,
        ...                    help="turn mine on").parse_env({"MINE_ON": "yes"})
        True
        """
        return SettingSpec(parse=parse_switch(named["env"]), default=default, **named)

    @staticmethod
    def milliseconds(
        *, default: int, allow_zero: bool = False, **named: Unpack[Named]
    ) -> SettingSpec[int]:
        """A positive whole number of milliseconds (0 too with *allow_zero*)."""
        parse = parse_milliseconds(named["env"], default, allow_zero=allow_zero)
        return SettingSpec(parse=parse, default=default, **named)

    @staticmethod
    def fraction(*, default: float, **named: Unpack[Named]) -> SettingSpec[float]:
        """A number from 0 to 1."""
        return SettingSpec(parse=parse_fraction(named["env"], default), default=default, **named)

    @staticmethod
    def text(**named: Unpack[Named]) -> SettingSpec[str | None]:
        """Text taken as written; ``None`` when unset."""
        return SettingSpec(parse=_as_written, default=None, **named)

    def parse_env(self, environ: Mapping[str, str]) -> T:
        """The setting's value in *environ*; raise :class:`SettingsError` on a bad one."""
        raw = environ.get(self.env, "")
        if not raw:
            return self.default
        try:
            return self.parse(raw)
        except SettingsError:
            raise
        except (ValueError, TypeError):
            shown = "****" if self.secret else repr(raw)
            raise SettingsError(
                f"{self.env} must be {self.invalid}, got {shown}; "
                f"unset it for the default of {self.show(self.default)}."
            ) from None

    def read(self, settings: Settings) -> T:
        """This setting's value in *settings* (validated when the plugin was loaded)."""
        if self.env in settings.plugin_values:
            return cast(T, settings.plugin_values[self.env])
        return self.parse_env(settings.environ)

    def show(self, value: object) -> str | int | float | bool | list[str] | None:
        """*value* for ``pimem plugins`` and ``pimem status`` (JSON-ready), secrets masked."""
        if self.secret and value:
            return "****"
        if value is None or isinstance(value, str | int | float | bool):
            return value
        if isinstance(value, frozenset | set):
            return sorted(str(part) for part in value)
        if isinstance(value, tuple | list):
            return [str(part) for part in value]
        return str(value)


def parse_switch(name: str) -> Callable[[str], bool]:
    """A parser for an ``on``/``off`` setting with pimem's message."""
    return lambda raw: _switch({name: raw}, name, default=False)


def parse_milliseconds(
    name: str, default: int, *, allow_zero: bool = False
) -> Callable[[str], int]:
    """A parser for a (positive, or with *allow_zero* whole) number of milliseconds."""
    return lambda raw: _milliseconds({name: raw}, name, default, allow_zero=allow_zero)


def _as_written(raw: str) -> str:
    return raw


def parse_fraction(name: str, default: float) -> Callable[[str], float]:
    """A parser for a number from 0 to 1 with pimem's message."""
    return lambda raw: _fraction({name: raw}, name, default)


def parse_count(name: str, default: int, *, unit: str | None = None) -> Callable[[str], int]:
    """A parser for a whole number with pimem's message."""
    return lambda raw: _count({name: raw}, name, default, unit=unit)


_ON = {"on", "1", "true", "yes"}
_OFF = {"off", "0", "false", "no"}


def _switch(env: Mapping[str, str], name: str, *, default: bool) -> bool:
    raw = env.get(name, "")
    if not raw:
        return default
    if raw.lower() in _ON:
        return True
    if raw.lower() in _OFF:
        return False
    raise SettingsError(f"{name} must be 'on' or 'off', got {raw!r}; unset it for the default.")


def _milliseconds(
    env: Mapping[str, str], name: str, default: int, *, allow_zero: bool = False
) -> int:
    raw = env.get(name, "")
    if not raw:
        return default
    if raw.isascii() and raw.isdigit() and (int(raw) > 0 or allow_zero):
        return int(raw)
    kind = "whole number" if allow_zero else "positive whole number"
    raise SettingsError(
        f"{name} must be a {kind} of milliseconds, got {raw!r}; "
        f"unset it for the default of {default}."
    )


def _chosen_plugins(env: Mapping[str, str]) -> tuple[PluginChoice, ...]:
    """``PIMEM_USE``'s choices, and ``PIMEM_DISTILLER``'s as the choice of a distiller.

    Only the form is checked here: the hooks and which plugins are installed are the plugin
    manager's to check, once the plugins have loaded
    (:meth:`pimem_core.manager.PimemPluginManager.check_choices`).
    """
    raw = env.get("PIMEM_USE", "")
    choices: dict[str, PluginChoice] = {}
    for item in raw.split(","):
        if not item.strip():
            continue  # as in PIMEM_DISABLE_PLUGINS, an empty item (a trailing comma) is nothing
        written, colon, plugin = (part.strip() for part in item.partition(":"))
        if not (written and colon and plugin):
            raise SettingsError(
                "PIMEM_USE must list hook:plugin pairs separated by commas, such as "
                f"open_index:grep-index, got {raw!r}; unset it to let the plugins' order decide."
            )
        hook = _HOOK_PREFIX + written.removeprefix(_HOOK_PREFIX)  # either spelling is meant
        short = hook.removeprefix(_HOOK_PREFIX)
        if hook in choices and choices[hook].plugin != plugin:
            raise SettingsError(
                f"PIMEM_USE chooses two plugins for {short} ({choices[hook].plugin}, {plugin}); "
                "name one."
            )
        choices[hook] = PluginChoice(
            hook=hook, plugin=plugin, setting=f"PIMEM_USE={short}:{plugin}"
        )
    distiller = env.get("PIMEM_DISTILLER", "")
    if distiller and distiller != "auto":
        # A thin alias: PIMEM_DISTILLER=<name> is PIMEM_USE=distill_exchange:<name>.
        plugin = DISTILLER_NAMES.get(distiller, distiller)
        earlier = choices.get(DISTILL_HOOK)
        if earlier is not None and earlier.plugin != plugin:
            raise SettingsError(
                f"PIMEM_DISTILLER={distiller} and {earlier.setting} choose different "
                "distillers; set only one of them."
            )
        if earlier is None:
            choices[DISTILL_HOOK] = PluginChoice(
                hook=DISTILL_HOOK, plugin=plugin, setting=f"PIMEM_DISTILLER={distiller}"
            )
    return tuple(choices.values())


def _fraction(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "")
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if 0.0 <= value <= 1.0:
        return value
    raise SettingsError(
        f"{name} must be a number from 0 to 1, got {raw!r}; unset it for the default of {default}."
    )


def _count(env: Mapping[str, str], name: str, default: int, *, unit: str | None = None) -> int:
    raw = env.get(name, "")
    if not raw:
        return default
    if raw.isascii() and raw.isdigit():
        return int(raw)
    kind = f"whole number of {unit}" if unit else "whole number (0 for no limit)"
    raise SettingsError(
        f"{name} must be a {kind}, got {raw!r}; unset it for the default of {default}."
    )


def _task_names(raw: str) -> frozenset[str]:
    # memsearch spells the tasks with underscores; a hyphen is forgiven, not a typo in a name.
    names = {part.strip().replace("-", "_") for part in raw.split(",") if part.strip()}
    for name in sorted(names):
        if not _TASK_NAME.fullmatch(name):
            raise SettingsError(
                f"PIMEM_MAINTENANCE must list task names separated by commas (such as "
                f"{','.join(BUNDLED_MAINTENANCE_TASKS)}), got {raw!r}; unset it to turn "
                "maintenance off."
            )
    return frozenset(names)


def _local_time(env: Mapping[str, str], name: str) -> datetime | None:
    raw = env.get(name, "")
    if not raw:
        return None
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise SettingsError(
            f"{name} must be an ISO local time such as 2026-08-13T22:41, got {raw!r}."
        ) from None
    # An explicit offset is honoured by converting to the machine's local time.
    return moment.astimezone().replace(tzinfo=None) if moment.tzinfo else moment
