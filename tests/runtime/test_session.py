"""The session lifecycle with a fake host: capture, markers, snapshot checkpoints, shutdown."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from pimem_core import Pimem, hookimpl
from pimem_core.paths import PimemPaths
from pimem_core.render import render_status, status_to_json
from pimem_core.runtime.exchange_window import exchange_window, passes_gates
from pimem_core.runtime.journal import CaptureJournal, Pending
from pimem_core.runtime.session import Session, SessionInfo
from pimem_core.service_values import IndexReport
from pimem_core.services import MemoryIndex
from pimem_core.testing import InMemoryIndex
from pimem_core.types import (
    Anchor,
    BackendCall,
    BranchEntry,
    Distillation,
    DistillRequest,
    Entry,
    Scope,
)

from conftest import make_pimem

SESSION = "3f2c9b1e-8d4a-4f6b-9c0d-1a2b3c4d5e6f"


def user(id_: str, text: str) -> BranchEntry:
    return BranchEntry(id=id_, kind="message", role="user", text=text)


def assistant(id_: str, text: str, *, aborted: bool = False) -> BranchEntry:
    return BranchEntry(id=id_, kind="message", role="assistant", text=text, aborted=aborted)


class ScriptedDistiller:
    """Answers each exchange with bullets naming its first user message."""

    def __init__(self) -> None:
        self.requests: list[DistillRequest] = []

    @hookimpl(tryfirst=True)
    def pimem_distill_exchange(self, request: DistillRequest) -> Distillation:
        self.requests.append(request)
        ask = request.exchange.messages[0].text
        return Distillation(text=f"- the user asked about {ask}", distiller="test", used_model=True)


class CountingIndex:
    """An index plugin that records each index run: (reason, files)."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, tuple[Path, ...]]] = []

    @hookimpl(tryfirst=True)
    def pimem_open_index(self, scope: Scope) -> MemoryIndex:
        runs = self.runs

        class Counting(InMemoryIndex):
            def index(self, reason: str, files: tuple[Path, ...], call: BackendCall) -> IndexReport:
                runs.append((reason, files))
                return IndexReport(indexed_chunks=len(files))

        return Counting(scope)


class Host:
    """A fake agent host: one session whose branch grows as the user and agent talk."""

    def __init__(self, pimem: Pimem, repo: Path, tmp_path: Path) -> None:
        self.session = Session(
            pimem, debounce=0.2, paths=PimemPaths.from_env({"PIMEM_HOME": str(tmp_path / "pimem")})
        )
        self.info = SessionInfo(
            session_id=SESSION, cwd=repo / "packages" / "core", transcript=tmp_path / "s.jsonl"
        )
        self.branch: list[BranchEntry] = []

    def exchange(
        self, n: int, ask: str, answer: str, *, aborted: bool = False, calls: tuple[str, ...] = ()
    ) -> None:
        reply = BranchEntry(
            id=f"a{n}", kind="message", role="assistant", text=answer, tool_calls=calls,
            aborted=aborted,
        )  # fmt: skip
        self.branch += [user(f"u{n}", ask), reply]
        self.session.settled(leaf=f"a{n}", branch=list(self.branch))


@pytest.fixture
def world(repo: Path, tmp_path: Path) -> Iterator[tuple[Host, ScriptedDistiller, CountingIndex]]:
    pimem = make_pimem()
    distiller, index = ScriptedDistiller(), CountingIndex()
    pimem.pm.add_plugin(distiller, "scripted-distiller")
    pimem.pm.add_plugin(index, "counting-index")
    host = Host(pimem, repo, tmp_path)
    yield host, distiller, index
    host.session.shutdown(cap=5)


def day(repo: Path) -> str:
    return (repo / ".memsearch" / "memory" / "2026-08-13.md").read_text()


