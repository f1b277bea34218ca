"""pimem's read model as the benchmarks measure it: searches, memory, start-up and backfill.

pimem ranks hits itself by default, on a read model of memsearch's collection kept in the
process that searches (ADR 0013). What that costs, for the latency and scaling parts:

* **searches** through ``Pimem.search_memory`` (query embedding included), beside memsearch's
  own hybrid search on the same engine and collection, and again with the other core busy
  (a process spinning on it);
* **where a search goes**: the check for changed files, the query embedding, both legs'
  candidates, the fusion and relevance;
* **memory**: the resident-memory growth of a fresh process when its read model loads from
  the cache (``python -m bench.read_model probe``), and the load time;
* **start-up**: a whole ``pimem search`` process, from its start to its first result, with the
  read model's cache present;
* **backfill**: a store indexed before the read model existed (no cache): the read model is
  read from the collection with one vector per chunk, and its per-fact vectors computed in
  the background while searches keep being answered.
"""

from __future__ import annotations

import contextlib
import gc
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pimem_core import Pimem
from pimem_core.types import Scope, SearchHit, SearchQuery
from pimem_plugins.memsearch.index import MemsearchMemoryIndex
from pimem_plugins.memsearch.recall.encoding import encoder_for
from pimem_plugins.memsearch.recall.ranking import DEPTH, rank, weights_for
from pimem_plugins.memsearch.recall.service import Recall
from pimem_plugins.memsearch.recall.text import tokens

PIMEM = Path(sys.executable).with_name("pimem")
Log = Callable[[str], None]


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def rss_mb() -> float:
    """This process's resident memory now, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def recall_of(index: MemsearchMemoryIndex) -> Recall:
    """*index*'s read model; refused when pimem's ranker is off (``PIMEM_RANKER``)."""
    if index.recall is None:
        raise RuntimeError("pimem's ranker is off (PIMEM_RANKER=memsearch): nothing to measure")
    return index.recall


def settle(recall: Recall, log: Log | None = None, label: str = "read model") -> None:
    """Wait until *recall* has every chunk's fact vectors and no background work left."""
    while True:
        finished = recall.idle(30.0)
        if finished and not recall.pending_facts():
            return
        if not finished and log is not None:
            log(f"{label}: {recall.pending_facts()} chunks still without fact vectors")
        time.sleep(0.05)


def cache_directory(recall: Recall) -> Path | None:
    """Where *recall* keeps its cache (the plugin's own answer; no public name for it yet)."""
    directory: Path | None = recall._collection.cache_dir()
    return directory


def pimem_search(pimem: Pimem, scope: Scope, text: str, top_k: int) -> tuple[SearchHit, ...]:
    """pimem's search API with its own ranker; refused when another ranker answered."""
    hits = pimem.search_memory(scope, SearchQuery(text=text, top_k=top_k))
    if not hits:
        raise RuntimeError(f"no hits for {text!r}")
    if any(hit.score_kind != "relevance" for hit in hits):
        raise RuntimeError(f"pimem's ranker was expected, got {hits[0].score_kind} scores")
    return hits


def memsearch_search(index: MemsearchMemoryIndex, text: str, top_k: int) -> tuple[SearchHit, ...]:
    """memsearch's hybrid search on the engine pimem opened (what ``PIMEM_RANKER=memsearch``
    serves), on its backend queue as pimem's own calls run."""
    engine, scope = index.engine, index.scope
    hits = index.queue.run("bench-memsearch", lambda: engine.reads.search(scope, text, top_k))
    if not hits:
        raise RuntimeError(f"memsearch found nothing for {text!r}")
    return hits


@contextlib.contextmanager
def busy_core() -> Iterator[int]:
    """A process spinning on a core while the block runs: the other core busy (2 cores here)."""
    process = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)  # scheduled and spinning
        yield process.pid
    finally:
        process.kill()
        process.wait(timeout=10)


def search_samples(pimem: Pimem, scope: Scope, queries: Sequence[str], top_k: int) -> list[float]:
    samples = []
    for text in queries:
        started = time.perf_counter()
        pimem_search(pimem, scope, text, top_k)
        samples.append(_ms(started))
    return samples


