"""Fuzzing the bridge's JSON-lines protocol: malformed, oversized, wrong-typed, unknown requests.

Every line that is not blank gets exactly one reply, with the request's ``id`` when it had one
(``null`` otherwise), an error ``type`` of ``request``, ``memory`` or ``unavailable`` when it
fails (``internal`` means a bug in pimem), and the bridge keeps serving: a ``ping`` after each
input must still be answered. Most inputs go to ``serve.Server`` in-process over in-memory
streams; a smaller budget goes to a real ``pimem serve`` over pipes, as raw bytes.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, cast

from hypothesis import strategies as st

from pimem_core.api import Pimem
from pimem_core.doors.serve import MAX_LINE, Server
from reliability.fuzzing import run_property
from reliability.outcome import Outcome
from reliability.sandbox import Sandbox, environment
from reliability.strategies import DEEP, JSON_VALUES, TEXT, TRICKY, damaged, dumps

METHODS = [
    "session.start",
    "session.before_prompt",
    "session.settled",
    "session.compacted",
    "session.shutdown",
    "memory.search",
    "memory.expand",
    "memory.transcript",
    "memory.write",
    "memory.forget",
    "memory.compact",
    "memory.status",
    "ping",
]
ACCEPTED_ERRORS = {"request", "memory", "unavailable"}
TIMEOUT = 60.0
# Paths a fuzzed session may name: inside the sandbox (relative names resolve there too).
SAFE_NAME = st.text(
    alphabet=st.characters(blacklist_characters="/.\x00", blacklist_categories=["Cs"]),
    min_size=1,
    max_size=12,
)
MODEL = st.fixed_dictionaries(
    {},
    optional={
        "provider": st.one_of(st.sampled_from(["anthropic", "openai"]), JSON_VALUES),
        "id": st.one_of(st.sampled_from(["small", "big"]), JSON_VALUES),
        "input_cost": st.one_of(st.floats(), JSON_VALUES),
        "output_cost": st.one_of(st.floats(), JSON_VALUES),
    },
)
BRANCH_ENTRY = st.fixed_dictionaries(
    {},
    optional={
        "id": st.one_of(st.sampled_from(["u1", "a1"]), JSON_VALUES),
        "kind": st.one_of(st.sampled_from(["message", "custom_message", "other"]), JSON_VALUES),
        "role": st.one_of(st.sampled_from(["user", "assistant", "tool"]), JSON_VALUES),
        "text": st.one_of(TEXT, JSON_VALUES),
        "tool_calls": st.one_of(st.lists(TEXT, max_size=3), JSON_VALUES),
        "aborted": JSON_VALUES,
    },
)


def params_for(project: Path) -> st.SearchStrategy[Any]:
    """Request params: every name any method reads, each valid, odd or of the wrong type."""
    inside = st.one_of(
        st.just(str(project)),
        SAFE_NAME,
        SAFE_NAME.map(lambda name: str(project / name)),
        JSON_VALUES.filter(lambda value: not isinstance(value, str)),
    )
    values = {
        "session_id": st.one_of(st.sampled_from(["s1", "s2"]), TEXT, JSON_VALUES),
        "cwd": inside,
        "transcript": st.one_of(st.none(), st.just(str(project / "s.jsonl")), inside),
        "model": st.one_of(MODEL, JSON_VALUES),
        "models": st.one_of(st.lists(MODEL, max_size=3), JSON_VALUES),
        "prompt": st.one_of(TEXT, JSON_VALUES),
        "leaf": st.one_of(st.sampled_from(["a1", "u1"]), TEXT, JSON_VALUES),
        "branch": st.one_of(
            st.lists(st.one_of(BRANCH_ENTRY, JSON_VALUES), max_size=4), JSON_VALUES
        ),
        "query": st.one_of(TEXT, JSON_VALUES),
        "scope": st.one_of(st.sampled_from(["project", "all"]), TEXT, JSON_VALUES),
        "top_k": st.one_of(st.integers(-3, 2**70), JSON_VALUES),
        "chunk_hash": st.one_of(st.sampled_from(["0123456789abcdef", "zz"]), TEXT, JSON_VALUES),
        "project": st.one_of(inside, TEXT),
        "transcript_path": st.one_of(inside, TEXT),
        "turn": st.one_of(st.sampled_from(["t1", "a1"]), TEXT, JSON_VALUES),
        "context": st.one_of(st.integers(-2, 2**70), JSON_VALUES),
        "limit": st.one_of(st.integers(-2, 2**70), JSON_VALUES),
        "content": st.one_of(st.sampled_from(["- a fact", "### 22:41"]), TEXT, JSON_VALUES),
        "date": st.one_of(st.sampled_from(["2026-08-13", "2026-02-30", "../x"]), TEXT, JSON_VALUES),
        "time": st.one_of(st.sampled_from(["22:41", "24:00", "2:41"]), TEXT, JSON_VALUES),
    }
    return st.one_of(
        st.fixed_dictionaries({}, optional=values),
        JSON_VALUES,
    )


@st.composite
def request_lines(draw: st.DrawFn, project: Path) -> str:
    """One line from a host: a request of any shape, or junk."""
    kind = draw(st.sampled_from(["request"] * 6 + ["json", "junk", "deep", "damaged"]))
    if kind == "json":
        return dumps(draw(JSON_VALUES))
    if kind == "junk":
        return draw(st.one_of(TEXT, TRICKY)).replace("\n", " ")
    if kind == "deep":
        return draw(DEEP)
    request: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        request["id"] = draw(
            st.one_of(
                st.integers(-(2**70), 2**70),
                SAFE_NAME,
                JSON_VALUES.filter(lambda v: not (isinstance(v, str) and v.startswith("pimem-"))),
            )
        )
    if draw(st.integers(0, 9)):
        request["method"] = draw(st.one_of(st.sampled_from(METHODS), TEXT, JSON_VALUES))
    if draw(st.integers(0, 3)):
        request["params"] = draw(params_for(project))
    line = dumps(request)
    if kind == "damaged":
        line = draw(damaged(line)).replace("\n", " ")
    return line


def _request_id(line: str) -> object:
    """The id a reply to *line* must carry (``None`` when the line has no usable one)."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return message.get("id") if isinstance(message, dict) else None


