"""End to end: the real pi CLI (0.73 and 1.6) with the adapter, the real ``pimem serve``, real
memsearch on Milvus Lite and the offline embedding model, against a scripted model on 127.0.0.1.

What only this level shows: pi's events reach pimem in the right order on both pi lines, capture
distils through pi's own model registry, the snapshot really ends the system prompt the model
receives, the tools' texts reach the model intact, and a crashed bridge costs one tool call, not
the session. Assertions are on bytes: the day file, the system prompt, and each tool message
exactly as the model received it. The clock is fixed (``PIMEM_NOW``) so headings are known.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from bench.pi_host import (
    PI_LINES,
    ChatRequest,
    ModelServer,
    PiRun,
    PiWorld,
    Reply,
    Rule,
    SessionFile,
    Text,
    ToolCall,
    after_tool,
    anchors,
    bridge_pids,
    bridges_in,
    gone,
    missing_pi,
    on_distill,
    on_prompt,
    pimem_command,
    read_session,
    text_of,
    wait_for,
)
from pimem_core.day_file import list_entries, without_anchors
from pimem_core.testing import ShownHit, read_hits
from pimem_plugins.memsearch.maintenance import SYSTEM_PROMPT as MAINTENANCE_SYSTEM
from pimem_plugins.snapshot import INSTRUCTIONS

from conftest import CLOCK

MISSING = missing_pi()
pytestmark = pytest.mark.skipif(
    MISSING is not None,
    reason=f"the pi adapter's Node packages are not installed (`make node`): {MISSING}",
)

DAY = "2026-08-13"
PROMPT_1 = "[s1] We picked PostgreSQL 16 for the ledger."
REPLY_1 = "Noted: the ledger service uses PostgreSQL 16."
FACT = "- the user chose PostgreSQL 16 for the ledger service"
# An entry another agent of the mesh wrote earlier that day.
OTHER_ENTRY = (
    "\n## Session 09:15\n\n### 09:15\n"
    "<!-- session:other-agent turn:t1 transcript:/elsewhere/session.jsonl -->\n"
    "- another agent fixed the flaky CI job by pinning the runner image\n\n"
)


# -- helpers -------------------------------------------------------------------------------


def succeeded(run: PiRun) -> SessionFile:
    """The run's session, after checking that pi exited cleanly and wrote one."""
    assert run.code == 0, f"pi failed ({run.code}):\n{run.stdout}\n{run.stderr}"
    assert run.session is not None, f"pi wrote no session file:\n{run.stderr}"
    return read_session(run.session)


def entry_bytes(session: SessionFile, turn: str, bullets: str) -> str:
    """One captured entry exactly as pimem appends it: the session's heading, then the entry."""
    comment = f"<!-- session:{session.id} turn:{turn} transcript:{session.path} -->"
    return f"\n## Session 22:41\n\n### 22:41\n{comment}\n{bullets}\n\n"


def section(entry: str) -> str:
    """An entry from its ``###`` heading on, without the blank lines around it."""
    return entry.strip().split("\n", 2)[2]


def bullets(entry: str) -> str:
    """What a search shows of an entry under its hit's line: no heading, no anchor."""
    return section(entry).split("\n", 2)[2]


def snapshot(day_text: str) -> str:
    """The stable snapshot for a day file: the instructions, then today's entries as the
    snapshot shows them, each its heading and bullets, no anchor (ADR 0022)."""
    shown = "\n\n".join(without_anchors(entry.text) for entry in list_entries(day_text))
    return f"{INSTRUCTIONS}\n\n### Today ({DAY})\n\n{shown}"


def asked(prompt: str) -> str:
    """The bullet the scripted model distils from a prompt by default."""
    return f"- the user asked: {prompt}"


def exchange_ends(session: SessionFile) -> list[str]:
    """The id of the last assistant message of each exchange: the turns captures anchor to."""
    ends: list[str] = []
    for entry in session.messages():
        role = entry["message"]["role"]
        if role == "user":
            ends.append("")
        elif role == "assistant" and ends:
            ends[-1] = str(entry["id"])
    return ends


