"""The host protocol: ``pimem serve`` driven over real pipes, as an adapter drives it."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, cast

import attrs
import pytest
from bridge import Bridge

from pimem_core import hookimpl
from pimem_core.doors import protocol
from pimem_core.doors.serve import Server
from pimem_core.errors import QueryError
from pimem_core.runtime.session import SessionInfo
from pimem_core.service_values import IndexReport
from pimem_core.services import MemoryIndex
from pimem_core.testing import InMemoryIndex, read_hits
from pimem_core.types import Anchor, BackendCall, Entry, LegScore, Scope, SearchHit, SearchQuery

from conftest import make_pimem


@pytest.fixture
def bridge(tmp_path: Path) -> Iterator[Bridge]:
    connection = Bridge(
        {"HOME": str(tmp_path / "home"), "PIMEM_DISABLE_PLUGINS": "memsearch-index"}
    )
    yield connection
    if not connection.process.stdin or not connection.process.stdin.closed:
        connection.close()


SESSION_MODEL = {"provider": "anthropic", "id": "big", "input_cost": 15, "output_cost": 75}
CATALOG = [
    SESSION_MODEL,
    {"provider": "openai", "id": "tiny", "input_cost": 0.1, "output_cost": 0.4},
    {"provider": "anthropic", "id": "small", "input_cost": 1, "output_cost": 5},
]


def start(bridge: Bridge, repo: Path, tmp_path: Path, **params: Any) -> dict[str, Any]:
    defaults = {"model": SESSION_MODEL, "models": CATALOG}
    return bridge.call(
        "session.start",
        session_id="s1",
        cwd=str(repo),
        transcript=str(tmp_path / "s1.jsonl"),
        **{**defaults, **params},
    )


def settle_one_exchange(bridge: Bridge) -> None:
    branch = [
        {"id": "u1", "kind": "message", "role": "user", "text": "fix the login bug"},
        {"id": "a1", "kind": "message", "role": "assistant", "text": "escaped the query"},
    ]
    assert bridge.call("session.settled", leaf="a1", branch=branch)["result"] == {"queued": True}


def test_only_new_knowledge_is_captured_and_every_skip_is_counted(
    bridge: Bridge, repo: Path, tmp_path: Path
) -> None:
    """ADR 0021 through the real bridge, in one session: a question answered from an
    auto-context injection, small talk, a recall through ``memory_search`` and an exchange the
    host's model found nothing to keep in leave no entry and are counted; the decisions are
    captured, the one put as a question and the one beside a memory search included."""
    start(bridge, repo, tmp_path)

    def distil(prompt: str) -> str:
        said = prompt.removeprefix("[User]: ").split("\n\n", 1)[0]
        return "NOTHING TO KEEP" if "intern" in said else f"- the user said: {said}"

    bridge.distil = distil
    injected = "Memory recalled for this prompt (auto-context): we use PostgreSQL 16."
    exchanges: list[list[dict[str, Any]]] = [
        [user_said("u1", "We pick Redis for the cache."), answered("a1", "Noted.")],
        [
            user_said("u2", "Which database did we pick for the ledger service?"),
            {"id": "c2", "kind": "custom_message", "text": injected},
            answered("a2", "PostgreSQL 16."),
        ],
        [user_said("u3", "How is your day going?"), answered("a3", "Fine, thanks!")],
        [user_said("u4", "Can we use tabs from now on?"), answered("a4", "Tabs from now on.")],
        [
            user_said("u5", "We moved the ledger to MySQL. What did we use before?"),
            answered("a5", "", "memory_search(query=ledger database)"),
            {"id": "t5", "kind": "message", "role": "tool", "text": injected},
            answered("b5", "PostgreSQL 16; MySQL from now on."),
        ],
        [
            user_said("u6", "What did we decide about the cache?"),
            answered("a6", "", "memory_search(query=cache)"),
            {"id": "t6", "kind": "message", "role": "tool", "text": "- we pick Redis"},
            answered("b6", "Redis."),
        ],
        [user_said("u7", "We met the new intern today."), answered("a7", "Nice!")],
    ]
    branch: list[dict[str, Any]] = []
    for exchange in exchanges:
        branch += exchange
        settled = bridge.call("session.settled", leaf=branch[-1]["id"], branch=branch)
        assert settled["result"] == {"queued": True}
    skipped = "skipped: 1 about memory, 1 answered from memory, 1 nothing to keep, 1 small talk"
    deadline = time.monotonic() + 30
    while skipped not in (status := bridge.call("memory.status")["result"]["text"]):
        assert time.monotonic() < deadline, status
        time.sleep(0.1)
    assert (
        f"capture (this session): 3 captured (3 distilled, 0 extractive, 0 failed); {skipped}"
        in (status.splitlines())
    )
    assert bridge.call("session.shutdown")["result"]["captured_in_time"] is True
    assert bridge.close() == 0
    # The host's model was asked about the decisions and the intern only.
    asked = [c["prompt"].split("\n\n", 1)[0] for c in bridge.completions]
    assert asked == [
        "[User]: We pick Redis for the cache.",
        "[User]: Can we use tabs from now on?",
        "[User]: We moved the ledger to MySQL. What did we use before?",
        "[User]: We met the new intern today.",
    ]
    day = (repo / ".memsearch" / "memory" / "2026-08-13.md").read_text()
    assert [line for line in day.splitlines() if line.startswith("- ")] == [
        "- the user said: We pick Redis for the cache.",
        "- the user said: Can we use tabs from now on?",
        "- the user said: We moved the ledger to MySQL. What did we use before?",
    ]


def user_said(entry_id: str, text: str) -> dict[str, Any]:
    return {"id": entry_id, "kind": "message", "role": "user", "text": text}


def answered(entry_id: str, text: str, *calls: str) -> dict[str, Any]:
    return {
        "id": entry_id,
        "kind": "message",
        "role": "assistant",
        "text": text,
        "tool_calls": list(calls),
    }


def test_the_bridge_says_it_is_ready_first(bridge: Bridge) -> None:
    assert bridge.ready["event"] == "ready"
    assert "memory.search" in bridge.ready["methods"]
    # Once: the next line is the answer to the first request.
    assert bridge.call("ping") == {"id": 1, "result": {"pong": True}}


def test_the_ready_line_comes_before_any_of_pimem_is_imported() -> None:
    """The host waits for it: importing pimem and its plugins comes after."""
    probe = (
        "import json, sys\n"
        "from pimem_core.doors import launcher\n"
        "launcher.announce_ready(sys.stdout)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pimem_core', 'pimem_plugins', 'memsearch', 'pluggy', 'attrs'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    ready, imported = done.stdout.splitlines()
    assert json.loads(ready)["event"] == "ready"
    # protocol.py holds the method names and imports nothing of pimem.
    assert json.loads(imported) == [
        "pimem_core",
        "pimem_core.doors",
        "pimem_core.doors.launcher",
        "pimem_core.doors.protocol",
    ]


def test_the_early_ready_line_lists_exactly_the_methods_served() -> None:
    out = io.StringIO()
    Server(make_pimem(), io.StringIO(""), out).serve()
    served = out.getvalue().splitlines()[0]
    assert served == protocol.ready_line(), "a new method belongs in protocol.py too"


def test_a_session_writes_snapshots_and_captures_through_the_hosts_model(
    bridge: Bridge, repo: Path, tmp_path: Path
) -> None:
    started = start(bridge, repo, tmp_path)
    assert started["result"]["scope"]["memory_dir"] == str(repo / ".memsearch" / "memory")
    written = bridge.call("memory.write", content="- chose Redis for the hot cache", turn="t0")
    assert written["result"]["file"].endswith("2026-08-13.md")
    snapshot = bridge.call("session.before_prompt", prompt="hi")["result"]["snapshot"]
    assert "Redis" not in snapshot  # mid-session writes wait for a checkpoint
    settle_one_exchange(bridge)
    shutdown = bridge.call("session.shutdown")
    assert shutdown["result"]["captured_in_time"] is True
    assert (
        bridge.completions[0]["prompt"]
        == "[User]: fix the login bug\n\n[Assistant]: escaped the query"
    )
    # the cheapest model of the session's provider, never another provider's
    assert bridge.completions[0]["model"] == {"provider": "anthropic", "id": "small"}
    day = (repo / ".memsearch" / "memory" / "2026-08-13.md").read_text()
    assert "turn:a1 " in day
    assert "- the agent fixed it\n" in day
    bridge.call(
        "session.start", session_id="s2", cwd=str(repo), transcript=str(tmp_path / "s2.jsonl")
    )
    assert "Redis" in bridge.call("session.before_prompt", prompt="again")["result"]["snapshot"]
    assert bridge.close() == 0


def test_a_capture_model_missing_from_the_catalog_leaves_a_marker_not_a_call(
    tmp_path: Path, repo: Path
) -> None:
    bridge = Bridge(
        {
            "HOME": str(tmp_path / "home"),
            "PIMEM_DISABLE_PLUGINS": "memsearch-index",
            "PI_MEMSEARCH_CAPTURE_MODEL": "ghost",
        }
    )
    start(bridge, repo, tmp_path)
    settle_one_exchange(bridge)
    bridge.call("session.shutdown")
    assert bridge.close() == 0
    assert bridge.completions == []
    day = (repo / ".memsearch" / "memory" / "2026-08-13.md").read_text()
    assert "capture model 'ghost' not found in the model registry" in day


def test_a_second_session_shows_the_first_ones_capture_beside_its_own_zero(
    bridge: Bridge, repo: Path, tmp_path: Path
) -> None:
    """Issue 14, item 7: ``memory.status`` labels this session's counters and today's entries
    in the store, which another process captured."""
    start(bridge, repo, tmp_path)
    settle_one_exchange(bridge)
    assert bridge.call("session.shutdown")["result"]["captured_in_time"] is True
    assert bridge.close() == 0
    second = Bridge({"HOME": str(tmp_path / "home"), "PIMEM_DISABLE_PLUGINS": "memsearch-index"})
    try:
        second.call(
            "session.start", session_id="s2", cwd=str(repo), transcript=str(tmp_path / "s2.jsonl")
        )
        status = second.call("memory.status")["result"]
    finally:
        assert second.close() == 0
    lines = status["text"].splitlines()
    assert (
        "capture (this session): 0 captured (0 distilled, 0 extractive, 0 failed); skipped: none"
    ) in lines
    assert "today in this store (all sessions): 1 entry from 1 session" in lines
    assert status["capture"]["counters_of"] == "this session"
    assert status["capture"]["counters"]["captured"] == 0
    assert status["store-today"]["entries"] == 1


def test_a_session_leaves_the_process_where_it_was(tmp_path: Path, repo: Path) -> None:
    """No working-directory or environment change per session: memsearch's configuration is
    found from the session's scope and the user's home, call by call."""
    (tmp_path / "home" / ".memsearch").mkdir(parents=True)
    (tmp_path / "home" / ".memsearch" / "config.toml").write_text(
        '[embedding]\nprovider = "onnx"\nmodel = "team/model"\n'
    )
    subdirectory = repo / "src" / "deep"
    subdirectory.mkdir(parents=True)
    bridge = Bridge({"HOME": str(tmp_path / "home")})
    try:
        started_in = Path(f"/proc/{bridge.process.pid}/cwd").resolve()
        bridge.call("session.start", session_id="s1", cwd=str(subdirectory), transcript=None)
        status = bridge.call("memory.status")["result"]
        assert status["backend"]["model"].startswith("team/model ")
        assert Path(f"/proc/{bridge.process.pid}/cwd").resolve() == started_in
    finally:
        bridge.close()


def test_a_malformed_model_catalog_is_a_request_error(
    bridge: Bridge, repo: Path, tmp_path: Path
) -> None:
    reply = start(bridge, repo, tmp_path, models=[{"provider": "anthropic"}])
    assert reply["error"]["type"] == "request"
    assert '"models"' in reply["error"]["message"]


def test_bad_lines_get_an_error_and_the_bridge_keeps_serving(
    bridge: Bridge, repo: Path, tmp_path: Path
) -> None:
    bridge.send("this is not json\n")
    assert bridge.read()["error"]["type"] == "request"
    bridge.send("[1, 2, 3]\n")
    assert bridge.read()["error"]["type"] == "request"
    assert bridge.call("no.such.method")["error"]["message"] == "unknown method 'no.such.method'"
    assert "session.start" in bridge.call("memory.status")["error"]["message"]
    start(bridge, repo, tmp_path)
    wrong = bridge.call("memory.search", query="x", top_k="five")
    assert wrong["error"] == {
        "type": "request",
        "message": '"top_k" must be a whole number of at least 1',
    }
    assert bridge.call("memory.write", content="- x")["error"]["message"].startswith(
        "memory_write needs a persisted session"
    )
    forget = bridge.call("memory.forget", chunk_hash="0123456789abcdef", date="2026-08-13")
    assert "exactly one address" in forget["error"]["message"]
    assert bridge.call("ping")["result"] == {"pong": True}


def test_forget_by_day_and_the_transcript_tool(bridge: Bridge, repo: Path, tmp_path: Path) -> None:
    start(bridge, repo, tmp_path)
    bridge.call("memory.write", content="- a fact to forget", turn="t0")
    forgotten = bridge.call("memory.forget", date="2026-08-13", time="22:41")["result"]
    assert "- a fact to forget" in forgotten["removed"]
    # A transcript recorded on another machine is an answer: the entry is all there is.
    elsewhere = str(tmp_path / "none.jsonl")
    missing = bridge.call("memory.transcript", transcript_path=elsewhere)["result"]
    assert missing["text"].startswith(f"The transcript {elsewhere} is not on this machine")
    assert (missing["turns"], missing["on_this_machine"]) == ([], False)


def test_end_of_input_ends_the_bridge(bridge: Bridge) -> None:
    assert bridge.close() == 0


class _HeldIndex:
    """An index whose runs wait until the test lets them finish."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.finished: list[str] = []

    @hookimpl
    def pimem_open_index(self, scope: Scope) -> MemoryIndex:
        held = self

        class Held(InMemoryIndex):
            def index(self, reason: str, files: tuple[Path, ...], call: BackendCall) -> IndexReport:
                assert held.release.wait(30)
                held.finished.append(reason)
                return super().index(reason, files, call)

        return Held(scope)


