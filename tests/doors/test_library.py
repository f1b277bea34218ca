"""The library surface (docs/library.md) on real memsearch and the offline model: a directory's
memory, sessions that capture with the agent's own model and recall in the next session, the
docs' examples, and the agent example held to the surface alone."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import pimem_core
from pimem_core import Memory, MemorySession, Message, PimemError
from pimem_core.errors import QueryError, StoreError
from pimem_plugins.shared.distill_prompt import SYSTEM_PROMPT

from conftest import CLOCK, REPO_ROOT

ROOT = REPO_ROOT
DOC = (ROOT / "docs" / "library.md").read_text(encoding="utf-8")
AGENT = ROOT / "examples" / "embed-in-agent" / "pimem_embed_agent"
BULLET = "- The staging database listens on port 6543."
FACT = [
    Message(role="user", text="Our staging database listens on port 6543.", id="u1"),
    Message(role="assistant", text="Noted: staging is on port 6543.", id="a1"),
]


class AgentModel:
    """The agent's own model, scripted: answers with *reply* (or raises it), recording calls."""

    def __init__(self, reply: str | Exception = BULLET) -> None:
        self.reply = reply
        self.calls: list[tuple[str, str, float]] = []

    def __call__(self, system: str, prompt: str, timeout_seconds: float) -> str:
        self.calls.append((system, prompt, timeout_seconds))
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


@pytest.fixture
def environ(memsearch_home: Path) -> dict[str, str]:
    return {**os.environ, "PIMEM_NOW": CLOCK, "PIMEM_DB_LINGER_MS": "0"}


@pytest.fixture
def memory(repo: Path, environ: dict[str, str]) -> Memory:
    return Memory.open(repo / "packages" / "core", environ=environ)


def day_file(memory: Memory) -> Path:
    return memory.scope.memory_dir / f"{CLOCK[:10]}.md"