def _same_id(left: object, right: object) -> bool:
    # NaN ids compare unequal to themselves; compare their JSON instead.
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)


HOST_ANSWERS: list[dict[str, Any]] = [
    {"result": {"text": "- the exchange, distilled"}},
    {"result": 5},
    {"error": "the model is down"},
    {"error": {"message": ["not", "text"]}},
    {},
    {"result": {"text": None}},
]


class Conversation:
    """The host's side of one bridge: send a line, collect the one reply it must get."""

    def __init__(
        self,
        send: Callable[[str], None],
        receive: Callable[[float], str | None],
        alive: Callable[[], bool],
    ) -> None:
        self._send = send
        self._receive = receive
        self._alive = alive
        self._asked = 0

    def _next(self) -> str:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            raw = self._receive(0.5)
            if raw is not None:
                return raw
            assert self._alive(), "the bridge died"
        raise AssertionError(f"no reply within {TIMEOUT:g} s")

    def drain(self) -> None:
        """Drop what an earlier, failed exchange left unread."""
        while self._receive(0) is not None:
            pass

    def reply_to(self, line: str) -> dict[str, Any]:
        """Send *line*; answer pimem's own requests meanwhile; return the reply to *line*."""
        self._send(line)
        while True:
            raw = self._next()
            message = json.loads(raw)
            assert isinstance(message, dict), f"the bridge wrote a non-object: {raw[:200]}"
            if message.get("method") == "complete":
                answer = HOST_ANSWERS[self._asked % len(HOST_ANSWERS)]
                self._asked += 1
                self._send(dumps({"id": message["id"], **answer}))
                continue
            if "progress" in message or "event" in message:
                continue
            return message


def check_reply(line: str, reply: dict[str, Any]) -> None:
    assert ("result" in reply) != ("error" in reply), f"not one result or error: {reply}"
    # A line over the limit is refused unread: its reply cannot carry its id.
    expected = None if len(line) > MAX_LINE else _request_id(line)
    assert _same_id(reply.get("id"), expected), f"reply id {reply.get('id')!r}, sent {expected!r}"
    error = reply.get("error")
    if error is not None:
        assert isinstance(error, dict), reply
        assert isinstance(error.get("message"), str), reply
        assert error.get("type") in ACCEPTED_ERRORS, (
            f"{error.get('type')} error for {line[:300]!r}: {error.get('message')}"
        )


def exchange(host: Conversation, line: str) -> None:
    """One fuzzed line and its reply, then a ping: the bridge must still be serving."""
    host.drain()
    if line.strip():
        check_reply(line, host.reply_to(line + "\n"))
    pong = host.reply_to('{"id": "alive", "method": "ping"}\n')
    assert pong.get("result") == {"pong": True}, f"the bridge stopped answering: {pong}"