def test_a_whole_session_writes_entries_and_indexes_once(
    world: tuple[Host, ScriptedDistiller, CountingIndex], repo: Path, tmp_path: Path
) -> None:
    host, distiller, index = world
    host.session.start(host.info)
    first = host.session.before_prompt("hello").snapshot
    host.exchange(1, "the login bug", "fixed it by escaping the query")
    host.exchange(2, "the cache", "chose Redis")
    host.exchange(3, "the tests", "made them faster")
    assert host.session.before_prompt("next").snapshot == first  # mid-session writes: no change
    report = host.session.shutdown(cap=10)
    assert report.captured_in_time
    assert report.indexed_in_time

    anchor = f"<!-- session:{SESSION} turn:{{}} transcript:{tmp_path / 's.jsonl'} -->"
    assert day(repo) == (
        "\n## Session 22:41\n\n"
        f"### 22:41\n{anchor.format('a1')}\n- the user asked about the login bug\n\n"
        f"### 22:41\n{anchor.format('a2')}\n- the user asked about the cache\n\n"
        f"### 22:41\n{anchor.format('a3')}\n- the user asked about the tests\n\n"
    )
    # The catch-up, then one run for the three writes: at shutdown, or when the wait ended.
    assert [run[0] for run in index.runs] in (["catch-up", "shutdown"], ["catch-up", "write"])
    assert index.runs[1][1] == (repo / ".memsearch" / "memory" / "2026-08-13.md",)
    sent = distiller.requests[0].exchange.transcript
    assert sent == "[User]: the login bug\n\n[Assistant]: fixed it by escaping the query"


def test_a_bridge_started_again_for_the_session_sends_the_same_snapshot(
    world: tuple[Host, ScriptedDistiller, CountingIndex], repo: Path, tmp_path: Path
) -> None:
    host, _, _ = world
    host.session.start(host.info)

    def written(session: Session, n: int, ask: str) -> None:
        host.exchange(n, ask, "done")
        assert session.capture is not None
        assert session.capture.drain(time.monotonic() + 10)

    written(host.session, 1, "the cache")
    host.session.compacted()  # a checkpoint: the snapshot now holds the first entry
    first = host.session.before_prompt("hello").snapshot
    assert first is not None
    assert "the user asked about the cache" in first
    written(host.session, 2, "the tests")  # memory changes; the snapshot does not
    # The bridge dies without a shutdown; a new one starts the same session.
    again = Host(make_pimem(), repo, tmp_path)
    try:
        again.session.start(host.info)
        assert again.session.before_prompt("next").snapshot == first
    finally:
        again.session.shutdown(cap=5)
    # A session that shut down keeps nothing: its next start builds a fresh snapshot.
    later = Host(make_pimem(), repo, tmp_path)
    try:
        later.session.start(host.info)
        fresh = later.session.before_prompt("next").snapshot
        assert fresh is not None
        assert "the user asked about the tests" in fresh
    finally:
        later.session.shutdown(cap=5)


def test_the_second_capture_holds_only_the_new_exchange(
    world: tuple[Host, ScriptedDistiller, CountingIndex],
) -> None:
    host, distiller, _ = world
    host.session.start(host.info)
    host.exchange(1, "first ask", "first answer")
    host.exchange(2, "second ask", "second answer")
    host.session.shutdown(cap=10)
    assert [r.exchange.transcript for r in distiller.requests] == [
        "[User]: first ask\n\n[Assistant]: first answer",
        "[User]: second ask\n\n[Assistant]: second answer",
    ]


def test_a_gated_exchange_is_never_offered_again(
    world: tuple[Host, ScriptedDistiller, CountingIndex], repo: Path
) -> None:
    host, distiller, _ = world
    host.session.start(host.info)
    host.exchange(1, "just a prompt", "")  # no assistant text: gated
    host.exchange(2, "real ask", "real answer")
    host.session.shutdown(cap=10)
    assert [r.exchange.messages[0].text for r in distiller.requests] == ["real ask"]
    assert "just a prompt" not in day(repo)


def test_exchanges_about_memory_and_repeats_are_not_captured_and_are_counted(
    world: tuple[Host, ScriptedDistiller, CountingIndex], repo: Path
) -> None:
    host, distiller, _ = world
    host.session.start(host.info)
    host.exchange(1, "what did we decide?", "Redis", calls=("memory_search(query=cache)",))
    host.exchange(2, "forget the cache entry", "gone", calls=("memory_forget(chunk_hash=ab)",))
    host.exchange(3, "the cache", "chose Redis")
    host.exchange(4, "the cache", "still Redis")  # distils to the same bullet: a repeat
    capture = host.session.capture
    assert capture is not None
    host.session.shutdown(cap=10)
    assert [r.exchange.messages[0].text for r in distiller.requests] == ["the cache"] * 2
    assert day(repo).count("- the user asked about the cache") == 1
    assert "forget" not in day(repo)
    assert capture.counters.skipped == {"about memory": 1, "asked to forget": 1, "duplicate": 1}


