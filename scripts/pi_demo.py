"""pimem inside the real pi, end to end, on this machine only (``make demo``).

The real pi CLI (the 1.x line, on the Node 22 that ``make node`` installs) with the pimem
adapter, against a scripted OpenAI-compatible model on 127.0.0.1, with Milvus Lite and the
offline embedding model, in a temporary project, HOME and pi agent directory. Two sessions:
the first is captured into the project's memory; the second starts with that memory in its
system prompt and recalls it layer by layer with the memory tools.

``python scripts/pi_demo.py [--keep]``: ``--keep`` leaves the temporary directory in place.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.pi_host import (
    PI_LINES,
    ChatRequest,
    ModelServer,
    PiRun,
    PiWorld,
    Reply,
    Rule,
    Text,
    ToolCall,
    after_tool,
    isolated_environment,
    on_distill,
    on_prompt,
    pimem_command,
    write_memsearch_config,
)
from pimem_core.testing import read_hits
from pimem_plugins.memsearch.offline_model import OfflineModel, install_offline_model

ROOT = Path(__file__).resolve().parents[1]
LINE = PI_LINES["1.6"]
TELL = "We picked PostgreSQL 16 for the ledger service, because of its logical replication."
REPLY = "Noted: the ledger service runs on PostgreSQL 16, for its logical replication."
FACT = "- the user chose PostgreSQL 16 for the ledger service, for its logical replication"
ASK = "Which database did we pick for the ledger, and why?"
ANSWER = (
    "We picked PostgreSQL 16 for the ledger service, for its logical replication "
    "(from memory: the earlier session's entry and its transcript)."
)
TOOLS = ("memory_search", "memory_expand", "memory_transcript", "memory_status")


def say(text: str) -> None:
    print("\n" + textwrap.fill(text, width=96), flush=True)


def show(text: str, *, title: str | None = None) -> None:
    """*text* indented, under *title*."""
    if title:
        print(f"\n  --- {title}")
    print("\n".join(f"  | {line}".rstrip() for line in text.rstrip("\n").split("\n")), flush=True)


def offline_model() -> OfflineModel:
    """The model ``make model`` installed (installed now if it is missing: no model hub)."""
    return install_offline_model(progress=print).model


# -- the scripted model ------------------------------------------------------------------------


def expand_the_ledger_hit(request: ChatRequest) -> Reply:
    """After memory_search: expand the hit about the ledger."""
    hits = read_hits(request.tool_results[-1].content)
    hit = next(hit for hit in hits if "PostgreSQL" in hit.content)
    return ToolCall("memory_expand", {"chunk_hash": hit.chunk_hash})


def open_its_transcript(request: ChatRequest) -> Reply:
    """After memory_expand: the anchor's last lines (session and turn, transcript) say where
    the conversation is."""
    anchor, where = request.tool_results[-1].content.splitlines()[-2:]
    turn = anchor.rsplit(" | ", 1)[1]
    return ToolCall(
        "memory_transcript",
        {
            "transcript_path": where.removeprefix("transcript: "),
            "turn": turn.removeprefix("turn: "),
        },
    )


def rules() -> list[Rule]:
    return [
        # Session 1: an answer, then the adapter's request to distil the exchange.
        on_prompt("PostgreSQL 16 for the ledger", Text(REPLY)),
        on_distill(Text(FACT), marker="PostgreSQL 16 for the ledger"),
        # Session 2: search, expand, transcript, status, then the answer.
        on_prompt("Which database", ToolCall("memory_search", {"query": "ledger database"})),
        after_tool("memory_search", expand_the_ledger_hit),
        after_tool("memory_expand", open_its_transcript),
        after_tool("memory_transcript", ToolCall("memory_status")),
        after_tool("memory_status", Text(ANSWER)),
        on_distill(),
    ]


# -- the demo ----------------------------------------------------------------------------------


def run(world: PiWorld, prompt: str) -> PiRun:
    print(f"\n  $ pi -e adapters/pi -p {prompt!r}", flush=True)
    done = world.run(prompt, timeout=180)
    if done.code != 0:
        raise SystemExit(f"pi failed ({done.code}):\n{done.stdout}\n{done.stderr}")
    show(done.stdout.strip() or "(no output)", title="pi answered")
    return done


def session_one(world: PiWorld) -> None:
    say(
        "1. Session one. The user tells pi a decision. When the agent has settled, the adapter "
        "hands the exchange to pimem, which asks pi's own model (here the scripted one) to distil "
        "it and appends the result to today's memory file, anchored to the session, the turn and "
        "the transcript. pimem indexes it when the session ends."
    )
    run(world, TELL)
    (day_file,) = sorted((world.repo / ".memsearch" / "memory").glob("*.md"))
    show(day_file.read_text(), title=f"the project's memory: {day_file.relative_to(world.repo)}")


def session_two(world: PiWorld) -> None:
    say("2. Session two, a new pi process, asks about it.")
    seen = len(world.server.requests)
    run(world, ASK)
    requests = [r for r in world.server.agent_requests() if r.index >= seen]
    say(
        "Before that prompt went out, the adapter appended pimem's snapshot to pi's system "
        "prompt: how to use memory, then the latest entries, session one's included. The last "
        "lines of the system prompt the model received:"
    )
    tail = requests[0].system.splitlines()[-10:]
    show("...\n" + "\n".join(tail), title="system prompt, last lines")
    say(
        "3. The model looked the answer up in layers, each tool call going through the adapter "
        "to the pimem bridge: memory_search (L1, the best chunks), memory_expand (L2, the whole "
        "entry and its anchor), memory_transcript (L3, the turns of session one), then "
        "memory_status. What each tool returned to the model:"
    )
    for request in requests:
        result = request.last_tool_result
        if result is not None and result.name in TOOLS:
            show(result.content, title=f"{result.name}({arguments(result.arguments)})")


def arguments(given: Mapping[str, Any]) -> str:
    """A tool call's arguments in one short line (a long path keeps its file name)."""
    shown = []
    for name, value in given.items():
        text = str(value)
        if len(text) > 40 and "/" in text:
            text = ".../" + text.rsplit("/", 1)[1]
        shown.append(f"{name}={text!r}")
    return ", ".join(shown)