def local_time(entry: Mapping[str, Any]) -> str:
    return datetime.fromisoformat(str(entry["timestamp"])).astimezone().strftime("%H:%M")


def hit_with(text: str, result: str) -> ShownHit:
    """The one hit of a ``memory_search`` result whose content holds *text*."""
    found = [hit for hit in read_hits(result) if text in hit.content]
    assert len(found) == 1, f"expected one hit with {text!r} in:\n{result}"
    return found[0]


def tool_message(server: ModelServer, marker: str, tool: str) -> str:
    """What the agent received from *tool* during the prompt containing *marker*."""
    contents = [
        result.content
        for request in server.agent_requests()
        if marker in request.prompt and (result := request.last_tool_result) is not None
        if result.name == tool
    ]
    assert len(contents) == 1, f"expected one {tool} result for {marker!r}, got {contents}"
    return contents[0]


def system_prompt(server: ModelServer, marker: str) -> str:
    """The system prompt of the first request for the prompt containing *marker*."""
    return next(r for r in server.agent_requests() if marker in r.prompt).system


def check_accounting(world: PiWorld, sessions: list[SessionFile], entries: int) -> None:
    """The server saw every completion pi made and nothing else: one agent request per
    assistant message in the sessions, one distillation per captured entry."""
    assert world.server.failures == []
    assert world.session_files() == [session.path for session in sessions]
    replies = sum(len(session.messages("assistant")) for session in sessions)
    assert len(world.server.agent_requests()) == replies
    assert len(world.server.distillations()) == entries


def capture_first_session(world: PiWorld) -> tuple[SessionFile, str]:
    """Scenario 1: one exchange becomes one entry, anchored to the session and its turn."""
    server, day_file = world.server, world.day_file(DAY)
    before = day_file.read_text() if day_file.exists() else ""
    server.rules = [on_prompt("[s1]", Text(REPLY_1)), on_distill(Text(FACT), marker="[s1]")]
    first = succeeded(world.run(PROMPT_1))

    (turn,) = exchange_ends(first)
    assert turn in {entry["id"] for entry in first.entries}
    assert first.header["cwd"] == str(world.repo)
    assert anchors(day_file.read_text())[-1] == (first.id, turn, str(first.path))
    entry = entry_bytes(first, turn, FACT)
    assert day_file.read_text() == before + entry
    assert server.distillations()[-1].prompt == f"[User]: {PROMPT_1}\n\n[Assistant]: {REPLY_1}"
    return first, entry


# -- scenarios 1 and 2: capture, then recall in the next session ---------------------------


