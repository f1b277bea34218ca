"""Taking turns at a local database with the other processes of the mesh: a knock at its lock
file (or, where knocks cannot be seen, a long stretch of use) leaves it closed for a while
before the next call, so a ``memsearch`` command waiting for it gets in."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from pimem_plugins.memsearch import lock_knocks
from pimem_plugins.memsearch.database_uri import is_server

#: When another process knocks at the open local database (opens its lock file: a
#: ``memsearch`` command that found it taken, say), the database is closed before the next
#: call and left closed until the knocker comes back for it, for this long at most: under a
#: steady stream of calls (a busy memory service) the other agents of the mesh still get in.
COURTESY_SECONDS = 5.0
#: Where knocks cannot be seen: a local database in use this long without a pause (open, or
#: closed and opened again at once) is left closed for :data:`YIELD_SECONDS` before the next
#: call, whether or not anyone waits for it.
MAX_HOLD_SECONDS = 3.0
YIELD_SECONDS = 2.5


class Turns:
    """When this process leaves its database to others. *holding* says whether the database
    is open (leased) now, and *release* closes it."""

    def __init__(self, holding: Callable[[], bool], release: Callable[[], None]) -> None:
        self._holding = holding
        self._release = release
        #: When the database was last closed, and since when it has been in use with no
        #: pause long enough for another process to take it (:meth:`take`).
        self.closed_at = float("-inf")
        self._streak: float | None = None
        #: Other processes' opens of the local database's lock file, by database.
        self.knocks: dict[str, lock_knocks.LockKnocks | None] = {}
        self._owed = False

    def _watch(self, uri: str) -> lock_knocks.LockKnocks | None:
        """The knocks at local database *uri*, once it exists (``None`` where inotify is not
        available: turns are then taken on a timer)."""
        if uri not in self.knocks:
            database = Path(uri).expanduser()
            if not database.is_dir():
                return None  # not made yet: looked for again at the next call
            self.knocks[uri] = lock_knocks.watch(database)
        return self.knocks[uri]

    def opened(self, uri: str) -> None:
        """After this process opened *uri*: its own knock, and those made while it was closed,
        are nobody waiting for it."""
        knocks = None if is_server(uri) else self._watch(uri)
        if knocks is not None:
            knocks.forget()

    def closed(self, uri: str) -> None:
        """After this process closed *uri*: a knock while it was open is remembered (the
        knocker is owed a turn)."""
        self.closed_at = time.monotonic()
        knocks = self.knocks.get(uri)
        self._owed = knocks is not None and knocks.knocked()

    def take(self, uri: str) -> None:
        """Before a call on a local database: when another process knocked while it was
        open, close it and leave it to them (on the backend queue, so pimem's own calls wait
        with it). Where knocks cannot be seen, after :data:`MAX_HOLD_SECONDS` of use with no
        pause of :data:`YIELD_SECONDS`, close it and wait that long."""
        if is_server(uri):
            return  # a server has no lock to share
        knocks = self._watch(uri)
        if knocks is not None:
            if self._holding() and knocks.knocked():
                self._release()
                self._owed = True
            if self._owed:
                self._owed = False
                self._step_aside(knocks, until=self.closed_at + COURTESY_SECONDS)
            return
        now = time.monotonic()
        if self._streak is None or (not self._holding() and now - self.closed_at >= YIELD_SECONDS):
            self._streak = now  # left alone long enough: a new stretch of use begins
        elif now - self._streak >= MAX_HOLD_SECONDS:
            self._release()
            time.sleep(YIELD_SECONDS)
            self._streak = time.monotonic()

    @staticmethod
    def _step_aside(knocks: lock_knocks.LockKnocks, *, until: float) -> None:
        """Wait, the database closed, until the knocker comes back (and a moment more, for it
        to take the lock) or the clock reads *until*."""
        while time.monotonic() < until:
            if knocks.knocked():
                time.sleep(0.2)
                return
            time.sleep(0.1)
