"""How recall results read: each hit one short metadata line (day, time, score and its kind,
chunk hash, project) and its text without the session anchor, which only expand shows; the
JSON keeps every field; ``--explain`` adds one line per leg."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from pimem_core.render import (
    NO_LEGS,
    SOME_LEGS,
    cross_repo_to_json,
    hit_to_json,
    none_relevant,
    render_cross_repo,
    render_hit_block,
    render_hits,
    render_section,
    section_to_json,
    shown_path,
)
from pimem_core.testing import read_hits
from pimem_core.types import Anchor, CrossRepoResult, LegScore, ScoreKind, SearchHit, Section

DAY_FILE = "/home/user/repo/.memsearch/memory/2026-08-13.md"
TRANSCRIPT = "/home/user/.pi/agent/sessions/--home-user-repo--/2026-08-13T22-41-07_3f2c9b1e.jsonl"
ANCHOR = f"<!-- session:3f2c9b1e turn:ab12cd34 transcript:{TRANSCRIPT} -->"
ENTRY = (
    f"### 22:41\n{ANCHOR}\n- chose Redis for the hot cache\n- Postgres stays the source of truth"
)
LEGS = (
    LegScore(name="dense", rank=1, score=0.7123),
    LegScore(name="lexical", rank=None, score=None),
    LegScore(name="fused", rank=2, score=-0.25),
)


def hit(
    content: str = ENTRY,
    *,
    source: str = DAY_FILE,
    heading: str = "22:41",
    score: float = 0.8712,
    score_kind: ScoreKind = "relevance",
    legs: tuple[LegScore, ...] = (),
    project: Path | None = None,
    chunk_hash: str = "0123456789abcdef",
) -> SearchHit:
    return SearchHit(
        chunk_hash=chunk_hash,
        content=content,
        source=source,
        heading=heading,
        heading_level=3,
        start_line=4,
        end_line=7,
        score=score,
        score_kind=score_kind,
        legs=legs,
        project=project,
    )


def test_a_hit_is_one_short_line_then_its_text_without_anchor_or_repeated_heading() -> None:
    compact = hit(
        "## Memory Compact 09:30\n- the login loop came from a stale cookie domain",
        source="/home/user/repo/.memsearch/memory/2026-08-12.md",
        heading="Memory Compact 09:30",
        score=0.41,
        chunk_hash="fedcba9876543210",
    )
    assert render_hits("which cache", [hit(), compact]) == (
        "2 memory chunk(s), best first (score = relevance from 0 to 1, comparable across "
        "searches):\n\n"
        "1. 2026-08-13 22:41 | relevance 0.87 | chunk 0123456789abcdef\n"
        "- chose Redis for the hot cache\n- Postgres stays the source of truth\n\n"
        "2. 2026-08-12 Memory Compact 09:30 | relevance 0.41 | chunk fedcba9876543210\n"
        "- the login loop came from a stale cookie domain"
    )


def test_memsearchs_ranker_says_its_score_is_rank_fusion() -> None:
    text = render_hits("q", [hit(score=1.0, score_kind="rank_fusion")])
    assert text.startswith("1 memory chunk(s), best first (score = rank fusion, not relevance):")
    assert "\n\n1. 2026-08-13 22:41 | rank fusion 1.00 | chunk 0123456789abcdef\n" in text


def test_auto_context_hits_say_similarity() -> None:
    block = render_hit_block(1, hit(score=0.9, score_kind="similarity"))
    assert block.splitlines()[0] == "1. 2026-08-13 22:41 | similarity 0.90 | chunk 0123456789abcdef"


def test_a_file_that_is_not_a_day_file_has_no_date_and_a_long_heading_stays_in_the_text() -> None:
    title = "Why the ledger moved off MySQL, and what it cost us in the end"
    notes = hit(f"## {title}\n- replication lag", source="/repo/memory/notes.md", heading=title)
    assert render_hit_block(3, notes) == (
        f"3. relevance 0.87 | chunk 0123456789abcdef\n## {title}\n- replication lag"
    )


def test_a_short_heading_that_is_not_a_time_is_shown_and_not_repeated() -> None:
    block = render_hit_block(1, hit("## Session 22:41\n- started", heading="Session 22:41"))
    assert (
        block == "1. 2026-08-13 Session 22:41 | relevance 0.87 | chunk 0123456789abcdef\n- started"
    )


def test_a_chunk_cut_from_a_long_entry_keeps_its_first_line() -> None:
    """memsearch splits a long section; its later parts do not start with the heading."""
    part = hit("- the second half of a long entry\n- more", heading="22:41")
    assert (
        render_hit_block(2, part).split("\n", 1)[1] == "- the second half of a long entry\n- more"
    )


def test_a_cross_repo_hit_ends_its_line_with_the_project_label(tmp_path: Path) -> None:
    alpha = tmp_path / "alpha"
    result = CrossRepoResult(
        hits=(hit(score=1.0, score_kind="rank_fusion", project=alpha),),
        searched=(tmp_path / "repo", alpha),
    )
    text = render_cross_repo("q", result)
    assert (
        f"\n\n1. 2026-08-13 22:41 | rank fusion 1.00 | chunk 0123456789abcdef | project {alpha}\n"
        in text
    )
    (shown,) = read_hits(text)
    assert (shown.project, shown.chunk_hash) == (str(alpha), "0123456789abcdef")
    assert cross_repo_to_json(result)["hits"] == [hit_to_json(result.hits[0])]


def test_explain_gives_one_line_per_leg_after_the_hits_line() -> None:
    text = render_hits("which cache", [hit(legs=LEGS)], explain=True)
    assert text.split("\n\n", 1)[1] == (
        "1. 2026-08-13 22:41 | relevance 0.87 | chunk 0123456789abcdef\n"
        "   dense: rank 1, score 0.712\n"
        "   lexical: not among its candidates\n"
        "   fused: rank 2, score -0.250\n"
        "- chose Redis for the hot cache\n- Postgres stays the source of truth"
    )
    (shown,) = read_hits(text)
    assert shown.legs == (
        "dense: rank 1, score 0.712",
        "lexical: not among its candidates",
        "fused: rank 2, score -0.250",
    )
    assert shown.content == "- chose Redis for the hot cache\n- Postgres stays the source of truth"
    # Without --explain the legs stay out of the text.
    assert "dense" not in render_hits("which cache", [hit(legs=LEGS)])


def test_explain_says_once_when_the_ranker_reports_no_legs() -> None:
    hits = [hit(score_kind="rank_fusion"), hit(score_kind="rank_fusion", chunk_hash="1" * 16)]
    text = render_hits("q", hits, explain=True)
    assert text.count(NO_LEGS) == 1
    assert text.splitlines()[:2] == [
        "2 memory chunk(s), best first (score = rank fusion, not relevance):",
        NO_LEGS,
    ]
    mixed = render_hits("q", [hit(legs=LEGS), hit(chunk_hash="1" * 16)], explain=True)
    assert mixed.splitlines()[1] == SOME_LEGS
    assert NO_LEGS not in render_hits("q", [hit(legs=LEGS)], explain=True)
    assert NO_LEGS not in render_hits("q", hits)


def test_the_json_keeps_every_field_the_anchor_and_the_legs() -> None:
    data = json.loads(json.dumps(hit_to_json(hit(legs=LEGS))))
    assert data == {
        "chunk_hash": "0123456789abcdef",
        "score": 0.8712,
        "score_kind": "relevance",
        "source": DAY_FILE,
        "start_line": 4,
        "end_line": 7,
        "heading": "22:41",
        "heading_level": 3,
        "content": ENTRY,
        "legs": [
            {"name": "dense", "rank": 1, "score": 0.7123},
            {"name": "lexical", "rank": None, "score": None},
            {"name": "fused", "rank": 2, "score": -0.25},
        ],
    }
    assert hit_to_json(hit())["legs"] == []


def anchored_section(source: str = DAY_FILE, transcript: str = TRANSCRIPT) -> Section:
    return Section(
        chunk_hash="0123456789abcdef",
        source=source,
        heading="22:41",
        start_line=4,
        end_line=7,
        content=ENTRY.replace(TRANSCRIPT, transcript),
        anchor=Anchor(session="3f2c9b1e", turn="ab12cd34", transcript=transcript),
    )


BULLETS = "- chose Redis for the hot cache\n- Postgres stays the source of truth"


def test_expand_shows_the_anchor_once_with_paths_relative_to_the_project_or_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three lines of metadata: the file and lines, then the anchor's session and turn, then
    its transcript; the anchor comment and the repeated heading are left out of the text."""
    home, project = tmp_path / "home", tmp_path / "home" / "repo"
    monkeypatch.setenv("HOME", str(home))
    source = project / ".memsearch" / "memory" / "2026-08-13.md"
    transcript = home / ".pi" / "agent" / "sessions" / "s.jsonl"
    text = render_section(anchored_section(str(source), str(transcript)), project=project)
    assert text == (
        f".memsearch/memory/2026-08-13.md:4-7 | 22:41\n\n{BULLETS}\n\n"
        "session: 3f2c9b1e | turn: ab12cd34\ntranscript: ~/.pi/agent/sessions/s.jsonl"
    )
    metadata = [line for line in text.splitlines() if line and not line.startswith("- ")]
    assert len(metadata) == 3
    # Outside the project and the home directory a path stays whole; the JSON keeps them whole.
    elsewhere = render_section(anchored_section(), project=project)
    assert elsewhere.startswith(f"{DAY_FILE}:4-7 | 22:41\n\n")
    assert elsewhere.endswith(f"\ntranscript: {TRANSCRIPT}")
    data = section_to_json(anchored_section(str(source), str(transcript)))
    assert data["source"] == str(source)
    assert data["anchor"] == {
        "session": "3f2c9b1e",
        "turn": "ab12cd34",
        "transcript": str(transcript),
    }


