"""Searches before background embedding: the work behind the requests (a store's facts, an
index run's chunks) steps aside between its batches while a search is answered.

Two cores embed one batch at a time about as fast as two batches side by side, so a search that
runs beside a batch of the background waits as long as the batch takes. The background checks
here before each batch and holds back while a search is on; the search then shares the cores
with at most the batch already running (a tenth of a second)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: The longest the background holds back for searches before it takes a batch anyway: a steady
#: stream of searches still sees the store indexed.
LONGEST_HOLD_SECONDS = 2.0


class Precedence:
    """Who goes first on the embedder: searches, then the background."""

    def __init__(self) -> None:
        self._searching = 0
        self._changed = threading.Condition()

    @contextmanager
    def search(self) -> Iterator[None]:
        """A search runs in this block: background batches wait for it to end."""
        with self._changed:
            self._searching += 1
        try:
            yield
        finally:
            with self._changed:
                self._searching -= 1
                self._changed.notify_all()

    def step_aside(self, longest: float = LONGEST_HOLD_SECONDS) -> None:
        """Called by background work before a batch: returns once no search is on (or after
        *longest* seconds)."""
        with self._changed:
            self._changed.wait_for(lambda: self._searching == 0, timeout=longest)