def test_a_host_that_does_not_wait_for_the_index_gets_its_answer_first(repo: Path) -> None:
    """``session.shutdown`` with ``wait_for_index: false`` answers while an index run still
    goes on; the process, left alone once stdin ends, finishes the run before it returns."""
    pimem = make_pimem({"PIMEM_DISABLE_PLUGINS": "memsearch-index"})
    index = _HeldIndex()
    pimem.pm.add_plugin(index, "held-index")
    output = io.StringIO()
    requests = [
        {"id": 1, "method": "session.start", "params": {"session_id": "s", "cwd": str(repo)}},
        {"id": 2, "method": "session.shutdown", "params": {"wait_for_index": False}},
    ]
    seen_when_the_host_left: list[list[dict[str, Any]]] = []

    def host_gone() -> None:
        seen_when_the_host_left.append(
            [json.loads(line) for line in output.getvalue().splitlines()]
        )
        index.release.set()

    # One request at a time, as a host does: shutdown comes after start's answer.
    reader = _Paced(requests, output)
    Server(pimem, cast(IO[str], reader), output, on_host_gone=host_gone).serve()

    (answers,) = seen_when_the_host_left
    assert answers[-1]["id"] == 2
    assert answers[-1]["result"]["indexed_in_time"] is False
    assert index.finished == ["catch-up"], "serve() returned before the last index run"


