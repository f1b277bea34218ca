"""The status report, assembled one way for every front door.

The session records' failures (:mod:`pimem_core.runtime.records`), every plugin's sections
(``pimem_collect_status``), the store's line for today, the distillation budget and the
plugins' declared settings, in rank order. A session adds its own
sections (its capture counters) through the plugin it registers; the CLI has no session, so it
shows none.
"""

from __future__ import annotations

from pathlib import Path

from pimem_core.api import Pimem
from pimem_core.paths import PimemPaths
from pimem_core.runtime.budget import DistillBudget
from pimem_core.runtime.maintenance import tasks_status
from pimem_core.runtime.records import records_status
from pimem_core.runtime.store_today import store_today_status
from pimem_core.types import Scope, StatusSection


def status_sections(
    pimem: Pimem,
    scope: Scope,
    budget: DistillBudget | None = None,
    *,
    state_dir: Path | None = None,
) -> tuple[StatusSection, ...]:
    """*scope*'s status sections, in rank order; *budget* defaults to the settings' budget, and
    the session records (the failures hosts recorded) are read from *state_dir*, by default
    pimem's."""
    budget = budget or DistillBudget.for_settings(pimem.settings)
    sections = (
        *failed_plugins_status(pimem),
        records_status(state_dir or PimemPaths.from_env().state_dir, scope),
        *pimem.collect_status(scope),
        *tasks_status(pimem, scope, budget),
        store_today_status(pimem, scope),
        budget.status(),
        pimem.settings_status(),
    )
    return tuple(sorted(sections, key=lambda section: (section.rank, section.name)))


def failed_plugins_status(pimem: Pimem) -> tuple[StatusSection, ...]:
    """The plugins that failed to load, first in the report: what each costs and the way out."""
    failed = pimem.pm.failed
    if not failed:
        return ()
    return (
        StatusSection(
            name="failed-plugins",
            rank=0,
            lines=tuple(f"warning: {record.failure}" for record in failed),
            data={"failed": [record.to_json() for record in failed]},
        ),
    )
