"""What each memory operation costs as the store grows, against the memsearch CLI doing the same.

Runs on the quality benchmark's worlds (``bench.quality``: 1k and 10k entries in the searched
project), indexing a world first when no kept one is found, and on a world of 100k entries
whose read model is built directly (below). For each size, in the world's own isolated home
and in this order:

1. search (warm, in-process: pimem's search API, then memsearch's hybrid search interleaved,
   then pimem's with the other core busy) and ``memsearch search``;
2. expand of the hits found and ``memsearch expand``;
3. the transcript window of an anchor and ``memsearch transcript`` on it;
4. the stable snapshot a session starts with;
5. index throughput: a batch of new entries in a day file of its own, pimem, then
   ``memsearch index`` on another batch;
6. one appended entry until searchable: pimem indexing its day file, ``memsearch index`` on the
   file, and ``memsearch index`` on the whole memory directory (what a CLI hook runs);
7. capture: ``settled`` to return, with the store's own index behind it;
8. a bridge (``pimem serve``) from spawn to ready, to ``session.start`` answered, and prompts
   with auto-context on, end to end, with its resident memory;
9. the read model in fresh processes: its memory and load from the cache, a first search's
   start-up step by step, ``pimem search`` timed whole.

Everything added is taken out again (emptied, indexed, deleted) and the chunk count checked, so
a kept world measures the same next time.

**Partly synthetic sizes** (100k entries and more): indexing that many entries with memsearch
takes hours here (about 20 chunks/s, slower as the collection grows), so no memsearch collection
is built, and pimem's ledger records the day files as indexed (a search's catch-up would
otherwise index them, a file per search). The world's files are real (generated and written
like any world's), and so is the read model: each day file cut into chunks by memsearch's own
chunker with memsearch's chunk hashes, exactly as pimem's read model takes a changed file, each
fact embedded by the same model, saved as the read model's cache; pimem then loads that cache
as it loads any. What is
missing is the collection: memsearch's search, the CLI, indexing, capture and the bridge (whose
start-up index would build it) are not measured there.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from bench import auto_context, capture, read_model
from bench.latency import (
    CpuClock,
    _ms,
    _rss_mb,
    cli_peak_rss_mb,
    environment,
    memsearch_index,
    release_database,
    run_cli,
    summarize,
)
from bench.quality import run as quality
from bench.quality.corpus import World, generate_world
from bench.quality.queries import build_queries
from pimem_core import Pimem
from pimem_core.service_values import TranscriptRequest
from pimem_core.types import Anchor, Entry, Scope, SearchQuery
from pimem_plugins.memsearch.index import MemsearchMemoryIndex
from pimem_plugins.memsearch.offline_model import OfflineModel
from pimem_plugins.memsearch.recall import cache
from pimem_plugins.memsearch.recall.encoding import encoder_for
from pimem_plugins.memsearch.recall.generation import ChunkRecord, Generation
from pimem_plugins.memsearch.recall.text import facts

Log = Callable[[str], None]
TOP_K = 5
#: The session id of every entry this benchmark adds: none of the world's sessions has it.
PROBE_SESSION = "bench-scaling-probe"
#: The results' layout: results of another layout are never combined with these.
FORMAT = 2
#: From this size on, the read model is built directly, without a memsearch collection.
SYNTHETIC_FROM = 100_000
#: The identity of a directly built read model: rebuilt when any of it changes.
READ_MODEL_FORMAT = 1


@dataclass(frozen=True)
class ScalingPlan:
    """How much to measure at each size (sample counts)."""

    sizes: tuple[int, ...]
    seed: int = 0
    warmup: int = 5
    searches: int = 40
    cli_calls: int = 5
    expands: int = 40
    transcripts: int = 40
    snapshots: int = 10
    #: Entries per index-throughput batch.
    batch: int = 100
    appends: int = 5
    cli_appends: int = 2
    settles: int = 100
    prompts: int = 60
    #: ``pimem search`` processes timed whole.
    first_results: int = 5
    #: Searches timed step by step (where pimem's search goes).
    breakdown: int = 40


SCALING_FULL = ScalingPlan(sizes=(1_000, 10_000, 100_000), searches=100)
SCALING_QUICK = ScalingPlan(
    sizes=(1_000,),
    searches=20,
    cli_calls=3,
    expands=20,
    transcripts=20,
    snapshots=5,
    batch=50,
    appends=3,
    cli_appends=1,
    settles=30,
    prompts=30,
    first_results=2,
    breakdown=10,
)


@dataclass(frozen=True)
class Rig:
    world: World
    pimem: Pimem
    scope: Scope
    env: dict[str, str]
    #: Questions with an answer in the store, and questions with none.
    queries: list[str]
    no_answer: list[str]
    #: No memsearch collection: the read model was built directly (a partly synthetic size).
    synthetic: bool = False

    @property
    def cwd(self) -> Path:
        return self.world.primary.directory

    @property
    def memory_dir(self) -> Path:
        return self.world.primary.memory_dir

    @property
    def index(self) -> MemsearchMemoryIndex:
        """The searched project's index, as the rig's pimem opened it."""
        return memsearch_index(self.pimem, self.scope)

    def cli(self, *args: str) -> tuple[float, str]:
        return run_cli(self.cwd, self.env, *args, "-c", self.scope.collection)

    def count(self) -> int | None:
        engine, scope = self.index.engine, self.scope
        return self.index.queue.run("bench-count", lambda: engine.reads.count(scope))


# -- entries this benchmark adds, and takes out again --------------------------------------------


def _probe(day: datetime, number: int, token: str) -> Entry:
    return Entry(
        anchor=Anchor(
            session=PROBE_SESSION,
            turn=f"{number:08x}",
            transcript=f"/home/dev/.pi/agent/sessions/--scaling--/{PROBE_SESSION}.jsonl",
        ),
        content=f"- the agent moved the {token} retry budget into the deploy manifest",
        written_at=day + timedelta(seconds=number),
    )


def _day_after_world(world: World, days: int) -> datetime:
    """Midnight *days* after the world's last entry: a day file of the benchmark's own."""
    last = max(item.entry.written_at for item in world.primary.entries)
    return datetime.combine(last.date() + timedelta(days=days), datetime.min.time())


@contextmanager
def added_files(rig: Rig) -> Iterator[list[Path]]:
    """Collects the day files a phase adds; on the way out each is emptied, indexed (which drops
    its chunks) and deleted, and the collection must be back to the world's chunk count."""
    files: list[Path] = []
    before = rig.count()
    try:
        yield files
    finally:
        for path in dict.fromkeys(files):
            if path.exists():
                path.write_text("", encoding="utf-8")
                rig.pimem.index_memory(rig.scope, "bench-restore", files=(path,))
                path.unlink()
        after = rig.count()
        if after != before:
            raise RuntimeError(f"restoring the world left {after} chunks instead of {before}")


