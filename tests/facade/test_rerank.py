"""The rerank stage (``pimem_rerank_hits``): with a reranker the index is asked for a deeper
candidate list, the reranker reorders it and the facade keeps ``top_k``; without one, search
is the call it always was."""

from __future__ import annotations

from datetime import datetime

import attrs
import pytest

from pimem_core import hookimpl
from pimem_core.api import Pimem
from pimem_core.errors import PluginError
from pimem_core.facade.recall import RERANK_DEPTH
from pimem_core.render import render_hits
from pimem_core.services import MemoryIndex
from pimem_core.testing import InMemoryIndex, MakePimem, TempProject
from pimem_core.types import (
    Anchor,
    BackendCall,
    Entry,
    LegScore,
    Scope,
    SearchHit,
    SearchQuery,
)

ENTRIES = 8


class DepthIndex(InMemoryIndex):
    """The kit's index, recording how many hits each search asked for."""

    asked: list[int]

    def search(self, query: SearchQuery, call: BackendCall) -> tuple[SearchHit, ...]:
        self.asked.append(query.top_k)
        return super().search(query, call)


class DepthIndexPlugin:
    def __init__(self) -> None:
        self.opened: DepthIndex | None = None

    @hookimpl(tryfirst=True)
    def pimem_open_index(self, scope: Scope) -> MemoryIndex:
        if self.opened is None:
            self.opened = DepthIndex(scope)
            self.opened.asked = []
        return self.opened


class Reverse:
    """A reranker that puts the index's last candidate first, and says so in a leg."""

    def __init__(self) -> None:
        self.given: list[int] = []

    @hookimpl
    def pimem_rerank_hits(
        self, query: SearchQuery, hits: tuple[SearchHit, ...]
    ) -> tuple[SearchHit, ...]:
        self.given.append(len(hits))
        return tuple(
            attrs.evolve(
                hit,
                score=1 / place,
                score_kind="reranker",
                legs=(*hit.legs, LegScore(name="reverse", rank=place, score=1 / place)),
            )
            for place, hit in enumerate(reversed(hits), 1)
        )


class NoOpinion:
    @hookimpl
    def pimem_rerank_hits(self) -> None:
        return None


class Buggy:
    @hookimpl
    def pimem_rerank_hits(self, hits: tuple[SearchHit, ...]) -> tuple[SearchHit, ...]:
        raise ZeroDivisionError("a bug in the reranker")


class Inventive:
    @hookimpl
    def pimem_rerank_hits(self, hits: tuple[SearchHit, ...]) -> tuple[SearchHit, ...]:
        return (attrs.evolve(hits[0], chunk_hash="f" * 16),)


class Wordy:
    @hookimpl
    def pimem_rerank_hits(self) -> str:
        return "the best hit is the first"


def searching(
    make_pimem: MakePimem, project: TempProject, *plugins: object
) -> tuple[Pimem, DepthIndexPlugin]:
    """A pimem whose index is a :class:`DepthIndex` over *ENTRIES* entries about the cache."""
    index = DepthIndexPlugin()
    pimem = make_pimem(index, *plugins, installed=True)
    anchor = Anchor(session="s1", turn="t1", transcript="/t/s1.jsonl")
    for minute in range(ENTRIES):
        entry = Entry(
            anchor=anchor,
            content=f"- cache fact number {minute}",
            written_at=datetime(2026, 8, 13, 22, minute),
        )
        pimem.append_entry(project.scope, entry)
    pimem.index_memory(project.scope, "test")
    return pimem, index


def search(pimem: Pimem, project: TempProject, top_k: int = 3) -> tuple[SearchHit, ...]:
    return pimem.search_memory(project.scope, SearchQuery(text="cache", top_k=top_k))


def test_without_a_reranker_the_index_is_asked_for_top_k(
    make_pimem: MakePimem, pimem_project: TempProject
) -> None:
    pimem, index = searching(make_pimem, pimem_project)
    hits = search(pimem, pimem_project)
    assert index.opened is not None
    assert index.opened.asked == [3]
    assert [hit.heading for hit in hits] == ["22:00", "22:01", "22:02"]


