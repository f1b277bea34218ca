"""What the bundled maintenance tasks share: memsearch's configuration and task context, read the
way memsearch reads them, the short system prompt pimem adds to memsearch's own prompts, and each
task's state in memsearch's ``.maintenance-state.json``.

The prompts are memsearch's installed templates (``memsearch/prompts/*.txt``, or the files its
``[prompts]`` settings name), built by memsearch's own functions; nothing of them is copied here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs

from pimem_core.plugin import (
    MaintenanceOutcome,
    MaintenanceRun,
    MaintenanceTask,
    PimemError,
    Scope,
    Settings,
    write_atomically,
)
from pimem_plugins.memsearch.compat import merged_config
from pimem_plugins.memsearch.config import global_config_path, project_config_path
from pimem_plugins.shared.layout import maintenance_root

#: The platform part of pimem's keys in memsearch's maintenance state (``pimem.<task>``).
PLATFORM = "pimem"
#: memsearch's maintenance state, one entry per ``<platform>.<task>``, beside its index state.
STATE_FILE = ".maintenance-state.json"

SYSTEM_PROMPT = (
    "You keep long-lived memory files of a coding agent up to date. Do exactly what the "
    "message asks and answer with the JSON object it describes, nothing else."
)


def memsearch_config(scope: Scope) -> Any:
    """memsearch's configuration for *scope*: its defaults, the global file, then the project
    file's trusted keys, with ``env:`` references resolved, as ``resolve_config`` does.

    Read here rather than through ``resolve_config`` because that reads module-level paths
    fixed when memsearch was imported, and maintenance runs beside the backend's own thread.
    """
    from memsearch.config import ConfigEnvVarError

    try:
        return merged_config(global_config_path(), project_config_path(scope.repository_dir))
    except ConfigEnvVarError as error:
        raise PimemError(f"memsearch configuration error: {error}") from None
    except (OSError, ValueError) as error:
        raise PimemError(f"cannot read memsearch's configuration: {error}") from None


def task_config(config_type: Callable[..., Any], task: MaintenanceTask, **fields: Any) -> Any:
    """memsearch's configuration of one of its plugin tasks (*config_type*, with *fields*) as
    pimem runs *task*: on, on its interval, reading its input directory."""
    return config_type(
        enabled=True,
        provider="pimem",  # the runner chooses the model, not memsearch
        min_interval_hours=int(task.min_interval.total_seconds() // 3600),
        input_dir=str(task.input_dir),
        **fields,
    )


def task_context(
    scope: Scope, name: str, task: MaintenanceTask, run: MaintenanceRun, config: Any
) -> Any:
    """memsearch's ``TaskContext`` for one run (its prompt builders take one)."""
    from memsearch.maintenance import TaskContext

    return TaskContext(
        platform=PLATFORM,
        task=name,
        task_config=config,
        project_dir=scope.repository_dir,
        memsearch_dir=maintenance_root(scope),
        input_dir=task.input_dir,
        output_file=task.output,
        input_digest=run.input_digest,
    )


def describe_task(
    scope: Scope,
    settings: Settings,
    name: str,
    output_name: str,
    run: Callable[[Scope, MaintenanceTask, MaintenanceRun], MaintenanceOutcome],
    *,
    status_rank: int = 85,
    status: Callable[[], tuple[tuple[str, ...], Mapping[str, object]]] | None = None,
) -> MaintenanceTask:
    """A bundled task: on when ``PIMEM_MAINTENANCE`` names it, reading the scope's day files and
    writing ``<memsearch dir>/<output_name>``, its state the entry ``pimem.<name>`` of memsearch's
    ``.maintenance-state.json``; *status* adds lines to its status section."""

    def run_task(maintenance_run: MaintenanceRun) -> MaintenanceOutcome:
        return run(scope, task, maintenance_run)

    state = StateEntry(maintenance_root(scope) / STATE_FILE, f"{PLATFORM}.{name}")
    task = MaintenanceTask(
        name=name,
        enabled=name in settings.maintenance,
        min_interval=timedelta(hours=settings.maintenance_interval_hours),
        input_dir=scope.memory_dir,
        output=maintenance_root(scope) / output_name,
        run=run_task,
        input_digest=lambda: input_digest(scope.memory_dir),
        read_state=state.read,
        update_state=state.update,
        status_rank=status_rank,
        status=status,
    )
    return task


def input_digest(directory: Path) -> str:
    """memsearch's digest of a task's input: every ``*.md`` below it, path and bytes, in order
    (its ``_input_digest``, which memsearch's own runners compare with the state's)."""
    if not directory.is_dir():
        return "sha256:empty"
    digest = hashlib.sha256()
    for path in sorted(path for path in directory.rglob("*.md") if path.is_file()):
        digest.update(str(path.relative_to(directory)).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return f"sha256:{digest.hexdigest()}"


@attrs.frozen
class StateEntry:
    """One task's entry (*key*) in memsearch's ``.maintenance-state.json``, shared with
    memsearch's own runners (``claude-code.project_review``...)."""

    path: Path
    key: str

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def read(self) -> Mapping[str, object]:
        entry = self._load().get(self.key)
        return entry if isinstance(entry, dict) else {}

    def update(self, changes: Mapping[str, object]) -> None:
        """Merge *changes* into the entry. Re-read first and replace the file at once, so
        entries other runners wrote meanwhile stay (memsearch itself writes in place)."""
        state = self._load()
        entry = state.get(self.key)
        state[self.key] = {**(entry if isinstance(entry, dict) else {}), **changes}
        write_atomically(self.path, json.dumps(state, indent=2, sort_keys=True) + "\n")
