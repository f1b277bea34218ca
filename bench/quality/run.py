"""Run the quality benchmark on one generated world: index it, ask every query, check L2/L3.

Everything runs in this process, against an isolated memsearch home (``HOME`` is the world's
``home/``, whose ``.memsearch/config.toml`` selects the offline model and a Milvus Lite
database inside the world), with ONE :class:`~pimem_core.Pimem` (two managers must never share
a Milvus Lite database in one process: ADR 0012). Every ranking of a query comes from the same
collection, in the same run:

* **pimem** is ``Pimem.search_memory`` with pimem's own ranker (the default, ``PIMEM_RANKER``
  unset): its read model of the collection, one vector per fact and a lexical leg, fused;
* **memsearch** is memsearch's own hybrid search (dense + BM25, fused by RRF) on the engine
  pimem opened, what ``PIMEM_RANKER=memsearch`` selects: the baseline;
* **dense** and **bm25** are the two halves of that hybrid search run alone on the collection
  through the engine's own leased client, with the request shapes memsearch uses.

Before the first query every project's read model is loaded and its per-fact vectors complete
(a read model built from the collection gets them in the background): pimem's ranking is
measured as it serves once warm. Database work goes through the backend queue of the index
pimem opened, as pimem's own calls do; nothing here writes to a collection after indexing.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench import read_model
from bench.latency import environment, memsearch_index
from bench.quality.corpus import MemoryEntry, World, generate_world
from bench.quality.metrics import lexical_overlap, rank_of
from bench.quality.queries import Query, build_queries
from bench.quality.sessions import SessionFile
from pimem_core import Pimem
from pimem_core.service_values import Transcript, TranscriptRequest
from pimem_core.types import RELEVANCE_THRESHOLD, Anchor, Scope, SearchHit, SearchQuery
from pimem_plugins.memsearch.index import MemsearchMemoryIndex
from pimem_plugins.memsearch.offline_model import OfflineModel

#: The store's identity: a kept world is reused only when all of it matches.
STORE_FORMAT = 1
TOP_K = 10
#: What an auto-context injection looks at (pimem's ``TOP_K`` of the auto-context plugin).
RECALL_K = 3
#: pi-memsearch's auto-context floor: memsearch's rank-fusion score.
MEMSEARCH_FLOOR = 0.5
#: pimem's auto-context floor with memsearch's ranker: the cosine similarity (ADR 0008).
SIMILARITY_FLOOR = 0.5
#: Environment variables that would point pimem or memsearch away from the world's store.
_FOREIGN = re.compile(r"^(PIMEM_|PI_MEMSEARCH_|MEMSEARCH_)")

Log = Callable[[str], None]


#: A world: (entries in the searched project, generator seed).
WorldKey = tuple[int, int]


@dataclass(frozen=True)
class Plan:
    #: Every setting of pimem's ranker was chosen on (1,000, 0) only; the others report it fixed.
    worlds: tuple[WorldKey, ...]
    per_style: int = 200
    cross: int = 30

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(sorted({size for size, _ in self.worlds}))

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(sorted({seed for _, seed in self.worlds}))

    def choose(self, sizes: Sequence[int] | None, seeds: Sequence[int] | None) -> Plan:
        """The plan for ``--sizes`` and ``--seeds``: every size at every seed; sizes alone are
        on seed 0, seeds alone at every size of this plan; neither, this plan's worlds."""
        if sizes is None and seeds is None:
            return self
        chosen_sizes = tuple(sizes) if sizes is not None else self.sizes
        chosen_seeds = tuple(seeds) if seeds is not None else (0,)
        worlds = tuple((size, seed) for seed in chosen_seeds for size in chosen_sizes)
        return replace(self, worlds=tuple(sorted(set(worlds), key=lambda world: world[::-1])))


QUICK = Plan(worlds=((1_000, 0),), per_style=50, cross=10)
FULL = Plan(worlds=((1_000, 0), (10_000, 0), (10_000, 1)))


