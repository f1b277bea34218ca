"""Recall results as agents and people read them, shared by the CLI and host adapters."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pimem_core.types import (
    CrossRepoResult,
    Redaction,
    Scope,
    SearchHit,
    Section,
    StatusSection,
    Transcript,
)

#: What the heading of a list of hits says their score is (``SearchHit.score_kind``).
SCORE_NOTES = {
    "rank_fusion": "score = rank fusion, not relevance",
    "reranker": "score = memsearch's reranker",
    "similarity": "score = similarity to the query",
}


def _best_first(hits: Sequence[SearchHit]) -> str:
    kinds = {hit.score_kind for hit in hits}
    note = SCORE_NOTES.get(kinds.pop(), "") if len(kinds) == 1 else ""
    return f"best first ({note})" if note else "best first"


def render_hits(query: str, hits: Sequence[SearchHit]) -> str:
    """L1 hits, best first. Scores are memsearch's normalised rank fusion: they rank, they do
    not measure relevance (``SearchHit.score_kind``), and the heading says so."""
    if not hits:
        return f'No memories found for "{query}".'
    blocks = [render_hit_block(number, hit) for number, hit in enumerate(hits, 1)]
    return f"{len(hits)} memory chunk(s), {_best_first(hits)}:\n\n" + "\n\n".join(blocks)


def render_hit_block(number: int, hit: SearchHit) -> str:
    """One hit as the agent reads it; the chunk hash chains into ``memory_expand``. A hit
    scored by similarity (auto-context) says ``similarity`` where the others say ``score``."""
    origin = f" | {hit.project}" if hit.project is not None else ""
    measure = "similarity" if hit.score_kind == "similarity" else "score"
    return (
        f"{number}. {measure} {hit.score:.3f} | chunk {hit.chunk_hash}{origin} | "
        f"{hit.source}:{hit.start_line}-{hit.end_line}\n{hit.content}"
    )


def render_cross_repo(query: str, result: CrossRepoResult) -> str:
    """Cross-repo L1: the hits with their project labels, what was searched, and what was not."""
    searched = len(result.searched)
    account = f"{searched} project{'' if searched == 1 else 's'} searched, "
    account += f"{len(result.skipped)} skipped"
    if result.collapsed:
        account += f", {len(result.collapsed)} collapsed"
    notes = []
    if result.skipped:
        notes.append(f"skipped, never indexed on this machine: {_paths(result.skipped)}")
    if result.collapsed:
        notes.append(
            f"collapsed, sharing the collection of a project searched before: "
            f"{_paths(result.collapsed)}"
        )
    if not result.hits:
        return "\n".join([f'No memories found for "{query}" across {account}.', *notes])
    blocks = [render_hit_block(number, hit) for number, hit in enumerate(result.hits, 1)]
    heading = f"{len(result.hits)} memory chunk(s), {account}, {_best_first(result.hits)}:"
    return "\n\n".join([heading, *blocks, *notes])


def _paths(paths: Sequence[Path]) -> str:
    return ", ".join(str(path) for path in paths)


def cross_repo_to_json(result: CrossRepoResult) -> dict[str, object]:
    return {
        "hits": [hit_to_json(hit) for hit in result.hits],
        "searched": [str(path) for path in result.searched],
        "skipped": [str(path) for path in result.skipped],
        "collapsed": [str(path) for path in result.collapsed],
    }


def hit_to_json(hit: SearchHit) -> dict[str, object]:
    data: dict[str, object] = {
        "chunk_hash": hit.chunk_hash,
        "score": hit.score,
        "score_kind": hit.score_kind,
        "source": hit.source,
        "start_line": hit.start_line,
        "end_line": hit.end_line,
        "heading": hit.heading,
        "content": hit.content,
    }
    if hit.project is not None:
        data["project"] = str(hit.project)
    return data


def render_section(section: Section) -> str:
    """L2: the section behind a chunk and, when it is anchored, its session anchor: one line
    each for the session, the turn and the transcript, named as in the anchor comment."""
    text = f"{section.source}:{section.start_line}-{section.end_line} | {section.heading}\n\n"
    text += section.content
    if section.anchor is not None:
        text += (
            f"\n\nsession: {section.anchor.session}\nturn: {section.anchor.turn}"
            f"\ntranscript: {section.anchor.transcript}"
        )
    return text


def section_to_json(section: Section) -> dict[str, object]:
    anchor = section.anchor
    return {
        "chunk_hash": section.chunk_hash,
        "source": section.source,
        "heading": section.heading,
        "start_line": section.start_line,
        "end_line": section.end_line,
        "content": section.content,
        "anchor": None
        if anchor is None
        else {"session": anchor.session, "turn": anchor.turn, "transcript": anchor.transcript},
    }


def render_redaction(redaction: Redaction) -> str:
    gone = " (it held nothing else, so the file was deleted)" if redaction.deleted else ""
    return (
        f"Forgot a memory {redaction.kind} in {redaction.file}{gone}. "
        f"No other copy is kept; this was it:\n\n{redaction.removed}"
    )


def redaction_to_json(redaction: Redaction) -> dict[str, object]:
    return {
        "file": str(redaction.file),
        "removed": redaction.removed,
        "deleted": redaction.deleted,
        "kind": redaction.kind,
    }


def render_status(scope: Scope, sections: Sequence[StatusSection]) -> str:
    lines = [
        f"scope: {scope.scope_dir}",
        f"store: {scope.memory_dir}",
        f"collection: {scope.collection}",
    ]
    if scope.store_command is not None:
        lines.append(f"store command: {scope.store_command}")
    before = [s for s in sections if s.rank < 20]
    after = [s for s in sections if s.rank >= 20]
    return "\n".join(
        [
            *(line for s in before for line in s.lines),
            *lines,
            *(line for s in after for line in s.lines),
        ]
    )


def status_to_json(scope: Scope, sections: Sequence[StatusSection]) -> dict[str, object]:
    return {"scope": scope.to_json(), **{section.name: dict(section.data) for section in sections}}


def render_transcript(transcript: Transcript) -> str:
    """L3: one ``[User] HH:MM`` or ``[Assistant] HH:MM`` block per turn, the anchored turn
    marked ``(target)``, blocks separated by a blank line."""
    return "\n\n".join(
        f"[{turn.role.capitalize()}] {turn.time}{' (target)' if turn.target else ''}\n{turn.body}"
        for turn in transcript.turns
    )


def transcript_to_json(transcript: Transcript) -> dict[str, object]:
    return {
        "path": str(transcript.path),
        "turns": [
            {"role": turn.role, "time": turn.time, "body": turn.body, "target": turn.target}
            for turn in transcript.turns
        ],
    }
