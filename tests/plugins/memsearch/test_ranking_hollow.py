"""Search ranks hollow entries (failure markers, bare headings) below every real entry, however
well their words match the query."""

from __future__ import annotations

import attrs

from pimem_plugins.memsearch.recall.generation import ChunkRecord
from pimem_plugins.memsearch.recall.ranking import rank
from pimem_plugins.memsearch.recall.read_model import Candidate
from pimem_plugins.memsearch.recall.text import tokens

ANCHOR = "<!-- session:5b0e2c4a turn:e41f7a90 transcript:/home/dana/.claude/projects/r/5b.jsonl -->"


def candidate(key: str, content: str, *, dense: float, lexical: float) -> Candidate:
    record = ChunkRecord(
        chunk_hash=key * 16, content=content, source="/m/2026-08-07.md", heading="09:20",
        heading_level=3, start_line=1, end_line=3, facts_ready=True,
    )  # fmt: skip
    return Candidate(
        record=record, dense=dense, lexical=lexical, dense_context=dense,
        lexical_context=lexical, ranks=dict.fromkeys(("dense", "lexical"), 1),
    )  # fmt: skip


def test_a_failure_marker_that_matches_the_query_ranks_below_a_real_entry() -> None:
    query = tokens("request timed out")
    found = [
        # memsearch's Claude Code plugin wrote the model's error as the entry: every word of
        # the query, and the closest vector.
        candidate(
            "m", f"### 09:20\n{ANCHOR}\nAPI Error: Request timed out.", dense=0.71, lexical=9
        ),
        candidate(
            "r",
            f"### 09:41\n{ANCHOR}\n- The nightly export request timed out at the 30 s gateway "
            "limit\n- Claude moved the export to a job queue",
            dense=0.62,
            lexical=6,
        ),
        candidate("b", f"### 09:58\n{ANCHOR}\n- \n-", dense=0.69, lexical=0),
        candidate("o", f"### 10:02\n{ANCHOR}\n- Payroll closes on the 25th", dense=0.2, lexical=0),
    ]
    hits = rank(found, query, 4, lambda _: 1.0)
    assert [hit.chunk_hash[0] for hit in hits] == ["r", "o", "m", "b"]
    fused = {hit.chunk_hash[0]: hit.legs[-1].score or 0.0 for hit in hits}
    assert fused["m"] > fused["r"]  # it matched best, and still comes after every real entry
    assert rank(found, query, 1, lambda _: 1.0)[0].chunk_hash[0] == "r"


def test_a_store_taken_in_by_its_words_alone_ranks_without_a_warning() -> None:
    """No candidate embedded yet (a store met for the first time): the dense legs have
    nothing to standardise, and the words decide (the suite turns warnings into errors)."""
    query = tokens("redis cache")
    found = [
        attrs.evolve(candidate("r", "- the team chose redis for the cache", dense=0, lexical=4),
                     embedded=False),
        attrs.evolve(candidate("p", "- postgres for the ledger", dense=0, lexical=0),
                     embedded=False),
    ]  # fmt: skip
    hits = rank(found, query, 2, lambda token: 1.0)
    assert hits[0].content == "- the team chose redis for the cache"
