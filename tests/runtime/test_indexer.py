"""When a session's index runs happen: at shutdown, now when the caller waits, a little later
when the host leaves without waiting (its own exit goes first)."""

from __future__ import annotations

import threading
from pathlib import Path

from pimem_core.runtime import indexer as indexer_module
from pimem_core.runtime.indexer import Indexer


class Runs:
    def __init__(self) -> None:
        self.reasons: list[str] = []
        self.done = threading.Event()

    def __call__(self, reason: str, files: tuple[Path, ...]) -> None:
        self.reasons.append(reason)
        self.done.set()


def test_a_waiting_shutdown_runs_the_pending_index_at_once(tmp_path: Path) -> None:
    runs = Runs()
    indexer = Indexer(runs, debounce=60)
    indexer.note_write(tmp_path / "2026-08-13.md")
    assert indexer.shutdown(10) is True
    assert runs.reasons == ["shutdown"]


def test_a_host_leaving_without_waiting_gets_its_exit_first(tmp_path: Path) -> None:
    runs = Runs()
    indexer = Indexer(runs, debounce=60)
    indexer.note_write(tmp_path / "2026-08-13.md")
    assert indexer.shutdown(0.0) is False
    assert runs.reasons == [], "nothing runs while the host exits"
    assert runs.done.wait(10 + indexer_module.AFTER_HOST_SECONDS)
    assert runs.reasons == ["shutdown"]
    assert indexer.shutdown(10) is True, "a later call waits for that run, and runs none again"
    assert runs.reasons == ["shutdown"]


def test_a_call_that_waits_after_the_host_left_starts_the_run_then(tmp_path: Path) -> None:
    runs = Runs()
    indexer = Indexer(runs, debounce=60)
    indexer.note_write(tmp_path / "2026-08-13.md")
    indexer.shutdown(0.0)
    assert indexer.shutdown(10) is True  # the end of the host's input: it waits for the run
    assert runs.reasons == ["shutdown"]
