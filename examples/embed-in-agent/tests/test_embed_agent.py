"""The agent, installed from its directory, against a scripted OpenAI-compatible model on
127.0.0.1: told a fact in one run, it recalls the fact in the next, through pimem.

Each run is a child process (``python -m pimem_embed_agent``), as a user starts the agent; the
memory is real (memsearch, with pimem's offline embedding model, which ``make model`` installs).
The fixture ``pimem_project`` comes from pimem's test kit (``pimem_core.testing``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pimem_core.testing import TempProject
from pimem_plugins.memsearch.offline_model import installed_model

#: The offline model, found before a test points HOME elsewhere.
MODEL = installed_model()
FACT = "Our staging database listens on port 6543."
BULLET = "- The user's staging database listens on port 6543."
QUESTION = "Which port does our staging database listen on?"
#: Requests the scripted model answers at most: every run is bounded.
MAX_REQUESTS = 20


class ScriptedModel:
    """An OpenAI-compatible chat model on 127.0.0.1 that answers by rules, recording every
    request. A request without tools is a distillation (pimem's capture, through the agent's
    model hook); one with tools is a step of the agent's loop."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.failures: list[str] = []
        self._lock = threading.Lock()
        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                answer = model.answer(self.path, body)
                data = json.dumps(answer).encode()
                self.send_response(200 if "choices" in answer else 400)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join()

    def agent_steps(self) -> list[dict[str, Any]]:
        with self._lock:
            return [request for request in self.requests if "tools" in request]

    def distillations(self) -> list[dict[str, Any]]:
        with self._lock:
            return [request for request in self.requests if "tools" not in request]

    def answer(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.requests.append(body)
            if path != "/v1/chat/completions" or len(self.requests) > MAX_REQUESTS:
                self.failures.append(f"unexpected request {len(self.requests)}: {path}")
                return {"error": {"message": "unexpected"}}
        try:
            reply = self._reply(body["messages"], "tools" in body)
        except Exception as error:  # noqa: BLE001 - reported to the test, not the client
            self.failures.append(repr(error))
            return {"error": {"message": "the rule failed"}}
        return {"choices": [{"index": 0, "message": {"role": "assistant", **reply}}]}

    def _reply(self, messages: list[dict[str, Any]], agent: bool) -> dict[str, Any]:
        last = messages[-1]
        if not agent:  # distil: the bullets of what the user stated
            return {"content": BULLET if "6543" in last["content"] else "NOTHING"}
        if last["role"] == "user":
            if "?" not in last["content"]:
                return {"content": "Noted: the staging database is on port 6543."}
            return call("memory_search", query="staging database port")
        if '"memory_search"' in json.dumps(messages[-2]):
            hashes = re.findall(r"chunk ([0-9a-f]+)", last["content"])
            return call("memory_expand", chunk_hash=hashes[0])
        facts = [line for line in last["content"].splitlines() if line.startswith("- ")]
        return {"content": f"From memory: {facts[0][2:]}"}


def call(name: str, **arguments: str) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {
        "content": "",
        "tool_calls": [{"id": f"call-{name}", "type": "function", "function": function}],
    }


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    server = ScriptedModel()
    yield server
    server.close()
    assert server.failures == []


@pytest.fixture
def environment(tmp_path: Path) -> dict[str, str]:
    """The agent's environment: a home of its own where memsearch embeds with the offline
    model into a database in the test's directory, and a fixed clock."""
    if MODEL is None:
        pytest.fail("the offline embedding model is not installed: run `make model`")
    home = tmp_path / "home"
    (home / ".memsearch").mkdir(parents=True)
    (home / ".memsearch" / "config.toml").write_text(
        f'[embedding]\nprovider = "{MODEL.provider}"\nmodel = "{MODEL.model}"\n\n'
        f'[milvus]\nuri = "{tmp_path / "milvus.db"}"\n'
    )
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "XDG_RUNTIME_DIR": str(runtime),
        **MODEL.environment(),
        "PIMEM_NOW": "2026-08-13T22:41",
        "PIMEM_STRICT_PLUGINS": "1",
    }


def run_agent(
    project: Path, model: ScriptedModel, environment: dict[str, str], said: str
) -> subprocess.CompletedProcess[str]:
    """One run of the agent (one session): the user says *said*, then the input ends."""
    done = subprocess.run(
        [sys.executable, "-m", "pimem_embed_agent", "--cwd", str(project)],
        input=said + "\n",
        capture_output=True,
        text=True,
        env={**environment, "OPENAI_BASE_URL": model.base_url, "OPENAI_MODEL": "scripted"},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def test_a_second_session_recalls_what_the_first_was_told(
    pimem_project: TempProject, model: ScriptedModel, environment: dict[str, str]
) -> None:
    project = pimem_project.directory
    day_file = pimem_project.scope.memory_dir / "2026-08-13.md"

    first = run_agent(project, model, environment, FACT)
    assert first.stdout == "Noted: the staging database is on port 6543.\n"
    # Captured when the exchange settled, distilled by the agent's own model.
    [distillation] = model.distillations()
    assert f"[User]: {FACT}" in distillation["messages"][1]["content"]
    written = day_file.read_text(encoding="utf-8")
    anchor = re.fullmatch(
        rf"\n## Session 22:41\n\n### 22:41\n"
        rf"<!-- session:(\w+) turn:(\w+) transcript:(\S+\.jsonl) -->\n{re.escape(BULLET)}\n\n",
        written,
    )
    assert anchor is not None, written
    session_id, transcript = anchor.group(1), Path(anchor.group(3))
    kept = [json.loads(line) for line in transcript.read_text(encoding="utf-8").splitlines()]
    assert [message["role"] for message in kept] == ["user", "assistant"]
    assert kept[0]["content"] == FACT
    assert "6543" not in model.agent_steps()[0]["messages"][0]["content"]  # nothing known yet

    second = run_agent(project, model, environment, QUESTION)
    assert second.stdout == "From memory: The user's staging database listens on port 6543.\n"
    steps = model.agent_steps()[1:]
    # The snapshot in the system prompt holds the fact already...
    assert BULLET in steps[0]["messages"][0]["content"]
    # ...and the memory tools found it: the search's hit, then the whole entry with its origin.
    searched, expanded = steps[1]["messages"][-1], steps[2]["messages"][-1]
    assert searched["role"] == expanded["role"] == "tool"
    assert BULLET in searched["content"]
    assert BULLET in expanded["content"]
    assert f"session: {session_id}" in expanded["content"]
    # Answered from memory: that exchange is not captured again.
    assert len(model.distillations()) == 1
    assert day_file.read_text(encoding="utf-8") == written