def test_capture_then_recall_layer_by_layer(world: PiWorld) -> None:
    """Session 1 is captured; session 2 sees it in its snapshot and finds its way back to the
    original conversation: search, expand (the anchor), transcript (session 1's turns)."""
    server, day_file = world.server, world.day_file(DAY)
    first, entry_1 = capture_first_session(world)
    # An empty store still gives the instructions, and only them.
    assert system_prompt(server, "[s1]").endswith(f"\n\n{INSTRUCTIONS}")

    def expand(request: ChatRequest) -> Reply:
        hit = hit_with("PostgreSQL 16", request.tool_results[-1].content)
        return ToolCall("memory_expand", {"chunk_hash": hit.chunk_hash})

    def transcript(request: ChatRequest) -> Reply:
        anchor, where = request.tool_results[-1].content.splitlines()[-2:]
        return ToolCall(
            "memory_transcript",
            {
                "transcript_path": where.removeprefix("transcript: "),
                "turn": anchor.rsplit(" | turn: ", 1)[1],
            },
        )

    prompt_2 = "[s2] Which database did we pick for the ledger?"
    server.rules = [
        on_prompt("[s2]", ToolCall("memory_search", {"query": "ledger database"})),
        after_tool("memory_search", expand, marker="[s2]"),
        after_tool("memory_expand", transcript, marker="[s2]"),
        after_tool("memory_transcript", Text("The ledger uses PostgreSQL 16."), marker="[s2]"),
        on_distill(marker="[s2]"),
    ]
    second = succeeded(world.run(prompt_2))
    assert system_prompt(server, "[s2]").endswith(f"\n\n{snapshot(entry_1)}")

    # Session 1's shutdown indexed the entry (a catch-up would be queued before the search).
    searched = tool_message(server, "[s2]", "memory_search")
    hit = hit_with("PostgreSQL 16", searched)
    assert re.match(
        r"1 memory chunk\(s\), best first \(score = [^\n]+\):\n\n"
        rf"1\. {DAY} 22:41 \| (?:relevance|rank fusion) \d\.\d\d \| chunk {hit.chunk_hash}\n",
        searched,
    )
    # The hit is its day, time and bullets; the anchor is expand's to show.
    assert (hit.day, hit.heading, hit.content) == (DAY, "22:41", bullets(entry_1))
    assert "<!-- session:" not in searched

    # The anchor once, at the end; the day file relative to the project (pi's session files
    # lie outside the project and the home directory here, so that path stays whole).
    (turn,) = exchange_ends(first)
    assert tool_message(server, "[s2]", "memory_expand") == (
        f".memsearch/memory/{DAY}.md:4-6 | 22:41\n\n{bullets(entry_1)}\n\n"
        f"session: {first.id} | turn: {turn}\ntranscript: {first.path}"
    )

    (user,), (reply,) = first.messages("user"), first.messages("assistant")
    assert tool_message(server, "[s2]", "memory_transcript") == (
        f"[User] {local_time(user)}\n{PROMPT_1}\n\n"
        f"[Assistant] {local_time(reply)} (target)\n{REPLY_1}"
    )

    # Session 2 only read memory: a gate kept it out of memory (ADR 0014).
    assert day_file.read_text() == entry_1
    check_accounting(world, [first, second], entries=1)


# -- scenario 3: forget --------------------------------------------------------------------


def test_forget_by_chunk_hash_leaves_snapshot_file_and_index(world: PiWorld) -> None:
    """An entry forgotten by the chunk hash a search gave is gone from the day file (the rest
    kept byte for byte), from the next session's snapshot and from the index."""
    server, day_file = world.server, world.day_file(DAY)
    day_file.parent.mkdir(parents=True)
    day_file.write_text(OTHER_ENTRY)
    first, entry_1 = capture_first_session(world)
    assert system_prompt(server, "[s1]").endswith(f"\n\n{snapshot(OTHER_ENTRY)}")

    def forget(request: ChatRequest) -> Reply:
        hit = hit_with("PostgreSQL 16", request.tool_results[-1].content)
        return ToolCall("memory_forget", {"chunk_hash": hit.chunk_hash})

    prompt_3 = "[s3] Forget which database the ledger uses."
    server.rules = [
        on_prompt("[s3]", ToolCall("memory_search", {"query": "ledger database"})),
        after_tool("memory_search", forget, marker="[s3]"),
        after_tool("memory_forget", Text("Forgotten."), marker="[s3]"),
        on_distill(marker="[s3]"),
    ]
    third = succeeded(world.run(prompt_3))
    assert system_prompt(server, "[s3]").endswith(f"\n\n{snapshot(OTHER_ENTRY + entry_1)}")
    assert len(read_hits(tool_message(server, "[s3]", "memory_search"))) == 2
    assert tool_message(server, "[s3]", "memory_forget") == (
        f"Forgot a memory entry in {day_file}. No other copy is kept; this was it:\n\n"
        f"{section(entry_1)}"
    )
    # The exchange that forgot is not captured: the subject does not come back (ADR 0014).
    remaining = OTHER_ENTRY
    assert day_file.read_text() == remaining

    server.rules = [
        on_prompt("[s4]", ToolCall("memory_search", {"query": "PostgreSQL ledger database"})),
        after_tool("memory_search", Text("Nothing about it."), marker="[s4]"),
        on_distill(marker="[s4]"),
    ]
    fourth = succeeded(world.run("[s4] What do you remember about the ledger?"))
    assert system_prompt(server, "[s4]").endswith(f"\n\n{snapshot(remaining)}")
    assert "PostgreSQL" not in system_prompt(server, "[s4]")
    searched = tool_message(server, "[s4]", "memory_search")
    # The forgotten entry is not among the hits, and what is left is not about the question.
    assert searched.startswith("No hit reaches the relevance threshold of 0.30")
    assert "PostgreSQL" not in searched.split("\n\n", 1)[1]
    assert {hit.content for hit in read_hits(searched)} == {bullets(OTHER_ENTRY)}
    assert day_file.read_text() == remaining  # a recall question is not memory either
    check_accounting(world, [first, third, fourth], entries=1)


