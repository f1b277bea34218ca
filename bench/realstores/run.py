"""The realstores part: memory pimem did not write, met cold, beside memsearch in the same run.

Each store of the development set (``--realstores PATH``, prepared by
``python -m bench.realstores.prepare PATH``) is copied into fresh projects, each with a
``HOME``, ``PIMEM_HOME``, runtime directory and Milvus Lite file of its own, so no cache,
collection or memory service exists before the copy is first searched. Everything pimem does
is measured through its command line, as a shell or a newly cloned teammate meets it
(``pimem search --json``, ``pimem index --json``, ``pimem status --json``), with the memory
service on. Per store, in four copies:

1. **cold**: the first ``pimem search`` with no service running (the client starts it);
2. **warm**: a service already warm from another project (a user's first search in this
   clone), then the first search; then ``pimem index`` runs in the background while the
   store's queries are searched in a loop, one after the other, until the index run returned
   and ``pimem status`` shows no work pending; then every query once more (after indexing);
3. **index**: a cold ``pimem index`` (service start included), timed to its return and to
   the moment status shows nothing pending, with the resident memory of every process of that
   copy (the client, the service and their children) sampled throughout;
4. **memsearch**: ``memsearch index`` of the same files with the same model, its resident
   memory sampled likewise, then ``memsearch search`` of every query.

Hits are judged by :class:`bench.realstores.dataset.Query`: an answerable query is found at
rank r when the r-th hit comes from its day file and holds its entry's text; a no-answer query
is answered right when the best hit's relevance is below the documented threshold (or there is
no hit). Every best-first list pimem returns is checked for a relevance that rises down the
list. The JSON keeps ranks, scores and timings, never an entry's text.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import itertools
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.latency import MEMSEARCH
from bench.read_model import PIMEM
from bench.realstores.dataset import (
    KINDS,
    MEMORY_DIR,
    Query,
    Store,
    ambiguous,
    entries,
    load_queries,
    load_stores,
    verify,
)
from bench.service import Sampler, memory_of, reap, service_pid, stop_service
from pimem_plugins.memsearch.offline_model import OfflineModel

FORMAT = 1
TOP_K = 10
#: A search that has not answered by then is ended and counted as timed out (pi's own
#: patience for a memory call is 120 s; a shell user's is far shorter).
SEARCH_TIMEOUT_S = 60.0
#: The first search of a cold copy may index in the request (pimem before issue 35).
FIRST_TIMEOUT_S = 300.0
INDEX_PATIENCE_S = 900.0
SETTLE_PATIENCE_S = 300.0
#: How often ``pimem status`` is asked whether background work is still pending.
STATUS_EVERY_S = 2.0
#: A later score may exceed an earlier one by this much and still count as not rising.
EPSILON = 1e-6
MEMSEARCH_COLLECTION = "bench_realstores"
#: Settings of the caller's that would reach into its own pimem, memsearch or service.
_FOREIGN = ("PIMEM_", "PI_MEMSEARCH_", "MEMSEARCH_", "XDG_RUNTIME_DIR")
_WARM_NOTE = (
    "## Session 09:00\n\n### 09:00\n"
    "<!-- session:warm-up turn:t1 transcript:/warm-up/session.jsonl -->\n"
    "- the warm-up project keeps a single note about its build cache\n"
)
_CHUNKS = re.compile(r"Indexed (\d+) chunks")

Log = Callable[[str], None]


@dataclass(frozen=True)
class RealStoresPlan:
    #: The stores measured, by name (``None``: every store of the set).
    stores: tuple[str, ...] | None


REALSTORES_FULL = RealStoresPlan(stores=None)
#: ``--quick``: the two smallest stores.
REALSTORES_QUICK = RealStoresPlan(stores=("desktop-client", "dolios"))


# -- a cold copy -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Copy:
    """One project holding a store's day files, with everything pimem and memsearch keep
    outside it (home, pimem's data, runtime directory, database) fresh beside it."""

    root: Path

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def memory(self) -> Path:
        return self.project / MEMORY_DIR

    @property
    def run(self) -> Path:
        return self.root / "run"

    def environment(self, model: OfflineModel) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if not key.startswith(_FOREIGN)}
        return (
            env
            | model.environment()
            | {
                "HOME": str(self.root / "home"),
                "PIMEM_HOME": str(self.root / "pimem-home"),
                "XDG_RUNTIME_DIR": str(self.run),
                "PIMEM_SERVICE": "on",
            }
        )