# -- the store ---------------------------------------------------------------------------------


def world_root(workdir: Path, size: int, seed: int = 0) -> Path:
    return workdir / (f"size-{size}" if seed == 0 else f"size-{size}-seed-{seed}")


def identity(world: World, model: OfflineModel) -> dict[str, object]:
    return {
        "format": STORE_FORMAT,
        "size": world.size,
        "seed": world.seed,
        "world": world.digest(),
        "model": model.model,
        "memsearch": importlib.metadata.version("memsearch"),
        "milvus-lite": importlib.metadata.version("milvus-lite"),
    }


def _marker(world: World) -> Path:
    return world.root / "indexed.json"


def prepare(world: World, model: OfflineModel) -> dict[str, Any] | None:
    """Write *world* with its memsearch home; the kept index report when it is already indexed."""
    marker = _marker(world)
    if marker.is_file():
        recorded = json.loads(marker.read_text())
        if recorded.get("identity") == identity(world, model):
            index: dict[str, Any] = recorded["index"]
            return index
    if world.root.exists():
        shutil.rmtree(world.root)
    world.write()
    config = world.root / "home" / ".memsearch" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        f'[embedding]\nprovider = "{model.provider}"\nmodel = "{model.model}"\n\n'
        f'[milvus]\nuri = "{world.root / "milvus.db"}"\n'
    )
    return None


def environment_for(world: World, model: OfflineModel) -> dict[str, str]:
    """The process environment for the run on *world*."""
    return isolated_environment(world.root / "home", world.projects_dir, model)


def isolated_environment(home: Path, projects: Path, model: OfflineModel) -> dict[str, str]:
    """A process environment with *home* and the scan root *projects*, the offline model, and
    none of the caller's pimem or memsearch settings."""
    env = {key: value for key, value in os.environ.items() if not _FOREIGN.match(key)}
    env.update(model.environment())
    env["HOME"] = str(home)
    env["PI_MEMSEARCH_SCAN_ROOTS"] = str(projects)
    return env


@dataclass(frozen=True)
class Rig:
    world: World
    pimem: Pimem
    scopes: Mapping[str, Scope]

    @property
    def primary(self) -> Scope:
        return self.scopes[self.world.primary.project.name]

    @property
    def index(self) -> MemsearchMemoryIndex:
        """The primary project's index: its engine is the one every search here runs on."""
        return memsearch_index(self.pimem, self.primary)


def index_world(rig: Rig, model: OfflineModel, log: Log) -> dict[str, Any]:
    """Index every project in-process and remember the report beside the world."""
    projects = {}
    start = time.perf_counter()
    for project in rig.world.projects:
        name = project.project.name
        log(f"indexing {name}: {len(project.entries)} entries")
        began = time.perf_counter()
        report = rig.pimem.index_memory(rig.scopes[name], "bench-quality")
        seconds = time.perf_counter() - began
        if report.failed_files or report.indexed_chunks != len(project.entries):
            raise RuntimeError(
                f"{name}: {len(project.entries)} entries made {report.indexed_chunks} chunks "
                f"({len(report.failed_files)} files failed)"
            )
        projects[name] = {"chunks": report.indexed_chunks, "seconds": seconds}
    seconds = time.perf_counter() - start
    chunks = sum(int(item["chunks"]) for item in projects.values())
    index = {"projects": projects, "chunks": chunks, "seconds": seconds}
    index["chunks_per_s"] = chunks / seconds
    _marker(rig.world).write_text(
        json.dumps({"identity": identity(rig.world, model), "index": index})
    )
    return index


# -- retrieval ---------------------------------------------------------------------------------


def hit_id(content: str) -> str | None:
    """Which entry a chunk is: its anchor's session and turn (unique in the world)."""
    anchor = Anchor.parse(content)
    return None if anchor is None else f"{anchor.session}:{anchor.turn}"


