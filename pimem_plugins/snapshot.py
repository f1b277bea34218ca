"""The stable snapshot: usage instructions plus the tails of today's and yesterday's memory files.

It is appended to the agent's system prompt on every turn, and the session keeps it
byte-identical between checkpoints so provider prefix caches survive.
``PI_MEMSEARCH_SNAPSHOT=off`` deactivates this plugin.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pimem_core.plugin import MemoryStore, Settings, hookimpl, without_conflicts

TODAY_BUDGET = 3000
YESTERDAY_BUDGET = 2000
TRUNCATED = "[... earlier entries omitted]"

INSTRUCTIONS = """\
## Project memory

This project keeps a shared memory store: one markdown file per day, appended to by every \
coding agent that works here. The latest entries are below, each stamped with its time and \
anchored to the session that wrote it.

- When the user asks you to remember something, or a decision, fix or fact deserves to \
outlive this session, save it with the `memory_write` tool as third-person bullets in the \
language of the conversation.
- Look here before working out again how something was solved or decided; search older \
memory with `memory_search`.
- This block changes only at checkpoints (session start, a new day, context compaction, a \
forgotten entry); what you save mid-session shows in tool results, not here."""


#: The setting that turns the snapshot off (shown by `pimem plugins`).
ACTIVATION_SETTING = "PI_MEMSEARCH_SNAPSHOT"


def is_active(settings: Settings) -> bool:
    return settings.snapshot


def tail(text: str, budget: int) -> tuple[str, bool]:
    """The end of *text* within *budget* characters, cut at a line start when possible."""
    if len(text) <= budget:
        return text, False
    cut = text[-budget:]
    newline = cut.find("\n")
    aligned = cut[newline + 1 :] if newline != -1 else ""
    return aligned or cut, True


@hookimpl(trylast=True)
def pimem_build_snapshot(now: datetime, store: MemoryStore) -> str:
    today = now.date()
    sections = [INSTRUCTIONS]
    for label, day, budget in (
        ("Today", today, TODAY_BUDGET),
        ("Yesterday", today - timedelta(days=1), YESTERDAY_BUDGET),
    ):
        # A day file git left conflicted shows both sides, never the markers (ADR 0016).
        body = without_conflicts(store.read_day(day) or "").strip()
        if not body:
            continue
        kept, truncated = tail(body, budget)
        marker = f"{TRUNCATED}\n" if truncated else ""
        sections.append(f"### {label} ({day.isoformat()})\n\n{marker}{kept}")
    return "\n\n".join(sections)
