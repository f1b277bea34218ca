"""Relevance never rises down a best-first list, on pimem's real ranker: the offline model,
memsearch and Milvus Lite, a store of varied entries, and queries of every kind (keyword,
paraphrase, question, no answer, off topic) through every list pimem gives (search, the
similarity search auto-context reads, cross-repo recall, the rendered text)."""

from __future__ import annotations

import itertools
from datetime import datetime
from pathlib import Path

import pytest

from pimem_core import Pimem
from pimem_core.render import render_cross_repo, render_hits
from pimem_core.testing import read_hits
from pimem_core.types import RELEVANCE_THRESHOLD, Anchor, Entry, Scope, SearchHit, SearchQuery
from pimem_plugins.memsearch.index import MemsearchMemoryIndex

from conftest import make_pimem

ENTRIES = [
    "- the team chose Redis for the hot cache with 5 minute TTLs",
    "- Postgres stays the source of truth for orders and invoices",
    "- the agent fixed the login redirect loop by escaping the return URL",
    "- the roster service rejects a booking that collides in time with another one for the "
    "same employee",
    "- the user prefers pytest fixtures over unittest setUp methods",
    "- httpx is pinned to 0.27.2 in services/billing/client.py",
    "- deploys use blue-green releases behind the nginx load balancer",
    "- the nightly export job moved to 02:00 UTC to avoid the backup window",
    "- the flaky test_checkout_total was caused by a timezone-dependent fixture",
    "- the user said thanks, that is all for today",
    "- Prompt is too long",
    "- renamed renew_email_digests to send_weekly_digest in the mailer",
    "- the cache stampede on cold start is avoided with a lock per key",
    "- invoices are generated on the first business day of each month",
    "- the mobile app reads feature flags from the config service every 10 minutes",
]

QUERIES = [
    "redis cache ttl",
    "which database is the source of truth",
    "how did we fix the login loop",
    "how do we stop two shifts from overlapping",
    "unittest or pytest style",
    "httpx version billing",
    "how are releases deployed",
    "when does the export run",
    "why was the checkout test flaky",
    "send_weekly_digest",
    "what happens when the cache is cold",
    "kubernetes ingress controller annotations",
    "best sourdough starter hydration",
    "how often are feature flags refreshed",
]


def entry(number: int, content: str) -> Entry:
    anchor = Anchor(session="s1", turn=f"t{number}", transcript=f"/t/s1-{number}.jsonl")
    stamp = datetime(2026, 8, 1 + number % 9, 9 + number % 10, number)
    return Entry(anchor=anchor, content=content, written_at=stamp)


@pytest.fixture
def indexed(memsearch_home: Path, repo: Path) -> tuple[Pimem, Scope]:
    pimem = make_pimem({"PIMEM_DB_LINGER_MS": "0", "PI_MEMSEARCH_SCAN_ROOTS": str(repo.parent)})
    scope = pimem.resolve_scope(repo)
    for number, content in enumerate(ENTRIES):
        pimem.append_entry(scope, entry(number, content))
    assert pimem.index_memory(scope, "test").indexed_chunks == len(ENTRIES)
    return pimem, scope


def assert_never_rising(query: str, hits: tuple[SearchHit, ...] | list[SearchHit]) -> None:
    relevance = [hit.score for hit in hits if hit.score_kind == "relevance"]
    assert relevance, query
    assert relevance == sorted(relevance, reverse=True), (query, relevance)


def test_no_list_has_a_higher_relevance_below_a_lower_one(indexed: tuple[Pimem, Scope]) -> None:
    pimem, scope = indexed
    index = MemsearchMemoryIndex.opened_by(pimem, scope)
    lowered = 0
    for query in QUERIES:
        for top_k in (3, 10):
            hits = pimem.search_memory(scope, SearchQuery(text=query, top_k=top_k))
            assert_never_rising(query, hits)
            lowered += sum(1 for hit in hits for leg in hit.legs if leg.name == "relevance")
            # What a person and an agent read: the shown scores never rise either.
            shown = [hit.score for hit in read_hits(render_hits(query, hits))]
            assert shown == sorted(shown, reverse=True), (query, shown)
        # Auto-context's similarity search ranks without the facade.
        assert_never_rising(query, [hit for hit, _ in index.similar(query, 3)])
        result = pimem.search_everywhere(scope, SearchQuery(text=query, top_k=10))
        assert_never_rising(query, result.hits)
        shown = [hit.score for hit in read_hits(render_cross_repo(query, result))]
        assert shown == sorted(shown, reverse=True), (query, shown)
    # The pass did something: some list ordered a hit above a more relevant one.
    assert lowered > 0


def test_a_lowered_hit_keeps_its_own_relevance_for_explain(indexed: tuple[Pimem, Scope]) -> None:
    pimem, scope = indexed
    for query in QUERIES:
        hits = pimem.search_memory(scope, SearchQuery(text=query, top_k=10))
        for above, hit in itertools.pairwise(hits):
            own = [leg.score for leg in hit.legs if leg.name == "relevance"]
            if own:
                assert own[0] is not None
                assert own[0] > hit.score == above.score
        text = render_hits(query, hits, explain=True)
        assert text.count("   relevance: rank ") == sum(
            1 for hit in hits for leg in hit.legs if leg.name == "relevance"
        )


def test_a_right_paraphrase_at_rank_1_is_not_called_nothing(indexed: tuple[Pimem, Scope]) -> None:
    """The login fix asked in none of its words scores 0.00, first: the notice says memory
    holds a close match and names it; a question about bread still reads as nothing."""
    pimem, scope = indexed
    query = "authentication page kept sending people back in circles"
    hits = pimem.search_memory(scope, SearchQuery(text=query, top_k=3))
    assert "login redirect loop" in hits[0].content
    assert hits[0].score < RELEVANCE_THRESHOLD
    notice = render_hits(query, hits).split("\n\n", 1)[0]
    assert notice.startswith("No hit reaches the relevance threshold of 0.30 (the best scores ")
    assert f'but memory holds a close match to "{query}", perhaps in other words: hit 1 (' in notice
    bread = "best sourdough starter hydration"
    nothing = render_hits(bread, pimem.search_memory(scope, SearchQuery(text=bread, top_k=3)))
    assert f'memory probably holds nothing about "{bread}"' in nothing