def gold_id(anchor: Anchor) -> str:
    return f"{anchor.session}:{anchor.turn}"


def single_retrievers(index: MemsearchMemoryIndex, text: str) -> dict[str, list[str]]:
    """The dense half and the BM25 half of memsearch's hybrid search, each alone, top 10."""
    engine, scope = index.engine, index.scope

    def search() -> dict[str, list[str]]:
        config = engine.config(scope, bootstrap=False)
        vector = engine.event_loop().run_until_complete(engine.embedders.get(config).embed([text]))[
            0
        ]
        requests = {
            "dense": ([vector], "embedding", {"metric_type": "COSINE", "params": {}}),
            "bm25": ([text], "sparse_vector", {"metric_type": "BM25"}),
        }
        found = {}
        with engine.database.use(scope, config) as memsearch:
            store = memsearch.store
            client = store._connected_client()
            for name, (data, field, params) in requests.items():
                results = client.search(
                    collection_name=store._collection,
                    data=data,
                    anns_field=field,
                    search_params=params,
                    limit=TOP_K,
                    output_fields=["content"],
                )
                found[name] = [str(hit["entity"]["content"]) for hit in results[0]]
        return found

    return index.queue.run("bench-single", search)


def memsearch_search(index: MemsearchMemoryIndex, text: str, top_k: int) -> tuple[SearchHit, ...]:
    """memsearch's own hybrid search on the engine pimem opened: the baseline ranker (what
    ``PIMEM_RANKER=memsearch`` serves), on the same collection."""
    engine, scope = index.engine, index.scope
    return index.queue.run("bench-memsearch", lambda: engine.reads.search(scope, text, top_k))


def similarity_recall(
    index: MemsearchMemoryIndex, text: str
) -> tuple[tuple[SearchHit, float], ...]:
    """What auto-context saw with memsearch's ranker: the 3 chunks most similar to the query
    in the collection, with their cosine similarity."""
    engine, scope = index.engine, index.scope
    return index.queue.run("bench-recall", lambda: engine.reads.recall(scope, text, RECALL_K))


def pimem_search(pimem: Pimem, scope: Scope, text: str, top_k: int) -> tuple[SearchHit, ...]:
    """pimem's search API with its own ranker; refused when another ranker answered (the
    benchmark must never measure memsearch twice under two names)."""
    hits = pimem.search_memory(scope, SearchQuery(text=text, top_k=top_k))
    if any(hit.score_kind != "relevance" for hit in hits):
        raise RuntimeError(
            f"pimem's ranker was expected, got score kinds {sorted({h.score_kind for h in hits})}"
        )
    return hits


def _top(hits: Sequence[SearchHit], rank: int | None) -> dict[str, Any] | None:
    return None if not hits else {"score": hits[0].score, "right": rank == 1}


def _ids(contents: Iterable[str]) -> list[str]:
    return [hit_id(content) or "" for content in contents]


@dataclass
class Seen:
    """Every chunk text any search returned, for the secret check."""

    contents: set[str]

    def add(self, contents: Iterable[str]) -> list[str]:
        listed = list(contents)
        self.contents.update(listed)
        return listed