def side_by_side(
    pimem: Pimem, index: MemsearchMemoryIndex, queries: Sequence[str], top_k: int
) -> dict[str, list[float]]:
    """Each query through pimem's search API, then memsearch's hybrid search, interleaved, so
    both see the same load."""
    found: dict[str, list[float]] = {"pimem": [], "memsearch": []}
    for text in queries:
        started = time.perf_counter()
        pimem_search(pimem, index.scope, text, top_k)
        found["pimem"].append(_ms(started))
        started = time.perf_counter()
        memsearch_search(index, text, top_k)
        found["memsearch"].append(_ms(started))
    return found


def breakdown_samples(
    index: MemsearchMemoryIndex, queries: Sequence[str], top_k: int
) -> dict[str, list[float]]:
    """Where one of pimem's searches goes, its steps timed one by one as ``Recall.search`` runs
    them: the stat check of the store's files, the query embedding, both legs' candidates
    (faiss over the fact vectors, bm25s over the clean text) and the fusion with relevance."""
    recall = recall_of(index)
    encode = encoder_for(index.engine.embedder(index.scope), index.engine.event_loop)
    parts: dict[str, list[float]] = {"check": [], "embed": [], "legs": [], "fuse": []}
    for text in queries:
        started = time.perf_counter()
        recall.files.changed()
        parts["check"].append(_ms(started))
        started = time.perf_counter()
        vector = encode([text])[0]
        query_tokens = tokens(text)
        parts["embed"].append(_ms(started))
        started = time.perf_counter()
        candidates, share = recall.model.candidates(vector, query_tokens, DEPTH)
        parts["legs"].append(_ms(started))
        started = time.perf_counter()
        rank(candidates, query_tokens, top_k, recall.model.idf, weights=weights_for(share))
        parts["fuse"].append(_ms(started))
    return parts


# -- a store indexed before the read model existed -----------------------------------------------


def backfill(
    pimem: Pimem,
    index: MemsearchMemoryIndex,
    queries: Sequence[str],
    top_k: int,
    log: Log,
    *,
    pause: float = 0.25,
    timeout: float = 1800.0,
) -> dict[str, Any]:
    """Drop the read model's cache, then search: the first search reads the collection (one
    vector per chunk) and the per-fact vectors are computed in the background. Searches go on,
    *pause* seconds apart, until the background work is done (the cache saved again)."""
    recall = recall_of(index)
    if recall.loaded:
        raise RuntimeError("the read model is already loaded: measure the backfill first")
    directory = cache_directory(recall)
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)
    rss_before = rss_mb()
    started = time.perf_counter()
    pimem_search(pimem, index.scope, queries[0], top_k)
    first_ms = _ms(started)
    origin, chunks = recall.origin, len(recall.model)
    pending_at_start = recall.pending_facts()
    loaded = time.perf_counter()
    samples: list[float] = []
    pending: list[int] = []
    number = 0
    while recall.pending_facts() or not recall.idle(0.05):
        if time.perf_counter() - loaded > timeout:
            raise RuntimeError(f"the backfill did not finish in {timeout:.0f} s")
        text = queries[1 + number % (len(queries) - 1)]
        begun = time.perf_counter()
        pimem_search(pimem, index.scope, text, top_k)
        samples.append(_ms(begun))
        pending.append(recall.pending_facts())
        number += 1
        if number % 100 == 0:
            log(f"backfill: {recall.pending_facts()} chunks still without fact vectors")
        time.sleep(pause)
    return {
        "origin": origin,
        "chunks": chunks,
        "first_search_ms": first_ms,
        "rss_growth_mb": rss_mb() - rss_before,
        "pending_at_start": pending_at_start,
        "pending_at_end": recall.pending_facts(),
        "backfill_s": time.perf_counter() - loaded,
        "searches_ms": samples,
        "pending": pending,
        "pause_s": pause,
        "cache_saved": directory is not None and directory.is_dir(),
    }


# -- fresh processes -----------------------------------------------------------------------------


def probe(project: Path, env: Mapping[str, str]) -> dict[str, Any]:
    """The read model loaded by a fresh process on *project* (``python -m bench.read_model
    probe``): its load time and the resident memory it added."""
    return _child("probe", project, env)


