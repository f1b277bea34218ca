"""The in-process memsearch engine: warm embedder, database lease, partial index, indexer."""

from __future__ import annotations

import fcntl
import gc
import importlib.metadata
import os
import subprocess
import sys
import tempfile
import threading
import time
import types
from datetime import datetime
from pathlib import Path

import grpc  # type: ignore[import-untyped]
import pytest

from pimem_core import Pimem
from pimem_core.errors import NoMemoryYet
from pimem_core.private_dir import runtime_dir
from pimem_core.runtime.indexer import Indexer
from pimem_core.types import Anchor, DayAddress, Entry, Scope, SearchQuery
from pimem_plugins.memsearch.chunks import extract_section, search_hit
from pimem_plugins.memsearch.engine import MemsearchEngine
from pimem_plugins.memsearch.errors import database_failure, is_contention, rebuild_instructions
from pimem_plugins.memsearch.index import MemsearchMemoryIndex
from pimem_plugins.memsearch.work_queue import BackendQueue

from conftest import make_pimem
from proc_sockets import tcp_listeners

MEMSEARCH_CLI = str(Path(sys.executable).with_name("memsearch"))


def add(pimem: Pimem, scope: Scope, turn: str, content: str, minute: int) -> Path:
    entry = Entry(
        anchor=Anchor(session="s1", turn=turn, transcript="/t/s1.jsonl"),
        content=content,
        written_at=datetime(2026, 8, 13, 22, minute),
    )
    return pimem.append_entry(scope, entry)


def texts(pimem: Pimem, scope: Scope, query: str) -> list[str]:
    return [hit.content for hit in pimem.search_memory(scope, SearchQuery(text=query, top_k=5))]