def test_shown_path_prefers_the_project_then_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    project = tmp_path / "repo"
    assert shown_path(project / "a" / "b.md", project) == "a/b.md"
    assert shown_path(tmp_path / "other" / "c.md", project) == "~/other/c.md"
    assert shown_path("/elsewhere/d.md", project) == "/elsewhere/d.md"
    assert shown_path(tmp_path / "e.md") == "~/e.md"


def test_expand_says_when_the_transcript_is_not_on_this_machine() -> None:
    """A teammate's entry, pulled: the line above the anchor says the entry is all there is,
    and the anchor stays last, its transcript named by its file, written elsewhere (the
    teammate's directories mean nothing here); the JSON keeps the path whole."""
    section = anchored_section()
    assert render_section(section, transcript_here=False) == (
        f"{DAY_FILE}:4-7 | 22:41\n\n{BULLETS}\n\n"
        "The session's transcript is not on this machine (it was recorded on another one, or "
        "the file moved since): the entry above is all that was kept of it.\n"
        "session: 3f2c9b1e | turn: ab12cd34\n"
        "transcript: 2026-08-13T22-41-07_3f2c9b1e.jsonl (written elsewhere)"
    )
    assert section_to_json(section, transcript_here=False)["anchor"] == {
        "session": "3f2c9b1e",
        "turn": "ab12cd34",
        "transcript": TRANSCRIPT,
    }
    assert section_to_json(section, transcript_here=False)["transcript_on_this_machine"] is False
    unanchored = attrs.evolve(section, anchor=None)
    assert section_to_json(unanchored)["transcript_on_this_machine"] is None