# -- scenario 4: the bridge killed mid-session ---------------------------------------------


def test_a_killed_bridge_costs_no_tool_call(world: PiWorld) -> None:
    """``pimem serve`` is killed between two prompts of one pi session (RPC mode), then again
    just as the model asks for a search: each time the prompt goes on with the session's
    snapshot, and the search runs on a new bridge (sent once more when the old one died under
    it): the agent never sees the crash. pimem status names both."""
    server, day_file = world.server, world.day_file(DAY)
    killing: list[int] = []  # the pi whose bridge the next rule kills

    def kill_then(reply: Reply) -> Callable[[ChatRequest], Reply]:
        def answer(request: ChatRequest) -> Reply:
            (running,) = bridge_pids(killing.pop())
            os.kill(running, signal.SIGKILL)
            return reply

        return answer

    prompts = {
        "[p0]": "[p0] We deploy the ledger with blue-green releases.",
        "[p1]": "[p1] How is memory set up here?",
        "[p2]": "[p2] Search memory for the setup.",
        "[p3]": "[p3] Search memory for the setup again.",
    }
    server.rules = [
        on_prompt("[p0]", Text("Noted.")),
        on_prompt("[p1]", ToolCall("memory_status")),
        after_tool("memory_status", Text("Memory is set up."), marker="[p1]"),
        on_prompt("[p2]", ToolCall("memory_search", {"query": "memory setup"})),
        after_tool("memory_search", Text("The memory call worked."), marker="[p2]"),
        on_prompt("[p3]", kill_then(ToolCall("memory_search", {"query": "memory setup"}))),
        after_tool("memory_search", Text("Memory works again."), marker="[p3]"),
        on_distill(),
    ]
    with world.rpc() as pi:
        pi.prompt(prompts["[p0]"])
        pi.prompt(prompts["[p1]"])
        status = tool_message(server, "[p1]", "memory_status")
        assert f"scope: {world.repo}\nstore: {world.repo / '.memsearch' / 'memory'}\n" in status
        # Capture runs in the background: let it write before the bridge dies.
        wait_for(lambda: len(anchors(read_text(day_file))) == 1, 30, "the first capture")
        (bridge,) = bridge_pids(pi.pid)
        os.kill(bridge, signal.SIGKILL)
        wait_for(lambda: gone(bridge), 10, "pi to reap the killed bridge")

        records = pi.prompt(prompts["[p2]"])
        hit_with(asked(prompts["[p0]"]), tool_message(server, "[p2]", "memory_search"))
        assert "The memory call worked." in assistant_texts(records)
        # The prompt went on with the session's snapshot instead of waiting for a new bridge.
        assert system_prompt(server, "[p2]") == system_prompt(server, "[p0]")
        (second,) = bridge_pids(pi.pid)
        assert second != bridge

        # Killed as the model asks for the search: the search gets its answer all the same.
        killing.append(pi.pid)
        records = pi.prompt(prompts["[p3]"])
        hit_with(asked(prompts["[p0]"]), tool_message(server, "[p3]", "memory_search"))
        # The new bridge sends the snapshot the session had: the system prompt's bytes hold.
        assert system_prompt(server, "[p3]") == system_prompt(server, "[p0]")
        assert "Memory works again." in assistant_texts(records)
        (respawned,) = bridge_pids(pi.pid)
        assert respawned not in (bridge, second)
        assert pi.close() == 0
        # pi did not wait for the last index run: the bridge finishes it alone, then exits.
        wait_for(lambda: gone(respawned), 30, "the released bridge to finish and exit")

    (path,) = world.session_files()
    session = read_session(path)
    status = pimem_status(world)
    assert status.startswith(
        f"failures: the memory bridge of session {session.id} stopped 2 times; the last time "
    ), status
    assert ": the pimem bridge was killed by SIGKILL\n" in status
    # Only [p0] is memory: the other exchanges only used memory tools (ADR 0014).
    assert anchors(day_file.read_text()) == [(session.id, exchange_ends(session)[0], str(path))]
    assert [line for line in day_file.read_text().splitlines() if line.startswith("- ")] == [
        asked(prompts["[p0]"])
    ]
    check_accounting(world, [session], entries=1)