def test_importing_pimem_core_loads_none_of_the_library() -> None:
    probe = (
        "import sys, pimem_core\n"
        "assert 'pimem_core.doors.library' not in sys.modules\n"
        "assert not any(m.startswith('pimem_core.runtime') for m in sys.modules)\n"
        "from pimem_core import Memory\n"
        "print(Memory.__module__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "pimem_core.doors.library\n"


def test_every_name_of_the_package_resolves() -> None:
    for name in pimem_core.__all__:
        assert getattr(pimem_core, name) is not None
    assert {"Memory", "MemorySession", "Message", "Found", "Expanded", "Written"} <= set(
        pimem_core.__all__
    )


def test_a_directory_s_memory_writes_finds_expands_forgets_and_reports(memory: Memory) -> None:
    assert memory.scope.scope_dir == memory.cwd.parents[1]  # the project holding the directory
    empty = memory.search("deploy day")
    assert empty.hits == ()
    assert "no memory yet" in empty.text.lower()
    written = memory.write(
        "- The team deploys on Tuesdays.\n- The token is ghp_" + "a" * 36,
        session="build-42",
        turn="t1",
        transcript="/var/log/agent/build-42.jsonl",
    )
    assert written.file == day_file(memory)
    assert written.redacted == (("github-token", 1),)
    assert "[REDACTED:github-token]" in written.file.read_text(encoding="utf-8")
    assert "Redacted a secret" in written.text

    found = memory.search("which day do we deploy", top_k=3)
    assert "- The team deploys on Tuesdays." in found.hits[0].content
    assert f"chunk {found.hits[0].chunk_hash}" in found.text
    expanded = memory.expand(found.hits[0].chunk_hash)
    assert expanded.section.anchor is not None
    assert expanded.section.anchor.session == "build-42"
    assert "session: build-42 | turn: t1" in expanded.text

    status = memory.status()
    assert f"store: {memory.scope.memory_dir}" in status.text
    assert "today in this store (all sessions): 1 entry from 1 session" in status.text
    assert status.to_json()["scope"] == memory.scope.to_json()

    with pytest.raises(ValueError, match="not both"):
        memory.forget()
    with pytest.raises(StoreError, match="HH:MM"):
        memory.forget(day=CLOCK[:10], time="late")
    redaction = memory.forget(day=CLOCK[:10], time=CLOCK[11:])
    assert redaction.removed.startswith("### 22:41")
    assert memory.search("which day do we deploy").hits == ()
    with pytest.raises(QueryError):
        memory.search("   ")


def test_a_settled_exchange_is_distilled_by_the_agent_s_model_and_recalled_next_session(
    memory: Memory, tmp_path: Path
) -> None:
    model = AgentModel()
    transcript = tmp_path / "chat-1.jsonl"
    with memory.session(model=model, transcript=transcript, session_id="chat-1") as first:
        assert first.snapshot() is not None
        assert "6543" not in (first.snapshot() or "")
        assert first.settle(FACT)
    report = first.end()
    assert report.captured_in_time
    assert first.end() is report
    with pytest.raises(PimemError, match="ended"):
        first.settle(FACT)
    [(system, prompt, _)] = model.calls
    assert system == SYSTEM_PROMPT
    assert prompt == (
        "[User]: Our staging database listens on port 6543.\n\n"
        "[Assistant]: Noted: staging is on port 6543."
    )
    assert day_file(memory).read_text(encoding="utf-8") == (
        "\n## Session 22:41\n\n### 22:41\n"
        f"<!-- session:chat-1 turn:a1 transcript:{transcript} -->\n{BULLET}\n\n"
    )

    second = memory.session(model=model, transcript=tmp_path / "chat-2.jsonl")
    try:
        assert BULLET in (second.snapshot() or "")
        assert second.before_prompt("which port?").snapshot == second.snapshot()
        found = second.search("staging database port")
        assert BULLET in found.hits[0].content
        assert BULLET in found.text
        assert second.expand(found.hits[0].chunk_hash).section.anchor is not None
        # Memory work only: gated, never distilled.
        assert second.settle(
            [
                Message(role="user", text="Which port does staging use?"),
                Message(role="assistant", tool_calls=("memory_search(query=staging port)",)),
                Message(role="tool", text=found.text),
                Message(role="assistant", text="Port 6543."),
            ]
        )
        assert "capture (this session):" in second.status().text
        second.end()
        assert len(model.calls) == 1
        assert day_file(memory).read_text(encoding="utf-8").count("### ") == 1
    finally:
        second.end()


def test_a_session_writes_under_its_own_anchor_and_reports_its_capture(
    memory: Memory, tmp_path: Path
) -> None:
    transcript = tmp_path / "chat.jsonl"
    with memory.session(model=AgentModel(), transcript=transcript, session_id="chat") as session:
        written = session.write("- The user prefers tabs.", turn="w1")
        assert written.entry.anchor.session == "chat"
        assert written.entry.anchor.transcript == str(transcript)
        session.settle(FACT)
    assert session.end().captured_in_time
    text = day_file(memory).read_text(encoding="utf-8")
    assert (
        f"<!-- session:chat turn:w1 transcript:{transcript} -->\n- The user prefers tabs." in text
    )
    assert BULLET in text


def test_a_model_that_fails_leaves_a_marker(memory: Memory, tmp_path: Path) -> None:
    model = AgentModel(RuntimeError("the provider is down"))
    with memory.session(model=model, transcript=tmp_path / "chat.jsonl") as session:
        session.settle(FACT)
    assert "- [pimem] this exchange could not be distilled: the provider is down" in day_file(
        memory
    ).read_text(encoding="utf-8")


def test_without_a_transcript_nothing_is_captured_nor_written(memory: Memory) -> None:
    model = AgentModel()
    with memory.session(model=model) as session:
        assert isinstance(session, MemorySession)
        assert session.transcript is None
        assert not session.settle(FACT)
        with pytest.raises(PimemError, match="transcript"):
            session.write("- a fact")
    assert model.calls == []
    assert not day_file(memory).exists()


@pytest.mark.parametrize("number", range(len(re.findall(r"```python\n", DOC))))
def test_the_docs_examples_run(
    number: int, repo: Path, environ: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/library.md's examples, in order in one namespace, up to example *number*, in a
    fresh project; ``ask_my_model`` is the agent's model, scripted."""
    for name in ("PIMEM_NOW", "PIMEM_DB_LINGER_MS"):
        monkeypatch.setenv(name, environ[name])
    monkeypatch.chdir(repo)
    asked: list[str] = []

    def ask_my_model(*, system: str, user: str, timeout: float) -> str:
        asked.append(user)
        return "- The staging database moved to port 6543."

    namespace: dict[str, object] = {"ask_my_model": ask_my_model}
    for index, block in enumerate(re.findall(r"```python\n(.*?)```", DOC, re.DOTALL)):
        if index > number:
            break
        exec(compile(block, f"docs/library.md example {index}", "exec"), namespace)
    if "session" in namespace:
        assert asked
        assert "6543" in asked[0]


def test_the_agent_example_uses_only_the_library_surface() -> None:
    """Of pimem, the example imports names the package itself exports, nothing deeper."""
    imported = set()
    for path in sorted(AGENT.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pimem"):
                imported |= {(node.module, alias.name) for alias in node.names}
            elif isinstance(node, ast.Import):
                assert not any(alias.name.startswith("pimem_core") for alias in node.names)
    of_pimem = {(module, name) for module, name in imported if module == "pimem_core"}
    assert of_pimem, "the example imports nothing of pimem"
    assert {module for module, _ in imported} <= {
        "pimem_core",
        "pimem_embed_agent.agent",
        "pimem_embed_agent.model",
    }
    assert {name for _, name in of_pimem} <= set(pimem_core.__all__)


def test_the_library_module_stays_small() -> None:
    path = ROOT / "pimem_core" / "doors" / "library.py"
    assert len(path.read_text(encoding="utf-8").splitlines()) <= 500
