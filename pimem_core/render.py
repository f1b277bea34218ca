"""Recall results as agents and people read them, shared by the CLI and host adapters."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from pimem_core.day_file import ANCHOR_LINE, without_anchors
from pimem_core.scores import own_relevance, shown_score, ties
from pimem_core.service_values import Redaction, Transcript
from pimem_core.types import (
    CONFIGURATION_RANK,
    RELEVANCE_THRESHOLD,
    CrossRepoResult,
    LegScore,
    Scope,
    SearchHit,
    Section,
    StatusSection,
)

#: What the heading of a list of hits says their score is (``SearchHit.score_kind``).
SCORE_NOTES = {
    "rank_fusion": "score = rank fusion, not relevance",
    "reranker": "score = a reranker's",
    "similarity": "score = similarity to the query",
    "relevance": "score = relevance from 0 to 1, comparable across searches",
}

#: What each hit's metadata line calls its score.
SCORE_LABELS = {
    "rank_fusion": "rank fusion",
    "reranker": "reranker",
    "similarity": "similarity",
    "relevance": "relevance",
}

#: A heading longer than this is left in the content rather than put on the metadata line,
#: which must stay one short line.
SHORT_HEADING = 40

#: The cosine between a query and a hit's best fact from which a hit below the relevance
#: threshold is still a close match in other words (the notice's second form). On the
#: benchmark's two 1,000-entry worlds no off-topic query's first hit reached it (at most
#: 0.2996, 0 of 120), while every right first hit below the threshold did (6 of 6, all
#: paraphrases) and so did 86 of the 90 answerable queries left below it (docs/recall.md).
CLOSE_COSINE = 0.30

#: The line ``--explain`` gives once when no hit carries per-leg scores.
NO_LEGS = "(this ranker reports no per-leg scores: each hit has only its score)"
#: ... and when only some do (a cross-repo search over projects ranked differently).
SOME_LEGS = "(hits without leg lines come from a ranker that reports no per-leg scores)"

_DAY_FILE = re.compile(r"(\d{4}-\d{2}-\d{2})\.md")
_TIME = re.compile(r"(?:[01]\d|2[0-3]):[0-5]\d")
_HEADING_LINE = re.compile(r"[ ]{0,3}#{1,6}[ \t]+(.*?)[ \t]*")


def _best_first(hits: Sequence[SearchHit]) -> str:
    kinds = {hit.score_kind for hit in hits}
    note = SCORE_NOTES.get(kinds.pop(), "") if len(kinds) == 1 else ""
    return f"best first ({note})" if note else "best first"


def _explain_note(hits: Sequence[SearchHit]) -> str | None:
    without = sum(1 for hit in hits if not hit.legs)
    if without == 0:
        return None
    return NO_LEGS if without == len(hits) else SOME_LEGS


def _cosine(hit: SearchHit) -> float | None:
    """The cosine of the query and *hit*'s best fact, when its ranker reports it."""
    return next((leg.score for leg in hit.legs if leg.name == "dense"), None)


def _close(number: int, hit: SearchHit) -> str | None:
    """Why hit *number*, below the threshold as listed, may still be about the query: it means
    nearly what the query asks in other words (:data:`CLOSE_COSINE`), or it reaches the
    threshold on its own and was lowered to the hit above it. ``None`` when neither."""
    own = own_relevance(hit)
    if own >= RELEVANCE_THRESHOLD:
        return f"hit {number} (relevance {shown_score(own)} on its own)"
    cosine = _cosine(hit)
    if cosine is not None and cosine >= CLOSE_COSINE:
        return f"hit {number} (cosine {shown_score(cosine)} to the query)"
    return None


def none_relevant(query: str, hits: Sequence[SearchHit]) -> str | None:
    """The line a list of hits opens with when every hit is scored by relevance and none
    reaches :data:`RELEVANCE_THRESHOLD`; ``None`` otherwise. Without it a reader takes the best
    of unrelated chunks for an answer. It has two forms: memory probably holds nothing, or it
    holds a close match in other words (:func:`_close`), which the reader should read before
    saying memory has nothing: a right paraphrase at rank 1 must not be called nothing."""
    if not hits or any(hit.score_kind != "relevance" for hit in hits):
        return None
    best = max(hit.score for hit in hits)
    if best >= RELEVANCE_THRESHOLD:
        return None
    below = (
        f"No hit reaches the relevance threshold of {RELEVANCE_THRESHOLD:.2f} (the best scores "
        f"{shown_score(best)})"
    )
    close = [why for number, hit in enumerate(hits, 1) if (why := _close(number, hit))]
    if close:
        which = close[0] if len(close) == 1 else ", ".join(close[:-1]) + " and " + close[-1]
        read = "it" if len(close) == 1 else "them"
        return (
            f'{below}, but memory holds a close match to "{query}", perhaps in other words: '
            f"{which}. Read {read} before you say memory has nothing, and answer from "
            f"{read} only if the text plainly does."
        )
    return (
        f'{below}: memory probably holds nothing about "{query}". The nearest chunks '
        "follow; do not answer from them unless their text plainly does."
    )