def test_pi_exits_before_the_last_index_run_and_the_bridge_finishes_it(world: PiWorld) -> None:
    """pi's exit waits for capture, not for indexing (ADR 0015): the entry is on disk when pi
    has exited, and the bridge pi released indexes it on its own, so memsearch's own CLI, as
    any other agent of the mesh, then finds it in the collection."""
    capture_first_session(world)  # the entry is on disk once pi has exited
    wait_for(lambda: not bridges_in(world.repo), 30, "the released bridge to index and exit")
    scope = json.loads(
        subprocess.run(
            [pimem_command(), "scope", "--json", "--cwd", str(world.repo)],
            env=world.env,
            capture_output=True,
            check=True,
        ).stdout
    )
    memsearch = Path(sys.executable).with_name("memsearch")
    found = subprocess.run(
        [str(memsearch), "search", "ledger database", "-j", "-k", "5", "-c", scope["collection"]],
        cwd=world.repo,
        env=world.env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert any(FACT in hit["content"] for hit in json.loads(found.stdout)), found.stdout


# -- scenario 5: pimem cannot be started ----------------------------------------------------


@pytest.mark.parametrize("line", sorted(PI_LINES))
def test_missing_pimem_bin_is_one_notice_and_the_session_goes_on(
    line: str, repo: Path, tmp_path: Path, server: ModelServer
) -> None:
    """``PIMEM_BIN`` names a file that does not exist: pi says so once, naming it and the fix
    (on stderr in print mode, as a UI notification in RPC mode), the memory tool answers the
    agent with the same reason, and every prompt still gets its answer."""
    missing = tmp_path / "no-venv" / "bin" / "pimem"
    world = PiWorld.create(
        PI_LINES[line],
        repo=repo,
        agent_dir=tmp_path / "agent",
        server=server,
        base_env=dict(os.environ),
        extra_env={"PIMEM_BIN": str(missing)},
    )
    reason = (
        f'pimem could not be started from PIMEM_BIN="{missing}" (no such file), '
        "so memory is off for this session. Run `pimem setup pi` with the pimem you want pi to "
        "use (it records that command for this adapter), or set PIMEM_BIN to the pimem "
        "executable of the Python environment where pimem is installed (for a virtual "
        'environment, its bin/pimem), or put pimem on PATH; see "Use pimem in pi" in pimem\'s '
        "README."
    )
    server.rules = [
        on_prompt("[n1]", ToolCall("memory_status")),
        after_tool("memory_status", Text("Memory is off; here is the answer."), marker="[n1]"),
        on_prompt("[n2]", Text("Still answering.")),
    ]

    run = world.run("[n1] How is memory set up here?")
    assert run.code == 0, f"pi failed ({run.code}):\n{run.stdout}\n{run.stderr}"
    assert "Memory is off; here is the answer." in run.stdout
    notices = [text for text in run.stderr.splitlines() if "pimem" in text]
    assert notices == [f"pimem: {reason}"], run.stderr
    assert tool_message(server, "[n1]", "memory_status") == f"memory_status failed: {reason}"

    with world.rpc() as pi:
        records = pi.prompt("[n2] Are you there?")
        assert "Still answering." in assistant_texts(records)
        assert pi.close() == 0
    shown = [
        (record.get("method"), record.get("message"), record.get("notifyType"))
        for record in pi.records
        if record.get("type") == "extension_ui_request" and "pimem" in str(record.get("message"))
    ]
    assert shown == [("notify", f"pimem: {reason}", "warning")]
    assert not [text for text in pi.stderr if "pimem" in text]
    assert server.failures == []
    assert not (repo / ".memsearch").exists()


def pimem_status(world: PiWorld) -> str:
    """``pimem status`` in the project, as the user runs it after the session."""
    done = subprocess.run(
        [pimem_command(), "status", "--cwd", str(world.repo)],
        env=world.env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def read_text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def assistant_texts(records: list[dict[str, Any]]) -> list[str]:
    """The assistant messages' texts among RPC events."""
    return [
        "".join(block.get("text", "") for block in message["content"] if block["type"] == "text")
        for record in records
        if record.get("type") == "message_end"
        and (message := record.get("message") or {}).get("role") == "assistant"
    ]


# -- maintenance through pi's model ----------------------------------------------------------


def test_maintenance_runs_on_pis_model_and_leaves_no_session_file(
    repo: Path, memsearch_home: Path, tmp_path: Path, server: ModelServer
) -> None:
    """With ``PIMEM_MAINTENANCE=project_review``, the session's start wakes the project review:
    pimem asks pi for one completion (no tools), PROJECT.md is written, ``memory_status`` shows
    the task, and pi's session directory holds the one session the user ran, nothing more."""
    world = PiWorld.create(
        PI_LINES["1.6"],
        repo=repo,
        agent_dir=tmp_path / "agent",
        server=server,
        base_env=dict(os.environ),
        extra_env={"PIMEM_NOW": CLOCK, "PIMEM_MAINTENANCE": "project_review"},
    )
    day_file = world.day_file(DAY)
    day_file.parent.mkdir(parents=True)
    day_file.write_text(OTHER_ENTRY)
    project = "# Project Memory\n\n## Recent Progress\n\n- The flaky CI job is fixed."
    review = json.dumps({"action": "replace", "reason": "CI fix", "content": project})

    def is_review(request: ChatRequest) -> bool:
        return request.system == MAINTENANCE_SYSTEM and "Task: project_review" in request.prompt

    server.rules = [
        Rule("project review", is_review, Text(review)),
        on_prompt("[m1]", Text("Hello.")),
        on_prompt("[m2]", ToolCall("memory_status")),
        after_tool("memory_status", Text("Memory is maintained."), marker="[m2]"),
        on_distill(),
    ]
    output = world.repo / ".memsearch" / "PROJECT.md"
    with world.rpc() as pi:
        pi.prompt("[m1] Hello.")
        # The run is over when its state is recorded, which comes after PROJECT.md.
        state = world.repo / ".memsearch" / ".maintenance-state.json"
        wait_for(lambda: "last_success_at" in _read(state), 30, "the review's recorded run")
        pi.prompt("[m2] Is memory maintained?")
        status = tool_message(server, "[m2]", "memory_status")
        assert pi.close() == 0

    assert output.read_text() == project + "\n"
    (request,) = [r for r in server.requests if is_review(r)]
    assert request.tools == []
    assert "another agent fixed the flaky CI job" in request.prompt
    assert f"maintenance project_review: on; last run {DAY} 22:41 (replace)" in status
    assert "maintenance user_profile: off" in status
    assert server.failures == []
    # One session file: the user's. The review ran with no session of its own.
    (session,) = world.session_files()
    users = [
        text_of(entry["message"]["content"]) for entry in read_session(session).messages("user")
    ]
    assert users == ["[m1] Hello.", "[m2] Is memory maintained?"]
    assert "Task: project_review" not in session.read_text()
    assert sorted(
        path.name for path in (world.agent_dir / "sessions").rglob("*") if path.is_file()
    ) == [session.name]


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""