def cold_copy(root: Path, memory: Path, model: OfflineModel) -> Copy:
    """A fresh copy of the day files in *memory* under *root* (anything there before is
    removed: it is this part's own)."""
    if root.exists():
        shutil.rmtree(root)
    copy = Copy(root)
    (copy.project / ".git").mkdir(parents=True)
    shutil.copytree(memory, copy.memory)
    config = root / "home" / ".memsearch" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        f'[embedding]\nprovider = "{model.provider}"\nmodel = "{model.model}"\n\n'
        f'[milvus]\nuri = "{root / "milvus.db"}"\n'
    )
    (root / "pimem-home").mkdir()
    copy.run.mkdir(mode=0o700)
    return copy


def processes(copy: Copy) -> list[int]:
    """The processes started for *copy* (its runtime directory in their environment), each
    tree once: the client, the memory service it started (a daemon, not its child), Milvus
    Lite's server below them, memsearch's CLI."""
    marker = f"XDG_RUNTIME_DIR={copy.run}".encode()
    marked: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                stat = (entry / "stat").read_text()
                marked[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    return [pid for pid, parent in marked.items() if parent not in marked]


def _close(copy: Copy, env: Mapping[str, str]) -> None:
    """End the copy's memory service and anything else it left running."""
    with contextlib.suppress(Exception):
        stop_service(env)
    reap(copy.run)


# -- one call --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    ms: float
    ok: bool
    timeout: bool
    #: (source, content, score) of each hit, best first.
    hits: tuple[tuple[str, str, float], ...]
    #: What the answer says beside its hits (fields of a JSON object, pimem's notes).
    meta: dict[str, Any]
    note: str


def _notes(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return " | ".join(lines)[-400:]


def _hits(data: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The hits of a ``--json`` answer, a list as pimem and memsearch print it today or an
    object holding it (and saying, for one, how much was ranked by meaning)."""
    if isinstance(data, list):
        return data, {}
    if isinstance(data, dict):
        found = data.get("hits", data.get("results", []))
        meta = {
            key: value
            for key, value in data.items()
            if key not in ("hits", "results")
            and isinstance(value, str | int | float | bool | type(None))
        }
        return list(found) if isinstance(found, list) else [], meta
    return [], {}


def call(
    command: Sequence[str], cwd: Path, env: Mapping[str, str], timeout: float
) -> tuple[float, subprocess.CompletedProcess[str] | None]:
    """Run *command*; its wall time in ms and what it did (``None``: ended at *timeout*)."""
    start = time.perf_counter()
    try:
        done = subprocess.run(
            list(command), cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return (time.perf_counter() - start) * 1000, None
    return (time.perf_counter() - start) * 1000, done


def search(command: Sequence[str], cwd: Path, env: Mapping[str, str], timeout: float) -> Answer:
    ms, done = call(command, cwd, env, timeout)
    if done is None:
        return Answer(ms=ms, ok=False, timeout=True, hits=(), meta={}, note="timed out")
    note = _notes(done.stderr)
    if done.returncode != 0:
        return Answer(ms=ms, ok=False, timeout=False, hits=(), meta={}, note=note)
    try:
        found, meta = _hits(json.loads(done.stdout))
    except json.JSONDecodeError:
        return Answer(ms=ms, ok=False, timeout=False, hits=(), meta={}, note=note)
    hits = tuple(
        (str(hit.get("source", "")), str(hit.get("content", "")), float(hit.get("score", 0.0)))
        for hit in found
    )
    return Answer(ms=ms, ok=True, timeout=False, hits=hits, meta=meta, note=note)


def pimem_search(copy: Copy, env: Mapping[str, str], text: str, timeout: float) -> Answer:
    # After "--": a query may start with a dash ("--flash-attn ...").
    return search(
        [str(PIMEM), "search", "--json", "-k", str(TOP_K), "--", text], copy.project, env, timeout
    )


def memsearch_search(copy: Copy, env: Mapping[str, str], text: str) -> Answer:
    command = [str(MEMSEARCH), "search", "-j", "-k", str(TOP_K), "-c", MEMSEARCH_COLLECTION]
    return search([*command, "--", text], copy.project, env, FIRST_TIMEOUT_S)


def rises(scores: Sequence[float]) -> int:
    """How many times a best-first list's score goes up from one hit to the next."""
    return sum(1 for before, after in itertools.pairwise(scores) if after > before + EPSILON)


def record(query: Query, answer: Answer, at_s: float, **extra: Any) -> dict[str, Any]:
    """What the JSON keeps of one search: no entry text, only where the right one ranked."""
    scores = [hit[2] for hit in answer.hits]
    return {
        "id": query.id,
        "kind": query.kind,
        "at_s": round(at_s, 3),
        "ms": round(answer.ms, 1),
        "ok": answer.ok,
        "timeout": answer.timeout,
        "rank": query.rank([(source, content) for source, content, _ in answer.hits])
        if query.relevant
        else None,
        "scores": [round(score, 6) for score in scores],
        "rises": rises(scores),
        "meta": answer.meta,
        "note": answer.note,
        **extra,
    }


def pending(project: Path, env: Mapping[str, str]) -> bool:
    """Whether ``pimem status`` shows indexing work still under way: facts the ranker still
    embeds, an index run in progress, or files left to index (each only if status says so;
    a status that fails to answer counts as pending)."""
    _, done = call([str(PIMEM), "status", "--json"], project, env, SEARCH_TIMEOUT_S)
    if done is None or done.returncode != 0:
        return True
    try:
        status = json.loads(done.stdout)
    except json.JSONDecodeError:
        return True
    ranker = status.get("ranker") or {}
    index = status.get("index") or {}
    if ranker.get("facts_pending"):
        return True
    if str(index.get("status", "")).lower() in ("indexing", "running", "in_progress", "queued"):
        return True
    progress = index.get("progress")
    if isinstance(progress, dict):
        done_, total = progress.get("done"), progress.get("total")
        if isinstance(done_, int) and isinstance(total, int) and done_ < total:
            return True
    return bool(index.get("pending_files"))


# -- the phases ------------------------------------------------------------------------------


def first_cold(copy: Copy, env: Mapping[str, str], query: Query) -> dict[str, Any]:
    """The first search in a copy with no memory service running."""
    if service_pid(env) is not None:
        raise RuntimeError("a memory service already runs for a cold copy")
    answer = pimem_search(copy, env, query.text, FIRST_TIMEOUT_S)
    return record(query, answer, 0.0)


def warm_up(copy: Copy, env: Mapping[str, str]) -> float:
    """A search and an index run in another project, then nothing pending there: the
    service started, its model loaded and idle, as a user's memory service is when they clone
    a repository whose memory is committed. The search's time."""
    other = copy.root / "warm-up"
    (other / ".git").mkdir(parents=True)
    (other / MEMORY_DIR).mkdir(parents=True)
    (other / MEMORY_DIR / "2026-01-05.md").write_text(_WARM_NOTE, encoding="utf-8")
    answer = search([str(PIMEM), "search", "build cache", "--json"], other, env, FIRST_TIMEOUT_S)
    if not answer.ok or service_pid(env) is None:
        raise RuntimeError(f"the warm-up search failed: {answer.note}")
    call([str(PIMEM), "index", "--json"], other, env, INDEX_PATIENCE_S)
    deadline = time.monotonic() + SETTLE_PATIENCE_S
    while pending(other, env) and time.monotonic() < deadline:
        time.sleep(STATUS_EVERY_S)
    return answer.ms


def during_and_after(
    copy: Copy, env: Mapping[str, str], queries: Sequence[Query], log: Log
) -> dict[str, Any]:
    """``pimem index`` in the background and the queries in a loop until it returned and
    status shows nothing pending; then each query once more."""
    began = time.perf_counter()
    indexer = subprocess.Popen(
        [str(PIMEM), "index", "--json"],
        cwd=copy.project,
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    during: list[dict[str, Any]] = []
    returned_s: float | None = None
    settled_s: float | None = None
    asked_s = -STATUS_EVERY_S
    for query in itertools.cycle(queries):
        now = time.perf_counter() - began
        if returned_s is None and indexer.poll() is not None:
            returned_s = now
        if returned_s is not None and now - asked_s >= STATUS_EVERY_S:
            asked_s = now
            if not pending(copy.project, env):
                settled_s = time.perf_counter() - began
                break
        if now > INDEX_PATIENCE_S + SETTLE_PATIENCE_S:
            break
        answer = pimem_search(copy, env, query.text, SEARCH_TIMEOUT_S)
        during.append(record(query, answer, now, indexing=indexer.poll() is None))
    if indexer.poll() is None:
        indexer.kill()
    out, err = indexer.communicate()
    log(
        f"  warm copy: pimem index returned after {returned_s or float('nan'):.1f} s, "
        f"settled after {settled_s or float('nan'):.1f} s; {len(during)} searches meanwhile"
    )
    after = []
    for query in queries:
        answer = pimem_search(copy, env, query.text, SEARCH_TIMEOUT_S)
        after.append(record(query, answer, time.perf_counter() - began))
    return {
        "index": {
            "returncode": indexer.returncode,
            "returned_s": returned_s,
            "settled_s": settled_s,
            "note": _notes(err),
            "report": _json_or_none(out),
        },
        "during": during,
        "after": after,
    }


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def _mb(copy: Copy) -> float:
    return float(memory_of(processes(copy))["rss_mb"])


def pimem_index(copy: Copy, env: Mapping[str, str]) -> dict[str, Any]:
    """A cold ``pimem index``: to its return, and until status shows nothing pending."""
    began = time.perf_counter()
    with Sampler(lambda: processes(copy)) as sampler:
        ms, done = call([str(PIMEM), "index", "--json"], copy.project, env, INDEX_PATIENCE_S)
        at_return = _mb(copy)
        settled_s = None
        while time.perf_counter() - began < INDEX_PATIENCE_S + SETTLE_PATIENCE_S:
            if not pending(copy.project, env):
                settled_s = time.perf_counter() - began
                break
            time.sleep(STATUS_EVERY_S)
    report = _json_or_none(done.stdout) if done is not None else None
    return {
        "ms": ms,
        "returncode": None if done is None else done.returncode,
        "settled_s": settled_s,
        "chunks": report.get("indexed_chunks") if isinstance(report, dict) else None,
        "peak_rss_mb": sampler.peak_mb,
        "rss_at_return_mb": at_return,
        "rss_settled_mb": _mb(copy),
        "note": "" if done is None else _notes(done.stderr),
    }


def memsearch_index(copy: Copy, env: Mapping[str, str]) -> dict[str, Any]:
    command = [str(MEMSEARCH), "index", "-c", MEMSEARCH_COLLECTION, str(copy.memory)]
    with Sampler(lambda: processes(copy)) as sampler:
        ms, done = call(command, copy.project, env, INDEX_PATIENCE_S)
    if done is None or done.returncode != 0:
        raise RuntimeError(f"memsearch index failed: {'' if done is None else done.stderr}")
    found = _CHUNKS.search(done.stdout)
    return {
        "ms": ms,
        "chunks": int(found.group(1)) if found else None,
        "peak_rss_mb": sampler.peak_mb,
    }


# -- a store ---------------------------------------------------------------------------------


def _entries(store: Store, root: Path) -> int:
    memory = store.memory(root)
    return sum(
        1
        for file in store.files
        for entry in entries((memory / file.name).read_text(encoding="utf-8"))
        if entry.startswith("### ")
    )


def measure_store(
    store: Store, root: Path, work: Path, model: OfflineModel, log: Log
) -> dict[str, Any]:
    queries = load_queries(store)
    first = next(query for query in queries if query.relevant)
    source = store.memory(root)
    result: dict[str, Any] = {
        "store": store.name,
        "repo": store.repo,
        "commit": store.commit,
        "agent": store.agent,
        "files": len(store.files),
        "bytes": sum(file.bytes for file in store.files),
        "entries": _entries(store, root),
        "queries": {kind: sum(q.kind == kind for q in queries) for kind in KINDS},
    }

    copy = cold_copy(work / "cold", source, model)
    env = copy.environment(model)
    try:
        result["first_cold"] = first_cold(copy, env, first)
    finally:
        _close(copy, env)
    log(f"  cold copy: first search {result['first_cold']['ms']:.0f} ms")

    copy = cold_copy(work / "warm", source, model)
    env = copy.environment(model)
    try:
        warm_up_ms = warm_up(copy, env)
        answer = pimem_search(copy, env, first.text, FIRST_TIMEOUT_S)
        result["first_warm"] = record(first, answer, 0.0, warm_up_ms=warm_up_ms)
        log(f"  warm copy: first search {answer.ms:.0f} ms (warm-up {warm_up_ms:.0f} ms)")
        result |= during_and_after(copy, env, queries, log)
    finally:
        _close(copy, env)

    copy = cold_copy(work / "index", source, model)
    env = copy.environment(model)
    try:
        result["pimem_index"] = pimem_index(copy, env)
    finally:
        _close(copy, env)
    index = result["pimem_index"]
    log(f"  index copy: pimem index {index['ms'] / 1000:.1f} s, peak {index['peak_rss_mb']:.0f} MB")

    copy = cold_copy(work / "memsearch", source, model)
    env = copy.environment(model)
    try:
        result["memsearch_index"] = memsearch_index(copy, env)
        theirs = []
        began = time.perf_counter()
        for query in queries:
            answer = memsearch_search(copy, env, query.text)
            theirs.append(record(query, answer, time.perf_counter() - began))
        result["memsearch"] = theirs
    finally:
        _close(copy, env)
    index = result["memsearch_index"]
    log(
        f"  memsearch: index {index['ms'] / 1000:.1f} s, peak {index['peak_rss_mb']:.0f} MB; "
        f"{len(queries)} searches"
    )
    shutil.rmtree(work, ignore_errors=True)
    return result


def run_realstores(
    path: Path, workdir: Path, model: OfflineModel, log: Log, *, quick: bool
) -> dict[str, Any]:
    """Measure the development set prepared at *path* (two small stores with *quick*)."""
    from bench.realstores.summary import summarize

    plan = REALSTORES_QUICK if quick else REALSTORES_FULL
    stores = [s for s in load_stores() if plan.stores is None or s.name in plan.stores]
    for store in stores:  # every store checked before anything is measured
        verify(path, store)
        problems = ambiguous(path, store, load_queries(store))
        if problems:
            raise RuntimeError("; ".join(problems))
    raw = []
    for store in stores:
        log(f"realstores: {store.name} ({store.repo}, {store.agent})")
        raw.append(measure_store(store, path, workdir / "realstores" / store.name, model, log))
    return {
        "plan": asdict(plan),
        "memsearch": importlib.metadata.version("memsearch"),
        "pimem": importlib.metadata.version("pimem"),
        "stores": raw,
        "summary": summarize(raw),
    }
