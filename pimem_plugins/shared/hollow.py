"""Hollow entries: entries of a daily memory file that hold nothing to recall.

Every agent of the mesh appends to the same day files, and not everything appended is memory.
An entry is **hollow** when, its heading, its session anchor (any HTML comment) and its empty
bullets aside, what is left is:

- nothing at all (``blank``): a bare heading, a heading and its anchor, bullets with no words;
- only failure text (``failure marker``): what an agent wrote in place of a distillation when
  the model call failed. memsearch's Claude Code plugin appends whatever ``claude -p`` printed,
  so a failed call leaves "Prompt is too long", "API Error: 529 {...}", "Request timed out.",
  "Invalid API key · Please run /login", "Credit balance is too low", "Claude AI usage limit
  reached|...", "(no content)" and the like; pimem's own capture leaves "- [pimem] this exchange
  could not be distilled: <why>". Each line must *be* such a message (the phrase, then the end
  of the line or punctuation), so a bullet that talks about an error ("- Fixed the 'Prompt is
  too long' failure by trimming the transcript") is memory, not a marker.

Why it matters: a store another agent wrote can be mostly markers (17 of 18 entries of a real
day file were "Prompt is too long"). The snapshot leaves hollow entries out, search ranks them
below every other entry and ``pimem status`` counts them. They stay in the file: they are the
trace that an exchange happened, and its anchor still leads to the transcript.
"""

from __future__ import annotations

import re
from typing import Literal

import attrs

from pimem_core.plugin import (
    DayText,
)

HollowKind = Literal["blank", "failure marker"]

_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_HEADING = re.compile(r"^\s{0,3}#{1,6}(?:\s|$)")
#: A list item with no words: ``-``, ``- ``, ``*``, ``1.``, ``- [ ]``.
_EMPTY_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])(?:\s+\[[ xX]?\])?\s*$")
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
#: What may follow a failure message's phrase: the end, or punctuation opening its details.
_END = r"(?:\s*$|\s*[.:;,!·•∙|(\[{\-\u2013\u2014])"
#: The failure messages agents write in place of memory, each matched from a line's start.
_FAILURE = re.compile(
    r"(?:error:\s*)?(?:"
    + "|".join(
        (
            rf"prompt is too long{_END}",
            rf"api error{_END}",
            rf"request timed out{_END}",
            rf"invalid api key{_END}",
            rf"not logged in{_END}",
            rf"(?:your )?credit balance is too low(?:{_END}|\s+to access\b)",
            rf"(?:claude (?:ai )?)?usage limit reached{_END}",
            rf"\d+-hour limit reached{_END}",
            rf"you(?:'|\u2019)?ve (?:hit|reached) your (?:[\w-]+ ){{0,3}}limit{_END}",
            rf"rate limit(?:ed| reached| exceeded){_END}",
            rf"too many requests{_END}",
            rf"overloaded(?:_error)?{_END}",
            rf"oauth token (?:has expired|(?:was |has been )?revoked|is invalid){_END}",
            rf"execution error{_END}",
            rf"reached max(?:imum)? turns{_END}",
            rf"\(no content\){_END}",
            rf"stream disconnected before completion{_END}",
            r"this model's maximum context length is \d+",
            # pimem's capture (pimem_core.runtime.capture.marker): the anchor is the trace.
            rf"\[pimem\] this exchange could not be distilled{_END}",
        )
    )
    + ")",
    re.IGNORECASE,
)


def hollow_kind(text: str) -> HollowKind | None:
    """What makes *text* (an entry, a block or a chunk as the file has it) hollow, or ``None``
    when it holds memory: ``blank`` when nothing is left of it but headings, comments and empty
    bullets, ``failure marker`` when every line left is an agent's failure message."""
    said = False
    for line in _COMMENT.sub("", text).splitlines():
        if not line.strip() or _HEADING.match(line) or _EMPTY_BULLET.match(line):
            continue
        # One line of memory is enough: most entries are decided on their first line.
        if not _FAILURE.match(_BULLET.sub("", line.strip(), count=1)):
            return None
        said = True
    return "failure marker" if said else "blank"


def is_hollow(text: str) -> bool:
    """Whether *text* holds nothing to recall (:func:`hollow_kind`)."""
    return hollow_kind(text) is not None


def without_empty_bullets(text: str) -> str:
    """*text* without its list items that have no words: they say nothing to a reader."""
    return "\n".join(line for line in text.split("\n") if not _EMPTY_BULLET.match(line))


@attrs.frozen(kw_only=True)
class HollowCount:
    """The entries of some day files (``### HH:MM`` headings, as the vocabulary defines them)
    and how many of them are hollow, by kind."""

    entries: int = 0
    failure_markers: int = 0
    blank: int = 0

    @property
    def hollow(self) -> int:
        return self.failure_markers + self.blank

    def __add__(self, other: HollowCount) -> HollowCount:
        return HollowCount(
            entries=self.entries + other.entries,
            failure_markers=self.failure_markers + other.failure_markers,
            blank=self.blank + other.blank,
        )


def count_hollow(day_file: str) -> HollowCount:
    """The entries of one daily memory file's text, and its hollow ones."""
    kinds = [hollow_kind(entry.text) for entry in DayText(day_file).entries()]
    return HollowCount(
        entries=len(kinds),
        failure_markers=kinds.count("failure marker"),
        blank=kinds.count("blank"),
    )