def test_questions_answered_from_memory_and_small_talk_are_not_captured_and_are_counted(
    world: tuple[Host, ScriptedDistiller, CountingIndex], repo: Path
) -> None:
    """ADR 0021: only new knowledge is captured; a decision put as a question still is."""
    host, distiller, _ = world
    host.session.start(host.info)
    host.exchange(1, "Which database did we pick for the ledger?", "PostgreSQL 16, per memory.")
    host.exchange(2, "How is your day going?", "Fine, thanks!")
    host.exchange(3, "Can we use tabs from now on?", "Sure, tabs it is.")
    capture = host.session.capture
    assert capture is not None
    host.session.shutdown(cap=10)
    assert [r.exchange.messages[0].text for r in distiller.requests] == [
        "Can we use tabs from now on?"
    ]
    assert "- the user asked about Can we use tabs from now on?" in day(repo)
    assert capture.counters.skipped == {"answered from memory": 1, "small talk": 1}


class NothingToKeep:
    """A model distiller that finds nothing worth keeping in any exchange."""

    @hookimpl(tryfirst=True)
    def pimem_distill_exchange(self, request: DistillRequest) -> Distillation:
        return Distillation(text="", distiller="test", used_model=True, nothing_to_keep=True)


def test_a_distiller_that_finds_nothing_to_keep_leaves_no_entry_and_is_counted(
    repo: Path, tmp_path: Path
) -> None:
    pimem = make_pimem()
    pimem.pm.add_plugin(NothingToKeep(), "nothing-to-keep")
    host = Host(pimem, repo, tmp_path)
    host.session.start(host.info)
    host.exchange(1, "we met the new intern today", "Nice!")
    capture = host.session.capture
    assert capture is not None
    assert capture.drain(time.monotonic() + 10)
    sections = {s.name: s for s in host.session.status()}
    host.session.shutdown(cap=10)
    assert not (repo / ".memsearch" / "memory").exists()
    assert capture.counters.skipped == {"nothing to keep": 1}
    assert sections["capture"].lines[0] == (
        "capture (this session): 0 captured (0 distilled, 0 extractive, 0 failed); "
        "skipped: 1 nothing to keep"
    )
    # The model was asked all the same: the answer counts against the day's budget.
    assert sections["budget"].lines == ("distillation budget: 499 of 500 left today",)


def test_an_aborted_run_is_not_captured(
    world: tuple[Host, ScriptedDistiller, CountingIndex], repo: Path
) -> None:
    host, distiller, _ = world
    host.session.start(host.info)
    host.exchange(1, "fix the login bug", "partial answer", aborted=True)
    host.session.shutdown(cap=10)
    assert distiller.requests == []
    assert not (repo / ".memsearch" / "memory").exists()


def test_capture_off_writes_nothing(repo: Path, tmp_path: Path) -> None:
    pimem = make_pimem({"PI_MEMSEARCH_CAPTURE": "off"})
    host = Host(pimem, repo, tmp_path)
    host.session.start(host.info)
    host.exchange(1, "ask", "answer")
    host.session.shutdown(cap=5)
    assert not (repo / ".memsearch" / "memory").exists()


def test_no_transcript_means_no_capture(repo: Path, tmp_path: Path) -> None:
    host = Host(make_pimem(), repo, tmp_path)
    host.session.start(SessionInfo(session_id=SESSION, cwd=repo, transcript=None))
    assert host.session.settled(leaf="a1", branch=[user("u1", "x"), assistant("a1", "y")]) is False
    host.session.shutdown(cap=5)


class Failing:
    def __init__(self, how: str) -> None:
        self.how = how
        self.release = threading.Event()

    @hookimpl(tryfirst=True)
    def pimem_distill_exchange(self, request: DistillRequest) -> Distillation:
        if self.how == "raise":
            raise RuntimeError("provider exploded")
        if self.how == "empty":
            return Distillation(text="  \n ", distiller="test", used_model=True)
        self.release.wait(30)  # hang
        return Distillation(text="- too late", distiller="test")


