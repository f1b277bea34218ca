"""The backend queue and the indexer schedule, with fake operations (no database)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from pimem_core.runtime.indexer import Indexer
from pimem_plugins.memsearch.work_queue import BackendQueue, BackendTimeout


class Contention(Exception):
    pass


def test_operations_run_one_at_a_time_in_submission_order() -> None:
    queue = BackendQueue()
    release = threading.Event()
    order: list[int] = []
    inside = threading.Semaphore(1)

    def operation(n: int) -> int:
        assert inside.acquire(blocking=False), "two operations overlapped"
        order.append(n)
        inside.release()
        return n

    blocker = threading.Thread(target=queue.run, args=("hold", lambda: release.wait(5)))
    blocker.start()
    threads = []
    for n in range(20):
        thread = threading.Thread(target=queue.run, args=(f"op{n}", lambda n=n: operation(n)))
        thread.start()
        threads.append(thread)
        while queue.pending < n + 2:  # wait until this one is queued before the next
            time.sleep(0.001)
    release.set()
    for thread in [blocker, *threads]:
        thread.join()
    assert order == list(range(20))


def hold(queue: BackendQueue, label: str) -> tuple[threading.Event, threading.Thread]:
    """Occupy *queue* with an operation that runs until the returned event is set."""
    release, started = threading.Event(), threading.Event()

    def operation() -> None:
        started.set()
        release.wait(5)

    holder = threading.Thread(target=queue.run, args=(label, operation))
    holder.start()
    started.wait(5)
    return release, holder


def test_a_queued_caller_learns_what_it_waits_on() -> None:
    queue = BackendQueue()
    release, holder = hold(queue, "index")
    notes: list[str] = []
    waiter = threading.Thread(
        target=queue.run, args=("search", lambda: 1), kwargs={"on_wait": notes.append}
    )
    waiter.start()
    while queue.pending < 2:  # the waiter is queued behind the holder
        time.sleep(0.001)
    release.set()
    holder.join()
    waiter.join()
    assert notes == ["index"]


def test_an_idle_queue_gives_no_note() -> None:
    notes: list[str] = []
    assert BackendQueue().run("search", lambda: 7, on_wait=notes.append) == 7
    assert notes == []


def test_contention_is_retried_on_the_backoff_schedule() -> None:
    sleeps: list[float] = []
    queue = BackendQueue(sleep=sleeps.append)
    attempts = iter([Contention(), Contention(), None])

    def flaky() -> str:
        error = next(attempts)
        if error is not None:
            raise error
        return "ok"

    notes: list[str] = []
    contended = queue.run(
        "search", flaky, is_contention=lambda e: isinstance(e, Contention), on_wait=notes.append
    )
    assert contended == "ok"
    assert sleeps == [0.2, 0.5]
    assert notes == [  # what the person waiting sees, before each retry
        "the memory database, which another process holds (retry 1 of 4)",
        "the memory database, which another process holds (retry 2 of 4)",
    ]


def test_contention_that_never_ends_fails_after_four_retries() -> None:
    sleeps: list[float] = []
    calls: list[int] = []
    queue = BackendQueue(sleep=sleeps.append)

    def locked() -> None:
        calls.append(1)
        raise Contention("another process holds the lock")

    with pytest.raises(Contention):
        queue.run("search", locked, is_contention=lambda e: isinstance(e, Contention))
    assert sleeps == [0.2, 0.5, 1.0, 2.0]
    assert len(calls) == 5


def test_other_failures_are_not_retried() -> None:
    sleeps: list[float] = []
    calls: list[int] = []
    queue = BackendQueue(sleep=sleeps.append)

    def broken() -> None:
        calls.append(1)
        raise ValueError("Configuration error: OPENAI_API_KEY is not set")

    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        queue.run("search", broken, is_contention=lambda e: isinstance(e, Contention))
    assert (sleeps, len(calls)) == ([], 1)


def test_time_spent_queued_does_not_count_toward_the_timeout() -> None:
    queue = BackendQueue()
    release, holder = hold(queue, "index")
    threading.Timer(0.3, release.set).start()
    assert queue.run("search", lambda: "answer", timeout=0.2) == "answer"
    holder.join()


def test_a_slow_operation_times_out_for_its_caller() -> None:
    queue = BackendQueue()
    with pytest.raises(BackendTimeout, match=r"memory search timed out after 0\.05 s"):
        queue.run("search", lambda: time.sleep(0.5), timeout=0.05)


# -- indexer schedule --------------------------------------------------------------------------


def test_a_burst_of_writes_costs_one_run_over_the_changed_files() -> None:
    runs: list[tuple[str, tuple[Path, ...]]] = []
    indexer = Indexer(lambda reason, files: runs.append((reason, files)), debounce=5)
    for day in (1, 2, 1, 2, 1):
        indexer.note_write(Path(f"2026-08-1{day}.md"))
    assert runs == []
    assert indexer.shutdown(cap=5)
    assert runs == [("shutdown", (Path("2026-08-11.md"), Path("2026-08-12.md")))]


def test_a_catch_up_indexes_the_whole_store() -> None:
    runs: list[tuple[str, tuple[Path, ...]]] = []
    indexer = Indexer(lambda reason, files: runs.append((reason, files)))
    indexer.catch_up()
    assert indexer.shutdown(cap=5)
    assert runs == [("catch-up", ())]


def test_the_wait_ends_in_one_run() -> None:
    ran = threading.Event()
    runs: list[str] = []

    def run(reason: str, files: tuple[Path, ...]) -> None:
        runs.append(reason)
        ran.set()

    indexer = Indexer(run, debounce=0.05)
    indexer.note_write()
    assert ran.wait(5)
    assert indexer.shutdown(cap=5)
    assert runs == ["write"]


def test_shutdown_without_pending_writes_runs_nothing() -> None:
    runs: list[str] = []
    assert Indexer(lambda reason, files: runs.append(reason)).shutdown(cap=1)
    assert runs == []


def test_shutdown_gives_up_at_the_cap() -> None:
    release = threading.Event()
    indexer = Indexer(lambda reason, files: release.wait(5), debounce=10)
    indexer.note_write()
    assert indexer.shutdown(cap=0.1) is False
    release.set()


def test_a_write_during_a_run_is_indexed_by_a_second_pass() -> None:
    runs: list[str] = []
    first = threading.Event()
    release = threading.Event()

    def run(reason: str, files: tuple[Path, ...]) -> None:
        runs.append(reason)
        if len(runs) == 1:
            first.set()
            release.wait(5)

    indexer = Indexer(run, debounce=0.01)
    indexer.catch_up()
    first.wait(5)
    indexer.note_write()
    time.sleep(0.1)  # the debounce fires while the catch-up still runs
    release.set()
    assert indexer.shutdown(cap=5)
    # The second pass ran for the write: when its wait ended, or at shutdown on a slow machine.
    assert runs in (["catch-up", "write"], ["catch-up", "shutdown"])


def test_a_failed_run_is_remembered_until_one_succeeds() -> None:
    outcomes = iter([RuntimeError("database is damaged"), None])

    def run(reason: str, files: tuple[Path, ...]) -> None:
        error = next(outcomes)
        if error is not None:
            raise error

    indexer = Indexer(run)
    indexer.catch_up()
    assert indexer.shutdown(cap=5)
    assert indexer.last_failure == "database is damaged"
    indexer.catch_up()
    assert indexer.shutdown(cap=5)
    assert indexer.last_failure is None
