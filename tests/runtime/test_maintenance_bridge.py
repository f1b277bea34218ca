"""Maintenance in a host session: ``pimem serve`` asks the host's model (``complete``) in the
background, after the session starts and after each capture, and never makes the host's own
requests wait; the skill candidates are reviewed and installed through ``memory.skills``."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pimem_core.atomic_files import TEMP_MARK
from pimem_core.runtime.maintenance import LOCK_FILE
from pimem_plugins.memsearch.maintenance import STATE_FILE, SYSTEM_PROMPT

from conftest import CLOCK

SESSION_MODEL = {"provider": "anthropic", "id": "big", "input_cost": 15, "output_cost": 75}
CATALOG = [
    SESSION_MODEL,
    {"provider": "openai", "id": "tiny", "input_cost": 0.1, "output_cost": 0.4},
    {"provider": "anthropic", "id": "small", "input_cost": 1, "output_cost": 5},
]
PROJECT = "# Project Memory\n\n## Decisions\n\n- The ledger service uses PostgreSQL 16."
SKILL = {
    "name": "run-tests",
    "description": "Run the test suite. Use when asked to run or check the tests.",
    "body": "1. Run `make test`.",
    "occurrences": 3,
    "sources": ["2026-08-13.md"],
}
DAY = "## Session 09:15\n\n### 09:15\n- project decision: the ledger uses PostgreSQL 16\n"
BULLETS = "- the user asked for a fix\n- the agent fixed it"


def host_answer(params: dict[str, Any]) -> str | None:
    """The host's model: JSON for maintenance prompts, bullets for distillation."""
    if params["system"] != SYSTEM_PROMPT:
        return BULLETS
    if "Task: project_review" in params["prompt"]:
        return json.dumps({"action": "replace", "reason": "a decision", "content": PROJECT})
    if "Task: user_profile" in params["prompt"]:
        return json.dumps({"action": "none", "reason": "nothing about the user"})
    return json.dumps({"skills": [SKILL]})