def render_hit_blocks(hits: Sequence[SearchHit], *, explain: bool = False) -> list[str]:
    """Each hit of a best-first list as :func:`render_hit_block` shows it, numbered from 1,
    a hit tied with the one above saying with which."""
    return [
        render_hit_block(number, hit, explain=explain, tied_with=tie)
        for (number, hit), tie in zip(enumerate(hits, 1), ties(hits), strict=True)
    ]


def render_hits(query: str, hits: Sequence[SearchHit], *, explain: bool = False) -> str:
    """L1 hits, best first, one short metadata line and the clean text each; the heading says
    what the score is (``SCORE_NOTES``), after a line saying none is relevant when none is
    (:func:`none_relevant`). *explain* adds each retriever's rank and score."""
    if not hits:
        return f'No memories found for "{query}".'
    heading = f"{len(hits)} memory chunk(s), {_best_first(hits)}:"
    note = _explain_note(hits) if explain else None
    blocks = render_hit_blocks(hits, explain=explain)
    irrelevant = none_relevant(query, hits)
    return "\n\n".join(
        [
            *([irrelevant] if irrelevant else []),
            heading if note is None else f"{heading}\n{note}",
            *blocks,
        ]
    )


def render_hit_block(
    number: int, hit: SearchHit, *, explain: bool = False, tied_with: int | None = None
) -> str:
    """One hit as the agent reads it: a metadata line (the day and time it was written, the
    score and what kind it is, ``tied with N`` when it shows the same score as hit *tied_with*
    above it, the chunk hash that chains into ``memory_expand``, and a cross-repo hit's project
    label), then its text without the session anchor, which only ``memory_expand`` shows. The
    path and lines are left to expand too: the agent cites dates."""
    day, heading = _day(hit.source), hit.heading.strip()
    shown = _shown_heading(heading, day)
    parts = [" ".join(part for part in (day, shown) if part)]
    score = f"{SCORE_LABELS.get(hit.score_kind, hit.score_kind)} {shown_score(hit.score)}"
    parts.append(score if tied_with is None else f"{score} (tied with {tied_with})")
    parts.append(f"chunk {hit.chunk_hash}")
    if hit.project is not None:
        parts.append(f"project {hit.project}")
    lines = [f"{number}. " + " | ".join(part for part in parts if part)]
    if explain:
        lines += [f"   {_leg(leg)}" for leg in hit.legs]
    # A heading the line already conveys (the time, a short heading, the day) is not repeated.
    covered = bool(shown) or (bool(day) and heading == day)
    text = _clean(hit.content, heading if covered else None)
    return "\n".join([*lines, text] if text else lines)


def _day(source: str) -> str:
    """The date of a daily memory file, from its name; ``""`` for any other file."""
    found = _DAY_FILE.fullmatch(Path(source).name)
    return found.group(1) if found else ""


def _shown_heading(heading: str, day: str) -> str:
    """What of a heading the metadata line shows: an entry's time, or a short heading that
    is not just the day again."""
    if _TIME.fullmatch(heading):
        return heading
    return heading if len(heading) <= SHORT_HEADING and heading != day else ""


def _clean(content: str, shown_heading: str | None) -> str:
    """*content* without its session anchor, and without its first line when that is the
    heading the metadata line already shows."""
    text = without_anchors(content).strip("\n")
    first, _, rest = text.partition("\n")
    heading = _HEADING_LINE.fullmatch(first)
    if shown_heading is not None and heading and heading.group(1) == shown_heading:
        text = rest
    return text.strip("\n")


def _leg(leg: LegScore) -> str:
    """One retriever's say on a hit, as ``--explain`` shows it."""
    rank = "not among its candidates" if leg.rank is None else f"rank {leg.rank}"
    score = "" if leg.score is None else f", score {leg.score:.3f}"
    return f"{leg.name}: {rank}{score}"