def check(server: ModelServer) -> None:
    if server.failures:
        unexpected = "\n".join(server.failures)
        raise SystemExit(f"the scripted model saw requests it did not expect:\n{unexpected}")
    called = {
        result.name
        for request in server.agent_requests()
        if (result := request.last_tool_result) is not None
    }
    if missing := [tool for tool in TOOLS if tool not in called]:
        raise SystemExit(f"the model never got a result from {', '.join(missing)}")


def demo(root: Path) -> None:
    model = offline_model()
    repo = root / "project"
    (repo / ".git").mkdir(parents=True)
    home = root / "home"
    write_memsearch_config(
        home, provider=model.provider, model=model.model, milvus_uri=root / "milvus.db"
    )
    with ModelServer(rules()) as server:
        world = PiWorld.create(
            LINE,
            repo=repo,
            agent_dir=root / "pi-agent",
            server=server,
            # pimem's own files, its memory service's socket included, in the demo's directory.
            base_env=isolated_environment(
                home, {**model.environment(), "PIMEM_HOME": str(root / "pimem-home")}
            ),
        )
        say(
            f"pimem in pi {LINE.name}, end to end, on this machine only: the real pi with the "
            f"pimem adapter, a scripted model at {server.url}, Milvus Lite and the offline "
            f"embedding model. Project, HOME and pi agent directory are temporary ({root})."
        )
        try:
            session_one(world)
            session_two(world)
            check(server)
        finally:
            # Both sessions shared one memory service, which would idle on for ten minutes.
            subprocess.run(
                [pimem_command(), "service", "stop"],
                env=world.env,
                capture_output=True,
                check=False,
            )
        say(
            f"Done: two pi sessions, {len(server.requests)} model requests, all answered by the "
            "scripted model on 127.0.0.1. To use pimem in your own pi, with your provider, see "
            '"Use pimem in pi" in README.md.'
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    if (reason := LINE.missing()) is not None:
        print(f"pimem demo: {reason}", file=sys.stderr)
        return 1
    root = Path(tempfile.mkdtemp(prefix="pimem-demo-"))
    try:
        demo(root)
    finally:
        if args.keep:
            print(f"\nKept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
