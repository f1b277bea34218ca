"""What plugins add around memory: maintenance tasks, the skill candidates they propose, the
commands they add to ``pimem``, and the files outside Python packages they load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from pimem_core.errors import PluginError, StoreError
from pimem_core.facade.opened import OpenedServices
from pimem_core.service_values import SkillCandidate
from pimem_core.types import MaintenanceTask, Scope


class Upkeep(OpenedServices):
    """``pimem_collect_maintenance_tasks``, the skill catalog's methods,
    ``pimem_collect_commands`` and ``pimem_collect_loaded_files``."""

    __slots__ = ()

    def collect_maintenance_tasks(self, scope: Scope) -> tuple[MaintenanceTask, ...]:
        """Every plugin's maintenance tasks for *scope*, by name."""
        contributions = self.pm.caller("pimem_collect_maintenance_tasks")(
            scope=scope, settings=self.settings
        )
        tasks: dict[str, MaintenanceTask] = {}
        for part in contributions:
            for task in part or ():
                if not isinstance(task, MaintenanceTask):
                    raise PluginError(
                        "pimem_collect_maintenance_tasks gave a "
                        f"{type(task).__name__}, not a MaintenanceTask"
                    )
                if task.name in tasks:
                    # Two tasks of one name would share one state entry and one output.
                    raise PluginError(
                        f"two plugins contribute the maintenance task {task.name!r}; block one "
                        "with PIMEM_DISABLE_PLUGINS"
                    )
                tasks[task.name] = task
        return tuple(tasks[name] for name in sorted(tasks))

    def list_skill_candidates(self, scope: Scope) -> tuple[SkillCandidate, ...]:
        with self._service("SkillCatalog.list_candidates"):
            return self.skills(scope).list_candidates()

    def read_skill_candidate(self, scope: Scope, name: str) -> SkillCandidate:
        """One candidate with its ``SKILL.md`` text."""
        found = [c for c in self.list_skill_candidates(scope) if c.name == name]
        if not found:
            raise StoreError(f"no skill candidate named {name!r}; `pimem skills list` shows them")
        try:
            text = found[0].path.read_text(encoding="utf-8")
        except OSError as error:
            raise StoreError(f"cannot read the skill candidate {name!r}: {error}") from None
        return attrs.evolve(found[0], text=text)

    def install_skill_candidate(
        self, scope: Scope, name: str, destination: Path
    ) -> tuple[Path, ...]:
        """Install candidate *name* into the skills directory *destination*, on request only."""
        with self._service("SkillCatalog.install_candidate"):
            return self.skills(scope).install_candidate(name, destination)

    def collect_commands(self) -> tuple[tuple[str, object], ...]:
        """Every plugin's commands, each with the name of the plugin that adds it, in the order
        plugins are asked; the command table (:func:`pimem_core.doors.commands.plugin_commands`)
        checks that each is a command."""
        found: list[tuple[str, object]] = []
        for impl in self.pm.hook.pimem_collect_commands.get_hookimpls()[::-1]:
            try:
                answer: Any = impl.function()
                found += [(impl.plugin_name, command) for command in answer or ()]
            except Exception as error:
                raise PluginError(
                    f"pimem_collect_commands of {impl.plugin_name} failed: "
                    f"{type(error).__name__}: {error}"
                ) from error
        return tuple(found)

    def collect_loaded_files(self) -> tuple[Path, ...]:
        """The files outside Python packages that plugins load (a model's directory)."""
        parts = self.pm.caller("pimem_collect_loaded_files")(settings=self.settings)
        return tuple(dict.fromkeys(Path(path) for part in parts if part for path in part))
