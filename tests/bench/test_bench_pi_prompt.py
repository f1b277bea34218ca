"""What pimem adds to a request (``bench/pi_prompt.py``), on two hand-made requests."""

from __future__ import annotations

import json

from bench.pi_host import ADAPTER_DIR
from bench.pi_prompt import TODAY, added, render, targets

BASE = "You are pi.\n\nAvailable tools:\n- read: Read file contents"


def tool(name: str, description: str) -> dict[str, object]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": {}},
    }


def request(system: str, *tools: dict[str, object]) -> dict[str, object]:
    return {
        "model": "fake-model",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": "hi"}],
        "tools": list(tools),
    }


def test_each_part_counts_what_the_adapter_adds() -> None:
    read = tool("read", "Read a file")
    search = tool("memory_search", "Search memory")
    skill = f"\n<skill><location>{ADAPTER_DIR}/skills/recall/SKILL.md</location></skill>"
    snapshot = "\n\n## Project memory\n\nShared memory."
    without = request(BASE, read)
    with_ = request(BASE + skill + snapshot, read, search)

    parts = added(without, with_)

    compact = len(json.dumps(search, separators=(",", ":")))
    assert parts["tools"] == compact + 1  # and its comma
    assert parts["tool_count"] == 1
    assert parts["snapshot"] == len(snapshot)
    # The package's directory counts as "<package>", wherever the checkout is.
    assert parts["listing"] == len(
        "\n<skill><location><package>/skills/recall/SKILL.md</location></skill>"
    )
    assert parts["total"] == parts["tools"] + parts["snapshot"] + parts["listing"]


def test_the_target_is_half_of_todays_figure_with_an_empty_store() -> None:
    today = TODAY["1.6"]["empty"]
    at_half = {"tools": 0, "snapshot": 0, "listing": today // 2, "total": today // 2}
    over = {**at_half, "listing": today // 2 + 1, "total": today // 2 + 1}
    (met,) = targets({"1.6": {"empty": at_half}})
    (missed,) = targets({"1.6": {"empty": over}})
    assert met["met"]
    assert not missed["met"]
    table = render({"1.6": {"empty": at_half, "full": at_half}})
    assert f"| pi 1.6 | empty | {today:,} | {today // 2:,} (50%) |" in table
