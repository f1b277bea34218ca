"""The ``project-review`` and ``user-profile`` maintenance tasks: memsearch's ``PROJECT.md`` and
``USER.md``, rewritten by a model from the recent day files when they hold something durable.

Off until ``PIMEM_MAINTENANCE`` names ``project_review`` / ``user_profile``. One model call per
run. The prompt is built by memsearch (its template, the current file, the recent journals) and
the answer parsed by memsearch; only the write is pimem's, because memsearch writes the file in
place and a crash mid-write would leave half of it: here the new file replaces the old at once.
"""

from __future__ import annotations

from collections.abc import Iterator

from pimem_core.plugin import (
    MaintenanceOutcome,
    MaintenanceRun,
    MaintenanceTask,
    Scope,
    Settings,
    hookimpl,
    write_atomically,
)
from pimem_plugins.memsearch.maintenance import (
    SYSTEM_PROMPT,
    describe_task,
    memsearch_config,
    task_config,
    task_context,
)


class _FileReview:
    """One task that keeps one markdown file (memsearch's ``action: replace | none`` protocol)."""

    NAME = ""
    OUTPUT = ""
    RANK = 85

    def task(self, scope: Scope, settings: Settings) -> MaintenanceTask:
        return describe_task(
            scope, settings, self.NAME, self.OUTPUT, self._run, status_rank=self.RANK
        )

    @hookimpl
    def pimem_collect_maintenance_tasks(
        self, scope: Scope, settings: Settings
    ) -> Iterator[MaintenanceTask]:
        yield self.task(scope, settings)

    def _run(self, scope: Scope, task: MaintenanceTask, run: MaintenanceRun) -> MaintenanceOutcome:
        from memsearch.config import PluginMaintenanceTaskConfig
        from memsearch.maintenance import _build_prompt, _parse_task_response

        config = memsearch_config(scope)
        review_config = task_config(PluginMaintenanceTaskConfig, task, output_file=str(task.output))
        context = task_context(scope, self.NAME, task, run, review_config)
        answer = _parse_task_response(run.complete(SYSTEM_PROMPT, _build_prompt(context, config)))
        reason = str(answer.get("reason") or "")
        if answer["action"] != "replace":
            return MaintenanceOutcome(action="none", reason=reason)
        content = str(answer.get("content") or "").strip()
        if not content:
            raise ValueError(f"{self.NAME}: the model answered replace without content")
        write_atomically(task.output, content + "\n")
        return MaintenanceOutcome(action="replace", reason=reason, written=(task.output,))


class ProjectReview(_FileReview):
    """``PROJECT.md``: the project's direction, decisions, risks and next steps."""

    NAME = "project_review"
    OUTPUT = "PROJECT.md"


class UserProfile(_FileReview):
    """``USER.md``: the user's stable preferences and working style."""

    NAME = "user_profile"
    OUTPUT = "USER.md"
    RANK = 86
