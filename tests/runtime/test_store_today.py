"""Today's entries in the store, counted from the daily memory file as every writer leaves it."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pimem_core.runtime.capture import marker
from pimem_core.runtime.store_today import DayCount, count_entries, store_today_status
from pimem_core.types import Anchor, DayAddress, Entry

from conftest import make_pimem


def entry(session: str, content: str, time: str = "22:41") -> str:
    anchor = Anchor(session=session, turn="t1", transcript="/t.jsonl").comment()
    return f"### {time}\n{anchor}\n{content}\n\n"


def test_entries_sessions_and_markers_are_counted() -> None:
    text = (
        "# 2026-08-13\n\n## Session 09:00\n\n"
        + entry("a", "- one")
        + entry("a", marker("timed out"))
        + "## Session 10:00\n\n"
        + entry("b", "- two\n#### a sub-heading inside the entry\n- more")
        + "### 11:00\n- an entry another agent wrote without an anchor\n\n"
    )
    assert count_entries(text) == DayCount(entries=4, sessions=2, markers=1)


def test_a_memory_compact_block_is_not_entries() -> None:
    text = (
        entry("a", "- one")
        + "## Memory Compact 12:00\n\n### 10:30\n- summarised\n\n"
        + "## Session 13:00\n\n"
        + entry("b", "- after")
    )
    assert count_entries(text) == DayCount(entries=2, sessions=2, markers=0)


def test_the_line_follows_writes_and_forgets(repo: Path) -> None:
    pimem = make_pimem()
    scope = pimem.resolve_scope(repo)
    assert store_today_status(pimem, scope).lines == (
        "today in this store (all sessions): no entries yet",
    )
    at = datetime(2026, 8, 13, 22, 41)
    anchor = Anchor(session="s1", turn="t1", transcript="/t.jsonl")
    pimem.append_entry(scope, Entry(anchor=anchor, content=marker("no model"), written_at=at))
    assert store_today_status(pimem, scope).lines == (
        "today in this store (all sessions): 1 entry from 1 session (1 is a marker of an "
        "exchange that could not be distilled)",
    )
    pimem.forget_entry(scope, DayAddress.parse("2026-08-13", "22:41"))
    assert store_today_status(pimem, scope).lines == (
        "today in this store (all sessions): no entries yet",
    )
