"""Session records: the failures a host records, status naming them first, and the exchanges a
session hands over (memory turned off, or capture not done within the host's wait at exit)
captured by the next session in the project, with their own session's anchor."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest

from pimem_core import Pimem, hookimpl
from pimem_core.paths import PimemPaths
from pimem_core.render import render_status
from pimem_core.runtime.records import read_record, record_path, records_status
from pimem_core.runtime.session import Session, SessionInfo
from pimem_core.runtime.status import status_sections
from pimem_core.types import Distillation, DistillRequest, HostModel
from pimem_plugins.usage.record import read_records, session_digest

from conftest import make_pimem
from pi_sessions import assistant, session_file, user

FIRST = "0199c2e4-1111-7000-8000-000000000001"
SECOND = "0199c2e4-2222-7000-8000-000000000002"
DAY = "2026-08-13.md"


class Distiller:
    """Bullets naming the user's words; with *gate*, each distillation waits for it first."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.gate = gate

    @hookimpl(tryfirst=True)
    def pimem_distill_exchange(self, request: DistillRequest) -> Distillation:
        if self.gate is not None:
            self.gate.wait(10)
        asked = request.exchange.messages[0].text
        return Distillation(text=f"- the user said: {asked}", distiller="test", used_model=True)


def pimem_with(distiller: Distiller) -> Pimem:
    pimem = make_pimem()
    pimem.pm.add_plugin(distiller, "test-distiller")
    return pimem


@pytest.fixture
def state(tmp_path: Path) -> PimemPaths:
    return PimemPaths.from_env({"PIMEM_HOME": str(tmp_path / "pimem")})


def transcript(path: Path, said: str) -> Path:
    return session_file(path, [user("u1", None, 1, said), assistant("a1", "u1", 2, "Noted.")])


def day_text(repo: Path) -> str:
    file = repo / ".memsearch" / "memory" / DAY
    return file.read_text() if file.exists() else ""


def wait_for(condition: object, what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.02)


class HostModels:
    """The host's model, as ``pimem serve`` lends it: bullets naming the user's words; with
    *gate*, each answer waits for it first (a host that has gone never answers)."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.gate = gate

    def model(self) -> HostModel:
        return HostModel(name="host", complete=self.complete)

    def complete(self, system: str, prompt: str, timeout: float) -> str:
        if self.gate is not None and not self.gate.wait(timeout):
            raise TimeoutError
        asked = prompt.split("\n\n")[0].removeprefix("[User]: ")
        return f"- the user said: {asked}"


def test_at_exit_an_exchange_for_the_hosts_model_is_handed_to_the_next_session_at_once(
    repo: Path, tmp_path: Path, state: PimemPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At exit the host does not wait for capture (``capture_wait_ms`` 0): an exchange being
    distilled with the host's model is not written as a marker but stays in the journal, handed
    over at once, and the next session in the project captures it, anchored to the session it
    came from, and recorded in the usage record as that session's capture."""
    monkeypatch.setenv("PIMEM_HOME", str(tmp_path / "pimem"))  # the usage record's state too
    gate = threading.Event()
    first = Session(make_pimem(), host_model=HostModels(gate).model(), paths=state)
    first_file = transcript(tmp_path / "first.jsonl", "we keep the ledger in eu-west-1")
    first.start(SessionInfo(session_id=FIRST, cwd=repo, transcript=first_file))
    assert first.settled(leaf="a1")
    report = first.shutdown(wait_for_index=False, capture_wait=0)
    assert (report.captured_in_time, report.handed_over) == (False, 1)
    assert report.seconds < 1
    scope = first.scope
    assert scope is not None
    record = read_record(record_path(state.state_dir, scope, FIRST))
    assert record is not None
    assert (record.handover, record.left) == (True, 1)
    first.shutdown(cap=5)  # the process's own end, after the host has gone
    gate.set()
    assert day_text(repo) == ""  # no marker: the exchange waits for the next session
    (section,) = [
        s
        for s in status_sections(first.pimem, scope, state_dir=state.state_dir)
        if s.name == "failures"
    ]
    assert section.lines == (
        f"capture: session {FIRST} shut down before capture had written everything",
        "  1 exchange of it kept for capture: the next session in this project captures it",
    )

    second = Session(make_pimem(), host_model=HostModels().model(), paths=state)
    second.start(SessionInfo(session_id=SECOND, cwd=repo, transcript=tmp_path / "second.jsonl"))
    wait_for(lambda: f"session:{FIRST} turn:a1 " in day_text(repo), "the handed-over capture")
    assert "- the user said: we keep the ledger in eu-west-1\n" in day_text(repo)
    second.shutdown(cap=5)
    (section,) = [
        s
        for s in status_sections(second.pimem, scope, state_dir=state.state_dir)
        if s.name == "failures"
    ]
    assert section.lines[1] == f"  what it kept was handed to session {SECOND} for capture"
    usage = state.state_dir / "usage" / scope.collection / f"{DAY.removesuffix('.md')}.jsonl"
    captures = [line for line in read_records(usage) if line["kind"] == "capture"]
    assert [(line["session"], len(line["entries"])) for line in captures] == [
        (session_digest(FIRST), 1)
    ]


