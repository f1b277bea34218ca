"""The capture gates about memory itself, and near-duplicates at capture (ADR 0014)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pimem_core.runtime.repeats import RECENT_ENTRIES, facts, recent_facts, repeats
from pimem_core.types import BranchEntry
from pimem_plugins.capture_gates import (
    ABOUT_MEMORY,
    ALREADY_WRITTEN,
    ASKED_TO_FORGET,
    RECALL_PROMPTS,
    gate,
)

ADAPTER = Path(__file__).resolve().parents[1] / "adapters" / "pi"


def exchange(ask: str, *calls: str, answer: str = "done") -> list[BranchEntry]:
    return [
        BranchEntry(id="u", kind="message", role="user", text=ask),
        BranchEntry(id="a", kind="message", role="assistant", text=answer, tool_calls=calls),
    ]


@pytest.mark.parametrize(
    ("window", "reason"),
    [
        (exchange("why does the login page loop?", "edit(path=src/login.py, …)"), None),
        (exchange("what did we decide about the cache?"), None),  # answered in words: kept
        (exchange("what did we decide?", "memory_search(query=cache)"), ABOUT_MEMORY),
        (
            exchange("is memory ok?", "memory_status()", "memory_expand(chunk_hash=ab12)"),
            ABOUT_MEMORY,
        ),
        (
            exchange("recall the cache", "read(path=/pkg/skills/recall/SKILL.md)"),
            ABOUT_MEMORY,
        ),
        (exchange("Use the recall skill to answer from memory: redis\n\nIf …"), ABOUT_MEMORY),
        (
            exchange('<skill name="recall" location="/p/SKILL.md">\n…\n</skill>\n\nredis'),
            ABOUT_MEMORY,
        ),
        (
            exchange("remember: we use Redis", "memory_write(content=- we use Redis)"),
            ALREADY_WRITTEN,
        ),
        (
            exchange("pin httpx and remember it", "edit(path=pyproject.toml)", "memory_write()"),
            None,  # other work too: captured (near-duplicates are dropped after distillation)
        ),
        (exchange("forget the Redis entry", "memory_forget(chunk_hash=ab12)"), ASKED_TO_FORGET),
        (
            exchange("forget it, then fix the bug", "memory_forget()", "edit(path=a.py)"),
            ASKED_TO_FORGET,
        ),
    ],
)
def test_gates(window: list[BranchEntry], reason: str | None) -> None:
    assert gate(window) == reason


def test_the_recall_prompt_template_begins_as_the_gate_expects() -> None:
    template = (ADAPTER / "prompts" / "recall.md").read_text(encoding="utf-8")
    body = template.split("---\n", 2)[2]
    assert body.startswith(RECALL_PROMPTS[0])


def test_the_recall_instruction_injected_beside_the_query_is_about_memory() -> None:
    """The pi adapter sends ``/recall <query>`` as the user's query, with its instruction as
    an injected message: the gate reads it there. Auto-context injected beside an ordinary
    prompt changes nothing."""
    query = BranchEntry(id="u", kind="message", role="user", text="which cache did we pick")
    answer = BranchEntry(id="a", kind="message", role="assistant", text="Redis.")
    recall = BranchEntry(id="c", kind="custom_message", text=f"{RECALL_PROMPTS[0]} the user…")
    hits = BranchEntry(id="h", kind="custom_message", text="## Memory about this prompt\n- x")
    assert gate([query, recall, answer]) == ABOUT_MEMORY
    assert gate([query, hits, answer]) is None


def test_the_adapters_recall_instruction_begins_as_the_gate_expects() -> None:
    source = (ADAPTER / "src" / "commands.ts").read_text(encoding="utf-8")
    assert f'RECALL_INSTRUCTION =\n  "{RECALL_PROMPTS[0]} ' in source


def test_facts_are_bullets_normalised() -> None:
    assert facts("- Chose Redis  for the cache.\n  with 5 minute TTLs\nsome prose\n* pinned x") == {
        "chose redis for the cache. with 5 minute ttls",
        "pinned x",
    }


def day(*entries: tuple[str, str]) -> str:
    return "".join(
        f"### 10:00\n<!-- session:{session} turn:t transcript:/t.jsonl -->\n{content}\n\n"
        for session, content in entries
    )


def test_an_entry_repeats_only_when_every_fact_is_known() -> None:
    known = recent_facts([day(("s1", "- we use Redis\n- TTL is 5 minutes"))], "s1")
    assert repeats("- We use Redis.", known)
    assert not repeats("- we use Redis\n- the TTL is now 10 minutes", known)
    assert not repeats("The agent looked around.", known)  # no bullet: nothing to compare


def test_other_sessions_count_only_among_the_last_entries() -> None:
    old = [("other", "- an old fact")]
    newer = [("other", f"- fact {n}") for n in range(RECENT_ENTRIES)]
    known = recent_facts([day(*old, *newer)], "mine")
    assert not repeats("- an old fact", known)
    assert repeats("- fact 3", known)
    assert repeats("- an old fact", recent_facts([day(("mine", "- an old fact"), *newer)], "mine"))