@pytest.mark.parametrize(
    ("how", "env", "reason"),
    [
        ("raise", {}, "provider exploded"),
        ("empty", {}, "distillation returned no text"),
        ("hang", {"PIMEM_DISTILL_TIMEOUT_MS": "200"}, "distillation timed out after 200ms"),
    ],
)
def test_a_failed_distillation_leaves_a_marker_with_the_anchor(
    repo: Path, tmp_path: Path, how: str, env: dict[str, str], reason: str
) -> None:
    pimem = make_pimem(env)
    failing = Failing(how)
    pimem.pm.add_plugin(failing, "failing")
    host = Host(pimem, repo, tmp_path)
    host.session.start(host.info)
    host.exchange(1, "fix the login bug", "fixed")
    host.session.shutdown(cap=10)
    failing.release.set()
    text = day(repo)
    assert f"<!-- session:{SESSION} turn:a1 transcript:" in text
    assert f"- [pimem] this exchange could not be distilled: {reason}\n" in text


def test_shutdown_keeps_its_cap_when_the_distiller_hangs(repo: Path, tmp_path: Path) -> None:
    pimem = make_pimem()
    failing = Failing("hang")
    pimem.pm.add_plugin(failing, "failing")
    host = Host(pimem, repo, tmp_path)
    host.session.start(host.info)
    host.exchange(1, "first", "one")
    host.exchange(2, "second", "two")
    started = time.monotonic()
    report = host.session.shutdown(cap=0.5)
    elapsed = time.monotonic() - started
    failing.release.set()
    assert not report.captured_in_time
    assert elapsed < 5  # the cap plus the time to write the markers, never the distiller's 30 s
    text = day(repo)
    assert text.count("could not be distilled: aborted by the shutdown cap") == 2
    assert "turn:a1 " in text
    assert "turn:a2 " in text


def test_settled_returns_before_distillation_finishes(repo: Path, tmp_path: Path) -> None:
    pimem = make_pimem()
    failing = Failing("hang")
    pimem.pm.add_plugin(failing, "failing")
    host = Host(pimem, repo, tmp_path)
    host.session.start(host.info)
    started = time.monotonic()
    host.exchange(1, "ask", "answer")
    assert time.monotonic() - started < 1  # generous: the distiller hangs for 30 s
    failing.release.set()
    host.session.shutdown(cap=5)


def test_start_is_idempotent_and_rearms_after_a_switch(
    world: tuple[Host, ScriptedDistiller, CountingIndex], repo: Path
) -> None:
    host, _, index = world
    host.session.start(host.info)
    capture = host.session.capture
    host.session.start(host.info)  # fired twice by the host
    assert host.session.capture is capture
    host.exchange(1, "first", "one")
    switched = SessionInfo(session_id="other", cwd=repo, transcript=host.info.transcript)
    host.session.start(switched)
    assert host.session.capture is not capture
    host.branch = []
    host.exchange(2, "after switch", "two")
    host.session.shutdown(cap=10)
    assert "session:other turn:a2 " in day(repo)
    # One catch-up for the first start and one for the switch; the repeated start adds none.
    assert [run[0] for run in index.runs].count("catch-up") == 2


def test_a_forget_refreshes_the_snapshot(
    world: tuple[Host, ScriptedDistiller, CountingIndex], repo: Path
) -> None:
    from pimem_core.types import DayAddress

    host, _, _ = world
    host.session.start(host.info)
    host.exchange(1, "the secret plan", "noted")
    host.session.shutdown(cap=10)
    host.session.start(host.info)  # re-armed after shutdown
    assert "the secret plan" in (host.session.before_prompt("x").snapshot or "")
    scope = host.session.scope
    assert isinstance(scope, Scope)
    host.session.pimem.forget_entry(scope, DayAddress.parse("2026-08-13", "22:41"))
    assert "the secret plan" not in (host.session.before_prompt("x").snapshot or "")


def test_compaction_is_a_snapshot_checkpoint(
    world: tuple[Host, ScriptedDistiller, CountingIndex], repo: Path
) -> None:
    host, _, _ = world
    host.session.start(host.info)
    before = host.session.before_prompt("x").snapshot
    host.exchange(1, "the new decision", "ok")
    host.session.shutdown(cap=10)
    host.session.start(host.info)
    host.session.compacted()
    after = host.session.before_prompt("x").snapshot
    assert before != after
    assert "the new decision" in (after or "")


def test_status_reports_capture_counters(
    world: tuple[Host, ScriptedDistiller, CountingIndex],
) -> None:
    host, _, _ = world
    host.session.start(host.info)
    host.exchange(1, "ask", "answer")
    assert host.session.capture is not None
    host.session.capture.drain(time.monotonic() + 10)
    scope = host.session.scope
    assert scope is not None
    sections = {s.name: s for s in host.session.status()}
    assert (
        sections["capture"].lines[0].startswith("capture (this session): 1 captured (1 distilled")
    )
    assert sections["store-today"].lines == (
        "today in this store (all sessions): 1 entry from 1 session",
    )
    assert sections["budget"].lines == ("distillation budget: 499 of 500 left today",)


