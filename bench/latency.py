"""Search and append-to-searchable latency: pimem in-process against memsearch and its CLI.

For each corpus size, one store (a project with daily memory files and an isolated memsearch
home with its own ``config.toml`` and Milvus Lite database, on the offline model) is indexed
in-process, then measured in this order, all in this one process with one ``Pimem``:

1. the backfill: the read model's cache removed, the first search reads the collection and the
   per-fact vectors are computed in the background while searches keep being answered;
2. fresh processes on the cached read model: its memory and load time, what a first search of
   a new process costs step by step, and ``pimem search`` timed whole;
3. warm search through ``Pimem.search_memory`` (pimem's ranker, query embedding included)
   interleaved with memsearch's own hybrid search on the same engine, then pimem's again with
   the other core busy, and where each search goes step by step;
4. memsearch's hybrid search with a linger of 0 (what ``PIMEM_DB_LINGER_MS=0`` sets): the
   database opened and closed per call;
5. ``memsearch search`` in a child process on the same store (the CLI baseline);
6. one appended entry, searched before and after its index: pimem, then the CLI.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench import read_model
from bench.corpus import Corpus, generate_corpus
from pimem_core import Pimem
from pimem_core.types import Anchor, Entry, Scope, SearchQuery
from pimem_plugins.memsearch.index import MemsearchMemoryIndex
from pimem_plugins.memsearch.offline_model import OfflineModel

MEMSEARCH = Path(sys.executable).with_name("memsearch")
TOP_K = 5
APPEND_SESSION = "bench-append-0000"
#: The store's identity: a kept store is reused only when all of it matches.
STORE_FORMAT = 1


@dataclass(frozen=True)
class Plan:
    """How much to measure. Sample counts are per corpus size."""

    sizes: tuple[int, ...]
    seed: int = 0
    warmup: int = 3
    #: Queries through pimem's search API, each followed by memsearch's hybrid search; then
    #: pimem's again with the other core busy.
    warm_queries: int = 200
    breakdown_queries: int = 40
    cold_queries: int = 30
    cli_queries: int = 8
    appends: int = 5
    cli_appends: int = 3
    #: ``pimem search`` processes timed whole.
    first_results: int = 5
    #: Seconds between the searches made while the per-fact vectors are backfilled.
    backfill_pause_s: float = 0.25


FULL = Plan(sizes=(2_000, 20_000))
QUICK = Plan(
    sizes=(2_000,),
    warm_queries=30,
    breakdown_queries=10,
    cold_queries=10,
    cli_queries=4,
    appends=3,
    cli_appends=1,
    first_results=2,
)


@dataclass(frozen=True)
class Store:
    """One benchmark store on disk: a git project, its memory files and a memsearch home."""

    root: Path
    size: int
    seed: int
    digest: str

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def memory_dir(self) -> Path:
        return self.project / ".memsearch" / "memory"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def database(self) -> Path:
        return self.root / "milvus.db"

    @property
    def marker(self) -> Path:
        return self.root / "indexed.json"

    def environment(self, model: OfflineModel) -> dict[str, str]:
        """What pimem and the memsearch CLI read: this home, and the offline model; pimem's
        default ranker whatever the caller's ``PIMEM_RANKER`` says."""
        own = {key: value for key, value in os.environ.items() if key != "PIMEM_RANKER"}
        return {**own, "HOME": str(self.home), **model.environment()}


# -- statistics --------------------------------------------------------------------------------