@pytest.mark.parametrize("distiller", ["a plugin's", "extractive"])
def test_at_exit_a_distiller_that_needs_no_host_captures_after_the_host_has_gone(
    repo: Path, tmp_path: Path, state: PimemPaths, distiller: str
) -> None:
    """With a distiller that needs no host (a plugin's own model, an HTTP endpoint, the
    extractive distiller chosen by name), what capture had not written when the host stopped
    waiting is captured by the same process after the host has gone: nothing is handed over."""
    gate = threading.Event()
    if distiller == "extractive":
        pimem = make_pimem({"PIMEM_DISTILLER": "extractive"})
    else:
        pimem = pimem_with(Distiller(gate))
    host = HostModels(threading.Event()).model()  # a host that is gone: it never answers
    first = Session(pimem, host_model=host, paths=state)
    first_file = transcript(tmp_path / "first.jsonl", "we keep the ledger in eu-west-1")
    first.start(SessionInfo(session_id=FIRST, cwd=repo, transcript=first_file))
    assert first.settled(leaf="a1")
    report = first.shutdown(wait_for_index=False, capture_wait=0)
    assert report.seconds < 1
    gate.set()
    first.shutdown(cap=10)  # the process's own end waits for that capture
    assert f"session:{FIRST} turn:a1 " in day_text(repo)
    if distiller != "extractive":
        assert "- the user said: we keep the ledger in eu-west-1\n" in day_text(repo)
    scope = first.scope
    assert scope is not None
    record = read_record(record_path(state.state_dir, scope, FIRST))
    assert record is None or not record.handover


def utc(stamp: str) -> str:
    return datetime.fromisoformat(stamp).astimezone().strftime("%Y-%m-%d %H:%M")


def test_the_failures_a_host_recorded_come_first_in_status_and_the_kept_turn_is_captured(
    repo: Path, tmp_path: Path, state: PimemPaths
) -> None:
    """The record as the pi adapter writes it when its bridge died three times during a turn:
    status (the CLI's too: no session) leads with it, and the next session captures the turn."""
    pimem = pimem_with(Distiller())
    scope = pimem.resolve_scope(repo)
    first_file = transcript(tmp_path / "first.jsonl", "we pinned httpx to 0.27")
    killed = "the pimem bridge was killed by SIGKILL"
    stamps = ["2026-08-13T20:30:00.000Z", "2026-08-13T20:35:00.000Z", "2026-08-13T20:43:00.000Z"]
    path = record_path(state.state_dir, scope, FIRST)
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps(
            {
                "session_id": FIRST,
                "transcript": str(first_file),
                "failures": [{"at": at, "reason": killed} for at in stamps],
                "memory_off_at": stamps[-1],
                "kept": [{"turn": "a1", "after": None}],
                "handover": True,
            }
        )
    )
    sections = status_sections(pimem, scope, state_dir=state.state_dir)
    text = render_status(scope, sections)
    assert text.splitlines()[:3] == [
        f"failures: the memory bridge of session {FIRST} stopped 3 times; the last time "
        f"{utc(stamps[-1])}: {killed}",
        f"  memory was off for the rest of that session from {utc(stamps[-1])}",
        "  1 exchange of it kept for capture: the next session in this project captures it",
    ]
    (failures,) = [s for s in sections if s.name == "failures"]
    assert failures.data["sessions"][0]["waiting"] == 1  # type: ignore[index]

    second = Session(pimem, paths=state)
    second.start(SessionInfo(session_id=SECOND, cwd=repo, transcript=tmp_path / "second.jsonl"))
    wait_for(lambda: f"session:{FIRST} turn:a1 " in day_text(repo), "the kept turn's capture")
    assert "- the user said: we pinned httpx to 0.27\n" in day_text(repo)
    second.shutdown(cap=5)
    record = read_record(path)
    assert record is not None
    assert (record.handover, record.handed_to, record.kept) == (False, SECOND, ())


def test_a_session_started_again_captures_what_it_kept_itself(
    repo: Path, tmp_path: Path, state: PimemPaths
) -> None:
    """A pi session resumed after its memory went off starts with the same id: it takes its
    kept turn back into its own journal."""
    pimem = pimem_with(Distiller())
    scope = pimem.resolve_scope(repo)
    file = transcript(tmp_path / "first.jsonl", "the cache TTL is five minutes")
    path = record_path(state.state_dir, scope, FIRST)
    path.parent.mkdir(parents=True)
    record = {"session_id": FIRST, "transcript": str(file), "handover": True}
    path.write_text(json.dumps({**record, "kept": [{"turn": "a1", "after": None}]}))
    again = Session(pimem, paths=state)
    again.start(SessionInfo(session_id=FIRST, cwd=repo, transcript=file))
    wait_for(lambda: f"session:{FIRST} turn:a1 " in day_text(repo), "the own kept turn")
    again.shutdown(cap=5)
    assert day_text(repo).count(f"session:{FIRST} turn:a1 ") == 1


def test_old_or_quiet_records_are_not_shown(repo: Path, state: PimemPaths) -> None:
    scope = make_pimem().resolve_scope(repo)
    path = record_path(state.state_dir, scope, FIRST)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"session_id": FIRST, "transcript": None, "failures": []}))
    assert records_status(state.state_dir, scope).lines == ()
    path.write_text(json.dumps({"session_id": FIRST, "failures": [{"at": "x", "reason": "r"}]}))
    assert records_status(state.state_dir, scope).lines != ()
    assert records_status(state.state_dir, scope, now=time.time() + 8 * 86_400).lines == ()
