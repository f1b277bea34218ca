"""Background maintenance: opt-in tasks that keep files distilled from a whole memory store up
to date (memsearch's ``PROJECT.md``, ``USER.md`` and skill candidates).

The tasks are plugins (``pimem_collect_maintenance_tasks``); this module decides when one runs:

- only when it is enabled, its input (the day files) changed since its last success and its
  minimum interval has passed;
- in the background: :meth:`MaintenanceRunner.wake` returns at once, so a session's start and
  its captures never wait for a model;
- one run at a time per project, under an ``flock`` on ``<root>/.pimem-maintenance.lock``: the
  kernel drops it when the process dies, so a crash never leaves a stale lock;
- every model call is charged to the daily distillation budget first; once it is spent, tasks
  wait for the next day.

A task keeps its own state (``MaintenanceTask.input_digest``, ``read_state``, ``update_state``:
the bundled tasks' is memsearch's ``.maintenance-state.json``); the runner reads the task's entry
to decide, and records each run in it.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import threading
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

import attrs

from pimem_core.api import Pimem
from pimem_core.atomic_files import TEMP_MARK
from pimem_core.errors import PimemError
from pimem_core.runtime.budget import DistillBudget
from pimem_core.runtime.scheduler import Scheduler
from pimem_core.settings import Settings
from pimem_core.types import (
    HostModel,
    MaintenanceOutcome,
    MaintenanceRun,
    MaintenanceTask,
    Scope,
    StatusSection,
)

log = logging.getLogger(__name__)

LOCK_FILE = ".pimem-maintenance.lock"
#: A maintenance prompt carries up to 80,000 characters of journals: give the model time.
MODEL_TIMEOUT_SECONDS = 300.0
#: Where a task's status section goes while it is off (configuration); a task that runs
#: reports this much earlier, with the sections that say how memory is doing.
STATUS_RANK = 85
RUNNING_RANK_SHIFT = 40


class BudgetSpent(PimemError):
    """Today's distillation budget is spent: maintenance waits for the next day."""


def maintenance_root(scope: Scope) -> Path:
    """Where the project's maintenance lock lives: with the store's state (the directory of its
    index state file, else beside the memory directory), where the maintained files live."""
    if scope.index_state_path is not None:
        return scope.index_state_path.parent
    return scope.memory_dir.parent


# -- files -------------------------------------------------------------------------------------


def day_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(path for path in directory.rglob("*.md") if path.is_file())


def remove_leftovers(directory: Path) -> None:
    """Remove what a killed run was writing in *directory* (call it only under the lock)."""
    if not directory.is_dir():
        return
    for path in directory.iterdir():
        if TEMP_MARK not in path.name:
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


@contextlib.contextmanager
def project_lock(root: Path) -> Iterator[bool]:
    """Hold the project's maintenance lock, or yield ``False`` when another run holds it.

    An ``flock``: released by the kernel when its process dies, so it cannot go stale. Every
    open of the file is its own lock owner, so two runners in one process exclude each other
    too.
    """
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # closing releases the lock


# -- state -------------------------------------------------------------------------------------


def utc_now(settings: Settings) -> datetime:
    """Now, in UTC, from ``Settings.now()`` (so ``PIMEM_NOW`` holds for maintenance too)."""
    return settings.now().astimezone(UTC)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def parse_iso(raw: object) -> datetime | None:
    if not isinstance(raw, str) or not raw:
        return None
    try:
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _error_text(error: BaseException, limit: int = 2000) -> str:
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= limit else text[: limit - 15] + "... [truncated]"


def is_due(
    task: MaintenanceTask, entry: Mapping[str, object], digest: str, now: datetime
) -> tuple[bool, str]:
    """memsearch's rule (input changed and the interval passed since the last success), plus:
    a run that failed on this very input waits out the interval too, so a task whose model
    keeps failing does not call it after every capture."""
    if entry.get("last_input_digest") == digest:
        return False, "input unchanged since the last run"
    failed = parse_iso(entry.get("last_failed_at"))
    if entry.get("failed_input_digest") == digest and failed and now < failed + task.min_interval:
        return False, f"failed on this input; retries after {iso(failed + task.min_interval)}"
    succeeded = parse_iso(entry.get("last_success_at"))
    if succeeded is None:
        return True, "never run"
    if now < succeeded + task.min_interval:
        return False, f"not due before {iso(succeeded + task.min_interval)}"
    return True, "input changed"


# -- running -----------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class TaskReport:
    """What one pass did with one task.

    ``result``: ``off``, ``no input``, ``not due``, ``busy`` (another run holds the project's
    lock), ``no model``, ``waiting for budget``, ``failed``, or the task's own action
    (``replace``, ``none``, ``distilled``).
    """

    name: str
    result: str
    detail: str = ""
    written: tuple[Path, ...] = ()

    def to_json(self) -> dict[str, object]:
        return attrs.asdict(self, recurse=False) | {"written": [str(path) for path in self.written]}