# -- the measurements ----------------------------------------------------------------------------


def measure_search(rig: Rig, plan: ScalingPlan) -> dict[str, Any]:
    """Warm searches through pimem's search API; then the same queries each followed by
    memsearch's hybrid search (interleaved); then pimem's with the other core busy; then the
    CLI on the same queries. The hits' chunk hashes for expand."""
    asked = rig.queries[plan.warmup : plan.warmup + plan.searches]
    for text in rig.queries[: plan.warmup]:
        read_model.pimem_search(rig.pimem, rig.scope, text, TOP_K)
    samples: list[float] = []
    hashes: list[str] = []
    for text in asked:
        started = time.perf_counter()
        hits = read_model.pimem_search(rig.pimem, rig.scope, text, TOP_K)
        samples.append(_ms(started))
        hashes.extend(hit.chunk_hash for hit in hits[:1])
    rss = _rss_mb()
    with read_model.busy_core():
        busy = read_model.search_samples(rig.pimem, rig.scope, asked, TOP_K)
    steps = read_model.breakdown_samples(rig.index, asked[: plan.breakdown], TOP_K)
    result: dict[str, Any] = {
        "pimem_ms": samples,
        "busy_ms": busy,
        "breakdown_ms": steps,
        "rss_mb": rss,
        "hashes": hashes,
        "paired_pimem_ms": [],
        "memsearch_ms": [],
        "cli_ms": [],
        "cli_peak_rss_mb": None,
    }
    if rig.synthetic:
        return result
    for text in rig.queries[: plan.warmup]:  # memsearch's first searches build its BM25 data
        read_model.memsearch_search(rig.index, text, TOP_K)
    both = read_model.side_by_side(rig.pimem, rig.index, asked, TOP_K)
    release_database(rig.index)
    cli_rss = cli_peak_rss_mb(
        rig.cwd, rig.env, "search", rig.queries[0], "-j", "-c", rig.scope.collection
    )
    cli = [rig.cli("search", text, "-j", "-k", str(TOP_K))[0] for text in asked[: plan.cli_calls]]
    return result | {
        "paired_pimem_ms": both["pimem"],
        "memsearch_ms": both["memsearch"],
        "cli_ms": cli,
        "cli_peak_rss_mb": cli_rss,
    }