def ask(rig: Rig, query: Query, seen: Seen) -> dict[str, Any]:
    """One query's raw record: the gold's rank in each ranking, and what auto-context saw."""
    record: dict[str, Any] = {
        "text": query.text,
        "style": query.style,
        "group": query.group,
        "kind": query.kind,
        "project": query.project,
    }
    gold = None if query.gold is None else gold_id(query.gold)
    if query.gold_content is not None:
        record["overlap"] = lexical_overlap(query.text, query.gold_content)
        record["near_duplicates"] = query.near_duplicates
    if query.group == "cross":
        result = rig.pimem.search_everywhere(rig.primary, SearchQuery(text=query.text, top_k=TOP_K))
        hits = result.hits
        seen.add(hit.content for hit in hits)
        rank = rank_of(_ids(hit.content for hit in hits), gold or "")
        expected = rig.world.projects_dir / (query.project or "")
        labels = [os.path.realpath(hit.project) if hit.project else "" for hit in hits]
        record["rank"] = rank
        record["label_ok"] = rank is not None and labels[rank - 1] == os.path.realpath(expected)
        record["top_label_ok"] = bool(labels) and labels[0] == os.path.realpath(expected)
        record["hash"] = None if rank is None else hits[rank - 1].chunk_hash
        record["label"] = None if rank is None else labels[rank - 1]
        return record
    scope, index = rig.primary, rig.index
    ranks: dict[str, int | None] = {}

    def ranked(hits: Iterable[SearchHit]) -> int | None:
        return rank_of(_ids(seen.add(hit.content for hit in hits)), gold or "")

    ours = pimem_search(rig.pimem, scope, query.text, TOP_K)
    ranks["pimem"] = ranked(ours)
    ranks["pimem_k5"] = ranked(pimem_search(rig.pimem, scope, query.text, 5))
    baseline = memsearch_search(index, query.text, TOP_K)
    ranks["memsearch"] = ranked(baseline)
    ranks["memsearch_k5"] = ranked(memsearch_search(index, query.text, 5))
    for name, contents in single_retrievers(index, query.text).items():
        ranks[name] = rank_of(_ids(seen.add(contents)), gold or "")
    record["ranks"] = ranks
    record["top"] = {
        "pimem": _top(ours, ranks["pimem"]),
        "memsearch": _top(baseline, ranks["memsearch"]),
    }
    position = ranks["pimem"]
    record["hash"] = None if position is None else ours[position - 1].chunk_hash
    # What auto-context sees with pimem's ranker: the best hits with their relevance.
    similar = index.similar(query.text, RECALL_K)
    seen.add(hit.content for hit, _ in similar)
    record["recall"] = [
        {"score": relevance, "gold": hit_id(hit.content) == gold} for hit, relevance in similar
    ]
    # With memsearch's ranker: the collection's most similar chunks, kept on their cosine.
    dense = similarity_recall(index, query.text)
    seen.add(hit.content for hit, _ in dense)
    record["similarity_recall"] = [
        {"score": similarity, "gold": hit_id(hit.content) == gold} for hit, similarity in dense
    ]
    # The original's (pi-memsearch): memsearch's hybrid top 3, kept on its score.
    fused = memsearch_search(index, query.text, RECALL_K)
    seen.add(hit.content for hit in fused)
    record["hybrid_recall"] = [
        {"score": hit.score, "gold": hit_id(hit.content) == gold} for hit in fused
    ]
    return record


# -- L2 and L3 ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class TurnCheck:
    """What the transcript reader showed for one anchor."""

    exact: bool
    #: The target turn is there, marked, and is the anchored one.
    target_ok: bool
    #: Turns shown that are not on the anchored session's live branch.
    foreign: int
    #: Of those, turns from a branch the conversation left.
    abandoned: int


def check_turn(transcript: Transcript, body: str, session: SessionFile) -> TurnCheck:
    targets = [turn for turn in transcript.turns if turn.target]
    target_ok = len(targets) == 1 and targets[0].body == body
    foreign = sum(1 for turn in transcript.turns if turn.body not in session.live)
    abandoned = sum(1 for turn in transcript.turns if turn.body in session.abandoned)
    return TurnCheck(
        exact=target_ok and foreign == 0 and abandoned == 0,
        target_ok=target_ok,
        foreign=foreign,
        abandoned=abandoned,
    )


def read_anchor(pimem: Pimem, anchor: Anchor) -> Transcript:
    return pimem.read_transcript(TranscriptRequest(path=Path(anchor.transcript), turn=anchor.turn))