def test_a_new_session_shows_what_another_captured_today_beside_its_own_zero(
    world: tuple[Host, ScriptedDistiller, CountingIndex], repo: Path, tmp_path: Path
) -> None:
    """Issue 14, item 7: session two's counters are its own; the store line shows session
    one's capture, and a ``pimem write`` entry, as every session sees them."""
    host, _, _ = world
    host.session.start(host.info)
    host.exchange(1, "the login bug", "fixed it")
    host.session.shutdown(cap=10)
    written = Entry(
        anchor=Anchor(session="cli", turn="t1", transcript="/t.jsonl"),
        content="- written by hand",
        written_at=datetime(2026, 8, 13, 22, 41),
    )
    make_pimem().append_entry(make_pimem().resolve_scope(repo), written)

    second = Session(
        make_pimem(), paths=PimemPaths.from_env({"PIMEM_HOME": str(tmp_path / "pimem")})
    )
    second.start(SessionInfo(session_id="two", cwd=repo, transcript=tmp_path / "two.jsonl"))
    try:
        assert second.scope is not None
        sections = second.status()
        text = render_status(second.scope, sections)
        own = text.index(
            "capture (this session): 0 captured (0 distilled, 0 extractive, 0 failed); "
            "skipped: none\n"
        )
        # Beside each other, but for a line of this session's own catch-up index run, which
        # may have failed by now (this home has no embedding model).
        assert own < text.index("today in this store (all sessions): 2 entries from 2 sessions\n")
        data = status_to_json(second.scope, sections)
        assert data["capture"]["counters"]["captured"] == 0  # type: ignore[index]
        assert data["capture"]["counters_of"] == "this session"  # type: ignore[index]
        assert data["store-today"] == {
            "date": "2026-08-13",
            "of": "all sessions",
            "entries": 2,
            "sessions": 2,
            "markers": 0,
        }
    finally:
        second.shutdown(cap=5)


# -- the exchange window, as pure logic ---------------------------------------------------------


def test_the_window_starts_at_the_last_user_message() -> None:
    branch = [user("u1", "a"), assistant("a1", "b"), user("u2", "c"), assistant("a2", "d")]
    window = exchange_window(branch, None)
    assert [e.id for e in window.entries] == ["u2", "a2"]
    assert window.last_id == "a2"


def test_the_window_follows_the_last_captured_entry_when_it_is_on_the_branch() -> None:
    branch = [user("u1", "a"), assistant("a1", "b"), user("u2", "c"), assistant("a2", "d")]
    assert [e.id for e in exchange_window(branch, "u1").entries] == ["a1", "u2", "a2"]
    # Captured on an abandoned branch: fall back to the last user message.
    assert [e.id for e in exchange_window(branch, "gone").entries] == ["u2", "a2"]


def test_injected_context_messages_are_not_part_of_the_exchange() -> None:
    """Not distilled, but the gates see them in place: how the host framed the request."""
    injected = BranchEntry(id="c1", kind="custom_message", role="user", text="memory hits")
    branch = [user("u1", "ask"), injected, assistant("a1", "answer")]
    window = exchange_window(branch, None)
    assert [e.id for e in window.entries] == ["u1", "a1"]
    assert [e.id for e in window.with_injected] == ["u1", "c1", "a1"]
    assert [e.id for e in exchange_window(branch, "u1").with_injected] == ["c1", "a1"]


@pytest.mark.parametrize(
    ("window", "passes"),
    [
        ([user("u", "ask"), assistant("a", "answer")], True),
        ([assistant("a", "answer")], False),
        ([user("u", "ask"), assistant("a", "   ")], False),
        ([user("u", "ask"), assistant("a", "partial", aborted=True)], False),
        ([user("u", "ask")], False),
    ],
)
def test_the_hard_gates(window: list[BranchEntry], passes: bool) -> None:
    assert passes_gates(window) is passes


