"""End to end, in the real pi (0.73 and 1.6) against a scripted model on 127.0.0.1: memory stays
useful over a real session.

- An exchange whose work was ``memory_write`` leaves the written entry and nothing else: it is
  not distilled again, and ``memory_status`` counts it as *already written* (ADR 0014).
- Bridges killed and healed where the user cannot see it (a new bridge takes the next memory
  call, or the settle) leave memory on: nothing is said, and the turns after are captured.
- ``/recall`` with nothing to look for shows its usage and sends nothing to the model; with a
  query the model gets the recall prompt, and that exchange is not captured.

Assertions are on bytes: the day file, what the model received and what the user is shown.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from bench.pi_host import (
    ChatRequest,
    ModelServer,
    PiWorld,
    RpcSession,
    Rule,
    SessionFile,
    Text,
    ToolCall,
    after_tool,
    anchors,
    bridge_pids,
    gone,
    missing_pi,
    on_distill,
    on_prompt,
    pimem_command,
    read_session,
    text_of,
    wait_for,
)
from pimem_plugins.capture_gates import RECALL_PROMPTS

from conftest import REPO_ROOT

MISSING = missing_pi()
pytestmark = pytest.mark.skipif(
    MISSING is not None,
    reason=f"the pi adapter's Node packages are not installed (`make node`): {MISSING}",
)

DAY = "2026-08-13"
ADAPTER = REPO_ROOT / "adapters" / "pi"
#: What the adapter shows for ``/recall`` without a query (adapters/pi/src/commands.ts).
RECALL_USAGE = (
    "pimem: /recall needs a query: /recall [--all] <query>, where --all searches every project "
    "under PI_MEMSEARCH_SCAN_ROOTS, not only this one. Nothing was sent to the model."
)


# -- helpers (some as in tests/adapters/pi/test_pi_e2e.py, which tests/ being no package cannot share) ----


def read_text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def entry_bytes(session: SessionFile, turn: str, bullets: str, *, first: bool = True) -> str:
    """One entry exactly as pimem appends it; a session's first entry of the day comes after
    the session's heading."""
    comment = f"<!-- session:{session.id} turn:{turn} transcript:{session.path} -->"
    heading = "\n## Session 22:41\n\n" if first else ""
    return f"{heading}### 22:41\n{comment}\n{bullets}\n\n"


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


def tool_call_turn(session: SessionFile, tool: str) -> str:
    """The id of the one assistant message that called *tool*: the turn its write anchors to."""
    (turn,) = [
        str(entry["id"])
        for entry in session.messages("assistant")
        for block in entry["message"]["content"]
        if block.get("type") == "toolCall" and block.get("name") == tool
    ]
    return turn


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


def assistant_texts(records: list[dict[str, Any]]) -> list[str]:
    """The assistant messages' texts among RPC events."""
    return [
        "".join(block.get("text", "") for block in message["content"] if block["type"] == "text")
        for record in records
        if record.get("type") == "message_end"
        and (message := record.get("message") or {}).get("role") == "assistant"
    ]


def notices(pi: RpcSession) -> list[tuple[str, str, str]]:
    """pimem's notifications in RPC mode: what a client shows the user."""
    return [
        (record["method"], record["message"], record.get("notifyType", ""))
        for record in pi.records
        if record.get("type") == "extension_ui_request" and "pimem" in str(record.get("message"))
    ]


def pimem_lines(text: str | list[str]) -> list[str]:
    lines = text.splitlines() if isinstance(text, str) else text
    return [line for line in lines if "pimem" in line]


def handled(pi: RpcSession, message: str, *, timeout: float = 60) -> list[dict[str, Any]]:
    """Send a prompt pi handles without a run (no event ends it): its records up to its
    accepted response."""
    request_id = pi.send({"type": "prompt", "message": message})
    deadline = time.monotonic() + timeout
    records = []
    while True:
        record = pi.next_record(deadline)
        records.append(record)
        if record.get("type") == "response" and record.get("id") == request_id:
            assert record.get("success"), record
            return records


# -- the explicit write --------------------------------------------------------------------

WRITTEN = "- the ledger service retries a failed payment three times"
NOTED = "- the user moved the ledger's nightly job to 02:00"