def _l3_summary(checks: list[tuple[TurnCheck, SessionFile]]) -> dict[str, Any]:
    def tally(selected: list[TurnCheck]) -> dict[str, Any]:
        return {
            "checked": len(selected),
            "exact": sum(check.exact for check in selected),
            "target_wrong": sum(not check.target_ok for check in selected),
            "foreign_turns": sum(check.foreign for check in selected),
            "abandoned_turns": sum(check.abandoned for check in selected),
        }

    return {
        **tally([check for check, _ in checks]),
        "in_branched_sessions": tally([check for check, s in checks if s.branched]),
        "in_forks": tally([check for check, s in checks if s.parent is not None]),
    }


def anchors_and_turns(rig: Rig, records: list[dict[str, Any]], log: Log) -> dict[str, Any]:
    """L2: expanding each gold hit gives the gold entry's anchor. L3: reading each anchor's
    transcript shows the anchored turn, marked, and only turns of the live branch; for the
    gold hits' anchors (the chain a reader follows) and for every entry of the world."""
    world = rig.world
    by_id: dict[str, tuple[str, MemoryEntry]] = {
        gold_id(item.anchor): (project.project.name, item)
        for project in world.projects
        for item in project.entries
    }
    sessions = world.sessions()
    expanded: dict[str, dict[str, Any]] = {}
    chain: list[tuple[TurnCheck, SessionFile]] = []
    for record in records:
        chunk = record.get("hash")
        if chunk is None or chunk in expanded:
            continue
        if record["group"] == "cross":
            scope = rig.pimem.resolve_project(Path(record["label"]))
            section = rig.pimem.expand_chunk(scope, chunk, read_only=True)
        else:
            section = rig.pimem.expand_chunk(rig.primary, chunk)
        expected = by_id.get(record["gold"])
        correct = expected is not None and section.anchor == expected[1].anchor
        expanded[chunk] = {"group": record["group"], "correct": correct}
        if section.anchor is not None and expected is not None:
            transcript = read_anchor(rig.pimem, section.anchor)
            session = sessions[Path(section.anchor.transcript)]
            chain.append((check_turn(transcript, expected[1].turn_body, session), session))
    log(f"L3 sweep over all {sum(len(p.entries) for p in world.projects)} anchors")
    sweep = []
    for _, item in by_id.values():
        session = sessions[Path(item.anchor.transcript)]
        sweep.append(
            (check_turn(read_anchor(rig.pimem, item.anchor), item.turn_body, session), session)
        )
    l2 = {
        group: {
            "checked": sum(1 for item in expanded.values() if item["group"] == group),
            "correct": sum(
                1 for item in expanded.values() if item["group"] == group and item["correct"]
            ),
        }
        for group in ("project", "cross")
    }
    return {"l2": l2, "l3_chain": _l3_summary(chain), "l3_sweep": _l3_summary(sweep)}


# -- secrets -----------------------------------------------------------------------------------


def secret_exposure(world: World, seen: Seen) -> dict[str, int]:
    """Raw secrets found in memory files, in any chunk a search returned, and (as they should
    be) in the transcripts."""
    secrets = world.secrets()
    if not secrets:
        return {"secrets": 0, "in_memory_files": 0, "in_search_results": 0, "in_transcripts": 0}
    pattern = re.compile("|".join(re.escape(secret) for secret in secrets))
    memory = "".join(
        path.read_text(encoding="utf-8")
        for project in world.projects
        for path in sorted(project.memory_dir.glob("*.md"))
    )
    transcripts = "".join(session.text() for session in world.sessions().values())
    return {
        "secrets": len(secrets),
        "in_memory_files": len(set(pattern.findall(memory))),
        "in_search_results": sum(1 for content in seen.contents if pattern.search(content)),
        "in_transcripts": len(set(pattern.findall(transcripts))),
        "redacted_chunks_returned": sum(1 for content in seen.contents if "[REDACTED:" in content),
    }


