"""Keeping the stable snapshot byte-identical between checkpoints.

Provider prefix caches key on the exact bytes of the system prompt, so the snapshot is rebuilt
only at checkpoints: session start, a new local day, the agent's context compaction and a
forgotten entry. Mid-session writes, including other agents' appends, leave it untouched.
"""

from __future__ import annotations

from datetime import date, datetime

import attrs

from pimem_core.api import Pimem
from pimem_core.types import Scope


@attrs.define
class StableSnapshot:
    """The snapshot of one session's scope, rebuilt only when asked or when the day changes."""

    pimem: Pimem
    scope: Scope
    _text: str | None = None
    _day: date | None = None

    def refresh(self, now: datetime | None = None) -> str | None:
        """A checkpoint: rebuild from the memory files as they are now."""
        moment = now or self.pimem.settings.now()
        self._text = self.pimem.build_snapshot(self.scope, moment)
        self._day = moment.date()
        return self._text

    def current(self, now: datetime | None = None) -> str | None:
        """The snapshot for this prompt: the cached bytes, unless none exist or the day rolled over."""
        moment = now or self.pimem.settings.now()
        if self._day != moment.date():
            return self.refresh(moment)
        return self._text