def test_expand_without_an_anchor_shows_the_text_as_it_is() -> None:
    section = attrs.evolve(anchored_section(), content="## Memory Compact 09:30\n- a", anchor=None)
    section = attrs.evolve(section, heading="Memory Compact 09:30")
    assert render_section(section) == f"{DAY_FILE}:4-7 | Memory Compact 09:30\n\n- a"


# -- a search nothing in memory answers ------------------------------------------------------


def test_a_list_no_hit_of_which_is_relevant_says_so_first() -> None:
    hits = [hit(score=0.04), hit(score=0.297, chunk_hash="1" * 16)]
    text = render_hits("the kubernetes ingress config", hits)
    first, rest = text.split("\n\n", 1)
    assert first == (
        "No hit reaches the relevance threshold of 0.30 (the best scores 0.29): memory probably "
        'holds nothing about "the kubernetes ingress config". The nearest chunks follow; do not '
        "answer from them unless their text plainly does."
    )
    assert rest.startswith("2 memory chunk(s), best first (score = relevance")
    assert [shown.chunk_hash for shown in read_hits(text)] == ["0123456789abcdef", "1" * 16]
    # One hit at the threshold, or a score that is not a relevance: no such line.
    assert render_hits("q", [hit(score=0.30), hit(score=0.01)]).startswith("2 memory chunk(s)")
    assert render_hits("q", [hit(score=0.01, score_kind="rank_fusion")]).startswith("1 memory")
    assert none_relevant("q", []) is None


def test_a_cross_repo_list_no_hit_of_which_is_relevant_says_so_first(tmp_path: Path) -> None:
    result = CrossRepoResult(
        hits=(hit(score=0.12, project=tmp_path / "alpha"),), searched=(tmp_path / "alpha",)
    )
    text = render_cross_repo("ingress", result)
    assert text.startswith("No hit reaches the relevance threshold of 0.30 (the best scores 0.12)")
    assert "\n\n1 memory chunk(s), 1 project searched, 0 skipped, best first" in text