# -- one size ----------------------------------------------------------------------------------


def ready_read_models(rig: Rig, log: Log) -> dict[str, Any]:
    """Load every project's read model and wait until each has its per-fact vectors (a read
    model built from the collection computes them in the background, then saves its cache):
    the rankings below are those of a warm, complete read model."""
    ready = {}
    for name, scope in rig.scopes.items():
        index = memsearch_index(rig.pimem, scope)
        recall = index.recall
        if recall is None:
            raise RuntimeError("pimem's ranker is off (PIMEM_RANKER): nothing to compare")
        began = time.perf_counter()
        index.queue.run("bench read model", recall.load)
        loaded = time.perf_counter() - began
        read_model.settle(recall, log, name)
        ready[name] = {
            "origin": recall.origin,
            "load_s": loaded,
            "ready_s": time.perf_counter() - began,
            "chunks": len(recall.model),
            "pending_facts": recall.pending_facts(),
        }
        log(f"{name}: read model from the {recall.origin}, ready in {ready[name]['ready_s']:.1f} s")
    return ready


def measure_size(
    plan: Plan, size: int, seed: int, workdir: Path, model: OfflineModel, log: Log
) -> dict[str, Any]:
    """Everything measured on the world of *size* entries and *seed*: raw records, timings."""
    started = time.perf_counter()
    world = generate_world(size, seed=seed, root=world_root(workdir, size, seed))
    queries = build_queries(world, per_style=plan.per_style, cross=plan.cross, seed=seed)
    timings = {"generate_s": time.perf_counter() - started}
    label = f"{size}/seed {seed}"
    log(
        f"{label}: {world.entries} entries in {len(world.projects)} projects, "
        f"{len(queries)} queries"
    )
    kept = prepare(world, model)
    timings["write_s"] = time.perf_counter() - started - timings["generate_s"]
    with environment(environment_for(world, model)):
        pimem = Pimem.from_env()
        scopes = {
            project.project.name: pimem.resolve_scope(project.directory)
            for project in world.projects
        }
        rig = Rig(world=world, pimem=pimem, scopes=scopes)
        if kept is None:
            index = index_world(rig, model, log)
            log(f"{label}: indexed {index['chunks']} chunks at {index['chunks_per_s']:.1f}/s")
        else:
            index = kept
            log(f"{label}: reusing the indexed world in {world.root}")
        began = time.perf_counter()
        read_model = ready_read_models(rig, log)
        timings["read_model_s"] = time.perf_counter() - began
        seen = Seen(set())
        began = time.perf_counter()
        records = []
        for number, query in enumerate(queries, 1):
            record = ask(rig, query, seen)
            if query.gold is not None:
                record["gold"] = gold_id(query.gold)
            records.append(record)
            if number % 100 == 0:
                log(f"{label}: {number}/{len(queries)} queries")
        timings["queries_s"] = time.perf_counter() - began
        began = time.perf_counter()
        checks = anchors_and_turns(rig, records, log)
        timings["l2_l3_s"] = time.perf_counter() - began
        rig.index.queue.run("release", rig.index.engine.release)
    timings["total_s"] = time.perf_counter() - started
    return {
        "size": size,
        "seed": seed,
        "entries": {project.project.name: len(project.entries) for project in world.projects},
        "sessions": {
            "files": sum(len(p.sessions) for p in world.projects),
            "branched": sum(s.branched for p in world.projects for s in p.sessions),
            "forks": sum(s.parent is not None for p in world.projects for s in p.sessions),
        },
        "index": index,
        "index_reused": kept is not None,
        "read_model": read_model,
        "records": records,
        **checks,
        "secrets": secret_exposure(world, seen),
        "timings": timings,
        "floors": {
            "pimem_relevance": RELEVANCE_THRESHOLD,
            "pimem_similarity": SIMILARITY_FLOOR,
            "memsearch_score": MEMSEARCH_FLOOR,
        },
    }