def measure_expand(rig: Rig, plan: ScalingPlan, hashes: Sequence[str]) -> dict[str, Any]:
    chosen = list(hashes[: plan.expands])
    rig.pimem.expand_chunk(rig.scope, chosen[0])
    samples = []
    for chunk in chosen:
        started = time.perf_counter()
        rig.pimem.expand_chunk(rig.scope, chunk)
        samples.append(_ms(started))
    if rig.synthetic:
        return {"pimem_ms": samples, "cli_ms": []}
    release_database(rig.index)
    cli = [rig.cli("expand", chunk, "-j")[0] for chunk in chosen[: plan.cli_calls]]
    return {"pimem_ms": samples, "cli_ms": cli}


def measure_transcript(rig: Rig, plan: ScalingPlan) -> dict[str, Any]:
    entries = random.Random(rig.world.seed).sample(
        rig.world.primary.entries, min(plan.transcripts, len(rig.world.primary.entries))
    )
    samples, turns = [], 0
    for item in entries:
        request = TranscriptRequest(path=Path(item.anchor.transcript), turn=item.anchor.turn)
        started = time.perf_counter()
        transcript = rig.pimem.read_transcript(request)
        samples.append(_ms(started))
        turns += len(transcript.turns)
    # memsearch's reader is not branch-aware; timed on the same anchors all the same.
    cli = [
        run_cli(rig.cwd, rig.env, "transcript", item.anchor.transcript, "-t", item.anchor.turn)[0]
        for item in entries[: plan.cli_calls]
    ]
    return {"pimem_ms": samples, "turns_shown": turns, "cli_ms": cli}


def measure_snapshot(rig: Rig, plan: ScalingPlan) -> dict[str, Any]:
    """The snapshot as of the evening of the world's last day (its recent days are full)."""
    now = _day_after_world(rig.world, 0) + timedelta(hours=23)
    samples, size = [], 0
    for _ in range(plan.snapshots):
        started = time.perf_counter()
        snapshot = rig.pimem.build_snapshot(rig.scope, now=now)
        samples.append(_ms(started))
        size = len(snapshot or "")
    return {"pimem_ms": samples, "chars": size}


def _batch_file(rig: Rig, day: datetime, count: int, tag: str) -> Path:
    path = Path()
    for number in range(count):
        path = rig.pimem.append_entry(rig.scope, _probe(day, number, f"{tag}{number:04d}"))
    return path