class MaintenanceRunner:
    """Runs one project's due maintenance tasks, in the background when woken."""

    def __init__(
        self,
        pimem: Pimem,
        scope: Scope,
        *,
        budget: DistillBudget,
        host_model: HostModel | None = None,
        timeout: float = MODEL_TIMEOUT_SECONDS,
        scheduler: Scheduler | None = None,
    ) -> None:
        self._pimem = pimem
        self._scheduler = scheduler or Scheduler("pimem-maintenance")
        self._scope = scope
        self._budget = budget
        self._host_model = host_model
        self._timeout = timeout
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._running = False
        self._again = False
        #: The reports of the last pass, for tests and logs.
        self.last_reports: tuple[TaskReport, ...] = ()

    def wake(self, reason: str) -> None:
        """Run the due tasks in the background; returns at once. A wake during a pass asks for
        one more pass after it (the input may have changed meanwhile)."""
        if not self._pimem.settings.maintenance:
            return  # PIMEM_MAINTENANCE names no task: maintenance is off, not even a thread
        with self._lock:
            if self._running:
                self._again = True
                return
            self._running = True
        log.debug("maintenance woken (%s) for %s", reason, self._scope.scope_dir)
        self._scheduler.run("maintenance", self._loop)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no pass runs or is asked for; ``True`` if that happened in time."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._running, timeout=timeout)

    def _loop(self) -> None:
        while True:
            try:
                self.run_due()
            except Exception:  # a broken plugin must not kill the thread silently
                log.exception("maintenance failed for %s", self._scope.scope_dir)
            with self._idle:
                if not self._again:
                    self._running = False
                    self._idle.notify_all()
                    return
                self._again = False

    def run_due(self, *, force: bool = False) -> tuple[TaskReport, ...]:
        """Run every enabled task that is due (*force*: every enabled one), here and now."""
        tasks = self._pimem.collect_maintenance_tasks(self._scope)
        unknown = self._pimem.settings.maintenance - {task.name for task in tasks}
        if unknown:
            log.warning("PIMEM_MAINTENANCE names tasks no plugin provides: %s", sorted(unknown))
        reports = {task.name: TaskReport(name=task.name, result="off") for task in tasks}
        enabled = [task for task in tasks if task.enabled]
        if enabled:
            reports.update(self._run_enabled(enabled, force=force))
        self.last_reports = tuple(reports[task.name] for task in tasks)
        return self.last_reports

    def _run_enabled(
        self, tasks: Sequence[MaintenanceTask], *, force: bool
    ) -> dict[str, TaskReport]:
        root = maintenance_root(self._scope)
        with project_lock(root) as held:
            if not held:
                detail = "another process runs maintenance for this project"
                return {
                    task.name: TaskReport(name=task.name, result="busy", detail=detail)
                    for task in tasks
                }
            model: HostModel | None = None
            reports: dict[str, TaskReport] = {}
            for task in tasks:
                remove_leftovers(task.output if task.output.is_dir() else task.output.parent)
                if not day_files(task.input_dir):
                    reports[task.name] = TaskReport(
                        name=task.name,
                        result="no input",
                        detail=f"no day files in {task.input_dir}",
                    )
                    continue
                digest = task.input_digest()
                due, why = (
                    (True, "forced")
                    if force
                    else is_due(task, task.read_state(), digest, utc_now(self._pimem.settings))
                )
                if not due:
                    reports[task.name] = TaskReport(name=task.name, result="not due", detail=why)
                    continue
                if self._budget.left() == 0:
                    reports[task.name] = self._waiting(task)
                    continue
                model = model or self._model()
                if model is None:
                    reports[task.name] = TaskReport(
                        name=task.name, result="no model", detail=NO_MODEL
                    )
                    continue
                reports[task.name] = self._run(task, model, digest)
            return reports

    def _model(self) -> HostModel | None:
        if self._host_model is not None:
            return self._host_model
        try:
            return self._pimem.provide_model(self._scope)
        except PimemError as error:
            log.warning("no model for maintenance: %s", error)
            return None

    def _waiting(self, task: MaintenanceTask) -> TaskReport:
        detail = f"the distillation budget ({self._budget.limit} model calls) is spent for today"
        return TaskReport(name=task.name, result="waiting for budget", detail=detail)

    def _run(self, task: MaintenanceTask, model: HostModel, digest: str) -> TaskReport:
        def complete(system: str, prompt: str) -> str:
            # Charged before the call: a call that fails or is cut off by a crash costs too.
            if not self._budget.try_spend():
                raise BudgetSpent("the distillation budget is spent for today")
            return model.complete(system, prompt, self._timeout)

        settings = self._pimem.settings
        try:
            outcome: MaintenanceOutcome = task.run(
                MaintenanceRun(complete=complete, input_digest=digest)
            )
        except BudgetSpent:
            return self._waiting(task)
        except Exception as error:  # noqa: BLE001 - a task's failure is recorded, never raised
            log.warning("maintenance task %s failed: %s", task.name, error)
            now = iso(utc_now(settings))
            task.update_state(
                {
                    "last_checked_at": now,
                    "last_failed_at": now,
                    "failed_input_digest": digest,
                    "last_action": "error",
                    "last_error": _error_text(error),
                    "output_file": str(task.output),
                }
            )
            return TaskReport(name=task.name, result="failed", detail=_error_text(error))
        now = iso(utc_now(settings))
        task.update_state(
            {
                "last_checked_at": now,
                "last_success_at": now,
                "last_input_digest": digest,
                "last_action": outcome.action,
                "output_file": str(task.output),
                "model": model.name,
            }
        )
        return TaskReport(
            name=task.name, result=outcome.action, detail=outcome.reason, written=outcome.written
        )