class _Paced:
    """Stdin that gives the next request only once the answer to the last one is out."""

    def __init__(self, requests: list[dict[str, Any]], output: io.StringIO) -> None:
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


def test_shutdowns_wait_for_index_must_be_true_or_false(bridge: Bridge) -> None:
    answer = bridge.call("session.shutdown", wait_for_index="no")
    assert answer["error"] == {
        "type": "request",
        "message": '"wait_for_index" must be true or false',
    }


class _QueuedSearch:
    """A search that has to wait behind another memory operation."""

    @hookimpl
    def pimem_open_index(self, scope: Scope) -> MemoryIndex:
        class Queued(InMemoryIndex):
            def search(self, query: SearchQuery, call: BackendCall) -> tuple[SearchHit, ...]:
                if call.on_wait is not None:
                    call.on_wait("index (catch-up)")
                return ()

        return Queued(scope)


def test_a_queued_request_tells_the_host_what_it_waits_for(repo: Path) -> None:
    pimem = make_pimem({"PIMEM_DISABLE_PLUGINS": "memsearch-index"})
    pimem.pm.add_plugin(_QueuedSearch(), "queued-search")
    output = io.StringIO()
    request = {"id": 7, "method": "memory.search", "params": {"query": "redis"}}
    server = Server(pimem, io.StringIO(json.dumps(request) + "\n"), output)
    server.session.start(SessionInfo(session_id="s", cwd=repo, transcript=None))
    server.serve()
    lines = [json.loads(line) for line in output.getvalue().splitlines()]
    assert lines[1] == {"id": 7, "progress": "waiting for index (catch-up)"}
    assert lines[2]["id"] == 7
    assert lines[2]["result"]["text"] == 'No memories found for "redis".'


