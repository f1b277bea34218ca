"""The ``capture-gates`` plugin: memory is not filled with exchanges about memory itself.

Capture stays maximal: every exchange becomes an entry, and no model judges what is worth
keeping. These are hard rules on what the user asked and what the agent did (ADR 0014):

* **about memory**: the user asked to recall (the ``/recall`` prompt, ``/skill:recall``), or
  the agent's only work was reading memory (search, expand, transcript, status, skills, or
  reading one of pimem's skills). Captured, such an exchange comes back as the next search's
  hit and fills the next snapshot with questions instead of decisions;
* **already written**: the agent wrote memory itself (``memory_write``) and did nothing else:
  the entry is in the store already;
* **asked to forget**: the agent forgot an entry (``memory_forget``): capturing the exchange
  would write the forgotten subject straight back.

The tool names are those the pi adapter gives pimem's tools (``adapters/pi/src``).
"""

from __future__ import annotations

from collections.abc import Sequence

from pimem_core.plugin import BranchEntry, Settings, hookimpl

ABOUT_MEMORY = "about memory"
ALREADY_WRITTEN = "already written"
ASKED_TO_FORGET = "asked to forget"

#: pimem's tools that only read memory.
READING_TOOLS = frozenset(
    {"memory_search", "memory_expand", "memory_transcript", "memory_status", "memory_skills"}
)
WRITING_TOOL = "memory_write"
FORGETTING_TOOL = "memory_forget"
#: How the ``/recall`` instruction begins (the message the pi adapter injects beside the user's
#: query, and the prompt template ``adapters/pi/prompts/recall.md`` it falls back to), and how
#: pi sends ``/skill:recall``: the skill's text in a ``<skill>`` block before the user's words.
RECALL_PROMPTS = ("Use the recall skill to answer from memory:", '<skill name="recall" ')
#: pimem's skills about memory itself; reading one is memory work.
MEMORY_SKILLS = ("/skills/recall/SKILL.md", "/skills/memory-diagnosis/SKILL.md")


def tool_name(call: str) -> str:
    """The tool of a call one-liner such as ``memory_search(query=redis, …)``."""
    return call.split("(", 1)[0].strip()


def _memory_work(call: str) -> bool:
    name = tool_name(call)
    if name == "read":
        return any(skill in call for skill in MEMORY_SKILLS)
    return name in READING_TOOLS or name == WRITING_TOOL


def gate(window: Sequence[BranchEntry]) -> str | None:
    """Why *window* is not captured, or ``None``."""
    calls = [call for entry in window if entry.role == "assistant" for call in entry.tool_calls]
    if any(tool_name(call) == FORGETTING_TOOL for call in calls):
        return ASKED_TO_FORGET
    # The adapter's /recall sends the user's words alone, with its instruction injected.
    asked = [
        entry.text.lstrip()
        for entry in window
        if entry.role == "user" or entry.kind == "custom_message"
    ]
    if any(text.startswith(RECALL_PROMPTS) for text in asked):
        return ABOUT_MEMORY
    if calls and all(_memory_work(call) for call in calls):
        if any(tool_name(call) == WRITING_TOOL for call in calls):
            return ALREADY_WRITTEN
        return ABOUT_MEMORY
    return None


@hookimpl
def pimem_gate_exchange(window: tuple[BranchEntry, ...], settings: Settings) -> str | None:
    return gate(window)
