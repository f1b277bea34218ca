"""A serialized queue for backend operations: one worker thread, first in, first out.

Milvus Lite lets one client at a time open a database, and closing a client releases it for
the whole process, so backend operations never overlap: they run one after another, first in,
first out, on one worker thread. A caller queued behind another operation can learn what it is
waiting on. An operation that fails because another process holds the database is retried
after 200, 500, 1000 and 2000 ms; any other failure is returned at once.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import attrs

from pimem_core.plugin import PimemError

T = TypeVar("T")

BACKOFF_SECONDS = (0.2, 0.5, 1.0, 2.0)


class BackendTimeout(PimemError):
    """A backend operation took longer than its time limit."""


@attrs.define
class _Job:
    label: str
    operation: Callable[[], Any]
    is_contention: Callable[[BaseException], bool]
    on_wait: Callable[[str], None] | None = None
    result: Future[Any] = attrs.Factory(Future)
    started: threading.Event = attrs.Factory(threading.Event)


class BackendQueue:
    """Runs operations one at a time on a worker thread, in the order they were submitted."""

    def __init__(
        self,
        *,
        backoff: tuple[float, ...] = BACKOFF_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._backoff = backoff
        self._sleep = sleep
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._holder: str | None = None
        self._pending = 0
        self._state = threading.Lock()
        self._worker: threading.Thread | None = None

    @property
    def pending(self) -> int:
        """Operations submitted and not finished yet, the running one included."""
        return self._pending

    @property
    def holder(self) -> str | None:
        """The label of the operation running now, if any."""
        return self._holder

    def run(
        self,
        label: str,
        operation: Callable[[], T],
        *,
        is_contention: Callable[[BaseException], bool] = lambda _: False,
        on_wait: Callable[[str], None] | None = None,
        timeout: float | None = None,
    ) -> T:
        """Run *operation* in turn and return its result (or raise its exception).

        :param label: what the operation is, for callers queued behind it (``search``...).
        :param is_contention: whether a failure means another process holds the database.
        :param on_wait: told what the call waits for: once with the holder's label when it has
            to queue, and before each retry while another process holds the database.
        :param timeout: seconds the operation may run once started; time spent queued does
            not count. On expiry the caller gets :class:`BackendTimeout`; the operation itself
            finishes in the background, since a running database call cannot be interrupted.
        """
        job = _Job(label=label, operation=operation, is_contention=is_contention, on_wait=on_wait)
        with self._state:
            busy = self._pending > 0
            holder = self._holder
            self._pending += 1
            self._jobs.put(job)
            self._ensure_worker()
        if busy and on_wait is not None:
            on_wait(holder or "another memory operation")
        job.started.wait()
        try:
            result: T = job.result.result(timeout=timeout)
        except TimeoutError:
            raise BackendTimeout(
                f"memory {label} timed out after {timeout:g} s; it finishes in the background"
            ) from None
        return result

    def _ensure_worker(self) -> None:
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._work, name="pimem-backend", daemon=True)
            self._worker.start()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            self._holder = job.label
            job.started.set()
            try:
                job.result.set_result(self._attempt(job))
            except BaseException as error:  # noqa: BLE001 - handed to the caller, who decides
                job.result.set_exception(error)
            finally:
                with self._state:
                    self._holder = None
                    self._pending -= 1

    def _attempt(self, job: _Job) -> Any:
        retries = len(self._backoff)
        for retry, delay in enumerate((*self._backoff, None), 1):
            try:
                return job.operation()
            except Exception as error:
                if delay is None or not job.is_contention(error):
                    raise
                if job.on_wait is not None:  # the person waiting sees why, and for how long
                    job.on_wait(
                        f"the memory database, which another process holds "
                        f"(retry {retry} of {retries})"
                    )
                self._sleep(delay)
        raise AssertionError("unreachable: the last attempt returns or raises")
