"""The daily distillation budget: model calls per day, shared by every session on the machine.

Past the budget, capture keeps working with the extractive distiller and maintenance waits for
the next day, so automatic memory never runs up an unbounded bill. The count lives in one small
JSON file, updated under a file lock.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from datetime import date
from pathlib import Path

import attrs

from pimem_core.paths import PimemPaths
from pimem_core.private_files import open_private
from pimem_core.settings import Settings
from pimem_core.types import StatusSection


@attrs.define
class DistillBudget:
    """Model distillations allowed per local day (``limit`` 0: no limit)."""

    limit: int
    path: Path
    today: Callable[[], date] = attrs.field(default=date.today, eq=False)

    def used(self) -> int:
        return self._update(0)

    def available(self) -> bool:
        return self.limit == 0 or self.used() < self.limit

    def spend(self) -> int:
        """Count one model distillation; returns today's count."""
        return self._update(1)

    def try_spend(self) -> bool:
        """Count one model call if the budget allows it (checked and counted under one lock, so
        concurrent sessions cannot overspend); ``False`` when today's budget is spent."""
        return self._update(1, within_limit=True) > 0

    def left(self) -> int | None:
        return None if self.limit == 0 else max(0, self.limit - self.used())

    def status(self) -> StatusSection:
        used = self.used()
        if self.limit == 0:
            line = f"distillation budget: no limit ({used} model distillations today)"
        else:
            line = (
                f"distillation budget: {max(0, self.limit - used)} of {self.limit} left today"
                + (
                    ""
                    if used < self.limit
                    else " (spent: capture uses the extractive distiller, maintenance waits "
                    "for tomorrow)"
                )
            )
        return StatusSection(
            name="budget", rank=55, lines=(line,), data={"limit": self.limit, "used": used}
        )

    @classmethod
    def for_settings(cls, settings: Settings, paths: PimemPaths | None = None) -> DistillBudget:
        state_dir = (paths or PimemPaths.from_env()).state_dir
        return cls(
            limit=settings.distill_budget,
            path=state_dir / "distill-budget.json",
            today=lambda: settings.now().date(),
        )

    def _update(self, add: int, *, within_limit: bool = False) -> int:
        try:
            fd = open_private(self.path, os.O_RDWR)
        except OSError:
            return 0  # an unwritable state dir must not stop capture: count nothing
        with os.fdopen(fd, "r+", encoding="utf-8") as file:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX)
            try:
                record = json.loads(file.read() or "{}")
            except ValueError:
                record = {}
            day = self.today().isoformat()
            used = int(record.get("used", 0)) if record.get("date") == day else 0
            if within_limit and self.limit and used + add > self.limit:
                return 0
            if add:
                used += add
                file.seek(0)
                file.truncate()
                file.write(json.dumps({"date": day, "used": used}))
            return used
