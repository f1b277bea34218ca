"""The quality benchmark's world: deterministic, in pimem's formats, with honest gold answers.

No search here: the generator, its queries and the anchor-to-turn chain through pimem's own
transcript reader, on a small world written to a temporary directory.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path

import pytest
from memsearch.chunker import chunk_markdown

from bench.quality.corpus import World, generate_world, scrubber
from bench.quality.facts import STYLES
from bench.quality.queries import build_queries
from bench.quality.run import check_turn
from pimem_core.day_file import list_entries
from pimem_core.service_values import TranscriptRequest
from pimem_plugins.pi_transcript import read_pi_transcript

SIZE = 1000


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    built = generate_world(SIZE, seed=0, root=tmp_path_factory.mktemp("world"))
    built.write()
    return built


def _live_ids(path: Path) -> list[str]:
    """The live branch of a written session file, read as pi reads it: from the last line
    back to the root along parentId."""
    entries = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    by_id = {entry["id"]: entry for entry in entries}
    ids, current = [], entries[-1]["id"]
    while current is not None:
        ids.append(current)
        current = by_id[current]["parentId"]
    return ids


def test_the_same_seed_and_root_give_the_same_bytes(tmp_path: Path) -> None:
    first = generate_world(300, seed=5, root=tmp_path)
    assert first.digest() == generate_world(300, seed=5, root=tmp_path).digest()
    assert first.digest() != generate_world(300, seed=6, root=tmp_path).digest()
    assert [len(project.entries) for project in first.projects] == [300, 100, 100, 100]


def test_every_entry_is_one_chunk_in_pimem_format(world: World) -> None:
    for project in world.projects:
        texts = [path.read_text() for path in sorted(project.memory_dir.glob("*.md"))]
        assert sum(len(list_entries(text)) for text in texts) == len(project.entries)
        chunks = [chunk for text in texts for chunk in chunk_markdown(text)]
        assert len(chunks) == len(project.entries)
        sessions = {item.anchor.session for item in project.entries}
        days = Counter(
            (item.entry.written_at.date(), item.anchor.session) for item in project.entries
        )
        assert sum(text.count("\n## Session ") for text in texts) == len(days) >= len(sessions)


def test_anchored_turns_are_the_final_answers_on_the_live_branch(world: World) -> None:
    sessions = world.sessions()
    for project in world.projects:
        for item in project.entries:
            path = Path(item.anchor.transcript)
            assert path in sessions
            assert path.is_file()
            assert item.anchor.turn in _live_ids(path)
            line = next(
                json.loads(text)
                for text in path.read_text().splitlines()
                if f'"id": "{item.anchor.turn}"' in text
            )
            assert line["message"]["role"] == "assistant"
            assert line["message"]["content"][0]["text"] == item.turn_body


def test_branches_leave_turns_behind_that_no_anchor_points_at(world: World) -> None:
    branched = [s for p in world.projects for s in p.sessions if s.branched]
    assert branched
    anchored = {item.turn_body for p in world.projects for item in p.entries}
    for session in branched:
        assert session.abandoned
        assert not session.abandoned & session.live
        assert not session.abandoned & anchored
        # The abandoned branch comes before the live leaf: pi's leaf is the last line.
        assert json.loads(session.lines[-1])["id"] in _live_ids(session.path)


def test_forks_copy_the_parents_path_then_diverge(world: World) -> None:
    forks = [s for p in world.projects for s in p.sessions if s.parent is not None]
    assert forks
    sessions = world.sessions()
    for fork in forks:
        assert fork.parent is not None
        header = json.loads(fork.lines[0])
        assert header["parentSession"] == str(fork.parent)
        parent = sessions[fork.parent]
        copied = [json.loads(line) for line in fork.lines[1:]]
        parent_ids = {json.loads(line)["id"] for line in parent.lines[1:]}
        shared = [entry["id"] for entry in copied if entry["id"] in parent_ids]
        assert shared
        assert [entry["id"] for entry in copied[: len(shared)]] == shared
        assert len(shared) < len(copied)  # new entries after the fork point
        # The parent's turns after the fork point are left behind for the fork.
        assert fork.abandoned
        assert fork.abandoned <= parent.live


def test_the_transcript_reader_shows_each_anchored_turn_and_only_live_turns(
    world: World,
) -> None:
    sessions = world.sessions()
    hard = [
        item
        for project in world.projects
        for item in project.entries
        if sessions[Path(item.anchor.transcript)].branched
        or sessions[Path(item.anchor.transcript)].parent is not None
    ]
    assert hard
    for item in hard:
        session = sessions[Path(item.anchor.transcript)]
        transcript = read_pi_transcript(TranscriptRequest(path=session.path, turn=item.anchor.turn))
        check = check_turn(transcript, item.turn_body, session)
        assert check.exact, (item.anchor, check)


def test_secrets_stay_in_transcripts_and_out_of_memory(world: World) -> None:
    secrets = world.secrets()
    assert secrets
    memory = "".join(path.read_text() for p in world.projects for path in p.memory_dir.glob("*.md"))
    transcripts = "".join(s.text() for s in world.sessions().values())
    assert not [secret for secret in secrets if secret in memory]
    assert all(secret in transcripts for secret in secrets)
    assert memory.count("[REDACTED:") == len(secrets)
    # Only secret facts are scrubbed when generating: every other bullet is left unchanged
    # by pimem's scrubber anyway.
    for project in world.projects:
        for item in project.entries:
            for fact in item.facts:
                if fact.secret is None:
                    assert scrubber().scrub(fact.bullet) == fact.bullet


def test_queries_have_one_gold_entry_in_three_styles(world: World) -> None:
    queries = build_queries(world, per_style=40, cross=10, seed=0)
    project = [q for q in queries if q.group == "project"]
    cross = [q for q in queries if q.group == "cross"]
    none = [q for q in queries if q.group == "none"]
    assert Counter(q.style for q in project) == dict.fromkeys(STYLES, 40)
    assert len(cross) == 30
    assert len(none) == 72
    assert all(q.gold is None and q.project is None for q in none)
    golds = {q.gold for q in project}
    assert len(golds) == 40
    keys = Counter(fact.key for item in world.primary.entries for fact in item.facts)
    for item in world.primary.entries:
        if item.anchor in golds:
            assert any(keys[fact.key] == 1 for fact in item.facts)
    assert {q.project for q in cross} <= {p.project.name for p in world.projects[1:]}
    assert queries == build_queries(world, per_style=40, cross=10, seed=0)


def test_paraphrases_share_fewer_words_with_their_entry_than_keywords() -> None:
    from bench.quality.metrics import lexical_overlap

    world = generate_world(400, seed=1, root=Path("/nonexistent/world"))
    queries = [q for q in build_queries(world, per_style=60, cross=0) if q.group == "project"]
    mean = {
        style: statistics.fmean(
            lexical_overlap(q.text, q.gold_content or "") for q in queries if q.style == style
        )
        for style in STYLES
    }
    assert mean["paraphrase"] < mean["question"] < mean["keyword"]
    assert not any(
        q.text.lower() in (q.gold_content or "").lower() for q in queries if q.style != "keyword"
    )


def test_near_duplicates_count_facts_that_differ_in_one_named_slot(world: World) -> None:
    from bench.quality.queries import near_duplicates

    count = near_duplicates([world.primary])
    facts = [fact for item in world.primary.entries for fact in item.facts]
    for fact in facts[:200]:
        expected = sum(
            1
            for other in facts
            if other.kind == fact.kind
            and len(other.key) == len(fact.key)
            and sum(a != b for a, b in zip(other.key, fact.key, strict=True)) == 1
        )
        if len(fact.key) < 4:
            assert count(fact.key) is None
        else:
            # A fact with an exact twin is counted once per slot it could differ in.
            twins = sum(1 for other in facts if other.key == fact.key) - 1
            assert count(fact.key) == expected + twins * (len(fact.key) - 1)
