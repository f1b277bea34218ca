"""The index ledger: which day files changed since this machine last indexed them, told by a
stat and confirmed by a hash, and the catch-up's one line (no database, no model)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pimem_core.service_values import FailedFile, IndexReport
from pimem_plugins.memsearch import ledger as ledger_module
from pimem_plugins.memsearch.catch_up import CatchUp, catch_up
from pimem_plugins.memsearch.ledger import DayFile, IndexLedger

DAY = "2026-08-13.md"
ENTRY = (
    "\n## Session 22:41\n\n### 22:41\n<!-- session:s1 turn:t1 transcript:/t.jsonl -->\n- a fact\n\n"
)
HOUR_NS = 3_600 * 1_000_000_000


class Clock:
    """A monotonic clock the test moves: the ledger's full checks are a second apart."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> Path:
    memory = tmp_path / "repo" / ".memsearch" / "memory"
    memory.mkdir(parents=True)
    return memory


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths the ledger reads and hashes, in order."""
    reads: list[str] = []
    digest = ledger_module._digest

    def counting(path: str) -> str | None:
        reads.append(os.path.basename(path))
        return digest(path)

    monkeypatch.setattr(ledger_module, "_digest", counting)
    return reads


def ledger_of(store: Path, clock: Clock, file: Path | None = None) -> IndexLedger:
    return IndexLedger(file, store, monotonic=clock)


def names(days: list[DayFile]) -> list[str]:
    return [os.path.basename(day.path) for day in days]


def age(path: Path, hours: float = 2) -> None:
    """Set *path*'s mtime back: the ledger trusts the stat of a file that settled."""
    past = path.stat().st_mtime_ns - int(hours * HOUR_NS)
    os.utime(path, ns=(past, past))


def index_all(ledger: IndexLedger) -> None:
    """What an index run of the whole store does to the ledger."""
    ledger.record(ledger.fingerprint())


def test_a_file_never_indexed_here_has_changed_newest_first(store: Path, clock: Clock) -> None:
    for day in ("2026-08-11.md", "2026-08-13.md", "2026-08-12.md"):
        (store / day).write_text(ENTRY)
    (store / ".hidden.md").write_text(ENTRY)
    (store / "notes.txt").write_text("not memory")
    ledger = ledger_of(store, clock)
    assert names(ledger.changed()) == ["2026-08-13.md", "2026-08-12.md", "2026-08-11.md"]
    index_all(ledger)
    clock.now += 2
    assert ledger.changed() == []


def test_an_unchanged_stat_rules_a_file_out_without_reading_it(
    store: Path, clock: Clock, hashed: list[str]
) -> None:
    (store / DAY).write_text(ENTRY)
    age(store / DAY)
    ledger = ledger_of(store, clock)
    index_all(ledger)
    hashed.clear()
    for _ in range(3):
        clock.now += 2
        assert ledger.changed() == []
    assert hashed == []


def test_a_pull_that_rewrites_a_file_with_the_same_bytes_is_not_a_change(
    store: Path, clock: Clock
) -> None:
    """git checks files out anew: the stat moves, the hash says the bytes did not."""
    (store / DAY).write_text(ENTRY)
    age(store / DAY)
    ledger = ledger_of(store, clock)
    index_all(ledger)
    (store / DAY).unlink()
    (store / DAY).write_text(ENTRY)
    clock.now += 2
    assert ledger.changed() == []


def test_appended_pulled_and_deleted_files_have_changed(store: Path, clock: Clock) -> None:
    for day in ("2026-08-11.md", "2026-08-12.md", "2026-08-13.md"):
        (store / day).write_text(ENTRY)
        age(store / day)
    ledger = ledger_of(store, clock)
    index_all(ledger)
    with (store / "2026-08-13.md").open("a") as file:  # another agent appends
        file.write(ENTRY.replace("a fact", "another fact"))
    (store / "2026-08-14.md").write_text(ENTRY)  # a teammate's day, pulled
    (store / "2026-08-11.md").unlink()  # forgotten to the last entry, pulled
    clock.now += 2
    changed = ledger.changed()
    assert names(changed) == ["2026-08-14.md", "2026-08-13.md", "2026-08-11.md"]
    assert [day.digest is None for day in changed] == [False, False, True]
    ledger.record(changed)
    clock.now += 2
    assert ledger.changed() == []


def test_between_full_checks_only_the_recent_files_are_looked_at(store: Path, clock: Clock) -> None:
    """An append to an old day file, with the directory unchanged, waits for the next full
    check (a second at most); an append to a recent one is seen at once."""
    (store / "2026-01-01.md").write_text(ENTRY)
    age(store / "2026-01-01.md", hours=48)
    (store / DAY).write_text(ENTRY)
    ledger = ledger_of(store, clock)
    index_all(ledger)
    assert ledger.changed() == []
    for day in ("2026-01-01.md", DAY):
        with (store / day).open("a") as file:
            file.write(ENTRY.replace("a fact", "more"))
    age(store / "2026-01-01.md", hours=48)
    assert names(ledger.changed()) == [DAY]
    clock.now += 2
    assert names(ledger.changed()) == [DAY, "2026-01-01.md"]


def test_this_processs_own_write_is_left_to_its_index_run(store: Path, clock: Clock) -> None:
    (store / DAY).write_text(ENTRY)
    ledger = ledger_of(store, clock)
    index_all(ledger)
    with (store / DAY).open("a") as file:
        file.write(ENTRY.replace("a fact", "mine"))
    ledger.hold(store / DAY)
    clock.now += 2
    assert ledger.changed() == []
    with (store / DAY).open("a") as file:  # then another agent appends to the same file
        file.write(ENTRY.replace("a fact", "theirs"))
    clock.now += 2
    assert names(ledger.changed()) == [DAY]