class _LegsIndex(InMemoryIndex):
    def search(self, query: SearchQuery, call: BackendCall) -> tuple[SearchHit, ...]:
        leg = LegScore(name="dense", rank=1, score=0.5)
        return tuple(attrs.evolve(hit, legs=(leg,)) for hit in super().search(query, call))


class _LegsSearch:
    def __init__(self) -> None:
        self.indexes: dict[str, _LegsIndex] = {}

    @hookimpl(tryfirst=True)
    def pimem_open_index(self, scope: Scope) -> MemoryIndex:
        return self.indexes.setdefault(scope.collection, _LegsIndex(scope))


def test_search_text_is_short_for_the_agent_and_the_json_whole(repo: Path) -> None:
    """The agent reads one line a hit and its bullets; the anchor waits for memory.expand. The
    JSON beside it keeps everything, and ``explain`` adds the legs to the text only."""
    pimem = make_pimem()
    pimem.pm.add_plugin(_LegsSearch(), "legs-search")
    scope = pimem.resolve_scope(repo)
    anchor = Anchor(session="s1", turn="t1", transcript="/home/user/.pi/sessions/s1.jsonl")
    written = pimem.settings.now()
    pimem.append_entry(scope, Entry(anchor=anchor, content="- Redis cache", written_at=written))
    pimem.index_memory(scope, "test")
    requests = [
        {"id": 1, "method": "memory.search", "params": {"query": "redis"}},
        {"id": 2, "method": "memory.search", "params": {"query": "redis", "explain": True}},
        {"id": 3, "method": "memory.search", "params": {"query": "redis", "explain": "yes"}},
    ]
    output = io.StringIO()
    server = Server(pimem, io.StringIO("".join(json.dumps(r) + "\n" for r in requests)), output)
    server.session.start(SessionInfo(session_id="s", cwd=repo, transcript=None))
    server.serve()
    answers = [line for line in map(json.loads, output.getvalue().splitlines()) if "id" in line]
    plain, explained = answers[0]["result"], answers[1]["result"]
    (hit,) = plain["hits"]
    assert anchor.comment() in hit["content"]
    assert hit["legs"] == [{"name": "dense", "rank": 1, "score": 0.5}]
    assert plain["text"] == (
        "1 memory chunk(s), best first (score = similarity to the query):\n\n"
        f"1. {written:%Y-%m-%d %H:%M} | similarity 1.00 | chunk {hit['chunk_hash']}\n"
        "- Redis cache"
    )
    assert explained["hits"] == plain["hits"]
    (shown,) = read_hits(explained["text"])
    assert shown.legs == ("dense: rank 1, score 0.500",)
    assert answers[2]["error"]["type"] == "request"
    assert '"explain" must be true or false' in answers[2]["error"]["message"]


