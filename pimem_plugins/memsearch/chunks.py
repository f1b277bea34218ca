"""memsearch's chunks as pimem hands them out: search hits, the section around a chunk, and
the anchor that leads from it back to its transcript."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pimem_core.plugin import (
    Anchor,
    DayText,
    PimemError,
    SearchHit,
    Section,
)

#: What a memsearch hit's score is: its hybrid search's (rank fusion, or its reranker's) or
#: the vector similarity of a search by meaning.
ScoreKind = Literal["rank_fusion", "reranker", "similarity"]
CHUNK_HASH = re.compile(r"[0-9a-f]{16}")
_HEADING = re.compile(r"^(#{1,6})\s+(.+)$")


def extract_section(lines: list[str], start_line: int, level: int) -> tuple[str, int, int]:
    """The section around a chunk, as memsearch's expand shows it: from the chunk's heading
    to the next heading of the same or a higher level, without the blank lines that end it.
    Lines are 1-based and inclusive in the result, as in a hit's range."""
    start = start_line - 1
    end = len(lines)
    if level > 0:
        for i in range(min(start_line, len(lines)) - 1, -1, -1):
            match = _HEADING.match(lines[i])
            if match and len(match.group(1)) <= level:
                start = i
                break
        for i in range(start_line, len(lines)):
            match = _HEADING.match(lines[i])
            if match and len(match.group(1)) <= level:
                end = i
                break
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return "\n".join(lines[start:end]), start + 1, end


def section_of(chunk_hash: str, chunk: Mapping[str, Any]) -> Section:
    """The L2 section around *chunk* (memsearch's fields), read from its file now."""
    source = Path(str(chunk["source"]))
    try:
        text = source.read_text(encoding="utf-8", errors="replace")
    except OSError:
        raise PimemError(
            f"chunk {chunk_hash} points at {source}, which no longer exists (reindex pending)"
        ) from None
    content, start, end = extract_section(
        DayText(text).blank_conflicts().splitlines(),
        int(chunk["start_line"]),
        int(chunk.get("heading_level", 0)),
    )
    return Section(
        chunk_hash=chunk_hash,
        source=str(source),
        heading=str(chunk.get("heading", "")),
        start_line=start,
        end_line=end,
        content=content,
        anchor=Anchor.parse(content),
    )


def text_end_line(start_line: int, end_line: int, content: str) -> int:
    """The last line of a chunk's own text, which a hit names (the line expand's range ends on
    too): memsearch's ``end_line`` counts the blank lines after the text (and, at the end of a
    file, the empty line after its last newline)."""
    return max(start_line, min(end_line, start_line + content.count("\n")))


def search_hit(result: dict[str, Any], score_kind: ScoreKind = "rank_fusion") -> SearchHit:
    """A memsearch result as a hit, ending on its text's own last line (:func:`text_end_line`)."""
    content = str(result["content"])
    start = int(result["start_line"])
    return SearchHit(
        chunk_hash=str(result["chunk_hash"]),
        # Another agent may have indexed a conflicted file markers and all.
        content=DayText(content).without_marker_lines(),
        source=str(result["source"]),
        heading=str(result.get("heading", "")),
        heading_level=int(result.get("heading_level", 0)),
        start_line=start,
        end_line=text_end_line(start, int(result["end_line"]), content),
        score=float(result["score"]),
        score_kind=score_kind,
    )
