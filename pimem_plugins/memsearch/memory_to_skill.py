"""The ``memory-to-skill`` maintenance task and the skill candidate store.

Off until ``PIMEM_MAINTENANCE`` names ``memory_to_skill``. One model call per run: memsearch's
distillation prompt (its template, the existing candidates, the recent journals) asks for
workflows that recur in at least 3 sessions, and memsearch's parser reads the answer. Each
candidate lands in memsearch's layout, ``.memsearch/skill-candidates/<name>/SKILL.md`` plus
``meta.json``, in the store's own git repository, so memsearch's ``skills`` commands and other
agents see the same drafts. memsearch writes a candidate's files in place; here they are built
in a staging directory and moved into place one file at a time, so a crash never leaves half a
file.

Candidates are never installed on their own: :meth:`DraftedSkills.install_candidate` runs only
when someone asks (``pimem skills install``, the ``memory_skills`` tool), with memsearch's own
``install``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
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
    SkillCandidate,
    SkillCatalog,
    StoreError,
    hookimpl,
)
from pimem_plugins.memsearch.compat import distill_steps
from pimem_plugins.memsearch.maintenance import (
    SYSTEM_PROMPT,
    describe_task,
    memsearch_config,
    task_config,
    task_context,
)
from pimem_plugins.shared.layout import maintenance_root

NAME = "memory_to_skill"
STORE = "skill-candidates"
_FILES = ("SKILL.md", "meta.json")


class MemoryToSkill:
    """Drafts skill candidates from memory; lists and installs them on request."""

    def task(self, scope: Scope, settings: Settings) -> MaintenanceTask:
        return describe_task(
            scope, settings, NAME, STORE, _distill, status_rank=87, status=lambda: _pending(scope)
        )

    @hookimpl
    def pimem_collect_maintenance_tasks(
        self, scope: Scope, settings: Settings
    ) -> Iterator[MaintenanceTask]:
        yield self.task(scope, settings)

    @hookimpl(trylast=True)
    def pimem_open_skills(self, scope: Scope) -> SkillCatalog:
        return DraftedSkills(scope)


def _pending(scope: Scope) -> tuple[tuple[str, ...], Mapping[str, object]]:
    """The candidates' line and JSON for the task's status section."""
    try:
        from memsearch.skills import candidate_review_summary

        summary = candidate_review_summary(maintenance_root(scope))
        pending = int(summary.get("pending_count") or 0)
        line = (
            f"skill candidates: {pending} pending install of "
            f"{int(summary.get('candidate_count') or 0)} in {summary.get('root')}"
            + (" (review them with `pimem skills list`)" if pending else "")
        )
        data: dict[str, object] = {
            "pending_candidates": pending,
            "candidates": int(summary.get("candidate_count") or 0),
            "pending_names": list(summary.get("pending_names") or []),
        }
    except Exception as error:  # noqa: BLE001 - status reports, never raises
        line, data = f"skill candidates: unreadable ({error})", {"pending_candidates": None}
    return (line,), data


@attrs.frozen
class DraftedSkills:
    """The candidates memory-to-skill drafted for one scope, via memsearch's skills module."""

    scope: Scope

    def list_candidates(self) -> tuple[SkillCandidate, ...]:
        list_candidates, skills_root = _skills("list_candidates", "skills_root")

        root = skills_root(maintenance_root(self.scope))
        return tuple(
            _candidate(root, meta) for meta in list_candidates(maintenance_root(self.scope))
        )

    def install_candidate(self, name: str, destination: Path) -> tuple[Path, ...]:
        (install,) = _skills("install")
        try:
            written = install(
                name,
                [str(destination)],
                project_dir=self.scope.repository_dir,
                memsearch_dir=maintenance_root(self.scope),
            )
        except ValueError as error:
            raise StoreError(f"{error}; `pimem skills list` shows the candidates") from None
        return tuple(Path(path) for path in written)


def _skills(*names: str) -> tuple[Any, ...]:
    """Functions of ``memsearch.skills``; a missing memsearch is a user-facing error."""
    try:
        from memsearch import skills
    except ImportError as error:
        raise PimemError(
            f"skill candidates need memsearch, which cannot be imported here ({error}); "
            'install it in pimem\'s environment: pip install "memsearch[onnx]"'
        ) from None
    return tuple(getattr(skills, name) for name in names)


def _candidate(root: Path, meta: Mapping[str, Any]) -> SkillCandidate:
    name = str(meta.get("name") or "")
    occurrences = meta.get("occurrences")
    return SkillCandidate(
        name=name,
        description=str(meta.get("description") or ""),
        path=root / name / "SKILL.md",
        status=str(meta.get("status") or "candidate"),
        pending=str(meta.get("pending_reason") or "new") if meta.get("pending_install") else None,
        occurrences=occurrences if isinstance(occurrences, int) else None,
        sources=tuple(str(source) for source in meta.get("sources") or ()),
        installed_paths=tuple(str(path) for path in meta.get("installed_paths") or ()),
        updated_at=str(meta["updated_at"]) if meta.get("updated_at") else None,
    )


def _distill(scope: Scope, task: MaintenanceTask, run: MaintenanceRun) -> MaintenanceOutcome:
    from memsearch import skills as ms
    from memsearch.config import PluginMemoryToSkillConfig

    steps = distill_steps()

    config = memsearch_config(scope)
    skill_config = task_config(PluginMemoryToSkillConfig, task)
    root = task.output
    steps["ensure_git"](root)
    prompt = steps["build_prompt"](
        task_context(scope, NAME, task, run, skill_config),
        min_occurrences=skill_config.min_occurrences,
        existing=ms.list_candidates(maintenance_root(scope)),
        cfg=config,
    )
    skills = steps["parse_response"](run.complete(SYSTEM_PROMPT, prompt))
    created: list[str] = []
    updated: list[str] = []
    for skill in skills:
        (created if _write_candidate(root, skill) == "created" else updated).append(skill["name"])
    if not (created or updated):
        return MaintenanceOutcome(action="none", reason="no workflow recurs often enough")
    parts = [f"add {len(created)}"] if created else []
    parts += [f"evolve {len(updated)}"] if updated else []
    steps["commit"](root, f"distill: {', '.join(parts)} candidate skill(s) [pimem]")
    names = created + updated
    return MaintenanceOutcome(
        action="distilled",
        reason=f"created {created or 'none'}, updated {updated or 'none'}",
        written=tuple(root / name / "SKILL.md" for name in names),
    )


def _write_candidate(root: Path, skill: Mapping[str, Any]) -> str:
    """memsearch's candidate writer, run on a staging copy; then each file replaces its old
    version at once. Returns ``created`` or ``updated``, as memsearch does."""
    from memsearch.skills import _write_candidate as write

    name = str(skill["name"])
    # Named as pimem's temporary files are (``.pimem-tmp-``): maintenance clears one a killed
    # run left behind.
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging.pimem-tmp-", dir=root))
    target = root / name
    try:
        (staging / name).mkdir()
        for file in _FILES:
            if (target / file).is_file():
                shutil.copy2(target / file, staging / name / file)
        outcome = str(write(staging, dict(skill)))
        target.mkdir(parents=True, exist_ok=True)
        for file in _FILES:
            os.replace(staging / name / file, target / file)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return outcome
