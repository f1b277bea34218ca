"""When a session's memory store gets indexed: caught up at start, soon after writes, at shutdown.

Indexing never runs on the agent's path: every run is a task of the session's scheduler. A write
schedules a run five seconds later, and every further write during the wait restarts it, so a
burst of captures costs one run. Shutdown starts a pending run at once and waits for it up to a
cap; what is not indexed by then is caught up at the next session start. memsearch's watcher is
never used: it would hold the database lock for the whole session. A host that leaves without
waiting for the last run gets half a second to exit before it starts.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from pimem_core.runtime.scheduler import Delayed, Scheduler

log = logging.getLogger(__name__)

DEBOUNCE_SECONDS = 5.0
SHUTDOWN_CAP_SECONDS = 15.0
#: How long a host leaving without waiting for the last index run has to exit before it starts.
AFTER_HOST_SECONDS = 0.5


class Indexer:
    """Schedules index runs for one session's store.

    ``run(reason, files)`` does one run: of the changed *files*, or of the whole store when
    *files* is empty (a catch-up).
    """

    def __init__(
        self,
        run: Callable[[str, tuple[Path, ...]], object],
        *,
        debounce: float = DEBOUNCE_SECONDS,
        scheduler: Scheduler | None = None,
    ) -> None:
        self._run = run
        self._debounce = debounce
        self._scheduler = scheduler or Scheduler("pimem-indexer")
        self._lock = threading.Lock()
        self._timer: Delayed | None = None
        self._worker: Future[None] | None = None
        self._again: str | None = None
        self._due = False
        #: When the last run may start, once a host left without waiting for it.
        self._after_host: float | None = None
        self._changed: set[Path] = set()
        self._whole = False
        #: Why the last run failed, or ``None`` when it succeeded (or none ran yet).
        self.last_failure: str | None = None
        self.runs = 0

    def catch_up(self) -> None:
        """Index the whole store in the background: whatever was written since the last run."""
        with self._lock:
            self._whole = True
        self._start("catch-up")

    def note_write(self, file: Path | None = None) -> None:
        """*file* changed (``None``: something did): (re)start the wait before the next run."""
        with self._lock:
            if file is None:
                self._whole = True
            else:
                self._changed.add(file)
            if self._timer is not None:
                self._timer.cancel()
            self._due = True
            self._timer = self._scheduler.call_later(
                self._debounce, "index-debounce", lambda: self._start("write")
            )

    def shutdown(self, cap: float = SHUTDOWN_CAP_SECONDS) -> bool:
        """Run a pending index and wait for it at most *cap* seconds; ``True`` if settled.

        With *cap* 0 (a host leaving without waiting for the run) the run starts
        ``AFTER_HOST_SECONDS`` later, so that it does not share the machine with the host's own
        exit; a later call that waits starts it then, not before.
        """
        with self._lock:
            timer, self._timer, due = self._timer, None, self._due
            if timer is not None:
                timer.cancel()
            if due and cap == 0:
                self._after_host = time.monotonic() + AFTER_HOST_SECONDS
                self._timer = self._scheduler.call_later(
                    AFTER_HOST_SECONDS, "index-after-host", lambda: self._start("shutdown")
                )
                return False
            after_host = self._after_host
        if due:
            if after_host is not None:
                time.sleep(max(0.0, min(after_host - time.monotonic(), cap)))
            self._start("shutdown")
        worker = self._worker
        if worker is not None:
            concurrent.futures.wait([worker], timeout=cap)
            return worker.done()
        return True

    def _start(self, reason: str) -> None:
        with self._lock:
            self._due = False
            if self._worker is not None and not self._worker.done():
                self._again = reason  # the running pass may have missed this write
                return
            self._worker = self._scheduler.run("index", lambda: self._work(reason))

    def _take_files(self) -> tuple[Path, ...]:
        with self._lock:
            files = () if self._whole else tuple(sorted(self._changed))
            self._changed.clear()
            self._whole = False
        return files

    def _work(self, reason: str) -> None:
        while True:
            try:
                self._run(reason, self._take_files())
                self.last_failure = None
            except Exception as error:  # noqa: BLE001 - remembered for status, never raised
                log.warning("index run (%s) failed: %s", reason, error)
                self.last_failure = str(error)
            self.runs += 1
            with self._lock:
                reason, self._again = self._again or "", None
                if not reason:
                    self._worker = None
                    return