def test_search_of_a_store_with_no_memory_answers_no_hits_and_a_blank_query_is_refused(
    repo: Path,
) -> None:
    requests = [
        {"id": 1, "method": "memory.search", "params": {"query": "ledger database"}},
        {"id": 2, "method": "memory.search", "params": {"query": " \t "}},
        {"id": 3, "method": "memory.search", "params": {"query": ""}},
    ]
    output = io.StringIO()
    server = Server(
        make_pimem(), io.StringIO("".join(json.dumps(r) + "\n" for r in requests)), output
    )
    server.session.start(SessionInfo(session_id="s", cwd=repo, transcript=None))
    server.serve()
    answers = {
        line["id"]: line for line in map(json.loads, output.getvalue().splitlines()) if "id" in line
    }
    memory_dir = repo / ".memsearch" / "memory"
    assert answers[1]["result"] == {
        "text": f"no memory yet in {memory_dir}; write or capture something first",
        "hits": [],
    }
    assert answers[2]["error"]["type"] == answers[3]["error"]["type"] == "request"
    assert "at least one word" in answers[2]["error"]["message"]


def test_a_query_must_hold_a_word_in_the_library_too() -> None:
    for text in ("", "   ", "\n"):
        with pytest.raises(QueryError, match="the search query is empty"):
            SearchQuery(text=text)
    assert SearchQuery(text=" redis ").text == " redis "


