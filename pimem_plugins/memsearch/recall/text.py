"""What of a chunk is ranked: its clean text, its facts, and the words of both.

An entry's anchor comment and its headings are metadata: the words that matter are the body's.
Identifiers, versions and file names (``auth_service.py``, ``0.19.0``, ``POST /v1/users``) are
single words to a person who types them, so they stay whole tokens.
"""

from __future__ import annotations

import re

from bm25s.stopwords import STOPWORDS_EN

_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
_BULLET = re.compile(r"^\s{0,3}(?:[-*+]|\d{1,3}[.)])\s+")
# A word, or words joined by the punctuation of paths, versions and identifiers.
_TOKEN = re.compile(r"\w+(?:[./:@+\-]\w+)*")
_STOP_WORDS = frozenset(STOPWORDS_EN)


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


def tokens(text: str) -> list[str]:
    """The lexical words of *text*: lower case, stop words left out, compounds kept whole."""
    return [
        token
        for token in (match.group().lower() for match in _TOKEN.finditer(text))
        if token not in _STOP_WORDS
    ]