def test_an_exchange_that_wrote_memory_leaves_only_what_it_wrote(world: PiWorld) -> None:
    """The model answers "remember ..." with ``memory_write``: the day file gets that entry,
    byte for byte, and no distilled copy of the exchange; ``memory_status`` later in the
    session counts the exchange as skipped, already written."""
    server, day_file = world.server, world.day_file(DAY)
    prompts = {
        "[w1]": "[w1] Remember: the ledger retries a failed payment three times.",
        "[w2]": "[w2] We moved the ledger's nightly job to 02:00.",
        "[w3]": "[w3] How is memory doing?",
    }
    server.rules = [
        on_prompt("[w1]", ToolCall("memory_write", {"content": WRITTEN})),
        after_tool("memory_write", Text("Saved to memory."), marker="[w1]"),
        on_prompt("[w2]", Text("Noted.")),
        on_distill(Text(NOTED), marker="[w2]"),
        on_prompt("[w3]", ToolCall("memory_status")),
        after_tool("memory_status", Text("Memory is fine."), marker="[w3]"),
    ]
    with world.rpc() as pi:
        pi.prompt(prompts["[w1]"])
        assert tool_message(server, "[w1]", "memory_write") == (
            f"Saved the memory entry to {day_file}"
        )
        # Capture works one exchange at a time, in order: once [w2]'s entry is written, [w1]
        # has been through the gates.
        pi.prompt(prompts["[w2]"])
        wait_for(lambda: len(anchors(read_text(day_file))) == 2, 30, "[w2]'s capture")
        pi.prompt(prompts["[w3]"])
        status = tool_message(server, "[w3]", "memory_status")
        assert pi.close() == 0

    assert (
        "capture (this session): 1 captured (1 distilled, 0 extractive, 0 failed); "
        "skipped: 1 already written\n"
    ) in status
    (path,) = world.session_files()
    session = read_session(path)
    written = entry_bytes(session, tool_call_turn(session, "memory_write"), WRITTEN)
    captured = entry_bytes(session, exchange_ends(session)[1], NOTED, first=False)
    assert day_file.read_text() == written + captured
    # One distillation, of [w2] alone: [w1] was never distilled, [w3] only read memory.
    assert [request.prompt for request in server.distillations()] == [
        f"[User]: {prompts['[w2]']}\n\n[Assistant]: Noted."
    ]
    assert server.failures == []


# -- memory turned off after repeated crashes ------------------------------------------------

CHECKED = "Checked memory."
DECISION = "[c3] We moved the ledger's backups to eu-central-1."
KEPT = "- the ledger's backups moved to eu-central-1"


def test_bridges_killed_and_healed_unseen_leave_memory_on(world: PiWorld) -> None:
    """``pimem serve`` is killed three times in one RPC session, each time healed where the user
    cannot see it: the next memory call runs on a new bridge, and the third, killed as the user
    states a decision, is replaced when that exchange settles. None of it costs a tool call or
    a capture, so memory stays on: nobody is told anything, and the decision, then a normal
    turn, are captured in the session. ``pimem status`` still names the crashes."""
    server, day_file = world.server, world.day_file(DAY)
    killing: list[int] = []

    def kill_then(reply: Text) -> Any:
        def answer(request: Any) -> Text:
            (running,) = bridge_pids(killing.pop())
            os.kill(running, signal.SIGKILL)
            return reply

        return answer

    server.rules = [
        on_prompt("[c0]", Text("Noted.")),
        on_distill(Text("- the user keeps the ledger in eu-west-1"), marker="[c0]"),
        on_prompt("[k", ToolCall("memory_status")),
        after_tool("memory_status", Text(CHECKED), marker="[k"),
        on_prompt("[c3]", kill_then(Text("Noted: backups in eu-central-1."))),
        on_distill(Text(KEPT), marker="[c3]"),
        on_prompt("[c4]", Text("Noted: logs too.")),
        on_distill(Text("- the ledger's logs moved to eu-central-1"), marker="[c4]"),
    ]
    killed: list[int] = []
    with world.rpc() as pi:
        pi.prompt("[c0] The ledger stays in eu-west-1.")
        wait_for(lambda: len(anchors(read_text(day_file))) == 1, 30, "the first capture")
        for crash in (1, 2):
            # This bridge has answered: it is past its ready line, so its death is a crash.
            (bridge,) = bridge_pids(pi.pid)
            os.kill(bridge, signal.SIGKILL)
            killed.append(bridge)
            wait_for(partial(gone, bridge), 10, "pi to reap the killed bridge")
            records = pi.prompt(f"[k{crash}] Check memory.")
            assert CHECKED in assistant_texts(records)
            status = tool_message(server, f"[k{crash}]", "memory_status")
            # It worked, on a new bridge, and leads with the crash it came after.
            times = "once" if crash == 1 else "2 times"
            assert status.startswith(
                f"failures: the memory bridge of session {session_id(world)} stopped {times}; "
            ), status
        (bridge,) = bridge_pids(pi.pid)
        killed.append(bridge)
        killing.append(pi.pid)
        pi.prompt(DECISION)
        wait_for(lambda: len(anchors(read_text(day_file))) == 2, 30, "the decision's capture")
        pi.prompt("[c4] We moved the ledger's logs to eu-central-1 too.")
        wait_for(lambda: len(anchors(read_text(day_file))) == 3, 30, "the next turn's capture")
        assert len(bridge_pids(pi.pid)) == 1
        assert pi.close() == 0

    assert len(set(killed)) == 3
    assert notices(pi) == []
    assert pimem_lines(pi.stderr) == []
    assert f"{KEPT}\n" in day_file.read_text()
    assert "- the ledger's logs moved to eu-central-1\n" in day_file.read_text()
    (path,) = world.session_files()
    first = read_session(path)
    told = run_pimem(world, "status").splitlines()
    assert told[0].startswith(
        f"failures: the memory bridge of session {first.id} stopped 3 times; the last time "
    ), told
    assert not any("memory was off" in line for line in told)
    assert server.failures == []