def test_capture_reads_the_exchange_from_a_pi_session_file(
    world: tuple[Host, ScriptedDistiller, CountingIndex], repo: Path
) -> None:
    from pi_sessions import assistant as pi_assistant
    from pi_sessions import entry, session_file
    from pi_sessions import user as pi_user

    host, distiller, _ = world
    session_file(
        host.info.transcript or Path("unused"),
        [
            pi_user("u1", None, 1, "fix the login bug"),
            entry(
                "c1", "u1", 1, "custom_message", customType="memory", content="hits", display=False
            ),
            pi_assistant("a1", "c1", 2, "fixed it by escaping the query"),
            pi_user("u2", "a1", 3, "a question typed after the agent settled"),
        ],
    )
    host.session.start(host.info)
    host.session.settled(leaf="a1")  # the file already holds the next prompt: leaf decides
    host.session.shutdown(cap=10)
    assert [r.exchange.transcript for r in distiller.requests] == [
        "[User]: fix the login bug\n\n[Assistant]: fixed it by escaping the query"
    ]
    assert "session:3f2c9b1e-8d4a-4f6b-9c0d-1a2b3c4d5e6f turn:a1 " in day(repo)


def test_an_unreadable_transcript_still_leaves_a_marker(
    world: tuple[Host, ScriptedDistiller, CountingIndex], repo: Path
) -> None:
    host, distiller, _ = world
    host.session.start(host.info)  # the transcript file was never written
    host.session.settled(leaf="a9")
    host.session.shutdown(cap=10)
    assert distiller.requests == []
    text = day(repo)
    assert "turn:a9 " in text
    assert (
        "- [pimem] this exchange could not be distilled: the transcript could not be read" in text
    )


def test_an_exchange_the_store_refused_is_written_late_not_lost(
    world: tuple[Host, ScriptedDistiller, CountingIndex],
    repo: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Found by the reliability suite: with the disk full, the exchange (and its marker) were
    # refused, and the next capture started after it.
    from pimem_plugins import markdown_store

    host, _, _ = world
    host.session.start(host.info)
    capture = host.session.capture
    assert capture is not None
    host.exchange(1, "before the disk filled", "ok")
    capture.drain(time.monotonic() + 10)
    real_append = markdown_store._append

    def full(file: Path, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(markdown_store, "_append", full)
    host.exchange(2, "while the disk was full", "ok")
    capture.drain(time.monotonic() + 10)
    scope = host.session.scope
    assert scope is not None
    status = [line for section in host.session.status() for line in section.lines]
    assert any(
        "1 entry waiting to be written" in line and "No space left" in line for line in status
    )
    monkeypatch.setattr(markdown_store, "_append", real_append)
    host.exchange(3, "after space came back", "ok")
    host.session.shutdown(cap=10)
    asks = [line for line in day(repo).splitlines() if line.startswith("- ")]
    assert asks == [
        "- the user asked about before the disk filled",
        "- the user asked about while the disk was full",
        "- the user asked about after space came back",
    ]
    assert "turn:a2 " in day(repo)


def _journal(tmp_path: Path) -> CaptureJournal:
    return CaptureJournal(tmp_path / "pimem" / "state" / "capture-journal", SESSION)


def test_a_journaled_exchange_already_written_is_not_written_again(
    world: tuple[Host, ScriptedDistiller, CountingIndex], repo: Path, tmp_path: Path
) -> None:
    host, distiller, _ = world
    host.session.pimem.append_entry(
        host.session.pimem.resolve_scope(host.info.cwd),
        Entry(
            anchor=Anchor(session=SESSION, turn="a1", transcript=str(host.info.transcript)),
            content="- written just before the kill",
            written_at=host.session.pimem.settings.now(),
        ),
    )
    _journal(tmp_path).add(Pending(turn="a1", after=None))
    host.session.start(host.info)
    host.session.shutdown(cap=10)
    assert day(repo).count("turn:a1 ") == 1
    assert distiller.requests == []
    assert _journal(tmp_path).pending() == []


def test_a_journaled_exchange_whose_transcript_is_gone_leaves_a_marker(
    world: tuple[Host, ScriptedDistiller, CountingIndex], repo: Path, tmp_path: Path
) -> None:
    host, _, _ = world
    _journal(tmp_path).add(Pending(turn="a7", after="a6"))
    host.session.start(host.info)  # its transcript was never written
    host.session.shutdown(cap=10)
    assert "turn:a7 " in day(repo)
    assert (
        "- [pimem] this exchange could not be distilled: the transcript could not be read"
        in day(repo)
    )
    assert _journal(tmp_path).pending() == []