def measure_index_throughput(rig: Rig, plan: ScalingPlan) -> dict[str, Any]:
    """A batch of new entries indexed into the store as it is: pimem, then the CLI."""
    with added_files(rig) as files:
        path = _batch_file(rig, _day_after_world(rig.world, 10), plan.batch, "batchpimem")
        files.append(path)
        started = time.perf_counter()
        report = rig.pimem.index_memory(rig.scope, "bench-batch", files=(path,))
        seconds = time.perf_counter() - started
        release_database(rig.index)
        path = _batch_file(rig, _day_after_world(rig.world, 11), plan.batch, "batchcli")
        files.append(path)
        cli_ms, _ = rig.cli("index", str(path))
    return {
        "entries": plan.batch,
        "pimem_chunks": report.indexed_chunks,
        "pimem_chunks_per_s": report.indexed_chunks / seconds,
        "cli_chunks_per_s": plan.batch / (cli_ms / 1000),
    }


def _searchable(rig: Rig, token: str) -> bool:
    hits = rig.pimem.search_memory(rig.scope, SearchQuery(text=f"the {token} retry budget"))
    return any(token in hit.content for hit in hits)


def measure_append(rig: Rig, plan: ScalingPlan) -> dict[str, Any]:
    """One new entry until a search finds it: pimem, the CLI on its file, the CLI on the store."""
    day = _day_after_world(rig.world, 20)
    pimem: list[float] = []
    cli_file: list[float] = []
    cli_store: list[float] = []
    #: The index step alone: pimem, then the CLI on the file, then on the whole store.
    index: tuple[list[float], list[float], list[float]] = ([], [], [])
    missing: list[str] = []
    with added_files(rig) as files:
        for number in range(plan.appends):
            token = f"quokkapimem{number:03d}x"
            path = rig.pimem.append_entry(rig.scope, _probe(day, number, token))
            files.append(path)
            started = time.perf_counter()
            rig.pimem.index_memory(rig.scope, "write", files=(path,))
            index[0].append(_ms(started))
            if not _searchable(rig, token):
                missing.append(token)
            pimem.append(_ms(started))
        release_database(rig.index)
        for number in range(plan.cli_appends * 2):
            token = f"quokkacli{number:03d}x"
            path = rig.pimem.append_entry(rig.scope, _probe(day, 100 + number, token))
            files.append(path)
            whole = number >= plan.cli_appends
            index_ms, _ = rig.cli("index", str(rig.memory_dir if whole else path))
            search_ms, out = rig.cli("search", f"the {token} retry budget", "-j")
            if token not in out:
                missing.append(token)
            (cli_store if whole else cli_file).append(index_ms + search_ms)
            index[2 if whole else 1].append(index_ms)
    return {
        "pimem_ms": pimem,
        "cli_file_ms": cli_file,
        "cli_store_ms": cli_store,
        "found": not missing,
        "missing": missing,
        "index_pimem_ms": index[0],
        "index_cli_file_ms": index[1],
        "index_cli_store_ms": index[2],
    }


def measure_capture(rig: Rig, plan: ScalingPlan, log: Log) -> dict[str, Any]:
    """``settled`` in the world's project, with the store's own index behind every capture."""
    # The capture's session opens the database itself: this process's lease must be closed.
    release_database(rig.index)
    with added_files(rig) as files:
        # Today may well be one of the world's days: the session's clock is set past them.
        now = _day_after_world(rig.world, 30) + timedelta(hours=12)
        result = capture.measure_settled(plan.settles, log, repo=rig.cwd, now=now)
        if len(result["day_files"]) != 1:
            raise RuntimeError(f"capture wrote {result['day_files']}, not one new day file")
        files.extend(Path(name) for name in result.pop("day_files"))
    return result


def measure_bridge(rig: Rig, plan: ScalingPlan) -> dict[str, Any]:
    """A bridge on the world's project, from spawn to its prompts with auto-context on."""
    release_database(rig.index)
    half = plan.prompts // 2
    prompts = [*rig.queries[:half], *rig.no_answer[: plan.prompts - half]]
    random.Random(rig.world.seed).shuffle(prompts)
    return auto_context.measure_latency(rig.cwd, rig.env, prompts, plan.warmup)


