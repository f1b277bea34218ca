"""Auto-context through a real bridge on real memsearch, Milvus Lite and the offline model
(spec case TC-39, adapted): what the host receives for each prompt, and the counters."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from bridge import Bridge

from pimem_core.types import Anchor, Entry
from pimem_plugins.auto_context import PREAMBLE

from conftest import make_pimem

EARLIER = [
    (
        "2026-08-03T10:15",
        "- the user and the agent chose Redis for the hot cache with 5 minute TTLs",
    ),
    ("2026-08-04T16:02", "- the agent fixed the login redirect loop by escaping the return URL"),
    ("2026-08-05T09:30", "- the team deploys the billing service with blue-green releases"),
]
TODAY = "- the agent renamed the invoice exporter to ledger_export today"


@pytest.fixture
def indexed_repo(memsearch_home: Path, repo: Path) -> Path:
    """Three entries from earlier days (not in the snapshot) and one from today (in it)."""
    pimem = make_pimem({"PIMEM_DB_LINGER_MS": "0"})  # the bridge must not wait for this process
    scope = pimem.resolve_scope(repo)
    stamps = [*EARLIER, ("2026-08-13T09:00", TODAY)]
    for number, (stamp, content) in enumerate(stamps):
        anchor = Anchor(session=f"s{number}", turn=f"t{number}", transcript=f"/t/s{number}.jsonl")
        written_at = datetime.fromisoformat(stamp)
        pimem.append_entry(scope, Entry(anchor=anchor, content=content, written_at=written_at))
    assert pimem.index_memory(scope, "test").indexed_chunks == 4
    return repo


def started_bridge(tmp_path: Path, repo: Path, **env: str) -> Bridge:
    bridge = Bridge({"PI_MEMSEARCH_CAPTURE": "off", **env})
    bridge.call(
        "session.start", session_id="s", cwd=str(repo / "packages" / "core"), transcript=None
    )
    return bridge


def auto_context(bridge: Bridge) -> dict[str, Any]:
    section: dict[str, Any] = bridge.call("memory.status")["result"]["auto-context"]
    return section


def wait_until_warm(bridge: Bridge) -> None:
    deadline = time.monotonic() + 60
    while auto_context(bridge)["state"] != "warm":
        assert time.monotonic() < deadline, "auto-context never became warm"
        time.sleep(0.05)


def hidden(bridge: Bridge, prompt: str) -> list[dict[str, str]]:
    reply = bridge.call("session.before_prompt", prompt=prompt)["result"]
    assert reply["snapshot"] is not None  # the snapshot comes with or without auto-context
    result: list[dict[str, str]] = reply["hidden"]
    return result


def test_a_relevant_older_memory_is_injected_as_a_hidden_message(
    indexed_repo: Path, tmp_path: Path
) -> None:
    bridge = started_bridge(tmp_path, indexed_repo, PI_MEMSEARCH_AUTO_CONTEXT="on")
    wait_until_warm(bridge)
    (message,) = hidden(bridge, "which cache did we choose for the hot path, and its TTL?")
    assert message["source"] == "auto-context"
    assert message["text"].startswith(PREAMBLE + "\n\n1. ")
    assert " | relevance " in message["text"]
    assert EARLIER[0][1] in message["text"]
    assert "login redirect" not in message["text"]  # similar enough, or not at all
    status = bridge.call("memory.status")["result"]
    assert status["auto-context"]["injected"] == 1
    assert "auto-context prompts: 1 seen, 1 injected" in status["text"]
    assert bridge.close() == 0


def test_unrelated_prompts_and_memories_already_in_the_snapshot_inject_nothing(
    indexed_repo: Path, tmp_path: Path
) -> None:
    bridge = started_bridge(tmp_path, indexed_repo, PI_MEMSEARCH_AUTO_CONTEXT="on")
    wait_until_warm(bridge)
    assert hidden(bridge, "write a haiku about autumn leaves in Kyoto") == []
    # Today's entry is in the snapshot already: the prompt matches it and nothing else.
    assert hidden(bridge, "what did the agent rename the invoice exporter to?") == []
    assert hidden(bridge, "x" * 600) == []  # only the first 500 characters are searched
    counters = auto_context(bridge)
    assert (counters["seen"], counters["injected"], counters["skipped_empty"]) == (3, 0, 3)
    assert bridge.close() == 0


def test_off_by_default_no_search_and_status_says_how_to_turn_it_on(
    indexed_repo: Path, tmp_path: Path
) -> None:
    bridge = started_bridge(tmp_path, indexed_repo)
    assert hidden(bridge, "which cache did we choose for the hot path?") == []
    status = bridge.call("memory.status")["result"]
    assert "auto-context: off (set PI_MEMSEARCH_AUTO_CONTEXT=on to enable)" in status["text"]
    assert status["auto-context"] == {"enabled": False}
    assert bridge.close() == 0
