"""A search's catch-up: the daily memory files the collection is behind on, indexed first.

Day files change with no index run on this machine: a ``git pull`` brings a teammate's, another
agent appends, a fresh clone has never been indexed here. Before it searches, the memsearch
index asks the ledger which files changed since this machine last indexed them and indexes
those through memsearch, newest first, within a time budget, so the next search finds a
teammate's memory without anyone running ``pimem index``. What the budget leaves is taken by the
next search. The person is told in one line (:attr:`CatchUp.notice`).
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from pimem_core.plugin import (
    FailedFile,
    IndexReport,
    PimemError,
    SettingSpec,
)
from pimem_plugins.memsearch.ledger import DayFile, IndexLedger


def milliseconds(name: str, env: str, default: int, help: str) -> SettingSpec[int]:
    """A setting of the ``memsearch-index`` plugin: a time in milliseconds, 0 allowed."""
    return SettingSpec.milliseconds(
        plugin="memsearch-index", name=name, env=env, default=default, help=help, allow_zero=True
    )


DEFAULT_CATCH_UP_MS = 5_000
#: How long a search may spend indexing changed day files before it searches.
CATCH_UP_MS = milliseconds(
    "catch_up_ms",
    "PIMEM_CATCH_UP_MS",
    DEFAULT_CATCH_UP_MS,
    "milliseconds a search may spend indexing new or changed day files before it "
    "searches (at least one file is indexed)",
)

#: Runs one index of the files, within a budget in seconds (``Engine.index`` in the queue):
#: how many of them still needed it when the run started, and its report.
IndexRun = Callable[[tuple[DayFile, ...], float], tuple[int, IndexReport]]


def _files(count: int) -> str:
    return f"{count} daily memory file" + ("" if count == 1 else "s")


@attrs.frozen(kw_only=True)
class CatchUp:
    """What a search's catch-up did."""

    #: Day files found new, changed or deleted since the last index run.
    pending: int
    #: How many of them the run reached.
    reached: int = 0
    failed_files: tuple[FailedFile, ...] = ()
    #: Why the run failed as a whole (nothing was recorded).
    error: str | None = None
    budget: float = 0.0

    @property
    def notice(self) -> str | None:
        """One line for the person who searched, or ``None`` when there was nothing to do."""
        if self.pending == 0:
            return None
        if self.error is not None:
            return (
                f"could not index {_files(self.pending)} new or changed since the last index "
                f"run, before searching: {self.error}; the search used what the index holds"
            )
        done = (
            f"indexed {_files(self.reached)}"
            if self.reached == self.pending
            else f"indexed {self.reached} of {_files(self.pending)}"
        )
        line = f"{done} new or changed since the last index run, before searching"
        if self.failed_files:
            first = self.failed_files[0].text
            line += f"; {len(self.failed_files)} failed, first {first}"
        if self.reached < self.pending:
            line += (
                f"; a search spends at most {self.budget:g} s on it: the next one indexes "
                "more, or `pimem index` indexes them all now"
            )
        return line


def catch_up(ledger: IndexLedger, budget: float, run: IndexRun) -> CatchUp:
    """Index the day files *ledger* finds changed, within *budget* seconds, through *run*."""
    pending = tuple(ledger.changed())
    if not pending:
        return CatchUp(pending=0)
    try:
        left, report = run(pending, budget)
    except PimemError as error:
        return CatchUp(pending=len(pending), error=str(error), budget=budget)
    # What another index run took in while this one waited (a session's catch-up at its start)
    # was not this search's doing, and is not told.
    return CatchUp(
        pending=left,
        reached=report.total_files,
        failed_files=report.failed_files,
        budget=budget,
    )
