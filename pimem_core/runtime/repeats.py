"""Near-duplicates at capture: an entry whose every fact memory already holds is not appended.

The rule (ADR 0014): a captured entry is dropped when each of its bullets, compared without
case, surrounding space or a final period, is a bullet of an entry this session wrote today or
yesterday, or of one of the store's last ``RECENT_ENTRIES`` entries of those days. One bullet
that differs keeps the whole entry: nothing that differs in a fact is dropped. Entries without
bullets (prose, diagnostic markers) are always kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pimem_core.day_file import list_entries

#: Entries of other sessions compared against, the newest of today's and yesterday's.
RECENT_ENTRIES = 20

_ANCHOR = re.compile(r"^<!--\s*session:(\S+)\s")
_BULLET = re.compile(r"^\s{0,3}[-*+]\s+")


def facts(content: str) -> frozenset[str]:
    """The bullets of *content*, each with its continuation lines, normalised."""
    found: list[list[str]] = []
    for line in content.splitlines():
        if _BULLET.match(line):
            found.append([_BULLET.sub("", line, count=1)])
        elif found and line.startswith((" ", "\t")) and line.strip():
            found[-1].append(line.strip())
        elif line.strip():
            found.append([])  # prose ends a bullet; it is no fact to compare
    return frozenset(
        " ".join(" ".join(parts).split()).casefold().rstrip(".") for parts in found if parts
    )


def _entries(day_text: str) -> list[tuple[str, list[str]]]:
    """The anchored entries of a daily file, oldest first: the session of each and its body
    lines (after the anchor)."""
    found: list[tuple[str, list[str]]] = []
    for entry in list_entries(day_text):
        body = entry.text.split("\n")[1:]
        anchor = _ANCHOR.match(body[0]) if body else None
        if anchor is not None:
            found.append((anchor.group(1), body[1:]))
    return found


def recent_facts(day_texts: Iterable[str], session: str) -> frozenset[str]:
    """The facts of *session*'s entries in *day_texts* (oldest day first) and of the last
    ``RECENT_ENTRIES`` entries of any session."""
    entries = [entry for text in day_texts for entry in _entries(text)]
    chosen = [body for owner, body in entries if owner == session]
    chosen += [body for _, body in entries[-RECENT_ENTRIES:]]
    return frozenset().union(*(facts("\n".join(body)) for body in chosen))


def repeats(content: str, known: frozenset[str]) -> bool:
    """Whether every fact of *content* is among *known* (and it has one)."""
    own = facts(content)
    return bool(own) and own <= known
