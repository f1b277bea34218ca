"""The files this process wrote that the read model has not taken in yet.

A write does not wait for the read model (a capture that an exiting agent host waits for must
not embed), but the next search must see it: the search waits for the read model while any
write is outstanding. Each file carries a count of the writes noted, so a write that lands
while a refresh reads the file stays outstanding after that refresh.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable


class OutstandingWrites:
    """Files written and not yet taken in, each with the count of writes noted; thread-safe,
    and never held while the read model works (a writer never waits)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    def note(self, sources: Iterable[str]) -> None:
        with self._lock:
            for source in sources:
                self._counts[source] = self._counts.get(source, 0) + 1

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._counts)

    def now(self) -> dict[str, int]:
        """The outstanding files as they are now: hand the result to :meth:`taken_in`."""
        with self._lock:
            return dict(self._counts)

    def taken_in(self, seen: dict[str, int]) -> None:
        """The files of *seen* (from :meth:`now`) are in the read model, unless written since."""
        with self._lock:
            for source, count in seen.items():
                if self._counts.get(source) == count:
                    del self._counts[source]