def measure_read_model(rig: Rig, plan: ScalingPlan) -> dict[str, Any]:
    """Fresh processes on the read model's cache: its memory and load, a first search's
    start-up step by step, ``pimem search`` timed whole."""
    return {
        "probe": read_model.probe(rig.cwd, rig.env),
        "startup": read_model.startup(rig.cwd, rig.env),
        "first_result": read_model.first_result_samples(
            rig.cwd, rig.env, rig.queries[0], plan.first_results
        ),
    }


# -- a read model built directly (partly synthetic sizes) ----------------------------------------


def _read_model_identity(world: World, model: OfflineModel) -> dict[str, object]:
    return {
        "format": READ_MODEL_FORMAT,
        "cache_format": cache.FORMAT,
        "size": world.size,
        "seed": world.seed,
        "world": world.digest(),
        "model": model.model,
    }


def _read_model_marker(world: World) -> Path:
    return world.root / "read-model.json"


def prepare_synthetic(world: World, model: OfflineModel) -> dict[str, Any] | None:
    """*world* written with its memsearch home (no collection); the recorded build of its read
    model when a matching one is kept (its files then untouched: the read model's stamps are
    their stats)."""
    marker = _read_model_marker(world)
    if marker.is_file():
        recorded = json.loads(marker.read_text())
        if recorded.get("identity") == _read_model_identity(world, model):
            built: dict[str, Any] = recorded["build"]
            return built
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