def test_lines_that_broke_the_bridge_get_request_errors_and_it_keeps_serving(repo: Path) -> None:
    # Each was found by the reliability suite's protocol fuzzing: the first two ended the
    # bridge (a RecursionError in the reader; a lone surrogate the UTF-8 writer refused), the
    # others were answered as internal errors.
    before_start = [
        "[" * 100_000,
        '{"id": "\\ud800", "method": "ping"}',
        '{"id": 1, "method": "session.before_prompt", "params": {"prompt": "hi"}}',
        '{"id": 2, "method": "memory.transcript", "params": {"transcript_path": "a\\u0000b"}}',
    ]
    # Requests are answered concurrently: the one that needs a session gets a server whose
    # session is started already, so its answer does not depend on which thread runs first.
    after_start = [
        '{"id": 4, "method": "memory.expand", "params": {"chunk_hash": "0123456789abcdef", "project": "rel"}}',
        '{"id": 5, "method": "ping"}',
    ]
    replies: dict[str, dict[str, Any]] = {}
    cwd = os.getcwd()
    try:
        for lines, started in ((before_start, False), (after_start, True)):
            pimem = make_pimem({"PIMEM_DISABLE_PLUGINS": "memsearch-index"})
            output = io.StringIO()
            server = Server(pimem, io.StringIO("\n".join(lines) + "\n"), output)
            if started:
                server.session.start(SessionInfo(session_id="s", cwd=repo, transcript=None))
            server.serve()
            written = output.getvalue()
            written.encode("utf-8")  # what a host reads must be UTF-8
            for reply in map(json.loads, written.splitlines()[1:]):
                replies[json.dumps(reply.get("id"))] = reply
    finally:
        os.chdir(cwd)  # a started session moves the process to the repository
    assert replies["null"]["error"]["type"] == "request"
    assert replies['"\\ud800"']["result"] == {"pong": True}
    for request_id, detail in (("1", "session.start"), ("2", "NUL"), ("4", "project label")):
        assert replies[request_id]["error"]["type"] == "request", replies[request_id]
        assert detail in replies[request_id]["error"]["message"]
    assert replies["5"]["result"] == {"pong": True}


