"""Reading a daily memory file strictly: a run of whole entries, or a list of what is wrong.

Every mesh writer appends the same shape (memsearch's): an optional ``## Session HH:MM``
heading, then ``### HH:MM``, the session anchor and the content, ending in a blank line. A file
that appenders alone wrote must be nothing but such blocks; anything else is a torn or
interleaved write.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping

import attrs

# A block starts a line; its content lines are neither headings nor another entry's anchor (two
# entries glued together by a torn write must not read as one).
_BLOCK = re.compile(
    r"(?<![^\n])"
    r"(?P<session_heading>\n## Session \d{2}:\d{2}\n\n)?"
    r"### (?P<time>\d{2}:\d{2})\n"
    r"<!-- session:(?P<session>\S+) turn:(?P<turn>\S+) transcript:(?P<transcript>\S+) -->\n"
    r"(?P<content>(?:(?!#{1,3} |<!-- session:)[^\n]*\n)*?)\n"
    r"(?=\n## Session |### |\Z)"
)


@attrs.frozen
class Parsed:
    """The entries found, keyed by ``(session, turn)``, and every byte range that was not one."""

    entries: list[tuple[str, str, str]]
    torn: list[str]

    def by_anchor(self) -> dict[tuple[str, str], list[str]]:
        found: dict[tuple[str, str], list[str]] = {}
        for session, turn, content in self.entries:
            found.setdefault((session, turn), []).append(content)
        return found


def parse(text: str) -> Parsed:
    """Split *text* into whole entries; what does not parse is reported as torn, 200 bytes of it."""
    entries, torn, position = [], [], 0
    while position < len(text):
        match = _BLOCK.match(text, position)
        if match is None:
            following = _BLOCK.search(text, position + 1)
            end = following.start() if following else len(text)
            torn.append(text[position : min(end, position + 200)])
            position = end
            continue
        entries.append((match["session"], match["turn"], match["content"].rstrip("\n")))
        position = match.end()
    return Parsed(entries=entries, torn=torn)


@attrs.frozen
class Audit:
    """Expected entries against a file: lost, duplicated, altered, unexpected and torn."""

    lost: list[tuple[str, str]]
    duplicated: list[tuple[str, str]]
    altered: list[tuple[str, str]]
    unexpected: list[tuple[str, str]]
    torn: list[str]

    @property
    def problems(self) -> list[str]:
        found = []
        for name in ("lost", "duplicated", "altered", "unexpected", "torn"):
            items = getattr(self, name)
            if items:
                found.append(
                    f"{len(items)} {name} entr{'y' if len(items) == 1 else 'ies'}: {items[:3]}"
                )
        return found


def audit(text: str, expected: Mapping[tuple[str, str], str], *, extra_ok: bool = False) -> Audit:
    """Compare *text* with the *expected* content of each ``(session, turn)`` anchor.

    With *extra_ok*, entries nobody expected are allowed (other writers of the same file).
    """
    parsed = parse(text)
    counts = Counter((session, turn) for session, turn, _ in parsed.entries)
    contents = {(session, turn): content for session, turn, content in parsed.entries}
    return Audit(
        lost=[key for key in expected if counts[key] == 0],
        duplicated=[key for key in expected if counts[key] > 1],
        altered=[key for key in expected if counts[key] == 1 and contents[key] != expected[key]],
        unexpected=[] if extra_ok else [key for key in counts if key not in expected],
        torn=parsed.torn,
    )