def build_read_model(
    pimem: Pimem, scope: Scope, world: World, model: OfflineModel, log: Log
) -> dict[str, Any]:
    """The read model of *scope*'s store built directly and saved as its cache: every day file
    cut by memsearch's chunker with memsearch's chunk hashes (the read model's own path for a
    changed file), every distinct fact embedded once by the same model."""
    index = memsearch_index(pimem, scope)
    recall = read_model.recall_of(index)
    directory = read_model.cache_directory(recall)
    if directory is None:
        raise RuntimeError("the read model has no cache directory")
    started = time.perf_counter()
    stamps: dict[str, tuple[int, int]] = {}
    records: list[ChunkRecord] = []
    for path in sorted(world.primary.memory_dir.glob("*.md")):
        # The read model's own chunking of a changed file (no public name for it yet).
        stamp, chunks = recall.files.chunks(path.resolve())
        if stamp is not None:
            stamps[str(path.resolve())] = stamp
        records += chunks or []
    texts = {record.chunk_hash: facts(record.content) for record in records}
    distinct = sorted({fact for group in texts.values() for fact in group}, key=len)
    log(f"{world.size}: {len(records):,} chunks, {len(distinct):,} distinct facts to embed")
    encode = encoder_for(index.engine.embedder(scope), index.engine.event_loop)
    vectors: dict[str, np.ndarray[Any, np.dtype[np.float32]]] = {}
    embedding = time.perf_counter()
    batch = 512
    for start in range(0, len(distinct), batch):
        part = distinct[start : start + batch]
        vectors.update(zip(part, encode(part), strict=True))
        if (start // batch) % 40 == 39:
            rate = len(vectors) / (time.perf_counter() - embedding)
            log(f"{world.size}: {len(vectors):,}/{len(distinct):,} facts embedded ({rate:.0f}/s)")
    embedding_s = time.perf_counter() - embedding
    entries = [
        (record, np.stack([vectors[fact] for fact in texts[record.chunk_hash]]))
        for record in records
    ]
    cache.save(directory, Generation.build(entries), stamps)
    built = {
        "chunks": len(records),
        "facts": sum(len(group) for group in texts.values()),
        "distinct_facts": len(distinct),
        "embedding_s": embedding_s,
        "facts_per_s": len(distinct) / embedding_s if embedding_s else 0.0,
        "seconds": time.perf_counter() - started,
    }
    _read_model_marker(world).write_text(
        json.dumps({"identity": _read_model_identity(world, model), "build": built})
    )
    return built


def vouch_for_files(rig: Rig) -> None:
    """Record every day file of a partly synthetic world as indexed in pimem's ledger, as if
    memsearch had indexed them: a search's catch-up would otherwise index them into a
    collection, a file per search, and the search measured would be memsearch's index run."""
    ledger = rig.index.engine.index_runs.ledger(rig.scope)
    ledger.record(ledger.fingerprint(None))


# -- one size ------------------------------------------------------------------------------------


def _queries(world: World, plan: ScalingPlan) -> tuple[list[str], list[str]]:
    queries = build_queries(world, per_style=plan.searches, cross=0, seed=plan.seed)
    asked = [q.text for q in queries if q.group == "project" and q.gold is not None]
    unanswered = [q.text for q in queries if q.group == "none"]
    return asked, unanswered


def _ready(rig: Rig, log: Log) -> dict[str, Any]:
    """The searched project's read model loaded and complete before anything is timed."""
    index = rig.index
    recall = read_model.recall_of(index)
    started = time.perf_counter()
    index.queue.run("bench read model", recall.load)
    read_model.settle(recall, log, f"scaling {rig.world.size}")
    return {
        "origin": recall.origin,
        "chunks": len(recall.model),
        "ready_s": time.perf_counter() - started,
    }


def measure_size(
    plan: ScalingPlan, size: int, workdir: Path, model: OfflineModel, log: Log
) -> dict[str, Any]:
    world = generate_world(size, seed=plan.seed, root=quality.world_root(workdir, size, plan.seed))
    asked, unanswered = _queries(world, plan)
    synthetic = size >= SYNTHETIC_FROM
    env = quality.environment_for(world, model)
    kept = prepare_synthetic(world, model) if synthetic else quality.prepare(world, model)
    with environment(env):
        pimem = Pimem.from_env()
        scopes = {p.project.name: pimem.resolve_scope(p.directory) for p in world.projects}
        scope = scopes[world.primary.project.name]
        if kept is None and synthetic:
            log(f"scaling {size}: building the read model directly (no memsearch collection)")
            kept = build_read_model(pimem, scope, world, model, log)
        elif kept is None:
            kept = quality.index_world(quality.Rig(world, pimem, scopes), model, log)
        rig = Rig(world, pimem, scope, env, asked, unanswered, synthetic)
        if synthetic:
            vouch_for_files(rig)
        ready = _ready(rig, log)
        if synthetic and ready["origin"] != "cache":
            raise RuntimeError(f"the built read model was not loaded from its cache: {ready}")
        phases: dict[str, Any] = {
            "chunks": ready["chunks"] if synthetic else rig.count(),
            "day_files": sum(1 for _ in world.primary.memory_dir.glob("*.md")),
            "synthetic": synthetic,
            "index_at_build": kept,
            "read_model_ready": ready,
        }
        measures: list[tuple[str, Callable[[], dict[str, Any]]]] = [
            ("search", lambda: measure_search(rig, plan)),
            ("expand", lambda: measure_expand(rig, plan, phases["search"]["hashes"])),
            ("transcript", lambda: measure_transcript(rig, plan)),
            ("snapshot", lambda: measure_snapshot(rig, plan)),
        ]
        if not synthetic:  # each needs memsearch's collection (the bridge's start-up indexes)
            measures += [
                ("index", lambda: measure_index_throughput(rig, plan)),
                ("append", lambda: measure_append(rig, plan)),
                ("capture", lambda: measure_capture(rig, plan, log)),
                ("bridge", lambda: measure_bridge(rig, plan)),
            ]
        measures.append(("read_model", lambda: measure_read_model(rig, plan)))
        clock = CpuClock.now()
        for name, measure in measures:
            log(f"scaling {size}: {name}")
            started = time.perf_counter()
            phases[name] = measure()
            phases[name]["phase_s"] = time.perf_counter() - started
        phases["contention"] = CpuClock.now().others_since(clock)
        if not synthetic:
            release_database(rig.index)
    return {"size": size, "entries": world.entries, **phases}


def _stats(values: Sequence[float]) -> dict[str, float] | None:
    return summarize(values) if values else None


def summarize_size(raw: dict[str, Any]) -> dict[str, Any]:
    """p50/p95 of every cost at one size, with the CLI's (and memsearch's) beside it where
    there is one; ``None`` for what a partly synthetic size does not measure."""

    def pair(phase: str, ours: str = "pimem_ms", theirs: str | None = "cli_ms") -> dict[str, Any]:
        values = raw[phase]
        return {
            "pimem": summarize(values[ours]),
            "cli": _stats(values[theirs]) if theirs else None,
        }

    search = raw["search"]
    paired, memsearch = _stats(search["paired_pimem_ms"]), _stats(search["memsearch_ms"])
    read = raw["read_model"]
    probe = read["probe"]
    summary: dict[str, Any] = {
        "size": raw["size"],
        "chunks": raw["chunks"],
        "day_files": raw.get("day_files"),
        "synthetic": raw.get("synthetic", False),
        "search": pair("search")
        | {
            "busy": summarize(search["busy_ms"]),
            "steps": {
                name: summarize(values) for name, values in search.get("breakdown_ms", {}).items()
            },
            "paired": paired,
            "memsearch": memsearch,
            "speedup_memsearch": (
                memsearch["p50"] / paired["p50"] if memsearch and paired else None
            ),
        },
        "expand": pair("expand"),
        "transcript": pair("transcript"),
        "snapshot": {**pair("snapshot", theirs=None), "chars": raw["snapshot"]["chars"]},
        "read_model": {
            "probe": probe,
            "mb_per_100k": probe["rss_growth_mb"] * 100_000 / max(1, probe["chunks"]),
            "startup": read["startup"],
            "first_result": summarize(read["first_result"]["samples_ms"]),
            "ready": raw.get("read_model_ready"),
        },
        "index": None,
        "append": None,
        "index_one": None,
        "capture": None,
        "bridge": None,
        "contention": raw.get("contention"),
        "memory": {
            "in_process_rss_mb": search["rss_mb"]["current_mb"],
            "cli_search_peak_rss_mb": search["cli_peak_rss_mb"],
            "bridge_rss_mb": None,
            "read_model_mb": probe["rss_growth_mb"],
        },
    }
    if "bridge" not in raw:
        return summary
    bridge = raw["bridge"]
    summary |= {
        "append": {
            **pair("append", theirs="cli_file_ms"),
            "cli_store": summarize(raw["append"]["cli_store_ms"]),
            "found": raw["append"]["found"],
        },
        "index_one": {
            **pair("append", "index_pimem_ms", "index_cli_file_ms"),
            "cli_store": summarize(raw["append"]["index_cli_store_ms"]),
        },
        "index": raw["index"] | {"at_build": raw["index_at_build"]},
        "capture": {
            "pimem": raw["capture"]["settled_ms"],
            "captured": raw["capture"]["entries_written"],
            "exchanges": raw["capture"]["exchanges"],
        },
        "bridge": {
            "ready_ms": bridge["ready_ms"],
            "session_started_ms": bridge["session_started_ms"],
            "warm_after_s": bridge["warm_after_s"],
            "auto_context": summarize(bridge["samples_ms"]),
            "within_cap": bridge["within_cap"],
            "skipped": bridge["skipped_budget"],
            "rss_mb": bridge["rss_mb"],
            "peak_rss_mb": bridge["peak_rss_mb"],
        },
    }
    summary["memory"]["bridge_rss_mb"] = bridge["rss_mb"]
    return summary


def run_scaling(plan: ScalingPlan, workdir: Path, model: OfflineModel, log: Log) -> dict[str, Any]:
    raw = [measure_size(plan, size, workdir, model, log) for size in plan.sizes]
    return {"plan": asdict(plan), "raw": raw, "summary": [summarize_size(item) for item in raw]}


def dump(results: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(results, indent=1) + "\n")