def test_a_run_that_reached_a_changed_file_vouches_for_the_bytes_it_read_before(
    store: Path, clock: Clock
) -> None:
    """The fingerprint is taken before memsearch reads the file: a write during the run makes
    the file differ from it next time, so it is indexed again rather than missed."""
    (store / DAY).write_text(ENTRY)
    ledger = ledger_of(store, clock)
    taken = ledger.fingerprint([store / DAY])
    with (store / DAY).open("a") as file:
        file.write(ENTRY.replace("a fact", "during the run"))
    ledger.record(taken)
    clock.now += 2
    assert names(ledger.changed()) == [DAY]


def test_files_outside_the_store_are_not_the_ledgers_business(
    store: Path, clock: Clock, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere.md"
    elsewhere.write_text(ENTRY)
    (store / DAY).write_text(ENTRY)
    ledger = ledger_of(store, clock)
    assert names(ledger.fingerprint([elsewhere, store / DAY])) == [DAY]


def test_the_ledger_is_shared_through_its_file_and_an_unreadable_one_is_empty(
    store: Path, clock: Clock, tmp_path: Path
) -> None:
    file = tmp_path / "state" / "index-ledger" / "ms_repo_0123abcd.json"
    (store / DAY).write_text(ENTRY)
    index_all(ledger_of(store, clock, file))
    other = ledger_of(store, Clock(), file)  # another process, as it were
    assert other.changed() == []
    file.write_text("{not json")
    assert names(ledger_of(store, Clock(), file).changed()) == [DAY]


def test_another_run_may_have_taken_a_file_in_while_the_catch_up_waited(
    store: Path, clock: Clock
) -> None:
    (store / DAY).write_text(ENTRY)
    ledger = ledger_of(store, clock)
    changed = ledger.changed()
    assert ledger.outstanding(changed) == changed
    index_all(ledger)
    assert ledger.outstanding(changed) == []


def test_clearing_the_ledger_makes_every_file_change(store: Path, clock: Clock) -> None:
    (store / DAY).write_text(ENTRY)
    ledger = ledger_of(store, clock)
    index_all(ledger)
    ledger.clear()
    clock.now += 2
    assert names(ledger.changed()) == [DAY]


# -- the catch-up ----------------------------------------------------------------------------


def test_a_catch_up_indexes_what_changed_and_says_so_in_one_line(store: Path, clock: Clock) -> None:
    for day in ("2026-08-12.md", DAY):
        (store / day).write_text(ENTRY)
    ledger = ledger_of(store, clock)
    given: list[tuple[list[str], float]] = []

    def run(files: tuple[DayFile, ...], budget: float) -> tuple[int, IndexReport]:
        given.append((names(list(files)), budget))
        ledger.record(files)
        return len(files), IndexReport(indexed_chunks=2, total_files=len(files))

    done = catch_up(ledger, 5.0, run)
    assert given == [(["2026-08-13.md", "2026-08-12.md"], 5.0)]
    assert done.notice == (
        "indexed 2 daily memory files new or changed since the last index run, before searching"
    )
    clock.now += 2
    assert catch_up(ledger, 5.0, run) == CatchUp(pending=0)
    assert CatchUp(pending=0).notice is None
    assert len(given) == 1


def test_files_another_run_took_in_meanwhile_are_not_the_catch_ups_to_tell(
    store: Path, clock: Clock
) -> None:
    """A search queued behind a session's start catch-up finds nothing left to index."""
    (store / DAY).write_text(ENTRY)
    ledger = ledger_of(store, clock)

    def run(files: tuple[DayFile, ...], budget: float) -> tuple[int, IndexReport]:
        index_all(ledger)  # the session's catch-up ran first
        return len(ledger.outstanding(files)), IndexReport(indexed_chunks=0)

    done = catch_up(ledger, 5.0, run)
    assert (done.pending, done.notice) == (0, None)


def test_the_catch_ups_line_when_the_budget_ran_out_or_indexing_failed() -> None:
    assert CatchUp(pending=9, reached=2, budget=5.0).notice == (
        "indexed 2 of 9 daily memory files new or changed since the last index run, before "
        "searching; a search spends at most 5 s on it: the next one indexes more, or "
        "`pimem index` indexes them all now"
    )
    failed = (FailedFile(path="/s/2026-08-13.md", error="boom"),)
    assert CatchUp(pending=1, reached=1, failed_files=failed).notice == (
        "indexed 1 daily memory file new or changed since the last index run, before "
        "searching; 1 failed, first /s/2026-08-13.md (boom)"
    )
    assert CatchUp(pending=3, error="the database is locked").notice == (
        "could not index 3 daily memory files new or changed since the last index run, before "
        "searching: the database is locked; the search used what the index holds"
    )


def test_a_clone_written_at_once_checks_only_its_newest_days_on_every_search() -> None:
    # A checkout gives every file the same time: checking them all would cost each search a
    # stat per day of history.
    second = 1_000_000_000
    cloned = {
        f"/m/2026-{month:02d}-{day:02d}.md": 5 * second
        for month in (1, 2)
        for day in (1, 2, 3, 4, 5, 6)
    }
    cloned["/m/2025-12-31.md"] = 5 * second - 2 * ledger_module.RECENT_NS
    recent = ledger_module.recent_files(cloned)
    assert len(recent) == ledger_module.RECENT_FILES
    assert recent[:2] == ["/m/2026-02-06.md", "/m/2026-02-05.md"]
    assert "/m/2025-12-31.md" not in recent
    written_now = {**cloned, "/m/2026-01-01.md": 6 * second}
    assert ledger_module.recent_files(written_now)[0] == "/m/2026-01-01.md"