NO_MODEL = (
    "no model: the host lends none and memsearch has no [llm] provider configured "
    "(memsearch config set llm.provider openai)"
)


# -- status ------------------------------------------------------------------------------------


def task_status(
    task: MaintenanceTask,
    settings: Settings,
    budget: DistillBudget,
    *,
    lines: Sequence[str] = (),
    data: Mapping[str, object] | None = None,
    rank: int = STATUS_RANK,
) -> StatusSection:
    """A task's status section: off, or its last run, when it is due next and its last error
    (plus the plugin's own *lines* and *data*)."""
    name = f"maintenance.{task.name}"
    extra = dict(data or {})
    if not task.enabled:
        line = f"maintenance {task.name}: off (add {task.name} to PIMEM_MAINTENANCE to turn it on)"
        return StatusSection(
            name=name, rank=rank, lines=(line, *lines), data={"enabled": False, **extra}
        )
    entry = task.read_state()
    succeeded = parse_iso(entry.get("last_success_at"))
    failed = parse_iso(entry.get("last_failed_at"))
    last_run = f"{_local(succeeded)} ({entry.get('last_action', '?')})" if succeeded else "never"
    next_due = _next_due(task, entry, budget, utc_now(settings))
    error = entry.get("last_error") if failed and (not succeeded or failed > succeeded) else None
    out = [f"maintenance {task.name}: on; last run {last_run}; next due {next_due}"]
    if error:
        out.append(f"maintenance {task.name} last error ({_local(failed)}): {error}")
    return StatusSection(
        name=name,
        rank=rank - RUNNING_RANK_SHIFT,
        lines=(*out, *lines),
        data={
            "enabled": True,
            "output": str(task.output),
            "last_run": entry.get("last_success_at"),
            "last_action": entry.get("last_action"),
            "next_due": next_due,
            "last_error": error,
            **extra,
        },
    )


def tasks_status(pimem: Pimem, scope: Scope, budget: DistillBudget) -> tuple[StatusSection, ...]:
    """Every maintenance task's status section, with its plugin's own lines (``task.status``)."""
    try:
        tasks = pimem.collect_maintenance_tasks(scope)
    except PimemError as error:  # status answers whatever is broken
        return (
            StatusSection(
                name="maintenance", rank=STATUS_RANK, lines=(f"maintenance: {error}",), data={}
            ),
        )
    sections = []
    for task in tasks:
        lines, data = task.status() if task.status is not None else ((), {})
        sections.append(
            task_status(
                task,
                pimem.settings,
                budget,
                lines=lines,
                data=data,
                rank=task.status_rank,
            )
        )
    return tuple(sections)


def _next_due(
    task: MaintenanceTask, entry: Mapping[str, object], budget: DistillBudget, now: datetime
) -> str:
    if budget.left() == 0:
        return "tomorrow (the distillation budget is spent)"
    if not day_files(task.input_dir):
        return "after the first day file is written"
    due, why = is_due(task, entry, task.input_digest(), now)
    if due:
        return "now (at the next capture or session start)"
    if why.startswith("input unchanged"):
        return "when the day files change"
    moments = [parse_iso(entry.get(key)) for key in ("last_success_at", "last_failed_at")]
    latest = max((moment for moment in moments if moment), default=now)
    return f"after {_local(latest + task.min_interval)}"


def _local(moment: datetime | None) -> str:
    return "" if moment is None else moment.astimezone().strftime("%Y-%m-%d %H:%M")
