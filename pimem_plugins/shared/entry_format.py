"""An entry's bytes in a daily memory file: memsearch's shape, which every mesh agent writes."""

from __future__ import annotations

from pimem_core.plugin import Entry


def day_file_name(entry: Entry) -> str:
    return f"{entry.written_at.date().isoformat()}.md"


def format_entry(entry: Entry, *, session_heading: bool) -> str:
    """The exact bytes appended for *entry*: memsearch's shape, shared by every mesh agent."""
    time = entry.written_at.strftime("%H:%M")
    heading = f"\n## Session {time}\n\n" if session_heading else ""
    return f"{heading}### {time}\n{entry.anchor.comment()}\n{entry.content}\n\n"
