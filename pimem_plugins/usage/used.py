"""Whether the agent used what memory gave it: an entry's distinctive content, or its day and
time, in what the agent then said and did.

An entry's distinctive tokens are its identifiers (``snake_case``, ``CamelCase``, ``SQLite``,
paths, dotted names, versions), its numbers (three digits or more, or with a decimal point:
two-digit numbers match by chance too often), its capitalised names not at a sentence's start,
and its rare words (long words, no common word). A token counts only where the agent's answer
or tool calls carry it whole and the user's prompt does not: an echo of the question is not a
use. A rare word other entries given in the exchange hold too is a use of the one of them that
shares the most words with the answer, and of none when that is a tie: it says which entry the
answer follows only with what surrounds it. Citing the entry's day and time (``2026-12-06
09:12``, the day and ``09:12`` near each other) is a use, whatever the prompt says.

Entries are told apart by their text: two entries written in the same minute share a day and a
time, and each is judged on its own; the same entry given twice (a search hit, then expanded)
is one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

import attrs

from pimem_plugins.usage.record import Shown

Evidence = str  # "citation" | "identifier" | "number" | "name" | "rare word"

_PATTERNS: tuple[tuple[Evidence, re.Pattern[str]], ...] = (
    ("identifier", re.compile(r"(?<![\w/.-])(?:[\w.-]+/)+[\w.-]+")),  # a path
    ("identifier", re.compile(r"\b[A-Za-z_]\w*_\w+\b")),  # snake_case
    ("identifier", re.compile(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b")),  # CamelCase
    ("identifier", re.compile(r"\b[a-z]+[A-Z]\w*\b")),  # camelCase
    ("identifier", re.compile(r"\b[A-Z]{2,}[a-z]\w*\b")),  # SQLite, IPython
    ("identifier", re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\b")),  # dotted.name
    ("identifier", re.compile(r"\bv?\d+\.\d+\.\d+(?:[-.\w]*)")),  # a version
    ("number", re.compile(r"(?<![\w.:-])\d+\.\d+(?![\w.:-])|(?<![\w.:-])\d{3,}(?![\w.:-])")),
    ("name", re.compile(r"(?<![.!?:\n-]\s)(?<=\s)[A-Z][a-z]{2,}\b")),
    ("rare word", re.compile(r"\b[a-z]{9,}\b")),
)
_DATE_OR_TIME = re.compile(r"\d{4}-\d{2}-\d{2}|\b\d{2}:\d{2}\b")
_COMMON = frozenset(
    [
        "The",
        "This",
        "That",
        "These",
        "Those",
        "There",
        "Then",
        "When",
        "Where",
        "What",
        "Which",
        "While",
        "With",
        "Without",
        "After",
        "Before",
        "Also",
        "And",
        "But",
        "For",
        "From",
        "Into",
        "Its",
        "Not",
        "Now",
        "Only",
        "Our",
        "Some",
        "Such",
        "Their",
        "They",
        "Use",
        "Used",
        "Uses",
        "Using",
        "Yes",
        "You",
        "Your",
        "Today",
        "Yesterday",
        "Memory",
        "Note",
        "Session",
        "Entry",
        "something",
        "everything",
        "important",
        "different",
        "following",
        "implement",
        "implemented",
        "implementation",
        "generated",
        "available",
        "configure",
        "configured",
        "configuration",
        "necessary",
        "therefore",
        "otherwise",
        "themselves",
        "including",
        "currently",
        "previously",
        "successfully",
        "information",
        "functions",
        "function",
    ]
)


@attrs.frozen(kw_only=True)
class Use:
    via: str
    entry: Shown
    evidence: Evidence
    term: str


def distinctive(text: str) -> Iterator[tuple[Evidence, str]]:
    """*text*'s distinctive tokens, strongest kind first."""
    clean = _DATE_OR_TIME.sub(" ", text)
    seen: set[str] = set()
    for evidence, pattern in _PATTERNS:
        for found in pattern.finditer(clean):
            token = found.group(0).strip(".")
            if len(token) < 3 or token in seen or token in _COMMON:
                continue
            seen.add(token)
            yield evidence, token


def _carries(text: str, token: str) -> bool:
    flags = re.IGNORECASE if token.islower() else 0
    return re.search(rf"(?<![\w]){re.escape(token)}(?![\w])", text, flags) is not None


def cited(entry: Shown, answer: str) -> str | None:
    """The citation of *entry* in *answer* (its day and its time within 40 characters)."""
    if not entry.day or not entry.time:
        return None
    for found in re.finditer(re.escape(entry.day), answer):
        near = answer[max(0, found.start() - 40) : found.end() + 40]
        if re.search(rf"(?<!\d){re.escape(entry.time)}(?!\d)", near):
            return f"{entry.day} {entry.time}"
    return None


def _words(text: str) -> set[str]:
    return {word.lower() for word in re.findall(r"\w{3,}", text)}


def _body(text: str) -> str:
    """An entry's text as two ways of giving it agree on: no heading lines, spaces folded."""
    lines = (line for line in text.splitlines() if not line.lstrip().startswith("#"))
    return " ".join(" ".join(lines).split())


def _distinct(given: Sequence[tuple[str, Shown]]) -> list[tuple[str, Shown]]:
    """Each entry of *given* once, by the most deliberate way memory gave it: the same entry
    is the same address with a text that holds the other's (a hit, then its whole section)."""
    rank = {"expand": 0, "search": 1, "injection": 2, "snapshot": 3}
    kept: list[tuple[str, Shown]] = []
    for via, entry in given:
        body = _body(entry.text)
        for at, (was_via, was) in enumerate(kept):
            same_place = (was.day, was.time) == (entry.day, entry.time)
            other = _body(was.text)
            if same_place and (body in other or other in body):
                if rank.get(via, 9) < rank.get(was_via, 9):
                    kept[at] = (via, entry if len(body) >= len(other) else was)
                break
        else:
            kept.append((via, entry))
    return kept


def uses(given: Sequence[tuple[str, Shown]], prompt: str, answer: str) -> list[Use]:
    """The entries of *given* (``(via, entry)``, in the order memory gave them) the agent used
    in *answer*, each once, by the most deliberate way memory gave it."""
    entries = _distinct(given)
    answer_words = _words(answer)
    found: list[Use] = []
    for via, entry in entries:
        citation = cited(entry, answer)
        if citation is not None:
            found.append(Use(via=via, entry=entry, evidence="citation", term=citation))
            continue
        for evidence, token in distinctive(entry.text):
            if not _carries(answer, token) or _carries(prompt, token):
                continue
            if evidence == "rare word":
                rivals = [e for _, e in entries if e is not entry and _carries(e.text, token)]
                shared = len(_words(entry.text) & answer_words)
                if any(len(_words(e.text) & answer_words) >= shared for e in rivals):
                    continue
            found.append(Use(via=via, entry=entry, evidence=evidence, term=token))
            break
    return found
