"""The benchmark's queries, each with its gold entry (and so its gold chunk and gold turn).

* **project** queries look for one fact of the first project, in that project's collection;
  each gold fact is asked three ways (keyword, paraphrase, question), so the styles compare
  on the same facts.
* **cross** queries look for a fact of another project, asked from the first project's
  session with cross-repo recall: the hit must come back labelled with the right project.
* **none** queries ask about subjects no session ever touched: the right answer is nothing.
* **offtopic** queries ask about everyday subjects far from software (cooking, gardening,
  travel, sport...; :mod:`bench.quality.offtopic`): the right answer is nothing, and a readable
  relevance score is low for every one of them.

A fact is only asked for when no other fact of the searched stores shares its key (what the
queries mention), so one entry is the one right answer.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from bench.quality.corpus import MemoryEntry, ProjectCorpus, World
from bench.quality.facts import STYLES, Fact
from bench.quality.offtopic import OFF_TOPIC
from bench.quality.vocabulary import ABSENT
from pimem_core.types import Anchor

GROUPS = ("project", "cross", "none", "offtopic")


@dataclass(frozen=True)
class Query:
    text: str
    style: str
    group: str
    #: The gold fact's kind; ``none`` for a no-answer query.
    kind: str
    #: The gold entry's project, and its anchor (which names the gold turn).
    project: str | None = None
    gold: Anchor | None = None
    #: The gold entry's text, for the lexical-overlap statistic.
    gold_content: str | None = None
    #: Other facts of the searched store that share all but one of the slots the query names
    #: (``None`` when it names fewer than three): how crowded the neighbourhood of the gold is.
    near_duplicates: int | None = None


def near_duplicates(projects: Iterable[ProjectCorpus]) -> Callable[[tuple[str, ...]], int | None]:
    """Counts, for a fact's key, the other facts of the same kind that differ from it in
    exactly one named slot; keys naming fewer than three slots get ``None`` (with one or two
    slots, "all but one" is nearly every fact of the kind)."""
    masked: Counter[tuple[str, ...]] = Counter()
    for project in projects:
        for item in project.entries:
            for fact in item.facts:
                for slot in range(1, len(fact.key)):
                    masked[_mask(fact.key, slot)] += 1

    def count(key: tuple[str, ...]) -> int | None:
        if len(key) < 4:
            return None
        return sum(masked[_mask(key, slot)] - 1 for slot in range(1, len(key)))

    return count


def _mask(key: tuple[str, ...], slot: int) -> tuple[str, ...]:
    return (*key[:slot], "\0", *key[slot + 1 :])


def _keyed(projects: Iterable[ProjectCorpus]) -> Counter[tuple[str, ...]]:
    return Counter(
        fact.key for project in projects for item in project.entries for fact in item.facts
    )


def _candidates(
    project: ProjectCorpus, counts: Counter[tuple[str, ...]]
) -> list[tuple[MemoryEntry, Fact]]:
    """One uniquely-keyed fact per entry that has one, in corpus order."""
    found = []
    for item in project.entries:
        unique = [fact for fact in item.facts if counts[fact.key] == 1]
        if unique:
            found.append((item, unique[0]))
    return found


def _asked(
    group: str, project: ProjectCorpus, item: MemoryEntry, fact: Fact, near: int | None
) -> list[Query]:
    return [
        Query(
            text=fact.query(style),
            style=style,
            group=group,
            kind=fact.kind,
            project=project.project.name,
            gold=item.anchor,
            gold_content=item.entry.content,
            near_duplicates=near,
        )
        for style in STYLES
    ]


def build_queries(world: World, *, per_style: int, cross: int, seed: int = 0) -> tuple[Query, ...]:
    """*per_style* gold facts of the first project and *cross* of the others, each asked in
    the three styles, then every no-answer subject in the three styles, then every off-topic
    query (style ``offtopic``, kind its subject)."""
    rng = random.Random(f"{seed}:queries")
    primary = world.primary
    chosen = _candidates(primary, _keyed([primary]))
    if len(chosen) < per_style:
        raise ValueError(f"only {len(chosen)} uniquely keyed facts for {per_style} queries")
    queries: list[Query] = []
    near = near_duplicates([primary])
    for item, fact in rng.sample(chosen, per_style):
        queries += _asked("project", primary, item, fact, near(fact.key))
    everywhere = _keyed(world.projects)
    others = [
        (project, item, fact)
        for project in world.projects[1:]
        for item, fact in _candidates(project, everywhere)
    ]
    near = near_duplicates(world.projects)
    for project, item, fact in rng.sample(others, min(cross, len(others))):
        queries += _asked("cross", project, item, fact, near(fact.key))
    for subject in ABSENT:
        queries += [
            Query(text=text, style=style, group="none", kind="none")
            for style, text in zip(STYLES, subject, strict=True)
        ]
    queries += [
        Query(text=text, style="offtopic", group="offtopic", kind=subject)
        for subject, text in OFF_TOPIC
    ]
    return tuple(queries)
