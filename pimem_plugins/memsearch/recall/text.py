"""What of a chunk is ranked: its clean text, its facts, and the words of both.

An entry's anchor comment and its headings are metadata: the words that matter are the body's.
Identifiers, versions and file names (``auth_service.py``, ``0.19.0``, ``POST /v1/users``) are
single words to a person who types them, so they stay whole tokens; a path is also each of its
parts, since an entry names ``scripts/bench.sh`` where a question says ``bench.sh``. Plain
words lose their plural and past endings (``donate``, ``donated`` and ``donates`` are one
word): people ask in another tense than they wrote. ``-ing`` stays: in code memory ``billing`` and ``logging`` are
names of things, not forms of ``bill`` and ``log``. The day an entry was written is in its file's name, not in its
text; :func:`day_words` gives it in the words a question uses ("in May 2023", "on 3 May").
"""

from __future__ import annotations

import os
import re
from datetime import date

from bm25s.stopwords import STOPWORDS_EN

_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
_BULLET = re.compile(r"^\s{0,3}(?:[-*+]|\d{1,3}[.)])\s+")
# A word, or words joined by the punctuation of paths, versions and identifiers.
_TOKEN = re.compile(r"\w+(?:[./:@+\-]\w+)*")
# Where a path or a qualified name parts (``src/app.py``, ``crate::module``, ``user@host``).
_PARTS = re.compile(r"/|::|@")
_STOP_WORDS = frozenset(STOPWORDS_EN)
_DAY_FILE = re.compile(r"(\d{4})-(\d{2})-(\d{2})\.md")
_MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)


def clean_text(content: str) -> str:
    """*content* without its anchor comment and heading lines."""
    body = _COMMENT.sub("", content)
    lines = [line for line in body.splitlines() if line.strip() and not _HEADING.match(line)]
    return "\n".join(lines).strip()


def facts(content: str) -> tuple[str, ...]:
    """The facts of a chunk: each bullet on its own, other text as one paragraph each; a chunk
    with no body gives its clean text (possibly empty) as its one fact."""
    found: list[list[str]] = []
    prose: list[str] = []
    for line in clean_text(content).splitlines():
        if _BULLET.match(line):
            found.append([_BULLET.sub("", line, count=1)])
        elif found and line.startswith((" ", "\t")):
            found[-1].append(line.strip())  # a bullet's continuation
        else:
            prose.append(line.strip())
    texts = [" ".join(parts) for parts in found]
    if prose:
        texts.append(" ".join(prose))
    return tuple(text for text in texts if text) or (clean_text(content),)


def stem(word: str) -> str:
    """*word* without its plural or past ending; short words, numbers and compounds as they
    are."""
    if len(word) <= 4 or not word.isalpha():
        return word
    if word.endswith(("ies", "ied")):
        return word[:-3] + "y"  # "parties", "tried"
    if word.endswith(("sses", "xes", "zes", "ches", "shes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if word.endswith("ed") and len(word) >= 5:
        word = word[:-2]
        if word[-1] == word[-2] and word[-1] not in "lsz":
            word = word[:-1]  # "planned"
    # "donate" as "donated" and "donates" became
    return word[:-1] if len(word) > 4 and word.endswith("e") else word


def tokens(text: str) -> list[str]:
    """The lexical words of *text*: lower case, stop words left out, compounds kept whole (a
    path or a qualified name also gives each of its parts: ``docs/spec-home.md`` is found by
    ``spec-home.md``), plain words stemmed."""
    found: list[str] = []
    for match in _TOKEN.finditer(text):
        token = match.group().lower()
        if token in _STOP_WORDS:
            continue
        found.append(stem(token))
        parts = [part for part in _PARTS.split(token) if part] if _PARTS.search(token) else ()
        found += [stem(part) for part in parts if part not in _STOP_WORDS]
    return found


def day_words(source: str) -> str:
    """The day a daily memory file holds, as words (``"3 may 2023"``); ``""`` for other files."""
    match = _DAY_FILE.fullmatch(os.path.basename(source))
    if match is None:
        return ""
    try:
        day = date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:
        return ""
    return f"{day.day} {_MONTHS[day.month - 1]} {day.year}"


def lexical_words(content: str, source: str) -> list[str]:
    """What the lexical leg indexes of a chunk: its clean text's words and its day's."""
    return tokens(f"{clean_text(content)} {day_words(source)}")