def test_a_reranker_reorders_a_deeper_list_and_the_facade_keeps_top_k(
    make_pimem: MakePimem, pimem_project: TempProject
) -> None:
    reverse = Reverse()
    pimem, index = searching(make_pimem, pimem_project, reverse)
    hits = search(pimem, pimem_project)
    assert index.opened is not None
    assert index.opened.asked == [RERANK_DEPTH]
    assert reverse.given == [ENTRIES]  # every candidate the store has, fewer than the depth
    assert [hit.heading for hit in hits] == ["22:07", "22:06", "22:05"]
    assert hits[0].legs == (LegScore(name="reverse", rank=1, score=1.0),)
    # The reranker's score and leg are what the agent is shown.
    text = render_hits("cache", hits, explain=True)
    assert text.startswith("3 memory chunk(s), best first (score = a reranker's):\n\n")
    assert "1. 2026-08-13 22:07 | reranker 1.00 | chunk " in text
    assert "\n   reverse: rank 1, score 1.000\n- cache fact number 7" in text


def test_a_top_k_beyond_the_depth_asks_for_top_k(
    make_pimem: MakePimem, pimem_project: TempProject
) -> None:
    pimem, index = searching(make_pimem, pimem_project, Reverse())
    search(pimem, pimem_project, top_k=RERANK_DEPTH + 10)
    assert index.opened is not None
    assert index.opened.asked == [RERANK_DEPTH + 10]


def test_a_reranker_with_no_opinion_leaves_the_index_order_cut_to_top_k(
    make_pimem: MakePimem, pimem_project: TempProject
) -> None:
    pimem, index = searching(make_pimem, pimem_project, NoOpinion())
    hits = search(pimem, pimem_project)
    assert index.opened is not None
    assert index.opened.asked == [RERANK_DEPTH]
    assert [hit.heading for hit in hits] == ["22:00", "22:01", "22:02"]


def test_no_hits_are_not_reranked(make_pimem: MakePimem, pimem_project: TempProject) -> None:
    reverse = Reverse()
    pimem, _ = searching(make_pimem, pimem_project, reverse)
    query = SearchQuery(text="nothing like it", top_k=3)
    assert pimem.search_memory(pimem_project.scope, query) == ()
    assert reverse.given == []


def test_a_rerankers_bug_names_the_plugin(
    make_pimem: MakePimem, pimem_project: TempProject
) -> None:
    pimem, _ = searching(make_pimem, pimem_project, ("buggy-reranker", Buggy()))
    with pytest.raises(ZeroDivisionError) as raised:
        search(pimem, pimem_project)
    assert raised.value.__notes__ == [
        "pimem plugin 'buggy-reranker' raised this in pimem_rerank_hits"
    ]


@pytest.mark.parametrize(
    ("plugin", "wrong"),
    [
        (Inventive(), "chunk ffffffffffffffff, which was not among the hits it was given"),
        (Wordy(), "a str, not a tuple of SearchHit"),
    ],
)
def test_a_wrong_answer_names_the_reranker(
    make_pimem: MakePimem, pimem_project: TempProject, plugin: object, wrong: str
) -> None:
    pimem, _ = searching(make_pimem, pimem_project, ("odd-reranker", plugin))
    with pytest.raises(PluginError) as raised:
        search(pimem, pimem_project)
    assert str(raised.value) == (
        f"pimem_rerank_hits answered with {wrong}: a reranker reorders the hits it is given. "
        "The reranker 'odd-reranker' is broken; block it with PIMEM_DISABLE_PLUGINS"
    )


class KeepsRelevance:
    """A reranker that keeps the index's order and scores each hit by a relevance that rises
    with its minute: its list would read higher further down."""

    @hookimpl
    def pimem_rerank_hits(self, hits: tuple[SearchHit, ...]) -> tuple[SearchHit, ...]:
        return tuple(
            attrs.evolve(hit, score=0.2 + 0.1 * int(hit.heading[-1]), score_kind="relevance")
            for hit in hits
        )


def test_a_reranker_that_keeps_relevance_cannot_make_the_list_rise(
    make_pimem: MakePimem, pimem_project: TempProject
) -> None:
    """The facade holds every answer to the rule: the reranker's order stands, and a hit
    never reads more relevant than the one above it (its own relevance kept as a leg)."""
    pimem, _ = searching(make_pimem, pimem_project, KeepsRelevance())
    hits = search(pimem, pimem_project)
    assert [hit.heading for hit in hits] == ["22:00", "22:01", "22:02"]
    assert [hit.score for hit in hits] == [0.2, 0.2, 0.2]
    (own,) = [leg for leg in hits[2].legs if leg.name == "relevance"]
    assert (own.rank, round(own.score or 0, 6)) == (1, 0.4)
    assert "2026-08-13 22:02 | relevance 0.20 (tied with 1) | chunk " in render_hits("c", hits)