def _probe(project: Path) -> dict[str, Any]:
    """In the probe process: pimem opened and its embedder warm (what any search needs), then
    the read model loaded, as a first search loads it."""
    pimem = Pimem.from_env()
    scope = pimem.resolve_scope(project)
    index = MemsearchMemoryIndex.opened_by(pimem, scope)
    recall = recall_of(index)
    encode = encoder_for(index.engine.embedder(scope), index.engine.event_loop)
    encode(["warm-up"])
    cache = cache_directory(recall)
    gc.collect()
    before, peak_before = rss_mb(), peak_rss_mb()
    started = time.perf_counter()
    index.queue.run("bench read model", recall.load)
    load_s = time.perf_counter() - started
    settle(recall)
    gc.collect()
    after = rss_mb()
    started = time.perf_counter()
    pimem_search(pimem, scope, "why did the release build fail", 5)
    return {
        "origin": recall.origin,
        "cache_present": cache is not None and cache.is_dir(),
        "chunks": len(recall.model),
        "facts": len(recall.model.generation().dense.owners),
        "pending_facts": recall.pending_facts(),
        "load_s": load_s,
        "rss_before_mb": before,
        "rss_after_mb": after,
        "rss_growth_mb": after - before,
        "peak_growth_mb": peak_rss_mb() - peak_before,
        "first_search_ms": _ms(started),
    }


def startup(project: Path, env: Mapping[str, str]) -> dict[str, float]:
    """Where a fresh process's first search goes: a small script (no benchmark code imported)
    times importing pimem, opening it (its plugins' imports), loading the embedder, loading the
    read model from its cache and the first search, one after another; what the process took
    beyond them (the interpreter's start and exit) is ``python``. Seconds each."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _STARTUP, str(project)],
        cwd=project,
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    whole = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"the start-up probe failed: {done.stderr.strip()[-2000:]}")
    steps: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return {"python": whole - sum(steps.values()), **steps, "whole": whole}


_STARTUP = """
import json, sys, time
from pathlib import Path
steps = {}
began = time.perf_counter()
from pimem_core import Pimem
from pimem_core.types import SearchQuery
from pimem_plugins.memsearch.index import MemsearchMemoryIndex
steps["import"] = time.perf_counter() - began
began = time.perf_counter()
pimem = Pimem.from_env()
scope = pimem.resolve_scope(Path(sys.argv[1]))
index = MemsearchMemoryIndex.opened_by(pimem, scope)
steps["open"] = time.perf_counter() - began
began = time.perf_counter()
index.engine.embedder(scope)
steps["embedder"] = time.perf_counter() - began
began = time.perf_counter()
index.queue.run("bench read model", index.recall.load)
steps["read_model"] = time.perf_counter() - began
began = time.perf_counter()
hits = pimem.search_memory(scope, SearchQuery(text="why did the release build fail", top_k=5))
assert hits and hits[0].score_kind == "relevance", hits
steps["first_search"] = time.perf_counter() - began
print(json.dumps(steps))
"""


def _child(mode: str, project: Path, env: Mapping[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.read_model", mode, str(project)],
        cwd=project,
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    if done.returncode != 0:
        raise RuntimeError(f"python -m bench.read_model {mode} failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def first_result_samples(
    project: Path, env: Mapping[str, str], query: str, runs: int
) -> dict[str, Any]:
    """``pimem search QUERY`` as a whole process, from its start to its exit with the result
    printed: one untimed run (the page cache), then *runs* timed ones."""

    def once() -> float:
        started = time.perf_counter()
        done = subprocess.run(
            [str(PIMEM), "search", query],
            cwd=project,
            env=dict(env),
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        elapsed = _ms(started)
        if done.returncode != 0 or not done.stdout.strip():
            raise RuntimeError(f"pimem search failed: {done.stderr.strip()[-2000:]}")
        return elapsed

    once()
    return {"query": query, "samples_ms": [once() for _ in range(runs)]}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or args[0] != "probe":
        print("usage: python -m bench.read_model probe PROJECT", file=sys.stderr)
        return 2
    print(json.dumps(_probe(Path(args[1]))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
