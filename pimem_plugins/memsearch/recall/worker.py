"""The read model's background work: one thread, running short steps, each step scheduling
the next while there is more to do."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor


class Worker:
    """One background thread that runs a step again for as long as it says more is left."""

    def __init__(self) -> None:
        # One worker thread, not a daemon (see wake); idle threads cost nothing.
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="pimem-read-model")
        self._scheduled = False
        self._lock = threading.Lock()

    def wake(self, step: Callable[[], bool]) -> None:
        """Schedule *step* unless a step is scheduled already. The work runs in short steps,
        each scheduling the next: at interpreter exit the executor finishes the step in hand
        and refuses the next, so a process never exits with a thread in native code."""
        with self._lock:
            if self._scheduled:
                return
            self._scheduled = True
        try:
            self._executor.submit(self._run, step)
        except RuntimeError:  # the interpreter is shutting down: the work is left for later
            with self._lock:
                self._scheduled = False

    def _run(self, step: Callable[[], bool]) -> None:
        more = step()
        with self._lock:
            self._scheduled = False
        if more:
            self.wake(step)

    def idle(self, timeout: float) -> bool:
        """Wait until no step is scheduled; ``True`` when none is."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not self._scheduled:
                    return True
            time.sleep(0.02)
        return False