def test_an_exchange_whose_bridge_was_killed_mid_capture_is_captured_by_the_next(
    tmp_path: Path, repo: Path
) -> None:
    # Found by the reliability suite: the exchange a killed bridge was distilling was lost;
    # the next bridge started its window after it. The capture journal hands it over.
    from pi_sessions import assistant, session_file, user

    session_file(
        tmp_path / "s1.jsonl",
        [user("u1", None, 1, "fix the login loop"), assistant("a1", "u1", 2, "escaping")],
    )
    env = {"HOME": str(tmp_path / "home"), "PIMEM_DISABLE_PLUGINS": "memsearch-index"}
    first = Bridge(env)
    start(first, repo, tmp_path)  # its transcript is s1.jsonl
    first.send({"id": 99, "method": "session.settled", "params": {"leaf": "a1"}})
    asked = [first.read(), first.read()]  # the reply, and pimem asking the host's model
    assert any(message.get("method") == "complete" for message in asked)
    first.process.kill()  # while the host's model is "thinking"
    first.process.wait()
    assert first.process.stdin is not None
    assert first.process.stdout is not None
    first.process.stdin.close()
    first.process.stdout.close()
    day = repo / ".memsearch" / "memory" / "2026-08-13.md"
    assert not day.exists()

    second = Bridge(env)
    start(second, repo, tmp_path)
    assert second.call("session.shutdown")["result"]["captured_in_time"] is True
    assert second.close() == 0
    assert second.completions[0]["prompt"] == (
        "[User]: fix the login loop\n\n[Assistant]: escaping"
    )
    assert day.read_text().count("turn:a1 ") == 1


def test_a_host_that_leaves_right_after_shutdown_hands_the_exchange_over(
    tmp_path: Path, repo: Path
) -> None:
    """pi at exit: the last settle, then ``session.shutdown`` without waiting for capture, and
    the host is gone before any answer. The exchange is journaled and handed over, not lost nor
    written as a marker; the next session distils it with its host's model. The secret in it
    was redacted before the model saw it, and the host was told so, by kind, as an event."""
    from pi_sessions import assistant, session_file, user

    key = "AKIA" + "QX7RT2WM9KLP4ZB3"  # built here: no key-shaped string in the source
    session_file(
        tmp_path / "s1.jsonl",
        [user("u1", None, 1, f"the deploy key is {key}"), assistant("a1", "u1", 2, "Noted.")],
    )
    env = {"HOME": str(tmp_path / "home"), "PIMEM_DISABLE_PLUGINS": "memsearch-index"}
    first = Bridge(env)
    start(first, repo, tmp_path)  # its transcript is s1.jsonl
    first.send({"id": 98, "method": "session.settled", "params": {"leaf": "a1"}})
    shutdown = {"wait_for_index": False, "capture_wait_ms": 0}
    first.send({"id": 99, "method": "session.shutdown", "params": shutdown})
    assert first.close() == 0  # no answer read: the host has gone
    day = repo / ".memsearch" / "memory" / "2026-08-13.md"
    assert not day.exists()

    second = Bridge(env)
    second.call(
        "session.start", session_id="s2", cwd=str(repo), model=SESSION_MODEL, models=CATALOG
    )
    deadline = time.monotonic() + 30
    while not (day.exists() and "session:s1 turn:a1 " in day.read_text()):
        assert time.monotonic() < deadline, "the handed-over exchange was not captured"
        second.call("ping")  # the host answers pimem's model requests meanwhile
        time.sleep(0.05)
    assert second.close() == 0
    assert second.completions[0]["prompt"] == (
        "[User]: the deploy key is [REDACTED:aws-access-key]\n\n[Assistant]: Noted."
    )
    assert day.read_text().count("session:s1 turn:a1 ") == 1
    assert key not in day.read_text()
    assert second.events == [
        {
            "event": "notice",
            "key": "redacted",
            "text": "redacted a secret from a captured exchange (1 aws-access-key) before "
            "distilling it: memory holds [REDACTED:aws-access-key] in its place, never the "
            "secret.",
        }
    ]