def render_cross_repo(query: str, result: CrossRepoResult, *, explain: bool = False) -> str:
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
    blocks = render_hit_blocks(result.hits, explain=explain)
    heading = f"{len(result.hits)} memory chunk(s), {account}, {_best_first(result.hits)}:"
    note = _explain_note(result.hits) if explain else None
    irrelevant = none_relevant(query, result.hits)
    return "\n\n".join(
        [
            *([irrelevant] if irrelevant else []),
            heading if note is None else f"{heading}\n{note}",
            *blocks,
            *notes,
        ]
    )


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
    """Every field of a hit: scripts get the whole content, anchor included, and the legs."""
    data: dict[str, object] = {
        "chunk_hash": hit.chunk_hash,
        "score": hit.score,
        "score_kind": hit.score_kind,
        "source": hit.source,
        "start_line": hit.start_line,
        "end_line": hit.end_line,
        "heading": hit.heading,
        "heading_level": hit.heading_level,
        "content": hit.content,
        "legs": [{"name": leg.name, "rank": leg.rank, "score": leg.score} for leg in hit.legs],
    }
    if hit.project is not None:
        data["project"] = str(hit.project)
    return data


#: What L2 says above the anchor of an entry whose transcript is not on this machine: a store
#: shared through git holds entries of sessions that ran on a teammate's machine.
TRANSCRIPT_ELSEWHERE = (
    "The session's transcript is not on this machine (it was recorded on another one, or the "
    "file moved since): the entry above is all that was kept of it."
)

#: What an anchor's transcript shows, after its file name, when it was recorded on another
#: machine: that machine's directories say nothing a reader here can use.
WRITTEN_ELSEWHERE = "written elsewhere"

#: A session anchor as any mesh agent writes it, its fields as ``key:value`` words: pimem's and
#: Claude Code's ``session: turn: transcript:``, Codex's ``session: rollout:``, OpenCode's
#: ``session: db:``; a field may be empty (Claude Code's ``turn:`` before its first turn).
_ANY_ANCHOR = re.compile(r"^[ \t]*<!--\s*(session:.*?)\s*-->[ \t]*(?:\n|$)", re.MULTILINE)
_FIELD = re.compile(r"([A-Za-z_]+):(\S*)")


def shown_path(path: str | Path, project: Path | None = None) -> str:
    """*path* as a reader should see it: relative to *project* when it lies inside it, else
    under ``~`` when it lies in the home directory, else as it is. Absolute paths fill a line
    with what the reader already knows; ``memory_transcript`` takes the ``~`` form back."""
    given = Path(path)
    for candidate in (given, Path(os.path.realpath(given))):
        if project is not None:
            for root in (project, Path(os.path.realpath(project))):
                if candidate != root and candidate.is_relative_to(root):
                    return candidate.relative_to(root).as_posix()
        home = Path.home()
        for root in (home, Path(os.path.realpath(home))):
            if candidate != root and candidate.is_relative_to(root):
                return "~/" + candidate.relative_to(root).as_posix()
    return str(given)


def shown_transcript(path: str, project: Path | None = None, *, here: bool | None = None) -> str:
    """An anchor's transcript as L2 shows it: as :func:`shown_path` does when it is on this
    machine (*here*; looked up when ``None``) or lies under this project or home; else, an
    absolute path of another machine, its file name and ``(written elsewhere)``."""
    if here is None:
        here = os.path.exists(path)
    shown = shown_path(path, project)
    if here or not os.path.isabs(path) or shown != str(Path(path)):
        return shown
    return f"{Path(path).name} ({WRITTEN_ELSEWHERE})"


def _anchor_lines(comment: str, project: Path | None) -> list[str]:
    """The lines L2 shows for an anchor pimem does not read as its own (another agent's form):
    its ids on one line, each absolute path on its own, shown as :func:`shown_transcript`
    shows a transcript."""
    fields = [(key, value) for key, value in _FIELD.findall(comment) if value]
    ids = [f"{key}: {value}" for key, value in fields if not os.path.isabs(value)]
    paths = [
        f"{key}: {shown_transcript(value, project)}"
        for key, value in fields
        if os.path.isabs(value)
    ]
    return [" | ".join(ids), *paths] if ids else paths


