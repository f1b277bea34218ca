"""A search's text read back hit by hit, as an agent is shown it (part of
:mod:`pimem_core.testing`): for tests of what a host adapter or an end-to-end run shows."""

from __future__ import annotations

import re

import attrs


@attrs.frozen(kw_only=True)
class ShownHit:
    """One hit of a search's text, as the agent reads it (:func:`read_hits`)."""

    number: int
    #: The day its daily memory file is named for; ``None`` for another file.
    day: str | None
    #: Its entry's time, or its heading when that is short; ``None`` when none is shown.
    heading: str | None
    #: What the line calls the score: ``relevance``, ``rank fusion``, ``similarity``...
    score_label: str
    score: float
    chunk_hash: str
    project: str | None
    #: The ``--explain`` lines, one per leg, as shown (``dense: rank 1, score 0.712``).
    legs: tuple[str, ...]
    #: The text under the line: the chunk without its anchor and its repeated heading.
    content: str
    #: The hit above it this one shows the same score as (``(tied with 1)``), if any.
    tied_with: int | None = None


_HIT_LINE = re.compile(
    r"^(?P<number>\d+)\. (?:(?P<when>[^|\n]+?) \| )?(?P<label>[a-z][a-z ]*?) "
    r"(?P<score>-?\d+\.\d+)(?: \(tied with (?P<tied>\d+)\))? \| chunk (?P<hash>[0-9a-f]+)"
    r"(?: \| project (?P<project>[^\n]+))?$",
    re.MULTILINE,
)
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_LEG_LINE = re.compile(r"   \S[^\n]*: (?:rank \d+|not among its candidates)[^\n]*")
# What cross-repo recall says after its last hit is an account of the search, not content.
_ACCOUNT = re.compile(r"\n\n(?:skipped, never indexed|collapsed, sharing the collection)")


def read_hits(text: str) -> tuple[ShownHit, ...]:
    """The hits of a search's text, best first: each metadata line read into its fields and
    the lines under it, up to the next hit, as its content."""
    found = list(_HIT_LINE.finditer(text))
    hits = []
    # Each hit's block ends where the next starts; the last one's at the end of the text.
    ends: list[re.Match[str] | None] = [*found[1:], None] if found else []
    for match, after in zip(found, ends, strict=True):
        block = text[match.end() : after.start() if after else len(text)]
        account = _ACCOUNT.search(block)
        lines = block[: account.start() if account else len(block)].strip("\n").split("\n")
        legs = []
        while lines and _LEG_LINE.fullmatch(lines[0]):
            legs.append(lines.pop(0).strip())
        day, _, heading = (match["when"] or "").partition(" ")
        if not _DAY.fullmatch(day):
            day, heading = "", match["when"] or ""
        hits.append(
            ShownHit(
                number=int(match["number"]),
                day=day or None,
                heading=heading or None,
                score_label=match["label"],
                score=float(match["score"]),
                chunk_hash=match["hash"],
                project=match["project"],
                legs=tuple(legs),
                content="\n".join(lines).strip("\n"),
                tied_with=int(match["tied"]) if match["tied"] else None,
            )
        )
    return tuple(hits)
