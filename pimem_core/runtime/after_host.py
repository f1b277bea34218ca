"""Capture after the host has gone: what a session's capture had not written when the host
stopped waiting at shutdown, distilled by this process without the host's model when one is
configured (an HTTP endpoint, or the extractive distiller chosen by name), else handed over to
the next session in the scope at once (:mod:`pimem_core.runtime.records`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import attrs

from pimem_core.api import Pimem
from pimem_core.runtime.budget import DistillBudget
from pimem_core.runtime.capture import Capture
from pimem_core.runtime.records import hand_over, journal_of
from pimem_core.runtime.scheduler import Scheduler
from pimem_core.settings import DISTILL_HOOK, DISTILLER_NAMES
from pimem_core.types import Scope


def distils_without_host(pimem: Pimem) -> bool:
    """Whether capture distils without the host's model, as configured: a distiller chosen by
    name other than the host's, or, with none chosen, one other than the host's and the
    extractive fallback (an HTTP endpoint's, whose plugin is loaded only when configured)."""
    chosen = pimem.settings.chosen(DISTILL_HOOK)
    if chosen is not None:
        return chosen != DISTILLER_NAMES["host"]
    own = {DISTILLER_NAMES["host"], DISTILLER_NAMES["extractive"]}
    return any(name not in own for name in pimem.distillers())


@attrs.frozen(kw_only=True)
class AfterHost:
    """What the capture after the host needs of its session."""

    pimem: Pimem
    scope: Scope
    session_id: str
    transcript: Path
    budget: DistillBudget
    state_dir: Path
    scheduler: Scheduler
    on_notice: Callable[[str, str | None], None] | None
    #: The capture the host stopped waiting for: left, its exchanges in the journal.
    left_by: Capture


def capture_after_host(job: AfterHost, deadline: float) -> None:
    """Capture what *job*'s capture left in the journal, by *deadline* (monotonic). An exchange
    only the host's model would distil, and every one after it, is handed over."""
    job.left_by.stopped(deadline - time.monotonic())
    journal = journal_of(job.state_dir, job.session_id)
    if not journal.pending():
        return
    capture = Capture(
        job.pimem,
        job.scope,
        session_id=job.session_id,
        transcript=job.transcript,
        host_model=None,
        budget=job.budget,
        journal=journal,
        scheduler=job.scheduler,
        on_notice=job.on_notice,
        after_host=True,
    )
    capture.finish(deadline)
    capture.stopped(1.0)
    left = len(journal.pending())
    if left:
        hand_over(job.state_dir, job.scope, job.session_id, job.transcript, left)