def session_id(world: PiWorld) -> str:
    (path,) = world.session_files()
    return read_session(path).id


def run_pimem(world: PiWorld, *args: str) -> str:
    """``pimem <args>`` in the project, as the user runs it."""
    done = subprocess.run(
        [pimem_command(), *args, "--cwd", str(world.repo)],
        env=world.env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


# -- /recall ---------------------------------------------------------------------------------


def test_recall_alone_in_print_mode_shows_the_usage_and_sends_nothing(world: PiWorld) -> None:
    """``pi -p /recall``: one line on stderr (print mode has no UI), no request to the model."""
    run = world.run("/recall")
    assert run.code == 0, f"pi failed ({run.code}):\n{run.stdout}\n{run.stderr}"
    assert pimem_lines(run.stderr) == [RECALL_USAGE], run.stderr
    assert run.stdout == ""
    assert world.server.requests == []


def test_a_print_run_without_a_reply_leaves_memory_alone(world: PiWorld) -> None:
    """A session in which the model never answered (here ``/recall`` alone) has no exchange,
    so memory gets nothing from it (pi 0.73, which has no agent_settled, included: its
    shutdown settles only after an agent run)."""
    run = world.run("/recall")
    assert run.code == 0, f"pi failed ({run.code}):\n{run.stdout}\n{run.stderr}"
    assert world.server.requests == []
    assert read_text(world.day_file(DAY)) == ""


def user_texts(request: ChatRequest) -> list[str]:
    """The user-role messages the model received, in order (pi sends a hidden message so)."""
    return [text_of(m.get("content")) for m in request.messages if m.get("role") == "user"]


def asked_with(words: str, reply: Text) -> Rule:
    """The agent's first request for a prompt one of whose user messages holds *words*."""
    return Rule(
        f"asked {words!r}",
        lambda r: (
            not r.is_distillation
            and r.last.get("role") == "user"
            and any(words in text for text in user_texts(r))
        ),
        reply,
    )


def test_recall_without_a_query_is_stopped_and_with_one_shows_only_the_query(
    world: PiWorld,
) -> None:
    """In one RPC session: ``/recall`` with only spaces, then only ``--all``: the user gets the
    usage as a notification, twice, and the model no request. With a query, the user's message
    (what pi shows, what the session keeps) is the query alone; the model gets the instruction
    to answer from memory beside it, as a message the user does not see; and that exchange is
    not captured."""
    server, day_file = world.server, world.day_file(DAY)
    query = "which cache did we pick"
    server.rules = [
        on_prompt("[r3]", Text("Noted.")),  # first: the query is in [r3]'s history too
        asked_with(query, Text("From memory: Redis.")),
        on_distill(Text("- the user picked Redis for the session cache"), marker="[r3]"),
    ]
    with world.rpc() as pi:
        handled(pi, "/recall   ")
        handled(pi, "/recall --all")
        wait_for(lambda: len(notices(pi)) == 2, 10, "the usage, twice")
        assert server.requests == []

        records = pi.prompt(f"/recall --all {query}")
        assert "From memory: Redis." in assistant_texts(records)
        # What pi shows the user as their message: the query.
        shown = [
            text_of(record["message"]["content"])
            for record in records
            if record.get("type") == "message_end" and record["message"].get("role") == "user"
        ]
        assert shown == [query]
        # Capture takes one exchange at a time, in order: once [r3] is written, the recall
        # exchange has been through the gates.
        pi.prompt("[r3] We picked Redis for the session cache.")
        wait_for(lambda: len(anchors(read_text(day_file))) == 1, 30, "[r3]'s capture")
        assert pi.close() == 0

    assert notices(pi) == [("notify", RECALL_USAGE, "warning")] * 2
    assert pimem_lines(pi.stderr) == []
    recall, noted = server.agent_requests()
    said, instruction = user_texts(recall)
    assert said == query
    assert instruction.startswith(f"{RECALL_PROMPTS[0]} the user's message above is a /recall ")
    assert instruction.endswith(
        'It came with --all: search every project at once (memory_search with scope "all"), '
        "not this project first."
    )
    assert user_texts(noted)[-1] == "[r3] We picked Redis for the session cache."
    (path,) = world.session_files()
    session = read_session(path)
    # The session keeps the query as the user's words; the instruction stays hidden.
    assert [text_of(e["message"]["content"]) for e in session.messages("user")] == [
        query,
        "[r3] We picked Redis for the session cache.",
    ]
    (hidden,) = [e for e in session.entries if e.get("type") == "custom_message"]
    assert hidden["display"] is False
    assert text_of(hidden["content"]) == instruction
    bullets = "- the user picked Redis for the session cache"
    assert day_file.read_text() == entry_bytes(session, exchange_ends(session)[1], bullets)
    assert [request.prompt for request in server.distillations()] == [
        "[User]: [r3] We picked Redis for the session cache.\n\n[Assistant]: Noted."
    ]
    assert server.failures == []