def database_locked(home: Path) -> bool:
    """Whether some client holds the Milvus Lite database of the test's memsearch home."""
    fd = os.open(home.parent / "milvus.db" / "LOCK", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


@pytest.fixture
def indexed(memsearch_home: Path, repo: Path) -> tuple[Pimem, Scope]:
    pimem = make_pimem({"PIMEM_DB_LINGER_MS": "0"})
    scope = pimem.resolve_scope(repo)
    add(pimem, scope, "t1", "- the team chose Redis for the hot cache", 41)
    add(pimem, scope, "t2", "- the agent fixed the flaky upload test by mocking the clock", 50)
    assert pimem.index_memory(scope, "test").indexed_chunks == 2
    return pimem, scope


def test_the_embedder_stays_warm_across_calls(indexed: tuple[Pimem, Scope]) -> None:
    pimem, scope = indexed
    texts(pimem, scope, "cache")
    embedders = dict(MemsearchMemoryIndex.opened_by(pimem, scope).engine.embedders.loaded)
    texts(pimem, scope, "flaky test")
    pimem.expand_chunk(scope, pimem.search_memory(scope, SearchQuery(text="cache"))[0].chunk_hash)
    assert MemsearchMemoryIndex.opened_by(pimem, scope).engine.embedders.loaded == embedders
    assert len(embedders) >= 1


def test_threads_asking_for_the_embedder_at_once_share_one(
    memsearch_home: Path, repo: Path
) -> None:
    # The read model encodes on threads of its own while the queue indexes: a second copy of
    # the model (and of its memory arena) would stay for the life of a memory service.
    pimem = make_pimem()
    scope = pimem.resolve_scope(repo)
    engine = MemsearchEngine(BackendQueue())
    found: list[object] = []
    start = threading.Barrier(4)

    def ask() -> None:
        start.wait()
        found.append(engine.embedder(scope))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(found) == 4
    assert all(embedder is found[0] for embedder in found)
    assert len(engine.embedders.loaded) == 1


def test_with_no_linger_the_database_is_closed_after_every_call(
    indexed: tuple[Pimem, Scope], memsearch_home: Path
) -> None:
    pimem, scope = indexed
    texts(pimem, scope, "cache")
    assert not database_locked(memsearch_home)


def test_with_a_linger_the_database_is_released_once_calls_stop(
    indexed: tuple[Pimem, Scope], memsearch_home: Path, repo: Path
) -> None:
    # memsearch's ranker searches the collection (pimem's reads the day files).
    pimem = make_pimem({"PIMEM_DB_LINGER_MS": "2000", "PIMEM_RANKER": "memsearch"})
    scope = pimem.resolve_scope(repo)
    texts(pimem, scope, "cache")
    assert database_locked(memsearch_home)  # leased while calls may follow
    deadline = datetime.now().timestamp() + 20
    while database_locked(memsearch_home) and datetime.now().timestamp() < deadline:
        pass
    assert not database_locked(memsearch_home)


def test_reopening_the_database_leaves_no_connection_behind(indexed: tuple[Pimem, Scope]) -> None:
    # Milvus Lite serves every opening on a new port; a connection kept per opening is a leak
    # in a service that opens and closes the database all day.
    pimem, scope = indexed
    engine = MemsearchMemoryIndex.opened_by(pimem, scope).engine

    def open_channels() -> int:
        gc.collect()
        return sum(isinstance(thing, grpc.Channel) for thing in gc.get_objects())

    texts(pimem, scope, "cache")
    engine.reads.rows(scope)
    before = open_channels()
    for _ in range(5):
        texts(pimem, scope, "cache")
        assert len(engine.reads.rows(scope)) == 2  # opened and closed again (no linger)
    assert open_channels() <= before


def served_sockets() -> list[Path]:
    return sorted(runtime_dir().glob("milvus-*.sock"))


def status_lines(pimem: Pimem, scope: Scope) -> list[str]:
    index = MemsearchMemoryIndex.opened_by(pimem, scope)
    return [line for section in index.status() for line in section.lines]


def test_the_open_database_is_served_on_a_private_unix_socket_not_a_tcp_port(
    indexed: tuple[Pimem, Scope], memsearch_home: Path, repo: Path
) -> None:
    pimem = make_pimem({"PIMEM_DB_LINGER_MS": "60000"})
    scope = pimem.resolve_scope(repo)
    engine = MemsearchMemoryIndex.opened_by(pimem, scope).engine
    assert engine.reads.search(scope, "cache", 1)
    (served,) = served_sockets()
    assert served.stat().st_mode & 0o777 == 0o600
    assert served.parent.stat().st_mode & 0o777 == 0o700
    assert tcp_listeners({os.getpid()}) == set()
    assert not [line for line in status_lines(pimem, scope) if line.startswith("database:")]
    assert database_locked(memsearch_home)  # leased, on that socket
    engine.release()
    assert served_sockets() == []
    assert not database_locked(memsearch_home)


def test_a_runtime_directory_too_deep_for_a_socket_serves_from_a_directory_of_its_own(
    indexed: tuple[Pimem, Scope], repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(deep))
    pimem = make_pimem({"PIMEM_DB_LINGER_MS": "60000"})
    scope = pimem.resolve_scope(repo)
    engine = MemsearchMemoryIndex.opened_by(pimem, scope).engine
    assert engine.reads.search(scope, "cache", 1)
    lease = engine.database.lease
    assert lease is not None
    assert lease.served is not None
    served = Path(lease.served.uri.removeprefix("unix:"))
    assert served.parent.stat().st_mode & 0o777 == 0o700
    assert served.parent.parent == Path(tempfile.gettempdir())
    assert tcp_listeners({os.getpid()}) == set()
    engine.release()
    assert not served.parent.exists()


def test_where_the_database_cannot_be_served_privately_it_is_closed_after_every_call(
    indexed: tuple[Pimem, Scope], memsearch_home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pimem_plugins.memsearch import database as module

    why = "milvus-lite 9.0 builds its in-process server differently"
    monkeypatch.setattr(module, "lite_socket_unsupported", lambda: why)
    pimem = make_pimem({"PIMEM_DB_LINGER_MS": "60000"})
    scope = pimem.resolve_scope(repo)
    engine = MemsearchMemoryIndex.opened_by(pimem, scope).engine
    assert engine.reads.search(scope, "cache", 1)  # on Milvus Lite's own server
    assert engine.database.lease is None, "closed after its call, whatever the linger"
    assert texts(pimem, scope, "flaky test")
    assert engine.database.lease is None
    assert not database_locked(memsearch_home)
    (line,) = [line for line in status_lines(pimem, scope) if line.startswith("database:")]
    assert line.startswith("database: closed after every call")
    assert why in line


def indexed_chunks(pimem: Pimem, scope: Scope) -> object:
    """What ``pimem status`` says of the collection."""
    sections = {section.name: section for section in pimem.collect_status(scope)}
    return sections["chunks"].data["indexed_chunks"]


def test_status_counts_once_then_answers_without_opening_until_the_collection_changes(
    indexed: tuple[Pimem, Scope], repo: Path, memsearch_home: Path
) -> None:
    pimem, scope = indexed
    texts(pimem, scope, "cache")  # the read model loaded, as in a service that searched
    engine = MemsearchMemoryIndex.opened_by(pimem, scope).engine
    assert indexed_chunks(pimem, scope) == 2
    opens = engine.opens
    for _ in range(3):
        assert indexed_chunks(pimem, scope) == 2
    assert engine.opens == opens  # answered without opening the database

    # Another process changes the collection: memsearch's own command indexes a new day.
    day = scope.memory_dir / "2026-08-14.md"
    day.write_text(
        "\n## Session 09:00\n\n### 09:00\n<!-- session:cc1 turn:u1 transcript:/t/cc.jsonl -->\n"
        "- Claude Code moved the nightly backup to a systemd timer\n\n"
    )
    subprocess.run(
        [
            str(Path(sys.executable).with_name("memsearch")),
            "index",
            str(scope.memory_dir),
            "-c",
            scope.collection,
        ],
        capture_output=True,
        cwd=repo,
        env={**os.environ, "HOME": str(memsearch_home)},
        check=True,
        timeout=300,
    )
    assert indexed_chunks(pimem, scope) == 3  # counted again, not the number remembered
    assert engine.opens == opens + 1
    assert indexed_chunks(make_pimem(), scope) == 3  # what a process that never counted says
    day.unlink()
    pimem.index_memory(scope, "test")  # this process's own change
    assert indexed_chunks(pimem, scope) == 2


def test_a_memsearch_command_knocking_at_a_busy_database_gets_in(
    indexed: tuple[Pimem, Scope], repo: Path
) -> None:
    """pimem uses the database without a pause (the lease never lingers out); a memsearch
    command that finds it taken and retries once a second gets in within its retries."""
    pimem = make_pimem({"PIMEM_DB_LINGER_MS": "60000"})
    scope = pimem.resolve_scope(repo)
    engine = MemsearchMemoryIndex.opened_by(pimem, scope).engine
    assert engine.reads.search(scope, "cache", 1)  # the database is leased from here on
    attempts: list[int] = []

    def memsearch_with_retries() -> None:
        for attempt in range(1, 7):
            done = subprocess.run(
                [str(Path(sys.executable).parent / "memsearch"), "search", "Redis",
                 "--collection", scope.collection, "-j"],
                capture_output=True, text=True, check=False, timeout=120,
            )  # fmt: skip
            if done.returncode == 0:
                assert "Redis" in done.stdout, done.stdout  # it read pimem's collection
                attempts.append(attempt)
                return
            time.sleep(1.0)

    other = threading.Thread(target=memsearch_with_retries)
    other.start()
    deadline = time.monotonic() + 120
    while other.is_alive() and time.monotonic() < deadline:
        try:
            engine.reads.search(scope, "cache", 1)
        except Exception as error:
            if not is_contention(error):
                raise
            time.sleep(0.2)  # wait, as pimem's queue does
        time.sleep(0.05)
    other.join(timeout=120)
    assert attempts, "the memsearch command never got the database in six attempts"
    engine.release()


def test_one_appended_entry_is_indexed_alone(indexed: tuple[Pimem, Scope]) -> None:
    pimem, scope = indexed
    file = add(pimem, scope, "t3", "- the user asked for tabs, never spaces, in the Makefile", 55)
    report = pimem.index_memory(scope, "write", files=(file,))
    # The new entry, and at most the entry before it, whose line range the append extended.
    assert 1 <= report.indexed_chunks <= 2
    assert any("tabs, never spaces" in text for text in texts(pimem, scope, "Makefile tabs"))


def test_a_forgotten_entry_leaves_the_index_with_a_partial_reindex(
    indexed: tuple[Pimem, Scope],
) -> None:
    pimem, scope = indexed
    redaction = pimem.forget_entry(scope, DayAddress.parse("2026-08-13", "22:41"))
    pimem.index_memory(scope, "forget", files=(redaction.file,))
    assert not any("Redis" in text for text in texts(pimem, scope, "hot cache Redis"))


def test_a_deleted_day_file_loses_its_chunks(indexed: tuple[Pimem, Scope]) -> None:
    pimem, scope = indexed
    day = scope.memory_dir / "2026-08-13.md"
    day.unlink()
    pimem.index_memory(scope, "forget", files=(day,))
    assert (
        MemsearchMemoryIndex.opened_by(pimem, scope).engine.reads.search(scope, "cache", 5) == ()
    )  # the collection, asked directly
    # With no file left the store holds no memory: search says so instead of asking the index.
    with pytest.raises(NoMemoryYet, match="no memory yet in "):
        texts(pimem, scope, "cache")


def test_the_indexer_makes_writes_searchable(indexed: tuple[Pimem, Scope]) -> None:
    pimem, scope = indexed
    indexer = Indexer(lambda reason, files: pimem.index_memory(scope, reason, files=files))
    file = add(pimem, scope, "t4", "- the agent pinned numpy below 3 for the old wheels", 58)
    indexer.note_write(file)
    assert indexer.shutdown(cap=60)
    assert indexer.last_failure is None
    assert any("pinned numpy" in text for text in texts(pimem, scope, "numpy pin"))


def test_expand_returns_the_section_and_its_anchor(indexed: tuple[Pimem, Scope]) -> None:
    pimem, scope = indexed
    hit = pimem.search_memory(scope, SearchQuery(text="flaky upload test", top_k=1))[0]
    section = pimem.expand_chunk(scope, hit.chunk_hash)
    assert section.heading == "22:50"
    assert section.anchor == Anchor(session="s1", turn="t2", transcript="/t/s1.jsonl")
    assert section.content.startswith("### 22:50\n<!-- session:s1 turn:t2")


@pytest.mark.parametrize("bad", ["DEADBEEFDEADBEEF", "abc", "0123456789abcdef0", '") or ("'])
def test_a_malformed_chunk_hash_is_refused_before_the_database(
    indexed: tuple[Pimem, Scope], bad: str
) -> None:
    pimem, scope = indexed
    with pytest.raises(Exception, match="16 lowercase hex digits"):
        pimem.expand_chunk(scope, bad)


def test_section_extraction_follows_memsearch_expand() -> None:
    lines = ["# 2026-08-13", "", "## Session 09:00", "", "### 09:00", "- a", "", "### 09:30", "- b"]
    assert extract_section(lines, 6, 3) == ("### 09:00\n- a", 5, 6)
    assert extract_section(lines, 9, 3) == ("### 09:30\n- b", 8, 9)
    assert extract_section(lines, 1, 0) == ("\n".join(lines), 1, 9)
    assert extract_section([*lines, "", ""], 8, 3) == ("### 09:30\n- b", 8, 9)


def test_a_hit_and_its_expansion_name_the_same_lines() -> None:
    """memsearch's chunks count the blank lines after an entry, and at the end of a file the
    empty line after the last newline: search and expand both name the entry's own lines."""
    from memsearch.chunker import chunk_markdown

    anchor = "<!-- session:s1 turn:t1 transcript:/t/s1.jsonl -->"
    text = (
        f"\n## Session 22:41\n\n### 22:41\n{anchor}\n- chose PostgreSQL 16\n\n"
        f"### 22:50\n{anchor}\n- the ledger keeps cents\n- and currencies\n\n"
    )
    lines = text.splitlines()
    ranges = []
    for chunk in chunk_markdown(text, source="/m/2026-08-13.md"):
        hit = search_hit({**chunk.__dict__, "chunk_hash": "0" * 16, "score": 1.0})
        content, start, end = extract_section(lines, chunk.start_line, chunk.heading_level)
        assert (hit.start_line, hit.end_line) == (start, end)
        assert hit.content == content == "\n".join(lines[start - 1 : end])
        ranges.append((start, end))
    assert ranges == [(4, 6), (8, 11)]


def test_an_incompatible_database_is_not_contention(tmp_path: Path) -> None:
    file_db = tmp_path / "old.db"
    file_db.write_text("a Milvus Lite 2 file")
    error = RuntimeError(
        f"Could not open the local Milvus database at {file_db}: boom. Milvus Lite 3.x stores a "
        "database as a directory, but this path is a file."
    )
    assert not is_contention(error)
    assert is_contention(RuntimeError("another process holds the lock on '/x'"))
    unheld = tmp_path / "free.db"
    (unheld).mkdir()
    (unheld / "LOCK").write_text("")
    generic = RuntimeError(f"Could not open the local Milvus database at {unheld}: failed")
    assert not is_contention(generic)


class MilvusException(Exception):
    """Shaped like pymilvus's: a ``message``, and raised ``from`` itself."""

    __module__ = "pymilvus.exceptions"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _raised_from_itself(error: Exception) -> Exception:
    try:
        try:
            raise error
        except Exception as caught:
            raise caught from caught  # pymilvus's decorators do this
    except Exception as looped:  # noqa: BLE001 - the looped exception is the result
        return looped


def test_an_exception_chain_that_loops_is_read_once() -> None:
    # Found by the reliability suite: `pimem status` hung on a damaged database, following
    # pymilvus's `raise e from e` forever.
    error = _raised_from_itself(MilvusException("Parquet magic bytes not found in footer"))
    assert error.__cause__ is error
    assert not is_contention(error)
    assert database_failure(error) == "Parquet magic bytes not found in footer"
    assert database_failure(RuntimeError("memsearch's own bug")) is None


def test_rebuild_instructions_name_the_collection_and_the_command() -> None:
    local = rebuild_instructions("/home/u/.memsearch/milvus.db", "ms_app_12345678")
    assert "move /home/u/.memsearch/milvus.db/collections/ms_app_12345678 aside" in local
    assert "`pimem index`" in local
    server = rebuild_instructions("http://milvus:19530", "ms_app_12345678")
    assert "drop collection ms_app_12345678" in server


def test_an_unavailable_backend_is_checked_again_after_30_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = MemsearchEngine(BackendQueue())
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    real_version = importlib.metadata.version

    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert engine.availability().reason is not None
    monkeypatch.setattr(importlib.metadata, "version", real_version)
    clock[0] += 29
    assert engine.availability().reason is not None  # still the cached answer
    clock[0] += 2
    assert engine.availability().available


def test_a_database_in_steady_use_is_left_alone_for_a_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After MAX_HOLD_SECONDS of use with no pause, the engine closes Milvus Lite and waits
    YIELD_SECONDS before the next call, so a memsearch command retrying once a second gets the
    lock; a pause that long resets the count; a server is never waited for."""
    from pimem_plugins.memsearch import turns as module

    clock = [100.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    fake_time = types.SimpleNamespace(monotonic=lambda: clock[0], sleep=sleep)
    monkeypatch.setattr(module, "time", fake_time)
    turns = MemsearchEngine(BackendQueue()).database.turns
    local = "/home/u/.memsearch/milvus.db"
    for _ in range(4):  # calls back to back, a second apart: 3 s of use
        turns.take(local)
        turns.closed_at = clock[0]  # each opened and closed again at once
        clock[0] += 1.0
    assert slept == [module.YIELD_SECONDS]

    clock[0] += module.YIELD_SECONDS  # a pause long enough: a new stretch
    turns.take(local)
    clock[0] += 2.0
    turns.take(local)
    assert slept == [module.YIELD_SECONDS]

    for _ in range(10):
        turns.take("http://127.0.0.1:19530")
        clock[0] += 1.0
    assert slept == [module.YIELD_SECONDS]


def test_a_knock_while_the_database_was_open_is_honoured_at_the_next_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A knock seen as pimem closes the database (an index run's own client, say) keeps it
    closed before the next call, until the knocker comes back or the courtesy time is up."""
    from pimem_plugins.memsearch import turns as module

    clock = [100.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    class Knocks:
        def __init__(self) -> None:
            self.pending = [True]  # the knock made while the database was open

        def knocked(self) -> bool:
            return self.pending.pop(0) if self.pending else False

        def forget(self) -> None:
            self.pending.clear()

    monkeypatch.setattr(
        module, "time", types.SimpleNamespace(monotonic=lambda: clock[0], sleep=sleep)
    )
    turns = MemsearchEngine(BackendQueue()).database.turns
    local = "/home/u/.memsearch/milvus.db"
    knocks = Knocks()
    turns.knocks[local] = knocks  # type: ignore[assignment]
    turns.closed(local)
    turns.take(local)  # nobody comes back: closed for the whole courtesy time
    assert sum(slept) == pytest.approx(module.COURTESY_SECONDS, abs=0.11)

    slept.clear()
    knocks.pending = [True, False, False, True]  # knocked while open; back 0.2 s later
    turns.closed(local)
    turns.take(local)
    assert sum(slept) == pytest.approx(0.2 + 0.2)  # two looks, then a moment for it to get in

    slept.clear()
    turns.take(local)  # no knock since: no wait
    assert slept == []
