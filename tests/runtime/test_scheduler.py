"""The runtime's scheduler: tasks, delayed calls, cancellation and shutdown."""

from __future__ import annotations

import threading
import time

import pytest

from pimem_core.runtime.scheduler import Scheduler


def test_a_task_hands_its_result_and_its_exception_to_the_future() -> None:
    scheduler = Scheduler()
    assert scheduler.run("answer", lambda: 42).result(timeout=10) == 42

    def broken() -> None:
        raise ValueError("broken")

    with pytest.raises(ValueError, match="broken"):
        scheduler.run("broken", broken).result(timeout=10)


def test_a_delayed_call_runs_as_a_task_and_a_cancelled_one_never_does() -> None:
    scheduler = Scheduler()
    ran: list[str] = []
    done = threading.Event()
    cancelled = scheduler.call_later(0.01, "cancelled", lambda: ran.append("cancelled"))
    cancelled.cancel()

    def later() -> None:
        ran.append("later")
        done.set()

    scheduler.call_later(0.05, "later", later)
    assert done.wait(10)
    assert ran == ["later"]


def test_delayed_calls_run_in_the_order_they_fall_due() -> None:
    scheduler = Scheduler()
    ran: list[str] = []
    both = threading.Barrier(3)

    def call(name: str) -> None:
        ran.append(name)
        both.wait(10)

    scheduler.call_later(0.2, "second", lambda: call("second"))
    scheduler.call_later(0.01, "first", lambda: call("first"))
    both.wait(10)
    assert ran == ["first", "second"]


def test_shutdown_cancels_what_is_waiting_and_names_what_still_runs() -> None:
    scheduler = Scheduler()
    release = threading.Event()
    started = threading.Event()

    def stuck() -> None:
        started.set()
        release.wait(10)

    scheduler.run("stuck", stuck)
    assert started.wait(10)
    ran: list[str] = []
    scheduler.call_later(0.01, "never", lambda: ran.append("never"))
    assert scheduler.running == ("stuck",)
    assert scheduler.shutdown(time.monotonic() + 0.1) == ("stuck",)
    release.set()
    refused = scheduler.run("after", lambda: None)
    with pytest.raises(RuntimeError, match="shut down: after not run"):
        refused.result(timeout=10)
    assert ran == []


def test_shutdown_waits_for_a_task_that_finishes_before_the_deadline() -> None:
    scheduler = Scheduler()
    release = threading.Event()
    finished = scheduler.run("short", lambda: release.wait(10))
    threading.Timer(0.05, release.set).start()
    assert scheduler.shutdown(time.monotonic() + 10) == ()
    assert finished.done()