def test_exchanges_queued_behind_a_capture_survive_a_killed_bridge(
    tmp_path: Path, repo: Path
) -> None:
    # Found by the workload benchmark: exchanges settled while another was being distilled
    # waited only in the killed process's queue, and the next bridge started after them.
    from pi_sessions import assistant, session_file, user

    session_file(
        tmp_path / "s1.jsonl",
        [
            user("u1", None, 1, "fix the login loop"),
            assistant("a1", "u1", 2, "escaping"),
            user("u2", "a1", 3, "we pick Redis for the cache"),
            assistant("a2", "u2", 4, "noted"),
            user("u3", "a2", 5, "and Postgres for the ledger"),
            assistant("a3", "u3", 6, "noted too"),
        ],
    )
    env = {"HOME": str(tmp_path / "home"), "PIMEM_DISABLE_PLUGINS": "memsearch-index"}
    first = Bridge(env)
    start(first, repo, tmp_path)
    for n, leaf in enumerate(("a1", "a2", "a3"), start=90):
        first.send({"id": n, "method": "session.settled", "params": {"leaf": leaf}})
    replies = [first.read() for _ in range(4)]  # three replies, and the first "complete"
    assert sum(message.get("method") == "complete" for message in replies) == 1
    first.process.kill()  # a1 is with the host's model, a2 and a3 wait in the queue
    first.process.wait()
    assert first.process.stdin is not None
    assert first.process.stdout is not None
    first.process.stdin.close()
    first.process.stdout.close()

    second = Bridge(env)
    second.distil = lambda prompt: "- " + prompt.splitlines()[0]
    start(second, repo, tmp_path)
    assert second.call("session.shutdown")["result"]["captured_in_time"] is True
    assert second.close() == 0
    assert [completion["prompt"] for completion in second.completions] == [
        "[User]: fix the login loop\n\n[Assistant]: escaping",
        "[User]: we pick Redis for the cache\n\n[Assistant]: noted",
        "[User]: and Postgres for the ledger\n\n[Assistant]: noted too",
    ]
    day = (repo / ".memsearch" / "memory" / "2026-08-13.md").read_text()
    assert [day.count(f"turn:{leaf} ") for leaf in ("a1", "a2", "a3")] == [1, 1, 1]
    assert day.index("turn:a1 ") < day.index("turn:a2 ") < day.index("turn:a3 ")


class _BuggyIndex(InMemoryIndex):
    def search(self, query: SearchQuery, call: BackendCall) -> tuple[SearchHit, ...]:
        raise ZeroDivisionError("a bug in the plugin")


class _BuggySearch:
    @hookimpl(tryfirst=True)
    def pimem_open_index(self, scope: Scope) -> MemoryIndex:
        return _BuggyIndex(scope)


def test_an_internal_error_names_the_plugin_that_raised_it(repo: Path) -> None:
    pimem = make_pimem()
    pimem.pm.add_plugin(_BuggySearch(), "buggy-search")
    output = io.StringIO()
    request = {"id": 9, "method": "memory.search", "params": {"query": "redis"}}
    server = Server(pimem, io.StringIO(json.dumps(request) + "\n"), output)
    server.session.start(SessionInfo(session_id="s", cwd=repo, transcript=None))
    server.serve()
    (answer,) = (line for line in map(json.loads, output.getvalue().splitlines()) if "id" in line)
    assert answer["error"]["type"] == "internal"
    said = answer["error"]["message"]
    assert said.startswith(
        "plugin 'buggy-search' raised ZeroDivisionError('a bug in the plugin') in "
        "MemoryIndex.search; the traceback is in "
    )
    assert said.endswith(
        "(fix the plugin, or set PIMEM_DISABLE_PLUGINS=buggy-search to go on without it)"
    )
