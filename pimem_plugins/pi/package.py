"""The pi package this pimem carries, and its command file: which ``pimem`` its extension runs.

An installed wheel holds the package in ``package/`` beside this module; a development install
(``pip install -e``) runs from a checkout, whose ``adapters/pi`` is the same package. pi loads
either in place: a local path in pi's settings is read where it lies, never copied.

The command file is a small JSON file in the package's root, ``pimem-command.json``, which the
extension reads when ``PIMEM_BIN`` is not set (``adapters/pi/src/command.ts``): the package and
the command it names belong to one installation, so upgrading pimem in place keeps both.
"""

from __future__ import annotations

import json
import sys
import sysconfig
from pathlib import Path

import attrs

from pimem_core.plugin import PimemError, write_atomically

#: ``name`` in the package's ``package.json``: how pimem tells its own package from others.
PACKAGE_NAME = "pimem-pi"
RECORD_NAME = "pimem-command.json"


def is_pimem_package(directory: Path) -> bool:
    try:
        manifest = json.loads((directory / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("name") == PACKAGE_NAME


def bundled_package(module_dir: Path | None = None) -> Path:
    """The directory of the pi package this pimem carries (absolute, links not resolved: pi
    compares its settings' paths as written)."""
    here = Path(__file__).absolute().parent if module_dir is None else module_dir
    for candidate in (here / "package", here.parent.parent / "adapters" / "pi"):
        if is_pimem_package(candidate):
            return candidate
    raise PimemError(
        f"this pimem carries no pi package (looked in {here / 'package'}): it was installed "
        "from something other than its wheel; reinstall it with `pip install pimem` (or "
        "pipx), then run `pimem setup pi` again"
    )


def this_pimem() -> Path:
    """The ``pimem`` command of this installation: the one that runs now when it was started
    as ``pimem``, else the one beside this Python (``python -m pimem_core``)."""
    started = Path(sys.argv[0])
    if started.name == "pimem" and started.is_file():
        return started.absolute()
    for directory in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        if (directory / "pimem").is_file():
            return (directory / "pimem").absolute()
    raise PimemError(
        f"cannot find the pimem command of this Python ({sys.executable}): run `pimem setup "
        "pi` through the pimem command itself"
    )


@attrs.frozen
class CommandFile:
    """``pimem-command.json`` in a pi package: the command its extension runs."""

    path: Path

    @classmethod
    def of(cls, package: Path) -> CommandFile:
        return cls(package / RECORD_NAME)

    def read(self) -> Path | None:
        """The recorded command, or ``None`` when there is no readable command file."""
        try:
            recorded = json.loads(self.path.read_text(encoding="utf-8")).get("command")
        except (OSError, ValueError, AttributeError):
            return None
        return Path(recorded) if isinstance(recorded, str) and recorded else None

    def write(self, command: Path) -> bool:
        """Record *command*; ``False`` when it was recorded already (nothing is written)."""
        content = _content(command)
        try:
            if self.path.read_text(encoding="utf-8") == content:
                return False
        except (OSError, ValueError):
            pass  # none yet, or unreadable: written below
        try:
            write_atomically(self.path, content)
        except OSError as error:
            raise PimemError(
                f"cannot write {self.path} ({error.strerror or error}): pimem is installed where "
                "this user cannot write; run `pimem setup pi` as the user who installed it, or "
                f"set PIMEM_BIN={command} in pi's environment instead"
            ) from None
        return True

    def remove(self) -> bool:
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        except OSError as error:
            raise PimemError(f"cannot remove {self.path} ({error.strerror or error})") from None
        return True


def _content(command: Path) -> str:
    note = "written by `pimem setup pi`: the pimem command this package's extension runs"
    return json.dumps({"command": str(command), "note": note}, indent=2) + "\n"