class _Feed:
    """The server's stdin: lines pushed by the fuzzer; ``""`` ends it."""

    def __init__(self) -> None:
        self.lines: queue.SimpleQueue[str] = queue.SimpleQueue()

    def readline(self) -> str:
        return self.lines.get()


class _Sink:
    """The server's stdout, one message per line."""

    def __init__(self) -> None:
        self.lines: queue.SimpleQueue[str] = queue.SimpleQueue()

    def write(self, data: str) -> int:
        # Split on "\n" only, as a host does: JSON text may hold U+2028 and other breaks.
        for line in data.split("\n")[:-1]:
            self.lines.put(line)
        return len(data)

    def flush(self) -> None:
        pass


def _take(lines: queue.SimpleQueue[str], timeout: float) -> str | None:
    try:
        return lines.get(timeout=timeout)
    except queue.Empty:
        return None


def _fuzz_env(box: Sandbox) -> dict[str, str]:
    return box.env({"PIMEM_DISTILL_TIMEOUT_MS": "2000"})


def run_in_process(outcome: Outcome, examples: int, seed_value: int, box: Sandbox) -> None:
    """Fuzz ``serve.Server`` in this process, its backend off (``memsearch-index`` blocked)."""
    env = _fuzz_env(box) | {"PIMEM_DISABLE_PLUGINS": "memsearch-index"}
    with environment(env):
        feed, sink = _Feed(), _Sink()
        server = Server(Pimem.from_env(env), cast(IO[str], feed), cast(IO[str], sink))
        serving = threading.Thread(target=server.serve, name="fuzz-bridge", daemon=True)
        serving.start()
        assert json.loads(_take(sink.lines, TIMEOUT) or "{}").get("event") == "ready"
        host = Conversation(
            feed.lines.put, lambda timeout: _take(sink.lines, timeout), serving.is_alive
        )

        def check(line: Any) -> None:
            exchange(host, line)

        try:
            run_property(
                outcome,
                request_lines(box.project),
                check,
                examples=examples,
                seed_value=seed_value,
                label="bridge",
            )
            oversized = '{"id": 1, "method": "ping", "pad": "' + "x" * MAX_LINE + '"}'
            outcome.inputs += 1
            try:
                check_reply(oversized, host.reply_to(oversized + "\n"))
            except Exception as error:  # noqa: BLE001 - a finding, recorded
                outcome.problems.append(f"bridge, a line over {MAX_LINE} characters: {error}")
        finally:
            feed.lines.put("")
            serving.join(TIMEOUT)
        outcome.expect(not serving.is_alive(), "the in-process bridge did not end at end of input")


def run_subprocess(outcome: Outcome, examples: int, seed_value: int, box: Sandbox) -> None:
    """The same strategy against a real ``pimem serve``, as bytes (invalid UTF-8 included)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pimem_core", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=box.project,
        env=_fuzz_env(box),
    )
    assert process.stdin is not None
    assert process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    replies: queue.SimpleQueue[str] = queue.SimpleQueue()

    def pump() -> None:
        for raw in iter(stdout.readline, b""):
            replies.put(raw.decode("utf-8"))  # the bridge must write UTF-8: a bad byte fails

    threading.Thread(target=pump, name="fuzz-bridge-out", daemon=True).start()

    def send(line: str) -> None:
        stdin.write(line.encode("utf-8", "surrogateescape"))
        stdin.flush()

    host = Conversation(
        send, lambda timeout: _take(replies, timeout), lambda: process.poll() is None
    )
    assert json.loads(_take(replies, TIMEOUT) or "{}").get("event") == "ready"

    def check(line: Any) -> None:
        exchange(host, line)

    try:
        run_property(
            outcome,
            st.one_of(
                request_lines(box.project),
                st.binary(max_size=30).map(lambda raw: raw.decode("utf-8", "surrogateescape")),
            ).map(lambda line: line.replace("\n", " ").replace("\r", " ")),
            check,
            examples=examples,
            seed_value=seed_value,
            label="bridge-process",
        )
    finally:
        stdin.close()
        try:
            code = process.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
        stdout.close()
    outcome.expect(code == 0, f"the real bridge exited {code} at end of input")


def run(outcome: Outcome, examples: int, seed_value: int, box: Sandbox) -> None:
    share = max(1, examples // 20)
    run_in_process(outcome, examples - share, seed_value, box)
    run_subprocess(outcome, share, seed_value, box)
