"""The steps of ``pimem setup pi`` (ADR 0023), imported only when the command runs: loading the
``pi-setup`` plugin, which every pimem process does, costs none of this.

Setup checks the ``pi`` on PATH (it runs, it is 0.73 or newer), installs the offline embedding
model when it is missing and writes memsearch's configuration when there is none (by running
the ``memsearch-tools`` plugin's commands from the command table, so the backend stays that
plugin's business), registers the pi package this pimem carries with pi (``pi install``, or
pi's settings file when ``pi`` is not on PATH), records this ``pimem`` in the package's command
file, and ends by starting a bridge and asking it ``ping``. Each step leaves what is done as it
is, so a second run changes no file. ``--check`` reports, ``--remove`` undoes the pi side.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pimem_core.plugin import (
    Command,
    Door,
    Flag,
    Outcome,
    PimemError,
)
from pimem_plugins.pi.bridge_check import check_bridge
from pimem_plugins.pi.package import (
    CommandFile,
    bundled_package,
    is_pimem_package,
    this_pimem,
)
from pimem_plugins.pi.pi_cli import (
    Pi,
    PiSettings,
    describe_pi,
    find_pi,
    pi_changed,
    probe_pi,
)

INSTALL_PI = (
    "install pi (`npm install -g @earendil-works/pi-coding-agent`, on Node 22.19 or newer) or "
    "put the pi you have on PATH, then run `pimem setup pi` again"
)
#: Where a wheel's pi package lies inside an installation: a registration of another pimem.
WHEEL_PACKAGE = ("pimem_plugins", "pi", "package")


def _run_command(door: Door, path: tuple[str, ...], **given: object) -> Outcome | None:
    """Run another plugin's command from the command table, in this process and through this
    door (its progress lines reach the user as the command's own do); ``None`` when no plugin
    offers it."""
    for _plugin, command in door.pimem.collect_commands():
        if isinstance(command, Command) and command.path == path:
            args: dict[str, Any] = {
                param.name: False if isinstance(param.kind, Flag) else param.default
                for param in command.params
            }
            return command.run(door, {**args, **given})
    return None


def _data(outcome: Outcome) -> dict[str, Any]:
    return dict(outcome.data) if isinstance(outcome.data, Mapping) else {}


# -- the steps ---------------------------------------------------------------------------------


def _find_pi(settings: PiSettings, environ: Mapping[str, str]) -> tuple[Pi | None, str]:
    """The pi to register with, checked, and the line that says so; ``None`` when pi is not on
    PATH but has settings here (they are written directly)."""
    path = find_pi(environ)
    if path is not None:
        pi = probe_pi(path, environ)
        return pi, f"pi: {describe_pi(pi, environ)}"
    if settings.base.is_dir():
        return None, f"pi: not on PATH; pimem writes pi's settings ({settings.path}) directly"
    raise PimemError(
        f"no pi found: no `pi` on PATH and no pi settings in {settings.base}; {INSTALL_PI}"
    )


def _model_and_config(door: Door) -> tuple[list[str], dict[str, Any]]:
    """Install the offline model when it is missing, write memsearch's configuration when
    there is none: the ``memsearch-tools`` commands, as a user would run them."""
    status = _run_command(door, ("model", "status"))
    if status is None:
        said = (
            "offline model: no plugin here offers `pimem model status` (memsearch-tools blocked "
            "by PIMEM_DISABLE_PLUGINS?), so the model and memsearch's configuration are left as "
            "they are"
        )
        return [said], {}
    data = _data(status)
    lines = []
    if data.get("installed"):
        lines.append(f"offline model: already installed in {data.get('hf_home')}")
        data["built"] = False
    else:
        door.note("pimem: installing the offline embedding model (about 87 MB, once)")
        try:
            installed = _run_command(door, ("model", "install-offline"))
        except PimemError as error:
            raise PimemError(
                f"{error}. The rest of `pimem setup pi` waits for the model: run it again once "
                "the model installs"
            ) from None
        data["built"] = bool(installed is not None and _data(installed).get("built"))
        data["installed"] = installed is not None
        lines.append(f"offline model: installed {data.get('model')} in {data.get('hf_home')}")
    if data.get("config_exists"):
        embedding = data.get("config_embedding") or {}
        chosen = f"{embedding.get('provider') or 'no provider'} / {embedding.get('model') or 'its default model'}"
        said = f"memsearch's configuration: {data.get('config')} kept as it is (embedding with {chosen})"
        if (embedding.get("provider"), embedding.get("model")) != (
            data.get("provider"),
            data.get("model"),
        ):
            said += "; `pimem config use-offline-model` switches it to the offline model"
        lines.append(said)
        data["config_written"] = False
    elif data.get("installed"):
        _run_command(door, ("config", "use-offline-model"))
        lines.append(
            f"memsearch's configuration: wrote {data.get('config')} (embedding with "
            f"{data.get('provider')} / {data.get('model')})"
        )
        data["config_written"] = True
    return lines, data


def _other_pimems(settings: PiSettings, package: Path) -> list[Path]:
    """Other pimem pi packages pi loads (a checkout, an older installation): pi must load one."""
    return [
        path
        for _, path in settings.local_packages()
        if path != package
        and (is_pimem_package(path) or (not path.exists() and path.parts[-3:] == WHEEL_PACKAGE))
    ]


def _register(
    pi: Pi | None, settings: PiSettings, package: Path
) -> tuple[list[str], dict[str, Any]]:
    lines, removed = [], []
    for other in _other_pimems(settings, package):
        if pi is not None:
            pi.change("remove", other)
        else:
            settings.remove(other)
        removed.append(str(other))
        lines.append(f"pi package: removed another pimem's package from pi: {other}")
    if settings.registered(package):
        lines.append(f"pi package: already registered in {settings.path}: {package}")
        return lines, {"registered": "already", "replaced": removed}
    if pi is not None:
        pi.change("install", package)
        pi_changed(settings, package, expect=True, said=("`pi install`",))
        lines.append(f"pi package: registered with `pi install {package}`")
    else:
        settings.add(package)
        lines.append(f"pi package: registered in {settings.path}: {package}")
    return lines, {"registered": "added", "replaced": removed}


def _record(package: Path, command: Path, environ: Mapping[str, str]) -> tuple[list[str], bool]:
    record = CommandFile.of(package)
    written = record.write(command)
    state = "recorded in" if written else "already recorded in"
    lines = [f"the adapter runs: {command} ({state} {record.path})"]
    overriding = environ.get("PIMEM_BIN")
    if overriding and Path(overriding) != command:
        lines.append(
            f"note: PIMEM_BIN is set here ({overriding}), and a pi started with it set runs that "
            "pimem instead"
        )
    return lines, written


def setup(door: Door) -> Outcome:
    environ = os.environ
    package, command = bundled_package(), this_pimem()
    settings = PiSettings.of(environ)
    pi, pi_line = _find_pi(settings, environ)
    model_lines, model = _model_and_config(door)
    # Recorded before pi is told of the package: a registered adapter always finds its pimem.
    record_lines, recorded = _record(package, command, environ)
    register_lines, registration = _register(pi, settings, package)
    answer = check_bridge(command, Path.cwd(), environ)
    lines = [
        pi_line,
        *model_lines,
        *record_lines,
        *register_lines,
        f"check: `{command} serve` started and answered ping in {answer.seconds * 1000:.0f} ms",
        "pimem is set up for pi: every new pi session has memory "
        "(`pimem setup pi --check` shows this, `pimem setup pi --remove` undoes it).",
    ]
    data = {
        "pi": None if pi is None else {"path": str(pi.path), "version": pi.shown_version},
        "settings": str(settings.path),
        "package": str(package),
        **registration,
        "command": str(command),
        "record": str(CommandFile.of(package).path),
        "recorded": recorded,
        "model": model,
        "bridge_seconds": round(answer.seconds, 3),
    }
    return Outcome(text="\n".join(lines), data=data)


# -- --check and --remove ----------------------------------------------------------------------


def _adapter_command(
    package: Path, command: Path, environ: Mapping[str, str], *, registered: bool
) -> tuple[str, str | None]:
    """The line saying which pimem the adapter runs, and that command (``None``: on PATH)."""
    runs = "the adapter runs" if registered else "the adapter would run"
    overriding = environ.get("PIMEM_BIN")
    if overriding:
        said = f"{runs}: {overriding} (PIMEM_BIN, set here)"
        if not Path(overriding).is_file():
            said += "; no such file: unset PIMEM_BIN, or point it at a pimem command"
        return said, overriding
    record = CommandFile.of(package)
    recorded = record.read()
    if recorded is None:
        on_path = shutil.which("pimem", path=environ.get("PATH"))
        where = on_path or "there is none"
        said = (
            f"{runs}: `pimem` on PATH, {where} (none recorded: `pimem setup pi` records this one)"
        )
        return said, on_path
    said = f"{runs}: {recorded} (recorded in {record.path})"
    if not recorded.is_file():
        said += "; no such file any more: run `pimem setup pi` again"
    elif recorded != command:
        said += f"; not this pimem ({command})"
    return said, str(recorded)


def check(door: Door) -> Outcome:
    environ = os.environ
    package, command = bundled_package(), this_pimem()
    settings = PiSettings.of(environ)
    version = importlib.metadata.version("pimem")
    lines = [f"pimem: {command} (pimem {version}, Python {sys.version.split()[0]})"]
    pi_path = find_pi(environ)
    pi_data: dict[str, Any] | None = None
    if pi_path is None:
        lines.append(f"pi: not on PATH (pi's settings: {settings.path})")
    else:
        try:
            pi = probe_pi(pi_path, environ)
            lines.append(f"pi: {describe_pi(pi, environ)}")
            pi_data = {"path": str(pi.path), "version": pi.shown_version}
        except PimemError as error:
            lines.append(f"pi: {error}")
            pi_data = {"path": str(pi_path), "error": str(error)}
    registered = settings.registered(package)
    lines.append(f"pi package: {package}")
    lines.append(
        f"registered with pi: yes, in {settings.path}"
        if registered
        else f"registered with pi: no ({settings.path}); `pimem setup pi` registers it"
    )
    others = _other_pimems(settings, package)
    lines += [f"also registered: another pimem's pi package, {other}" for other in others]
    adapter_line, runs = _adapter_command(package, command, environ, registered=registered)
    lines.append(adapter_line)
    status = _run_command(door, ("model", "status"))
    model = {} if status is None else _data(status)
    if status is not None and status.text:
        lines += status.text.splitlines()
    missing = [
        why
        for why, fine in (
            ("the package is not registered with pi", registered),
            ("the adapter would find no pimem to run", runs is not None and Path(runs).is_file()),
            ("the offline model is not installed", model.get("installed", True)),
        )
        if not fine
    ]
    ready = not missing
    lines.append(
        "pimem is set up for pi."
        if ready
        else f"pimem is not set up for pi yet ({'; '.join(missing)}): run `pimem setup pi`."
    )
    data = {
        "ready": bool(ready),
        "pimem": {"command": str(command), "version": version},
        "pi": pi_data,
        "settings": str(settings.path),
        "package": str(package),
        "registered": registered,
        "other_packages": [str(other) for other in others],
        "adapter_command": runs,
        "model": model,
    }
    return Outcome(text="\n".join(lines), data=data)


def remove(door: Door) -> Outcome:
    environ = os.environ
    package = bundled_package()
    settings = PiSettings.of(environ)
    lines = []
    removed = settings.registered(package)
    if removed:
        pi_path = find_pi(environ)
        if pi_path is not None:
            probe_pi(pi_path, environ).change("remove", package)
            pi_changed(settings, package, expect=False, said=("`pi remove`",))
            lines.append(f"pi package: removed with `pi remove {package}`")
        else:
            settings.remove(package)
            lines.append(f"pi package: removed from {settings.path} (pi is not on PATH)")
    else:
        lines.append(f"pi package: was not registered with pi ({settings.path})")
    record = CommandFile.of(package)
    forgotten = record.remove()
    if forgotten:
        lines.append(f"removed {record.path}")
    lines.append(
        "pi runs without pimem now. The offline model and memsearch's configuration stay (other "
        "memsearch agents may use them); `pimem setup pi` sets pi up again."
    )
    data = {
        "settings": str(settings.path),
        "package": str(package),
        "removed": removed,
        "record_removed": forgotten,
    }
    return Outcome(text="\n".join(lines), data=data)
