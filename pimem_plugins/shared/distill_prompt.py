"""What the model-based distillers share: the system prompt and the reading of a model's reply.

Not a plugin. A model asked for bullets may still open with a sentence, wrap its answer in a code
fence or add headings; :func:`clean_bullets` takes those out so the reply can become a memory
entry (where a ``#``, ``##`` or ``###`` heading would split the entry in its daily memory file).
A model may also answer that the exchange holds nothing to keep (:data:`NOTHING_TO_KEEP`, read
by :func:`nothing_to_keep`): capture then writes no entry and counts the exchange as skipped
(ADR 0021).
"""

from __future__ import annotations

import re

SYSTEM_PROMPT = """\
You turn one exchange between a user and a coding agent into notes for the project's \
long-term memory.
Write between 2 and 10 markdown bullets, each starting with "- ".
Use the third person and the past tense: call the people "the user" and "the agent", and \
write in the language the user mostly wrote in.
Make every bullet a fact that stands on its own and is worth recalling in a later session: a \
decision taken, a fix made, something learned about the project, a preference the user \
stated, or a follow-up left open.
If the exchange holds none of these (small talk, or a question answered only from memory or \
from what was already said), reply with the single line NOTHING TO KEEP; when the user stated \
a choice, a preference or a fact, even inside a question, write the bullets.
Reply with the bullets and nothing else: no headings, no introduction, no code fences."""

NO_TEXT = "distillation returned no text"
#: A model's whole reply when the exchange holds nothing worth recalling.
NOTHING_TO_KEEP = "NOTHING TO KEEP"

# Reasoning some local models print before their answer.
_THINKING = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^\s*(?:```|~~~)")
# A heading that would end the entry (up to three spaces of indent still make a heading).
_HEADING = re.compile(r"^ {0,3}#{1,3}(?:\s|$)")
_BULLET = re.compile(r"^(?:[-*+]|\d{1,3}[.)])(?:\s+|$)")
#: The answer "nothing to keep", however a model dressed it (a list mark, emphasis, quotes,
#: underscores, a final period) and with a reason after a colon or a dash, if it gave one.
_NOTHING = re.compile(
    r"^\W*nothing[ _]+to[ _]+keep\b(?:\W*$|\s*[:.;,(\u2013\u2014-])", re.IGNORECASE
)


def _lines(text: str) -> list[str]:
    """A reply's lines that say something: no reasoning, code fences or blank lines."""
    return [
        line.rstrip()
        for line in _THINKING.sub("", text).splitlines()
        if line.strip() and not _FENCE.match(line)
    ]


def _says_nothing_to_keep(line: str) -> bool:
    """Whether *line* is the answer :data:`NOTHING_TO_KEEP`: ``- Nothing to keep.``,
    ``**NOTHING_TO_KEEP**``, ``NOTHING TO KEEP: small talk``."""
    return _NOTHING.match(line) is not None


def nothing_to_keep(text: str) -> bool:
    """Whether a model's reply says only that the exchange holds nothing to keep.

    A reply that also holds a bullet is bullets: :func:`clean_bullets` drops the stray line.
    """
    lines = _lines(text)
    return bool(lines) and all(_says_nothing_to_keep(line) for line in lines)


def clean_bullets(text: str) -> str:
    """A model's reply as bullets only: reasoning, code fences and any preamble before the first
    bullet dropped, top-level ``*``/``+``/numbered items turned into ``- `` bullets, blank lines
    and a stray :data:`NOTHING_TO_KEEP` dropped and ``#``/``##``/``###`` headings demoted to
    ``####``.

    A reply without any bullet keeps its lines, each made a bullet. An empty result means the
    model gave no usable text.
    """
    lines = [line for line in _lines(text) if not _says_nothing_to_keep(line)]
    first = next((i for i, line in enumerate(lines) if _BULLET.match(line)), None)
    if first is None:
        lines = [f"- {_plain(line)}" for line in lines if _plain(line)]
    else:
        lines = [_item(line) for line in lines[first:]]
    return "\n".join(line for line in lines if line).strip()


def _plain(line: str) -> str:
    """A line's words without heading marks."""
    return line.strip().lstrip("#").strip()


def _item(line: str) -> str:
    if _HEADING.match(line):
        title = _plain(line)
        return f"#### {title}" if title else ""
    bullet = _BULLET.match(line)
    if bullet is None:
        return line
    rest = line[bullet.end() :].strip()
    return f"- {rest}" if rest else ""