def summarize(samples: Sequence[float]) -> dict[str, float]:
    """p50, p95 (linear interpolation between closest ranks), mean, min and max."""
    ordered = sorted(samples)
    if not ordered:
        return {}
    rank = 0.95 * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    p95 = ordered[low] + (ordered[high] - ordered[low]) * (rank - low)
    return {
        "n": len(ordered),
        "p50": statistics.median(ordered),
        "p95": p95,
        "mean": statistics.fmean(ordered),
        "min": ordered[0],
        "max": ordered[-1],
    }


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def _rss_mb() -> dict[str, float]:
    """The process's resident memory now and at its peak."""
    status = Path("/proc/self/status").read_text()
    current = next(
        (int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0
    )
    return {
        "current_mb": current / 1024,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


@dataclass(frozen=True)
class CpuClock:
    """CPU seconds spent by the whole machine and by this process (with its children)."""

    wall: float
    busy: float
    own: float

    @classmethod
    def now(cls) -> CpuClock:
        # /proc/stat's first line: user nice system idle iowait irq softirq steal ..., in ticks.
        ticks = [int(value) for value in Path("/proc/stat").read_text().split("\n")[0].split()[1:9]]
        busy = sum(ticks) - ticks[3] - ticks[4]
        own = 0.0
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
            usage = resource.getrusage(who)
            own += usage.ru_utime + usage.ru_stime
        return cls(time.perf_counter(), busy / os.sysconf("SC_CLK_TCK"), own)

    def others_since(self, start: CpuClock) -> float:
        """The share of all CPUs other processes (and the hypervisor) took since *start*:
        the benchmark shares its machine, and contention shows up in every number."""
        wall = (self.wall - start.wall) * (os.cpu_count() or 1)
        others = (self.busy - start.busy) - (self.own - start.own)
        return max(0.0, others / wall) if wall > 0 else 0.0


def thread_cpu_seconds() -> dict[str, float]:
    """CPU seconds this process's threads used so far: Python's threads, and native ones that
    never run Python (the worker pools of ONNX Runtime, OpenBLAS and gRPC)."""
    python = {thread.native_id for thread in threading.enumerate()}
    totals = {"python": 0.0, "native": 0.0}
    for task in Path("/proc/self/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended meanwhile
        kind = "python" if int(task.name) in python else "native"
        totals[kind] += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return totals


# -- the store ---------------------------------------------------------------------------------


@contextlib.contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """Run with *env* as the process environment: in-process memsearch reads ``HOME`` for its
    global configuration on every call, just as the CLI child does."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _identity(store: Store, model: OfflineModel) -> dict[str, object]:
    import importlib.metadata

    return {
        "format": STORE_FORMAT,
        "size": store.size,
        "seed": store.seed,
        "corpus": store.digest,
        "model": model.model,
        "memsearch": importlib.metadata.version("memsearch"),
        "milvus-lite": importlib.metadata.version("milvus-lite"),
    }


def _write_project(store: Store, corpus: Corpus, model: OfflineModel) -> None:
    """The project's day files, its ``.git`` and the memsearch home, where they differ from what
    *corpus* and *model* make: all of it is deterministic, so a kept store whose project lost
    its files gets them back without indexing again."""
    (store.project / ".git").mkdir(parents=True, exist_ok=True)
    store.memory_dir.mkdir(parents=True, exist_ok=True)
    for name, text in corpus.day_files().items():
        path = store.memory_dir / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    config = store.home / ".memsearch" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        f'[embedding]\nprovider = "{model.provider}"\nmodel = "{model.model}"\n\n'
        f'[milvus]\nuri = "{store.database}"\n'
    )


def prepare_store(root: Path, corpus: Corpus, model: OfflineModel) -> tuple[Store, bool]:
    """The store for *corpus* under *root*; ``True`` when a kept, already indexed one was found."""
    store = Store(root=root, size=len(corpus.entries), seed=corpus.seed, digest=corpus.digest())
    if store.marker.is_file():
        recorded = json.loads(store.marker.read_text())
        if recorded.get("identity") == _identity(store, model):
            _write_project(store, corpus, model)
            return store, True
    if root.exists():
        shutil.rmtree(root)
    _write_project(store, corpus, model)
    return store, False


def memsearch_index(pimem: Pimem, scope: Scope) -> MemsearchMemoryIndex:
    """*scope*'s index as *pimem* opened it: the measurements below reach into its engine (the
    warm embedder, the leased database) and queue, the very ones *pimem*'s own calls use."""
    return MemsearchMemoryIndex.opened_by(pimem, scope)


@contextlib.contextmanager
def timed_embedding(index: MemsearchMemoryIndex) -> Iterator[dict[str, float]]:
    """Add up the time the engine's warm embedder spends while this block runs.

    The embedder is the engine's own object, wrapped on the instance for the duration, so
    memsearch's indexing calls it unchanged: what is left of the index time is Milvus Lite.
    """
    engine, scope = index.engine, index.scope
    embedder = index.queue.run("bench", lambda: engine.embedders.get(engine.config(scope)))
    spent = {"seconds": 0.0, "texts": 0.0}
    # memsearch's ONNX provider is encoded batch by batch in batches of like length (its
    # ``_encode``, which the index runs call directly); another provider through ``embed``.
    name = "_encode" if hasattr(embedder, "_encode") else "embed"
    method = getattr(embedder, name)

    def counted(texts: list[str], start: float) -> None:
        spent["seconds"] += time.perf_counter() - start
        spent["texts"] += len(texts)

    def timed_encode(texts: list[str]) -> Any:
        start = time.perf_counter()
        try:
            return method(texts)
        finally:
            counted(texts, start)

    async def timed_embed(texts: list[str]) -> Any:
        start = time.perf_counter()
        try:
            return await method(texts)
        finally:
            counted(texts, start)

    setattr(embedder, name, timed_encode if name == "_encode" else timed_embed)
    try:
        yield spent
    finally:
        delattr(embedder, name)  # the class's method again


def index_store(pimem: Pimem, scope: Scope, store: Store, model: OfflineModel) -> dict[str, Any]:
    """Index the whole store in-process with memsearch alone, as another agent of the mesh
    would (pimem's own index run would also complete its read model, and the read model phase
    measures a store indexed before the read model existed); the throughput is remembered with
    a kept store."""
    index = memsearch_index(pimem, scope)
    with timed_embedding(index) as embedding:
        start = time.perf_counter()
        report = index.queue.run(
            "bench index", lambda: index.engine.index_runs.index(scope, (), None)
        )
        seconds = time.perf_counter() - start
    if report.failed_files or report.indexed_chunks != store.size:
        raise RuntimeError(
            f"indexing {store.size} entries made {report.indexed_chunks} chunks "
            f"({len(report.failed_files)} files failed)"
        )
    result = {
        "chunks": report.indexed_chunks,
        "files": report.total_files,
        "seconds": seconds,
        "chunks_per_s": report.indexed_chunks / seconds,
        "embedding_seconds": embedding["seconds"],
        "embedding_chunks_per_s": embedding["texts"] / embedding["seconds"],
    }
    store.marker.write_text(json.dumps({"identity": _identity(store, model), "index": result}))
    return result


# -- pimem in-process --------------------------------------------------------------------------


def release_database(index: MemsearchMemoryIndex) -> None:
    """Close the database *index*'s engine leased now, on its backend queue as every database
    call is, so a CLI child can open it; then let the lease's idle timers fire, so none lands
    mid-sample."""
    engine = index.engine
    index.queue.run("release", engine.release)
    time.sleep(engine.linger + 0.2)


@contextlib.contextmanager
def linger(index: MemsearchMemoryIndex, seconds: float) -> Iterator[None]:
    """Keep *index*'s database open *seconds* after each call while this block runs: what
    ``PIMEM_DB_LINGER_MS`` sets when an index is opened, here on the engine already warm (a
    pimem of its own would load a second embedder into this process, and into its RSS)."""
    engine = index.engine
    saved, engine.linger = engine.linger, seconds
    try:
        yield
    finally:
        engine.linger = saved


def search_samples(pimem: Pimem, scope: Scope, queries: Sequence[str]) -> list[float]:
    """pimem's search API, one query after another (pimem's ranker)."""
    return read_model.search_samples(pimem, scope, queries, TOP_K)


def memsearch_samples(index: MemsearchMemoryIndex, queries: Sequence[str]) -> list[float]:
    """memsearch's hybrid search on the engine pimem opened, one query after another."""
    samples = []
    for text in queries:
        start = time.perf_counter()
        read_model.memsearch_search(index, text, TOP_K)
        samples.append(_ms(start))
    return samples


def breakdown_samples(
    index: MemsearchMemoryIndex, queries: Sequence[str]
) -> dict[str, list[float]]:
    """Where one of memsearch's warm hybrid searches goes: configuration, query embedding, the
    database's hybrid search.

    The steps are the engine's own, run one by one on the backend queue (whose worker owns the
    database); whatever a whole search takes beyond them is queue hand-off and building the hits.
    """
    engine, scope = index.engine, index.scope
    loop = asyncio.new_event_loop()
    parts: dict[str, list[float]] = {"config": [], "embed": [], "database": []}

    def one(text: str) -> None:
        start = time.perf_counter()
        config = engine.config(scope)
        parts["config"].append(_ms(start))
        start = time.perf_counter()
        vector = loop.run_until_complete(engine.embedders.get(config).embed([text]))[0]
        parts["embed"].append(_ms(start))
        start = time.perf_counter()
        with engine.database.use(scope, config) as memsearch:
            memsearch.store.search(vector, query_text=text, top_k=TOP_K)
        parts["database"].append(_ms(start))

    try:
        for text in queries:
            index.queue.run("breakdown", functools.partial(one, text))
    finally:
        loop.close()
    return parts


def open_close_samples(
    index: MemsearchMemoryIndex, queries: Sequence[str]
) -> dict[str, list[float]]:
    """What a cold call pays on top of a warm one: opening the database, its first search
    (slower than a warm one), closing it."""
    engine, scope = index.engine, index.scope
    loop = asyncio.new_event_loop()
    parts: dict[str, list[float]] = {"open": [], "first_search": [], "close": []}

    def one(text: str) -> None:
        config = engine.config(scope)
        vector = loop.run_until_complete(engine.embedders.get(config).embed([text]))[0]
        start = time.perf_counter()
        memsearch, served = engine.database.open(scope, config)
        parts["open"].append(_ms(start))
        start = time.perf_counter()
        memsearch.store.search(vector, query_text=text, top_k=TOP_K)
        parts["first_search"].append(_ms(start))
        start = time.perf_counter()
        engine.database.close(memsearch, served, str(config.milvus.uri))
        parts["close"].append(_ms(start))

    release_database(index)
    try:
        for text in queries:
            index.queue.run("open-close", functools.partial(one, text))
    finally:
        loop.close()
    return parts


def _probe_entry(corpus: Corpus, number: int) -> tuple[Entry, str]:
    """An entry for the corpus's last day, after its last entry, with a word found nowhere else."""
    token = f"quokkaprobe{number:03d}x{corpus.seed}"
    day = corpus.days[-1]
    entry = Entry(
        anchor=Anchor(
            session=APPEND_SESSION,
            turn=f"{number:08x}",
            transcript=f"/home/dev/.pi/agent/sessions/--work-app--/{APPEND_SESSION}.jsonl",
        ),
        content=f"- the agent wired the {token} health check into the release checklist",
        written_at=datetime.combine(day, datetime.min.time()) + timedelta(hours=23, minutes=number),
    )
    return entry, token


def _rank(contents: Sequence[str], token: str) -> int | None:
    return next((rank for rank, text in enumerate(contents, 1) if token in text), None)


def append_samples(
    pimem: Pimem, scope: Scope, corpus: Corpus, first: int, count: int
) -> list[dict[str, Any]]:
    """Append an entry with the engine warm and search for it at once (pimem's read model takes
    the file's new chunks when the write returns: no index run needed), then index just its day
    file and search until found."""
    rounds = []
    for number in range(first, first + count):
        entry, token = _probe_entry(corpus, number)
        pimem.search_memory(scope, SearchQuery(text="what did we decide about the cache"))
        start = time.perf_counter()
        file = pimem.append_entry(scope, entry)
        written = time.perf_counter()
        early = pimem.search_memory(scope, SearchQuery(text=f"the {token} check", top_k=TOP_K))
        read_your_write_ms = _ms(written)
        written_ms = (written - start) * 1000
        start = time.perf_counter()
        report = pimem.index_memory(scope, "write", files=(file,))
        index_ms = _ms(start)
        hits = pimem.search_memory(scope, SearchQuery(text=f"the {token} check", top_k=TOP_K))
        searchable_ms = _ms(start)
        rounds.append(
            {
                "written_ms": written_ms,
                "read_your_write_ms": read_your_write_ms,
                "read_your_write_rank": _rank([hit.content for hit in early], token),
                "index_ms": index_ms,
                "searchable_ms": searchable_ms,
                "first_search_ms": searchable_ms - index_ms,
                "embedded_chunks": report.indexed_chunks,
                "rank": _rank([hit.content for hit in hits], token),
            }
        )
    return rounds


# -- the memsearch CLI -------------------------------------------------------------------------


def run_cli(cwd: Path, env: Mapping[str, str], *args: str) -> tuple[float, str]:
    """Run ``memsearch ARGS`` in *cwd*; its wall time in ms and its output."""
    start = time.perf_counter()
    done = subprocess.run(
        [str(MEMSEARCH), *args],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    elapsed = _ms(start)
    if done.returncode != 0:
        raise RuntimeError(f"memsearch {' '.join(args)} failed: {done.stderr.strip()[-2000:]}")
    return elapsed, done.stdout


def _cli_search(
    store: Store, env: Mapping[str, str], collection: str, text: str
) -> tuple[float, list[dict[str, Any]]]:
    elapsed, out = run_cli(
        store.project, env, "search", text, "-j", "-k", str(TOP_K), "-c", collection
    )
    hits: list[dict[str, Any]] = json.loads(out)
    return elapsed, hits


# A child's peak RSS as getrusage reports it counts the pages it shared with its parent
# before exec, so the CLI is started from a small Python process that reports it instead.
_PEAK_RSS = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
    "capture_output=True); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def cli_peak_rss_mb(cwd: Path, env: Mapping[str, str], *args: str) -> float:
    """The peak resident memory of one ``memsearch`` call in *cwd*, in MB."""
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, str(MEMSEARCH), *args],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return int(done.stdout) / 1024


def cli_search_samples(
    store: Store, env: Mapping[str, str], collection: str, queries: Sequence[str]
) -> list[float]:
    samples = []
    for text in queries:
        elapsed, hits = _cli_search(store, env, collection, text)
        if not hits:
            raise RuntimeError(f"memsearch found nothing for {text!r}")
        samples.append(elapsed)
    return samples


def cli_floor_samples(store: Store, env: Mapping[str, str], count: int) -> list[float]:
    """``memsearch --version``: the interpreter and CLI start-up every CLI call pays."""
    return [run_cli(store.project, env, "--version")[0] for _ in range(count)]


def cli_append_samples(
    pimem: Pimem,
    scope: Scope,
    store: Store,
    env: Mapping[str, str],
    corpus: Corpus,
    first: int,
    count: int,
    *,
    whole_store: bool,
) -> list[dict[str, Any]]:
    """Append through pimem, index with ``memsearch index``, search with ``memsearch search``.

    ``whole_store`` indexes the memory directory (what a hook calling the CLI does), else
    just the day file (the same partial update pimem makes).
    """
    rounds = []
    for number in range(first, first + count):
        entry, token = _probe_entry(corpus, number)
        file = pimem.append_entry(scope, entry)
        target = store.memory_dir if whole_store else file
        index_ms, _ = run_cli(store.project, env, "index", str(target), "-c", scope.collection)
        search_ms, hits = _cli_search(store, env, scope.collection, f"the {token} check")
        rounds.append(
            {
                "index_ms": index_ms,
                "searchable_ms": index_ms + search_ms,
                "first_search_ms": search_ms,
                "rank": _rank([str(hit.get("content", "")) for hit in hits], token),
            }
        )
    return rounds


# -- one corpus size ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Rig:
    """One size's store with everything the measurements share, in the store's environment."""

    plan: Plan
    corpus: Corpus
    store: Store
    env: dict[str, str]
    #: pimem with the default linger (its engine's is set to 0 for the cold searches).
    leased: Pimem
    scope: Scope
    warmup: list[str]
    queries: list[str]

    @property
    def index(self) -> MemsearchMemoryIndex:
        """The leased pimem's index, whose engine the breakdowns time and releases free."""
        return memsearch_index(self.leased, self.scope)


@dataclass
class SearchRun:
    warmup_ms: list[float]
    #: pimem's search API (its ranker), one query after another.
    pimem_ms: list[float]
    #: The same queries again, each through pimem's search API then memsearch's hybrid
    #: search, interleaved so both see the same load: the speed-up is taken from these.
    paired_pimem_ms: list[float]
    memsearch_ms: list[float]
    #: pimem's search API again, with a process spinning on the other core.
    busy_ms: list[float]
    #: CPU seconds of Python and native threads during pimem's warm searches, and their wall.
    pimem_cpu_s: dict[str, float]
    #: pimem's search step by step (stat check, embedding, both legs, fusion).
    pimem_breakdown_ms: dict[str, list[float]]
    #: memsearch's hybrid search step by step (configuration, embedding, database).
    breakdown_ms: dict[str, list[float]]
    open_close_ms: dict[str, list[float]]
    #: memsearch's hybrid search with a linger of 0 (the database opened per call).
    cold_ms: list[float]


@dataclass
class ReadModelRun:
    """The read model: its backfill on a store indexed before it existed, and fresh processes
    on its cache (memory and load, start-up step by step, ``pimem search`` whole)."""

    backfill: dict[str, Any]
    probe: dict[str, Any]
    startup: dict[str, float]
    first_result: dict[str, Any]


@dataclass
class CliRun:
    floor_ms: list[float]
    search_ms: list[float]
    rss_mb: float


@dataclass
class AppendRun:
    pimem: list[dict[str, Any]]
    cli_file: list[dict[str, Any]]
    cli_store: list[dict[str, Any]]


@dataclass
class SizeRun:
    """Everything measured at one corpus size (milliseconds unless named otherwise)."""

    chunks: int
    index: dict[str, Any]
    index_reused: bool
    search: SearchRun
    cli: CliRun
    append: AppendRun
    read_model: ReadModelRun
    rss: dict[str, dict[str, float]] = field(default_factory=dict)
    #: The share of the CPUs other processes took while indexing and while measuring.
    contention: dict[str, float] = field(default_factory=dict)


def _read_model_phase(rig: Rig, log: Callable[[str], None]) -> ReadModelRun:
    """Before any other search of this process: the backfill from the collection, then fresh
    processes on the cache it saved."""
    size = rig.store.size
    log(f"{size}: the read model from the collection, its fact vectors in the background")
    backfill = read_model.backfill(
        rig.leased, rig.index, rig.queries, TOP_K, log, pause=rig.plan.backfill_pause_s
    )
    log(f"{size}: read model backfilled in {backfill['backfill_s']:.0f} s; fresh processes")
    project, env = rig.store.project, rig.env
    probe = read_model.probe(project, env)
    startup = read_model.startup(project, env)
    first = read_model.first_result_samples(project, env, rig.queries[0], rig.plan.first_results)
    return ReadModelRun(backfill, probe, startup, first)


def _search_phase(rig: Rig) -> SearchRun:
    plan, scope, queries, index = rig.plan, rig.scope, rig.queries, rig.index
    warmup_ms = search_samples(rig.leased, scope, rig.warmup)
    # memsearch's first searches build Milvus Lite's BM25 data: not a warm search's cost.
    memsearch_samples(index, rig.warmup)
    before, start = thread_cpu_seconds(), time.perf_counter()
    pimem_ms = search_samples(rig.leased, scope, queries)
    threads = {kind: seconds - before[kind] for kind, seconds in thread_cpu_seconds().items()}
    threads["wall"] = time.perf_counter() - start
    both = read_model.side_by_side(rig.leased, index, queries, TOP_K)
    with read_model.busy_core():
        busy_ms = search_samples(rig.leased, scope, queries)
    pimem_breakdown = read_model.breakdown_samples(index, queries[: plan.breakdown_queries], TOP_K)
    breakdown = breakdown_samples(index, queries[: plan.breakdown_queries])
    open_close = open_close_samples(index, queries[: max(3, plan.cold_queries // 3)])
    with linger(index, 0):
        memsearch_samples(index, rig.warmup[:1])
        cold_ms = memsearch_samples(index, queries[: plan.cold_queries])
    return SearchRun(
        warmup_ms=warmup_ms,
        pimem_ms=pimem_ms,
        paired_pimem_ms=both["pimem"],
        memsearch_ms=both["memsearch"],
        busy_ms=busy_ms,
        pimem_cpu_s=threads,
        pimem_breakdown_ms=pimem_breakdown,
        breakdown_ms=breakdown,
        open_close_ms=open_close,
        cold_ms=cold_ms,
    )


def _cli_phase(rig: Rig) -> CliRun:
    store, env, collection = rig.store, rig.env, rig.scope.collection
    release_database(rig.index)
    floor_ms = cli_floor_samples(store, env, 3)
    # Untimed: warms the page cache, and measures the CLI's memory.
    rss = cli_peak_rss_mb(
        store.project, env, "search", rig.warmup[0], "-j", "-k", str(TOP_K), "-c", collection
    )
    search_ms = cli_search_samples(store, env, collection, rig.queries[: rig.plan.cli_queries])
    return CliRun(floor_ms, search_ms, rss)


def _append_phase(rig: Rig) -> AppendRun:
    plan = rig.plan
    pimem = append_samples(rig.leased, rig.scope, rig.corpus, 1, plan.appends)
    release_database(rig.index)
    first = plan.appends + 1
    cli = functools.partial(
        cli_append_samples, rig.leased, rig.scope, rig.store, rig.env, rig.corpus
    )
    cli_file = cli(first, plan.cli_appends, whole_store=False)
    cli_store = cli(first + plan.cli_appends, plan.cli_appends, whole_store=True)
    return AppendRun(pimem, cli_file, cli_store)


def _indexed(
    rig: Rig, reused: bool, model: OfflineModel, log: Callable[[str], None]
) -> dict[str, Any]:
    size = rig.store.size
    if reused:
        log(f"{size}: reusing the indexed store in {rig.store.root}")
        index: dict[str, Any] = json.loads(rig.store.marker.read_text())["index"]
        return index
    log(f"{size}: indexing {size} entries in-process (tens of chunks per second)")
    index = index_store(rig.leased, rig.scope, rig.store, model)
    log(f"{size}: indexed at {index['chunks_per_s']:.1f} chunks/s")
    return index


def measure_size(
    plan: Plan, size: int, workdir: Path, model: OfflineModel, log: Callable[[str], None]
) -> SizeRun:
    corpus = generate_corpus(size, seed=plan.seed)
    store, reused = prepare_store(workdir / f"store-{size}", corpus, model)
    env = store.environment(model)
    queries = [query.text for query in corpus.queries(plan.warmup + plan.warm_queries)]
    day_file = store.memory_dir / f"{corpus.days[-1].isoformat()}.md"
    original_day = day_file.read_text(encoding="utf-8")
    with environment(env):
        leased = Pimem.from_env()
        rig = Rig(
            plan=plan,
            corpus=corpus,
            store=store,
            env=env,
            leased=leased,
            scope=leased.resolve_scope(store.project),
            warmup=queries[: plan.warmup],
            queries=queries[plan.warmup :],
        )
        scope = rig.scope
        clock = CpuClock.now()
        index = _indexed(rig, reused, model, log)
        rss = {"after_index": _rss_mb()}
        contention = {"index": CpuClock.now().others_since(clock)}
        clock = CpuClock.now()
        read = _read_model_phase(rig, log)
        log(
            f"{size}: pimem search and memsearch's, {plan.warm_queries} warm each, then pimem's "
            f"with the other core busy; {plan.cold_queries} of memsearch's cold"
        )
        search = _search_phase(rig)
        log(f"{size}: memsearch CLI search, {plan.cli_queries} queries")
        cli = _cli_phase(rig)
        log(f"{size}: one appended entry: pimem {plan.appends}x, CLI {plan.cli_appends}x each")
        append = _append_phase(rig)
        rss["end"] = _rss_mb()
        contention["measurements"] = CpuClock.now().others_since(clock)
        # Back to the corpus as generated, so a kept store can be measured again.
        day_file.write_text(original_day, encoding="utf-8")
        leased.index_memory(scope, "bench-restore", files=(day_file,))
        release_database(rig.index)
    return SizeRun(size, index, reused, search, cli, append, read, rss, contention)


# -- summary and targets -----------------------------------------------------------------------

#: The earlier issues' targets: warm p50 per size, speed-up over the CLI, append to searchable.
TARGET_P50_MS = {2_000: 15.0, 20_000: 40.0}
TARGET_SPEEDUP = 50.0
TARGET_SEARCHABLE_MS = 300.0
#: Issue 16's (pimem's own ranker), at 20,000 entries: warm p50 through pimem's search API,
#: its spread, also with the other core busy; the speed-up over memsearch's hybrid search;
#: the read model's memory; a new process's first result with the read model cached.
RANKER_P50_MS = {20_000: 10.0}
RANKER_SPREAD = 1.5
RANKER_SPEEDUP = 10.0
RANKER_SPEEDUP_AT = 20_000
READ_MODEL_MB_PER_100K = 250.0
#: Below this many entries a read model's fixed cost (its libraries' allocations) dominates,
#: and a share per 100k entries says nothing: the memory target is judged from here up.
READ_MODEL_MB_FROM = 20_000
FIRST_RESULT_MS = 1_000.0
FIRST_RESULT_AT = 20_000


def _rounds(rounds: Sequence[Mapping[str, Any]], *keys: str) -> dict[str, dict[str, float]]:
    return {key: summarize([float(item[key]) for item in rounds]) for key in keys}


def _found(*rounds: Sequence[Mapping[str, Any]], key: str = "rank") -> bool:
    return all(item[key] is not None for part in rounds for item in part)


def _read_model_summary(read: ReadModelRun) -> dict[str, Any]:
    backfill, probe = read.backfill, read.probe
    return {
        "backfill": {
            key: backfill[key]
            for key in (
                "origin",
                "chunks",
                "first_search_ms",
                "pending_at_start",
                "pending_at_end",
                "backfill_s",
                "cache_saved",
                "rss_growth_mb",
                "pause_s",
            )
        }
        | {
            "searches": summarize(backfill["searches_ms"]),
            "answered": len(backfill["searches_ms"]),
        },
        "probe": probe,
        "mb_per_100k": probe["rss_growth_mb"] * 100_000 / max(1, probe["chunks"]),
        "startup": read.startup,
        "first_result": summarize(read.first_result["samples_ms"]),
    }


def summarize_size(run: SizeRun) -> dict[str, Any]:
    search, cli, append = run.search, run.cli, run.append
    pimem, cli_search = summarize(search.pimem_ms), summarize(cli.search_ms)
    paired, memsearch = summarize(search.paired_pimem_ms), summarize(search.memsearch_ms)
    return {
        "chunks": run.chunks,
        "index": run.index,
        "contention": run.contention,
        "pimem": pimem,
        "paired": paired,
        "memsearch": memsearch,
        "busy": summarize(search.busy_ms),
        "pimem_cpu_s": search.pimem_cpu_s,
        "cold": summarize(search.cold_ms),
        "cli": cli_search,
        "cli_floor": summarize(cli.floor_ms),
        "speedup_p50": cli_search["p50"] / pimem["p50"],
        "speedup_memsearch_p50": memsearch["p50"] / paired["p50"],
        "pimem_breakdown": {
            name: summarize(values) for name, values in search.pimem_breakdown_ms.items()
        },
        "breakdown": {name: summarize(values) for name, values in search.breakdown_ms.items()},
        "open_close": {name: summarize(values) for name, values in search.open_close_ms.items()},
        "append": _rounds(
            append.pimem,
            "written_ms",
            "read_your_write_ms",
            "index_ms",
            "searchable_ms",
            "first_search_ms",
        ),
        "append_found": _found(append.pimem),
        "read_your_write_found": _found(append.pimem, key="read_your_write_rank"),
        "cli_append_file": _rounds(append.cli_file, "index_ms", "searchable_ms"),
        "cli_append_store": _rounds(append.cli_store, "index_ms", "searchable_ms"),
        "cli_append_found": _found(append.cli_file, append.cli_store),
        "read_model": _read_model_summary(run.read_model),
    }


def _check(
    target: str, chunks: int | None, measured: float, unit: str, met: bool
) -> dict[str, Any]:
    return {"target": target, "chunks": chunks, "measured": measured, "unit": unit, "met": met}


def ranker_checks(size: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Issue 16's latency targets at one size (pimem's own ranker)."""
    chunks = size["chunks"]
    checks = []
    if chunks in RANKER_P50_MS:
        limit = RANKER_P50_MS[chunks]
        for key, how in (("pimem", ""), ("busy", ", the other core busy")):
            stats = size[key]
            checks += [
                _check(
                    f"pimem's search p50 <= {limit:g} ms{how}",
                    chunks,
                    stats["p50"],
                    "ms",
                    stats["p50"] <= limit,
                ),
                _check(
                    f"pimem's search p95 <= {RANKER_SPREAD:g}x its p50{how}",
                    chunks,
                    stats["p95"] / stats["p50"],
                    "x",
                    stats["p95"] <= RANKER_SPREAD * stats["p50"],
                ),
            ]
    if chunks == RANKER_SPEEDUP_AT:
        checks.append(
            _check(
                f">= {RANKER_SPEEDUP:g}x faster than memsearch's hybrid search (p50, same run)",
                chunks,
                size["speedup_memsearch_p50"],
                "x",
                size["speedup_memsearch_p50"] >= RANKER_SPEEDUP,
            )
        )
    read = size["read_model"]
    if chunks >= READ_MODEL_MB_FROM:
        checks.append(
            _check(
                f"read-model memory <= {READ_MODEL_MB_PER_100K:g} MB per 100k entries",
                chunks,
                read["mb_per_100k"],
                "MB",
                read["mb_per_100k"] <= READ_MODEL_MB_PER_100K,
            )
            | {"detail": f"{read['probe']['rss_growth_mb']:.0f} MB at {chunks:,}"}
        )
    if chunks == FIRST_RESULT_AT:
        first = read["first_result"]
        checks.append(
            _check(
                f"process start to first result <= {FIRST_RESULT_MS / 1000:g} s (`pimem search`, "
                "read model cached; median)",
                chunks,
                first["p50"],
                "ms",
                first["p50"] <= FIRST_RESULT_MS,
            )
        )
    backfill = read["backfill"]
    checks.append(
        _check(
            "a store indexed before the read model existed: fact vectors backfilled while "
            "every search is answered",
            chunks,
            backfill["backfill_s"],
            "s",
            # Read from the day files by their words since ADR 0026 (the collection before).
            backfill["origin"] in ("day files", "collection")
            and backfill["pending_at_end"] == 0
            and backfill["cache_saved"]
            and backfill["answered"] > 0,
        )
        | {"detail": f"{backfill['answered']} searches answered during it"}
    )
    return checks


def targets(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each of the issues' targets at each measured size, with the measured value."""
    checks = []
    for size in summary["sizes"]:
        chunks = size["chunks"]
        if chunks in TARGET_P50_MS:
            checks.append(
                _check(
                    f"warm search p50 <= {TARGET_P50_MS[chunks]:g} ms",
                    chunks,
                    size["pimem"]["p50"],
                    "ms",
                    size["pimem"]["p50"] <= TARGET_P50_MS[chunks],
                )
            )
        checks.append(
            _check(
                f">= {TARGET_SPEEDUP:g}x faster per query than the CLI (p50)",
                chunks,
                size["speedup_p50"],
                "x",
                size["speedup_p50"] >= TARGET_SPEEDUP,
            )
        )
        searchable = size["append"]["searchable_ms"]
        checks.append(
            _check(
                f"appended entry searchable <= {TARGET_SEARCHABLE_MS:g} ms (p50)",
                chunks,
                searchable["p50"],
                "ms",
                searchable["p50"] <= TARGET_SEARCHABLE_MS and size["append_found"],
            )
        )
        checks += ranker_checks(size)
    return checks


def run_plan(
    plan: Plan, workdir: Path, model: OfflineModel, log: Callable[[str], None]
) -> dict[str, Any]:
    """Measure every size of *plan*; the raw samples, their summary and the targets."""
    clock = CpuClock.now()
    runs = [measure_size(plan, size, workdir, model, log) for size in plan.sizes]
    summary = {"sizes": [summarize_size(run) for run in runs]}
    return {
        "contention": CpuClock.now().others_since(clock),
        "plan": asdict(plan),
        "runs": [asdict(run) for run in runs],
        "summary": summary,
        "targets": targets(summary),
        "rss_mb": _rss_mb(),
    }
