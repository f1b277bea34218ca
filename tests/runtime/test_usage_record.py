"""The usage record through a real session and its host protocol: what memory gave the agent,
and the ``used`` line when the agent's answer carries an entry's identifier."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import IO, Any, cast

import pytest

from pimem_core.doors.serve import Server
from pimem_core.runtime.scheduler import Scheduler
from pimem_core.runtime.session import SessionInfo
from pimem_core.runtime.usage import RecordedCapture
from pimem_core.testing import InMemoryIndexPlugin
from pimem_core.types import Anchor, Entry
from pimem_plugins.usage.record import read_records

from conftest import make_pimem


def test_a_search_then_an_answer_carrying_a_hits_identifier_records_a_use(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIMEM_HOME", str(tmp_path / "ph"))
    pimem = make_pimem({"PIMEM_DISABLE_PLUGINS": "memsearch-index"})
    pimem.pm.add_plugin(InMemoryIndexPlugin(), "in-memory-index")
    scope = pimem.resolve_scope(repo)
    anchor = Anchor(session="old", turn="t1", transcript="/nowhere.jsonl")
    content = "- the cache lives in `session_cache_v2`, flushed by FlushWorker"
    pimem.append_entry(
        scope, Entry(anchor=anchor, content=content, written_at=pimem.settings.now())
    )
    pimem.index_memory(scope, "test", files=())

    branch = [
        {"id": "u1", "kind": "message", "role": "user", "text": "where is the cache?"},
        {"id": "a1", "kind": "message", "role": "assistant", "text": "In session_cache_v2.",
         "tool_calls": ["memory_search(query=cache)"]},
    ]  # fmt: skip
    requests = [
        {"id": 1, "method": "session.before_prompt", "params": {"prompt": "where is the cache?"}},
        {"id": 2, "method": "memory.search", "params": {"query": "cache"}},
        {"id": 3, "method": "session.settled", "params": {"leaf": "a1", "branch": branch}},
    ]
    output = io.StringIO()
    server = Server(pimem, cast(IO[str], _Paced(requests, output)), output)
    server.session.start(SessionInfo(session_id="s1", cwd=repo, transcript=tmp_path / "s.jsonl"))
    server.serve()  # ends with the session's shutdown: the record is written by then

    day = pimem.settings.now().date().isoformat()
    path = tmp_path / "ph" / "state" / "usage" / scope.collection / f"{day}.jsonl"
    lines = list(read_records(path))
    kinds = [line["kind"] for line in lines]
    assert kinds[0] == "session"
    assert lines[0]["project"] == str(scope.scope_dir)
    assert "snapshot" in kinds
    assert "capture" in kinds
    (search,) = [line for line in lines if line["kind"] == "search"]
    assert search["query"] == "cache"
    assert search["top"] is not None
    assert search["hits"][0]["day"] == day
    (used,) = [line for line in lines if line["kind"] == "used"]
    assert used["via"] == "search"  # shown in the snapshot too: the search was deliberate
    assert (used["evidence"], used["term"]) == ("identifier", "session_cache_v2")
    assert used["turn"] == "a1"  # the exchange's last message: capture's anchor turn
    per_exchange = sum(len(json.dumps(line)) + 1 for line in lines if line["kind"] != "session")
    assert per_exchange < 1024 + 512  # the snapshot line is once a session, not per exchange


@pytest.mark.parametrize("disabled", ["", "usage"])
def test_without_a_plugin_that_hears_the_record_a_session_keeps_no_usage_notes(
    disabled: str, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIMEM_HOME", str(tmp_path / "ph"))
    tasks: list[str] = []
    run = Scheduler.run

    def spied(self: Scheduler, name: str, task: Any) -> Any:
        tasks.append(name)
        return run(self, name, task)

    monkeypatch.setattr(Scheduler, "run", spied)
    pimem = make_pimem({"PIMEM_DISABLE_PLUGINS": f"memsearch-index,{disabled}".rstrip(",")})
    pimem.pm.add_plugin(InMemoryIndexPlugin(), "in-memory-index")
    scope = pimem.resolve_scope(repo)
    branch = [
        {"id": "u1", "kind": "message", "role": "user", "text": "where is the cache?"},
        {"id": "a1", "kind": "message", "role": "assistant", "text": "No idea."},
    ]
    requests = [
        {"id": 1, "method": "session.before_prompt", "params": {"prompt": "where is the cache?"}},
        {"id": 2, "method": "memory.search", "params": {"query": "cache"}},
        {"id": 3, "method": "session.settled", "params": {"leaf": "a1", "branch": branch}},
    ]
    output = io.StringIO()
    server = Server(pimem, cast(IO[str], _Paced(requests, output)), output)
    server.session.start(SessionInfo(session_id="s1", cwd=repo, transcript=tmp_path / "s.jsonl"))
    usage, capture = server.session.usage, server.session.capture
    server.serve()

    assert capture is not None
    assert output.getvalue().count('"result"') == len(requests)
    record = tmp_path / "ph" / "state" / "usage" / scope.collection
    if disabled:
        assert not usage.recording
        assert not hasattr(usage, "_notes")  # not even a queue to put a note in
        assert "usage" not in tasks
        assert type(capture) is not RecordedCapture
        assert not record.exists()
    else:
        assert usage.recording
        assert "usage" in tasks
        assert isinstance(capture, RecordedCapture)
        lines = [line for path in record.glob("*.jsonl") for line in read_records(path)]
        assert {"session", "search", "capture"} <= {line["kind"] for line in lines}


class _Paced:
    """Stdin that gives the next request only once the answer to the last one is out."""

    def __init__(self, requests: list[dict[str, object]], output: io.StringIO) -> None:
        self._requests = list(requests)
        self._output = output
        self._sent = 0

    def readline(self) -> str:
        if self._sent:
            deadline = time.monotonic() + 30
            while self._output.getvalue().count('"result"') < self._sent:
                assert time.monotonic() < deadline, self._output.getvalue()
                time.sleep(0.01)
        if not self._requests:
            return ""
        self._sent += 1
        return json.dumps(self._requests.pop(0)) + "\n"
