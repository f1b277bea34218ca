"""Drive the real pi CLI against a scripted model server on 127.0.0.1, with the pimem adapter.

Shared by the end-to-end tests and the pi latency benchmark, so it imports nothing from pytest:

- :class:`ModelServer` is an OpenAI-compatible ``/v1/chat/completions`` endpoint that answers
  with replies chosen by :class:`Rule` s (first match wins) and logs every request it gets; the
  maintenance tests use it too, as memsearch's model.
- :class:`PiLine` says how to start one pi line (0.73 on the system node, 1.6 on Node 22).
- :class:`PiWorld` is one project (a git repository), one pi agent directory and one server:
  it runs pi in print mode (:meth:`PiWorld.run`) or RPC mode (:meth:`PiWorld.rpc`).
- :func:`read_session` reads a pi session file; :func:`bridge_pids` finds pi's ``pimem serve``;
  :func:`parse_hits` and :func:`anchors` read ``memory_search`` results and day files.

pi needs ``HOME`` to hold a memsearch configuration (:func:`write_memsearch_config`) and, for the
offline embedding model, ``HF_HOME`` and ``HF_HUB_OFFLINE=1`` in the environment given to it.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import attrs

REPO_ROOT = Path(__file__).resolve().parents[1]
ADAPTER_DIR = REPO_ROOT / "adapters" / "pi"
MODEL = "fake/fake-model"
API_KEY = "fake-key"
#: A runaway tool loop ends here instead of at the test's timeout (a benchmark sets its own).
MAX_REQUESTS = 60
#: How long :meth:`ModelServer.hold` keeps a request waiting at most, should no release come.
HOLD_SECONDS = 60
JSON = "application/json"


# -- the pi lines --------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class PiLine:
    """One pi release line: how to start it and which event ends a prompt in RPC mode."""

    name: str
    node: str | None
    cli: Path
    settled_event: str

    def missing(self) -> str | None:
        """Why this line cannot run here (``make node`` installs it), or ``None``."""
        if self.node is None or not Path(self.node).exists():
            return f"pi {self.name}: no node binary ({self.node or 'node not on PATH'})"
        if not self.cli.is_file():
            return f"pi {self.name}: {self.cli} is missing (run `make node`)"
        return None

    def command(self, *args: str, adapter: bool = True) -> list[str]:
        """pi with the adapter loaded by ``-e`` (an extension path is not gated by trust), or
        without it (*adapter* false: the baseline)."""
        if self.node is None:
            raise RuntimeError(self.missing())
        extension = ["-e", str(ADAPTER_DIR)] if adapter else []
        return [self.node, str(self.cli), *extension, *args]


PI_LINES: dict[str, PiLine] = {
    "0.73": PiLine(
        name="0.73",
        node=shutil.which("node"),
        cli=ADAPTER_DIR / "node_modules/@mariozechner/pi-coding-agent/dist/cli.js",
        settled_event="agent_end",
    ),
    "1.6": PiLine(
        name="1.6",
        node=str(ADAPTER_DIR / "node_modules/.bin/node"),
        cli=ADAPTER_DIR / "e2e/pi-1/node_modules/@earendil-works/pi-coding-agent/dist/cli.js",
        settled_event="agent_settled",
    ),
}


def missing_pi() -> str | None:
    """Why the pi lines cannot run (the adapter's Node packages are not installed), or ``None``."""
    reasons = [reason for line in PI_LINES.values() if (reason := line.missing())]
    return "; ".join(reasons) or None


def pimem_command() -> str:
    """The ``pimem`` next to this Python (its virtual environment), else the one on PATH: what
    ``PIMEM_BIN`` points pi's adapter at, so the bridge runs the code under test."""
    local = Path(sys.executable).with_name("pimem")
    found = str(local) if local.exists() else shutil.which("pimem")
    if found is None:
        raise RuntimeError("no pimem command: run `make venv`")
    return found


#: Variables of the caller's own memory and pi setup: none of them may reach an isolated pi.
FOREIGN_PREFIXES = ("PIMEM_", "PI_", "MEMSEARCH_", "XDG_")


def isolated_environment(home: Path, extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without the caller's pimem, pi, memsearch or XDG settings,
    ``HOME`` at *home*, then *extra* (the offline model's variables, say)."""
    own = {k: v for k, v in os.environ.items() if not k.startswith(FOREIGN_PREFIXES)}
    return {**own, "HOME": str(home), **extra}


def write_memsearch_config(home: Path, *, provider: str, model: str, milvus_uri: Path) -> Path:
    """``<home>/.memsearch/config.toml`` for an isolated memsearch (run pi with ``HOME=home``):
    the tests' ``memsearch_home`` fixture does the same with the offline model."""
    config = home / ".memsearch" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        f'[embedding]\nprovider = "{provider}"\nmodel = "{model}"\n\n'
        f'[milvus]\nuri = "{milvus_uri}"\n'
    )
    return config


# -- the model server ----------------------------------------------------------------------


def text_of(content: object) -> str:
    """A message's text: chat content is a string or a list of ``{"type": "text"}`` blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(block.get("text", ""))
            for block in content
            if isinstance(block, dict) and block.get("type") == "text"
        )
    return ""


@attrs.frozen(kw_only=True)
class ToolResult:
    """What the agent got back from one tool call, exactly as the model receives it."""

    name: str
    arguments: Mapping[str, Any]
    content: str


@attrs.frozen(kw_only=True)
class ChatRequest:
    """One request the server received, in arrival order (``index`` from 0)."""

    index: int
    path: str
    body: Mapping[str, Any]

    @property
    def messages(self) -> list[Mapping[str, Any]]:
        return list(self.body.get("messages", []))

    @property
    def tools(self) -> list[str]:
        return [tool["function"]["name"] for tool in self.body.get("tools") or []]

    @property
    def system(self) -> str:
        """The system prompt (pi sends it as the first message)."""
        first = self.messages[0] if self.messages else {}
        return text_of(first.get("content")) if first.get("role") == "system" else ""

    @property
    def last(self) -> Mapping[str, Any]:
        return self.messages[-1] if self.messages else {}

    @property
    def prompt(self) -> str:
        """The text of the last user message."""
        users = [m for m in self.messages if m.get("role") == "user"]
        return text_of(users[-1].get("content")) if users else ""

    @property
    def is_distillation(self) -> bool:
        """The adapter's capture call: no tools, and the exchange as ``[User]: ...``."""
        return not self.tools and self.prompt.startswith("[User]: ")

    @property
    def tool_results(self) -> list[ToolResult]:
        """Every tool result in the conversation so far, oldest first."""
        calls: dict[str, Mapping[str, Any]] = {}
        results = []
        for message in self.messages:
            for call in message.get("tool_calls") or []:
                calls[call["id"]] = call["function"]
            if message.get("role") == "tool":
                call = calls.get(message.get("tool_call_id", ""), {})
                results.append(
                    ToolResult(
                        name=str(call.get("name", "")),
                        arguments=json.loads(call.get("arguments") or "{}"),
                        content=text_of(message.get("content")),
                    )
                )
        return results

    @property
    def last_tool_result(self) -> ToolResult | None:
        """The tool result this request answers, when its last message is one."""
        return self.tool_results[-1] if self.last.get("role") == "tool" else None


@attrs.frozen
class Text:
    """Reply with assistant text (the run ends)."""

    content: str


@attrs.frozen
class ToolCall:
    """Reply with one tool call (pi runs it and asks again with the result)."""

    name: str
    arguments: Mapping[str, Any] = attrs.field(factory=dict)


Reply = Text | ToolCall
Responder = Reply | Callable[[ChatRequest], Reply]


@attrs.frozen
class Rule:
    """When ``matches`` a request, answer with ``reply`` (a reply or a function of the request)."""

    name: str
    matches: Callable[[ChatRequest], bool]
    reply: Responder

    def answer(self, request: ChatRequest) -> Reply:
        return self.reply(request) if callable(self.reply) else self.reply


def on_prompt(marker: str, reply: Responder) -> Rule:
    """The agent's first request for a user prompt containing *marker*."""
    return Rule(
        f"prompt {marker!r}",
        lambda r: not r.is_distillation and r.last.get("role") == "user" and marker in r.prompt,
        reply,
    )


def after_tool(tool: str, reply: Responder, *, marker: str = "") -> Rule:
    """The agent's request right after a *tool* result (in a prompt containing *marker*)."""

    def matches(request: ChatRequest) -> bool:
        result = request.last_tool_result
        return result is not None and result.name == tool and marker in request.prompt

    return Rule(f"after {tool} in {marker!r}", matches, reply)


def asked(request: ChatRequest) -> str:
    """The user's words in a distillation request (the first ``[User]:`` paragraph)."""
    first = request.prompt.split("\n\n[Assistant]: ", 1)[0]
    return " ".join(first.removeprefix("[User]: ").split())


def default_bullets(request: ChatRequest) -> Reply:
    return Text(f"- the user asked: {asked(request)}")


def on_distill(reply: Responder = default_bullets, *, marker: str = "") -> Rule:
    """The adapter's distillation of an exchange whose text contains *marker*."""
    return Rule(f"distill {marker!r}", lambda r: r.is_distillation and marker in r.prompt, reply)


def sse(events: Sequence[Mapping[str, Any]]) -> bytes:
    lines = [f"data: {json.dumps(event)}\n\n" for event in events]
    return ("".join(lines) + "data: [DONE]\n\n").encode()


def assistant(reply: Reply, index: int) -> tuple[dict[str, Any], str]:
    """The reply as an assistant message and its finish reason, streamed or not."""
    if isinstance(reply, Text):
        return {"role": "assistant", "content": reply.content}, "stop"
    call = {
        "index": 0,
        "id": f"call_{index}",
        "type": "function",
        "function": {"name": reply.name, "arguments": json.dumps(reply.arguments)},
    }
    return {"role": "assistant", "tool_calls": [call]}, "tool_calls"


def stream(reply: Reply, index: int) -> bytes:
    """The reply as the chunks of a streamed chat completion (pi streams)."""
    message, finish = assistant(reply, index)

    def chunk(delta: Mapping[str, Any], finish: str | None) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-{index}",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "fake-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    return sse([chunk(message, None), chunk({}, finish)])


def completion(reply: Reply, index: int, model: str) -> bytes:
    """The reply as one plain chat completion (memsearch's OpenAI client does not stream)."""
    message, finish = assistant(reply, index)
    body = {
        "id": f"chatcmpl-{index}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    return json.dumps(body).encode()


class ModelServer:
    """A scripted OpenAI-compatible model on 127.0.0.1 (a free port), in a daemon thread.

    A reply is streamed when the request asks for it, as pi does, else one plain completion.
    ``rules`` can be replaced between runs. A request no rule matches gets HTTP 400 and lands
    in ``failures``, as does anything but ``POST /v1/chat/completions``: tests assert it empty.
    :meth:`hold` keeps requests waiting until :meth:`release`, so a test can kill its client
    mid-call (``arrived`` tells it one came).
    """

    def __init__(self, rules: Sequence[Rule] = (), *, max_requests: int = MAX_REQUESTS) -> None:
        self.rules: list[Rule] = list(rules)
        self.max_requests = max_requests
        self.requests: list[ChatRequest] = []
        self.failures: list[str] = []
        self.arrived = threading.Event()
        self._open = threading.Event()
        self._open.set()
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._http.daemon_threads = True
        self._thread = threading.Thread(
            target=self._http.serve_forever, name="model-server", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def agent_requests(self) -> list[ChatRequest]:
        """Requests from pi's agent loop (each became one assistant message in a session)."""
        with self._lock:
            return [r for r in self.requests if not r.is_distillation]

    def distillations(self) -> list[ChatRequest]:
        with self._lock:
            return [r for r in self.requests if r.is_distillation]

    def hold(self) -> None:
        """Keep every request from now on waiting (at most ``HOLD_SECONDS``) until release."""
        self.arrived.clear()
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def close(self) -> None:
        self.release()
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _respond(self, method: str, path: str, raw: bytes) -> tuple[int, str, bytes]:
        """The status, content type and body for one request. Failures answer 400: a client
        retries a 5xx."""
        with self._lock:
            index = len(self.requests)
            if (method, path) != ("POST", "/v1/chat/completions"):
                self.failures.append(f"unexpected request: {method} {path}")
                return 404, JSON, b"{}"
            request = ChatRequest(index=index, path=path, body=json.loads(raw))
            self.requests.append(request)
        self.arrived.set()
        self._open.wait(HOLD_SECONDS)  # outside the lock: the requests that follow still log
        with self._lock:
            reply = self._choose(request)
        if isinstance(reply, str):
            return 400, JSON, json.dumps({"error": {"message": reply}}).encode()
        if request.body.get("stream"):
            return 200, "text/event-stream", stream(reply, index)
        return 200, JSON, completion(reply, index, str(request.body.get("model", "fake-model")))

    def _choose(self, request: ChatRequest) -> Reply | str:
        """The reply to *request*, or why there is none (the reason is in ``failures`` too)."""
        if request.index >= self.max_requests:
            self.failures.append(f"more than {self.max_requests} requests")
            return Text("too many requests")
        rule = next((rule for rule in self.rules if rule.matches(request)), None)
        if rule is None:
            self.failures.append(f"no rule for request {request.index}: {describe(request)}")
            return "no rule matched"
        try:
            return rule.answer(request)
        except Exception as error:  # noqa: BLE001 - reported to the test, not to the client
            self.failures.append(f"rule {rule.name} failed on request {request.index}: {error!r}")
            return "the rule failed"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # The headers and the body go out in two writes: with Nagle's algorithm on, the
            # body waits for the client's delayed ACK of the headers (40 ms on Linux), a stall
            # no model provider adds to every call.
            disable_nagle_algorithm = True

            def _answer(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, kind, body = server._respond(self.command, self.path, raw)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", kind)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # the test killed its client mid-call
                    self.close_connection = True

            do_POST = do_GET = do_PUT = do_DELETE = do_HEAD = _answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def describe(request: ChatRequest) -> str:
    """A request in one line, for failure messages."""
    last = request.last
    return f"tools={bool(request.tools)} last={last.get('role')}: {text_of(last.get('content'))[:200]!r}"


# -- pi sessions ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SessionFile:
    """A pi session file (JSONL): its header line and its entries."""

    path: Path
    header: Mapping[str, Any]
    entries: list[Mapping[str, Any]]

    @property
    def id(self) -> str:
        return str(self.header["id"])

    def messages(self, role: str | None = None) -> list[Mapping[str, Any]]:
        """Message entries, optionally only those whose message has *role*."""
        return [
            entry
            for entry in self.entries
            if entry.get("type") == "message"
            and (role is None or entry["message"].get("role") == role)
        ]


def read_session(path: Path) -> SessionFile:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    if not lines or lines[0].get("type") != "session":
        raise ValueError(f"{path} is not a pi session file")
    return SessionFile(path=path, header=lines[0], entries=lines[1:])


# -- running pi ----------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class PiRun:
    """One finished ``pi -p`` run and the session file it wrote."""

    code: int
    stdout: str
    stderr: str
    seconds: float
    session: Path | None


def write_agent_dir(agent_dir: Path, model_url: str) -> Path:
    """A pi agent directory whose only provider is the scripted server."""
    agent_dir.mkdir(parents=True, exist_ok=True)
    provider = {
        "baseUrl": model_url,
        "api": "openai-completions",
        "apiKey": API_KEY,
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": [
            {
                "id": "fake-model",
                "reasoning": False,
                "input": ["text"],
                "contextWindow": 32000,
                "maxTokens": 1024,
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
            }
        ],
    }
    (agent_dir / "models.json").write_text(json.dumps({"providers": {"fake": provider}}))
    return agent_dir


@attrs.define(kw_only=True)
class PiWorld:
    """One project, one pi agent directory and one model server, for one pi line.

    ``env`` is what pi (and so ``pimem serve``) runs with: *base_env* (HOME must hold the
    memsearch configuration) plus pi's offline switches and ``PIMEM_BIN``.
    """

    line: PiLine
    repo: Path
    agent_dir: Path
    server: ModelServer
    env: dict[str, str]

    @classmethod
    def create(
        cls,
        line: PiLine,
        *,
        repo: Path,
        agent_dir: Path,
        server: ModelServer,
        base_env: Mapping[str, str],
        extra_env: Mapping[str, str] | None = None,
    ) -> PiWorld:
        # pi exports PI_* variables to its tools: a suite run from inside pi must not pass them on.
        env = {
            **{name: value for name, value in base_env.items() if not name.startswith("PI_")},
            "PI_CODING_AGENT_DIR": str(write_agent_dir(agent_dir, server.url)),
            "PI_OFFLINE": "1",
            "PI_TELEMETRY": "0",
            "PIMEM_BIN": pimem_command(),
            **(extra_env or {}),
        }
        return cls(line=line, repo=repo, agent_dir=agent_dir, server=server, env=env)

    def session_files(self) -> list[Path]:
        """Every session file pi wrote, oldest first (names start with a timestamp)."""
        return sorted((self.agent_dir / "sessions").glob("*/*.jsonl"), key=lambda p: p.name)

    def run(self, prompt: str, *args: str, timeout: float = 90) -> PiRun:
        """``pi -p <prompt>`` in the project; the run's new session file comes back with it."""
        before = set(self.session_files())
        started = time.monotonic()
        done = subprocess.run(
            self.line.command("--model", MODEL, *args, "-p", prompt),
            cwd=self.repo,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
        new = [path for path in self.session_files() if path not in before]
        return PiRun(
            code=done.returncode,
            stdout=done.stdout.decode(errors="replace"),
            stderr=done.stderr.decode(errors="replace"),
            seconds=time.monotonic() - started,
            session=new[-1] if new else None,
        )

    def rpc(self, *args: str) -> RpcSession:
        """pi in RPC mode in the project (close it, or use it as a context manager)."""
        return RpcSession(
            self.line.command("--model", MODEL, "--mode", "rpc", *args),
            cwd=self.repo,
            env=self.env,
            settled_event=self.line.settled_event,
        )

    def day_file(self, day: str) -> Path:
        """The project's daily memory file for *day* (``YYYY-MM-DD``)."""
        return self.repo / ".memsearch" / "memory" / f"{day}.md"


class RpcSession:
    """pi in ``--mode rpc``: JSON lines in, responses and events out (split on LF only)."""

    def __init__(
        self, command: Sequence[str], *, cwd: Path, env: Mapping[str, str], settled_event: str
    ) -> None:
        self.settled_event = settled_event
        self.records: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._ids = 0
        self.process = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._readers = [
            threading.Thread(target=self._read, name="pi-rpc-stdout", daemon=True),
            threading.Thread(target=self._drain_stderr, name="pi-rpc-stderr", daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    @property
    def pid(self) -> int:
        return self.process.pid

    def send(self, command: Mapping[str, Any]) -> str:
        """Write one command (an ``id`` is added when it has none); returns its id."""
        self._ids += 1
        record = {"id": f"r{self._ids}", **command}
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(record).encode() + b"\n")
        self.process.stdin.flush()
        return str(record["id"])

    def next_record(self, deadline: float) -> dict[str, Any]:
        record = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
        if record is None:
            raise RuntimeError(f"pi exited ({self.process.poll()}): {self.stderr[-5:]}")
        return record

    def prompt(self, message: str, *, timeout: float = 60) -> list[dict[str, Any]]:
        """Send a prompt and return its records up to the event that ends it."""
        request_id = self.send({"type": "prompt", "message": message})
        deadline = time.monotonic() + timeout
        records = []
        while True:
            record = self.next_record(deadline)
            records.append(record)
            if record.get("type") == "response" and record.get("id") == request_id:
                if not record.get("success"):
                    raise RuntimeError(f"pi refused the prompt: {record}")
            elif record.get("type") == self.settled_event:
                return records

    def close(self, timeout: float = 30) -> int:
        """End stdin (pi shuts down in order: the bridge flushes capture and indexing)."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        finally:
            self._close_pipes()

    def kill(self) -> None:
        """Stop pi at once (after a failure): no orderly shutdown."""
        self.process.kill()
        self.process.wait()
        self._close_pipes()

    def _close_pipes(self) -> None:
        for reader in self._readers:
            reader.join(timeout=5)
        for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
            if pipe is not None and not pipe.closed:
                pipe.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.process.poll() is not None:
            self._close_pipes()
        elif kind is None:
            self.close()
        else:
            self.kill()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:  # a binary stream splits on b"\n" only
            if line.strip():
                record = json.loads(line)
                self.records.append(record)
                self._queue.put(record)
        self._queue.put(None)

    def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line.decode(errors="replace").rstrip())


# -- processes -----------------------------------------------------------------------------


def _proc_stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state) of a live process, from /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[1]), fields[0]


def cpu_ticks(pid: int) -> int:
    """User and system CPU ticks a process used so far (0 once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])


def children(pid: int) -> Iterator[int]:
    """The live (not zombie) child processes of *pid*."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _proc_stat(int(entry.name))
            if stat is not None and stat[0] == pid and stat[1] != "Z":
                yield int(entry.name)


def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def bridge_pids(pi_pid: int) -> list[int]:
    """The ``pimem serve`` processes pi started (direct children whose command line ends so)."""
    return [pid for pid in children(pi_pid) if cmdline(pid)[-1:] == ["serve"]]


def bridges_in(directory: Path) -> list[int]:
    """The ``pimem serve`` processes working in *directory*, whoever their parent is now: a
    bridge pi left to finish its last index run outlives pi."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and cmdline(int(entry.name))[-1:] == ["serve"]:
            try:
                if Path(os.readlink(entry / "cwd")) == directory:
                    found.append(int(entry.name))
            except OSError:
                continue  # gone meanwhile
    return found


def gone(pid: int) -> bool:
    """Reaped by its parent, not just dead: the parent has seen it exit."""
    return _proc_stat(pid) is None


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout}s for {what}")
        time.sleep(0.05)


# -- memory files --------------------------------------------------------------------------

ANCHOR = re.compile(r"<!-- session:(\S+) turn:(\S+) transcript:(.+?) -->")
HIT = re.compile(
    r"^\d+\. score [\d.]+ \| chunk (\w+)(?: \| [^|\n]+)? \| ([^\n]+):(\d+)-(\d+)$", re.M
)


@attrs.frozen(kw_only=True)
class Hit:
    """One block of ``memory_search``'s text: ``1. score 0.xxx | chunk <hash> | <source>:a-b``."""

    chunk_hash: str
    source: str
    start: int
    end: int
    content: str


def parse_hits(text: str) -> list[Hit]:
    """The hits of a ``memory_search`` result, best first, each with its content lines."""
    matches = list(HIT.finditer(text))
    hits = []
    for match, after in zip(matches, [*matches[1:], None], strict=True):
        content = text[match.end() : after.start() if after else len(text)].strip("\n")
        hits.append(
            Hit(
                chunk_hash=match.group(1),
                source=match.group(2),
                start=int(match.group(3)),
                end=int(match.group(4)),
                content=content,
            )
        )
    return hits


def anchors(text: str) -> list[tuple[str, str, str]]:
    """Every ``(session, turn, transcript)`` anchor comment in *text*."""
    return [(m.group(1), m.group(2), m.group(3)) for m in ANCHOR.finditer(text)]
