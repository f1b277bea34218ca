"""The runtime's background work, in one place: tasks, delayed calls, deadlines and shutdown.

A session's capture, indexer and maintenance runner start nothing on their own: they ask their
:class:`Scheduler`. A task runs on a daemon thread of its own, because some of them cannot be
interrupted (a distiller's HTTP request, a database call) and a hung one must not hold up the
others; a delayed call waits on the scheduler's one timer thread. Shutdown cancels the delayed
calls that have not started and waits for the running tasks up to a deadline; a task still
running then is left to finish in the background (its thread is a daemon), and reported.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import attrs

T = TypeVar("T")
log = logging.getLogger(__name__)

#: How long a thread keeps the interpreter lock while another waits for it. Python's default,
#: 5 ms, makes the thread answering the host wait that long behind a background task (the
#: usage record, an index run's bookkeeping) at every hand-over.
SWITCH_INTERVAL_S = 0.0005


def answer_promptly() -> None:
    """Let a process that serves a host hand the interpreter lock over sooner (see
    :data:`SWITCH_INTERVAL_S`): its answers matter more than its background throughput."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)


@attrs.define(eq=False)
class Delayed:
    """A call the scheduler makes later, unless cancelled first."""

    due: float
    name: str
    call: Callable[[], object] = attrs.field(repr=False)
    cancelled: bool = False

    def cancel(self) -> None:
        """Do not make the call (a no-op once it started)."""
        self.cancelled = True


class Scheduler:
    """Runs one runtime's background work; see the module's documentation."""

    def __init__(self, name: str = "pimem") -> None:
        self._name = name
        self._lock = threading.Condition()
        self._delayed: list[tuple[float, int, Delayed]] = []
        self._order = itertools.count()
        self._timer: threading.Thread | None = None
        self._running: dict[Future[Any], str] = {}
        self._closed = False

    def run(self, name: str, task: Callable[[], T]) -> Future[T]:
        """Start *task* now, on a thread of its own; its result or exception is the future's."""
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                future.set_exception(RuntimeError(f"{self._name} is shut down: {name} not run"))
                return future
            self._running[future] = name

        def work() -> None:
            try:
                future.set_result(task())
            except BaseException as error:  # noqa: BLE001 - the future carries it to the caller
                future.set_exception(error)
            finally:
                with self._lock:
                    self._running.pop(future, None)
                    self._lock.notify_all()

        threading.Thread(target=work, name=f"{self._name}-{name}", daemon=True).start()
        return future

    def call_later(self, delay: float, name: str, call: Callable[[], object]) -> Delayed:
        """Make *call* as a task after *delay* seconds, unless it is cancelled before."""
        delayed = Delayed(due=time.monotonic() + delay, name=name, call=call)
        with self._lock:
            if self._closed:
                delayed.cancel()
                return delayed
            heapq.heappush(self._delayed, (delayed.due, next(self._order), delayed))
            if self._timer is None:
                self._timer = threading.Thread(
                    target=self._wait_for_due, name=f"{self._name}-timer", daemon=True
                )
                self._timer.start()
            self._lock.notify_all()
        return delayed

    @property
    def running(self) -> tuple[str, ...]:
        """The names of the tasks running now."""
        with self._lock:
            return tuple(sorted(self._running.values()))

    def shutdown(self, deadline: float) -> tuple[str, ...]:
        """Cancel every delayed call, take no new work, and wait for the running tasks until
        *deadline* (monotonic); returns the names of those still running then."""
        with self._lock:
            self._closed = True
            for _, _, delayed in self._delayed:
                delayed.cancel()
            self._delayed.clear()
            self._lock.notify_all()
            while self._running and time.monotonic() < deadline:
                self._lock.wait(max(0.0, deadline - time.monotonic()))
            left = tuple(sorted(self._running.values()))
        if left:
            log.warning("%s shut down with work still running: %s", self._name, ", ".join(left))
        return left

    def _wait_for_due(self) -> None:
        with self._lock:
            while not self._closed:
                if not self._delayed:
                    self._lock.wait()
                    continue
                due, _, delayed = self._delayed[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self._lock.wait(wait)
                    continue
                heapq.heappop(self._delayed)
                if not delayed.cancelled:
                    self.run(delayed.name, delayed.call)  # the lock is reentrant
            self._timer = None