class Host:
    """The host's end of the protocol; ``answer`` returns ``None`` to leave a request pending."""

    def __init__(self, env: dict[str, str], answer: Callable[[dict[str, Any]], str | None]):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pimem_core", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={
                **os.environ,
                "PIMEM_NOW": CLOCK,
                "PIMEM_DISABLE_PLUGINS": "memsearch-index",
                **env,
            },
        )
        self.answer = answer
        self.completions: list[dict[str, Any]] = []
        self.pending: list[dict[str, Any]] = []
        self.next_id = 0
        assert self.read()["event"] == "ready"

    def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, "the bridge closed its output"
        message: dict[str, Any] = json.loads(line)
        return message

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def reply(self, request: dict[str, Any], text: str) -> None:
        self.send({"id": request["id"], "result": {"text": text}})

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        while True:
            message = self.read()
            if message.get("method") == "complete":
                self.completions.append(message["params"])
                text = self.answer(message["params"])
                if text is None:
                    self.pending.append(message)
                else:
                    self.reply(message, text)
                continue
            assert message.get("id") == self.next_id, message
            return message

    def start(self, repo: Path, tmp_path: Path) -> dict[str, Any]:
        return self.call(
            "session.start",
            session_id="s1",
            cwd=str(repo),
            transcript=str(tmp_path / "s1.jsonl"),
            model=SESSION_MODEL,
            models=CATALOG,
        )

    def until(self, condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
        """Keep the line busy (answering ``complete``) until *condition* holds."""
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            self.call("ping")
            time.sleep(0.05)

    def close(self) -> int:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.close()
        code = self.process.wait(timeout=60)
        self.process.stdout.close()
        return code


@pytest.fixture
def store(repo: Path) -> Path:
    memory = repo / ".memsearch" / "memory"
    memory.mkdir(parents=True)
    (memory / "2026-08-12.md").write_text(DAY)
    return repo / ".memsearch"


@pytest.fixture
def hosts() -> Iterator[list[Host]]:
    started: list[Host] = []
    yield started
    for host in started:
        if host.process.poll() is None:
            host.process.kill()
            host.process.wait()
        for stream in (host.process.stdin, host.process.stdout):
            if stream is not None and not stream.closed:
                stream.close()


def maintenance_prompts(host: Host) -> list[str]:
    return [c["prompt"] for c in host.completions if c["system"] == SYSTEM_PROMPT]


def test_the_hosts_model_maintains_in_the_background(
    repo: Path, store: Path, tmp_path: Path, hosts: list[Host]
) -> None:
    held: list[bool] = [True]

    def answer(params: dict[str, Any]) -> str | None:
        return None if held[0] and params["system"] == SYSTEM_PROMPT else host_answer(params)

    host = Host(
        {
            "PIMEM_MAINTENANCE": "project_review,memory_to_skill",
            "PIMEM_MAINTENANCE_INTERVAL_HOURS": "0",
        },
        answer,
    )
    hosts.append(host)
    assert "result" in host.start(repo, tmp_path)
    # The session start woke maintenance, which asks the host; the host's own requests do not
    # wait for that answer.
    host.until(lambda: bool(host.pending), "the first maintenance request")
    assert "snapshot" in host.call("session.before_prompt", prompt="hi")["result"]
    (request,) = host.pending
    assert request["params"]["model"] == {"provider": "anthropic", "id": "small"}
    assert request["params"]["timeout_ms"] == 300_000
    assert not (store / "PROJECT.md").exists()

    held[0] = False
    host.pending.clear()
    host.reply(request, host_answer(request["params"]) or "")
    host.until(
        lambda: (
            (store / "PROJECT.md").exists() and (store / "skill-candidates" / "run-tests").is_dir()
        ),
        "both outputs",
    )
    assert (store / "PROJECT.md").read_text() == PROJECT + "\n"
    assert len(maintenance_prompts(host)) == 2

    # A capture appends to the day files: maintenance runs again on the new input.
    branch = [
        {"id": "u1", "kind": "message", "role": "user", "text": "fix the login bug"},
        {"id": "a1", "kind": "message", "role": "assistant", "text": "escaped the query"},
    ]
    assert host.call("session.settled", leaf="a1", branch=branch)["result"] == {"queued": True}
    host.until(lambda: len(maintenance_prompts(host)) == 4, "maintenance after the capture")
    assert "the agent fixed it" in maintenance_prompts(host)[-1]

    status = host.call("memory.status")["result"]
    assert "maintenance project_review: on; last run 2026-08-13 22:41 (replace)" in status["text"]
    assert "maintenance user_profile: off" in status["text"]
    assert "skill candidates: 1 pending install of 1" in status["text"]
    assert status["maintenance.memory_to_skill"]["pending_candidates"] == 1
    assert host.call("session.shutdown")["result"]["captured_in_time"] is True
    assert host.close() == 0


def test_skills_are_reviewed_and_installed_on_request_only(
    repo: Path, store: Path, tmp_path: Path, hosts: list[Host]
) -> None:
    host = Host({"PIMEM_MAINTENANCE": "memory_to_skill"}, host_answer)
    hosts.append(host)
    host.start(repo, tmp_path)
    host.until(lambda: (store / "skill-candidates" / "run-tests").is_dir(), "the candidate")
    assert not (repo / ".pi").exists()

    listed = host.call("memory.skills", action="list")["result"]
    assert listed["text"].startswith("1 skill candidate(s), 1 pending install:\n\n- run-tests (new")
    assert [c["name"] for c in listed["candidates"]] == ["run-tests"]
    shown = host.call("memory.skills", action="show", name="run-tests")["result"]
    assert "1. Run `make test`." in shown["text"]
    refused = host.call("memory.skills", action="install", name="run-tests")
    assert refused["error"]["type"] == "request"
    assert '"to"' in refused["error"]["message"]

    installed = host.call("memory.skills", action="install", name="run-tests", to=".pi/skills")
    target = repo / ".pi" / "skills" / "run-tests" / "SKILL.md"
    assert installed["result"]["installed"] == [str(target)]
    assert target.read_text() == (store / "skill-candidates" / "run-tests" / "SKILL.md").read_text()
    after = host.call("memory.skills", action="list")["result"]["candidates"]
    assert (after[0]["status"], after[0]["pending"]) == ("installed", None)
    missing = host.call("memory.skills", action="show", name="ghost")["error"]
    assert missing["type"] == "memory"
    assert host.close() == 0


def test_a_bridge_killed_during_the_model_call_leaves_no_partial_file_or_lock(
    repo: Path, store: Path, tmp_path: Path, hosts: list[Host]
) -> None:
    env = {"PIMEM_MAINTENANCE": "project_review"}
    first = Host(env, lambda params: None)
    hosts.append(first)
    first.start(repo, tmp_path)
    first.until(lambda: bool(first.pending), "the maintenance request")
    first.process.send_signal(signal.SIGKILL)
    first.process.wait(10)
    assert not (store / "PROJECT.md").exists()
    assert [path for path in store.iterdir() if TEMP_MARK in path.name] == []
    assert not (store / STATE_FILE).exists()
    fd = os.open(store / LOCK_FILE, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if the lock went stale
    finally:
        os.close(fd)

    second = Host(env, host_answer)
    hosts.append(second)
    second.start(repo, tmp_path)
    second.until(lambda: (store / "PROJECT.md").exists(), "the second run")
    assert (store / "PROJECT.md").read_text() == PROJECT + "\n"
    assert second.close() == 0