def render_section(
    section: Section, *, transcript_here: bool = True, project: Path | None = None
) -> str:
    """L2: the section behind a chunk under one line naming its file, lines and heading, and,
    when it is anchored, its session anchor once, at the end: ``session: <id> | turn: <id>``
    and ``transcript: <path>``, after a line saying so when the transcript is not on this
    machine (not *transcript_here*). The anchor comment and a first line repeating the heading
    are left out of the text, and paths are shown relative to *project* or ``~``
    (:func:`shown_path`), another machine's transcript as its file name, ``written
    elsewhere`` (:func:`shown_transcript`): three lines of metadata at most. An anchor in
    another agent's form is shown the same way, field by field."""
    text = f"{shown_path(section.source, project)}:{section.start_line}-{section.end_line}"
    text += f" | {section.heading}\n\n"
    other = None if section.anchor else _ANY_ANCHOR.search(section.content)
    anchored = section.anchor is not None or other is not None
    content = ANCHOR_LINE.sub("", section.content, count=1) if anchored else section.content
    text += _clean_heading(content, section.heading.strip())
    if section.anchor is not None:
        text += "\n\n" if transcript_here else f"\n\n{TRANSCRIPT_ELSEWHERE}\n"
        shown = shown_transcript(section.anchor.transcript, project, here=transcript_here)
        text += (
            f"session: {section.anchor.session} | turn: {section.anchor.turn}\ntranscript: {shown}"
        )
    elif other is not None and (lines := _anchor_lines(other.group(1), project)):
        text += "\n\n" + "\n".join(lines)
    return text


def _clean_heading(content: str, heading: str) -> str:
    """*content* without its first line when that is a markdown heading saying *heading*."""
    text = content.strip("\n")
    first, _, rest = text.partition("\n")
    found = _HEADING_LINE.fullmatch(first)
    return rest.strip("\n") if found and found.group(1) == heading else text


def section_to_json(section: Section, *, transcript_here: bool = True) -> dict[str, object]:
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
        "transcript_on_this_machine": None if anchor is None else transcript_here,
    }


def render_redaction(redaction: Redaction) -> str:
    gone = " (it held nothing else, so the file was deleted)" if redaction.deleted else ""
    return (
        f"Forgot a memory {redaction.kind} in {redaction.file}{gone}. "
        f"No other copy is kept; this was it:\n\n{redaction.removed}"
    )


def render_redacted(found: Sequence[tuple[str, int]]) -> str:
    """What a write says when it took secrets out: how many of which kinds and the
    placeholders that stand in for them, never the secret."""
    total = sum(count for _, count in found)
    kinds = ", ".join(f"{count} {name}" for name, count in found)
    held = _placeholders(found)
    secrets = "a secret" if total == 1 else f"{total} secrets"
    return (
        f"Redacted {secrets} before saving ({kinds}): the entry holds {held} in "
        f"{'its' if total == 1 else 'their'} place, and memory keeps no copy."
    )


def render_captured_redaction(found: Sequence[tuple[str, int]]) -> str:
    """What the user is told when capture took secrets out of an exchange before distilling
    it: how many of which kinds, and the placeholders memory holds instead."""
    total = sum(count for _, count in found)
    kinds = ", ".join(f"{count} {name}" for name, count in found)
    secrets = "a secret" if total == 1 else f"{total} secrets"
    return (
        f"redacted {secrets} from a captured exchange ({kinds}) before distilling it: memory "
        f"holds {_placeholders(found)} in {'its' if total == 1 else 'their'} place, never the "
        "secret."
    )


def _placeholders(found: Sequence[tuple[str, int]]) -> str:
    shown = [f"[REDACTED:{name}]" for name, _ in found]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"


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
    # Health first: what the TUI shows of a long answer is its start.
    before = [s for s in sections if s.rank < CONFIGURATION_RANK]
    after = [s for s in sections if s.rank >= CONFIGURATION_RANK]
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
        "on_this_machine": True,
    }


def render_transcript_elsewhere(path: Path) -> str:
    """L3 for a transcript that is not on this machine: an answer, not a failure."""
    return (
        f"The transcript {path} is not on this machine: the session was recorded on another "
        "one (its entries came with the memory store), or the file moved since. The entry that "
        "names it is all that was kept of that session."
    )


def transcript_elsewhere_to_json(path: Path) -> dict[str, object]:
    return {"path": str(path), "turns": [], "on_this_machine": False}
