"""The LoCoMo part: recall on public conversational memory, right after each index run.

Each development conversation is written as a store (:mod:`bench.locomo.dataset`), indexed by
``Pimem.index_memory`` as ``pimem index`` would, and asked every question at once, before
anything else runs: the first searches after an index run, which is when a user who cloned or
pulled memory asks. Every question is asked of pimem's ranker and of memsearch's hybrid search
on the same collection, in the same process (as :mod:`bench.quality.run` does). Then, on the
same stores: the calibration of pimem's relevance (right top hits above the documented
threshold, off-topic questions below it) and what auto-context would inject for each question.

Everything runs against an isolated memsearch home inside the work directory, built afresh on
each run (a kept index would not measure the index run).
"""

from __future__ import annotations

import importlib.metadata
import shutil
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from bench.latency import environment, memsearch_index, summarize
from bench.locomo.dataset import CATEGORIES, DEVELOPMENT, Conversation, read, write_store
from bench.locomo.offtopic import OFF_TOPIC
from bench.quality.metrics import score
from bench.quality.run import isolated_environment, memsearch_search, pimem_search
from pimem_core import Pimem
from pimem_core.types import RELEVANCE_THRESHOLD, Anchor, SearchHit
from pimem_plugins.auto_context import DEFAULT_MIN_RELEVANCE, DEFAULT_MIN_SIMILARITY, select_chunks
from pimem_plugins.memsearch.offline_model import OfflineModel

FORMAT = 1
TOP_K = 10
#: ``--quick``: two conversations.
QUICK = DEVELOPMENT[:2]
RANKERS = ("pimem", "memsearch")

Log = Callable[[str], None]


def _turn(hit: SearchHit) -> str | None:
    anchor = Anchor.parse(hit.content)
    return None if anchor is None else anchor.turn


def _rank(hits: Sequence[SearchHit], evidence: Sequence[str]) -> int | None:
    return next((i for i, hit in enumerate(hits, 1) if _turn(hit) in evidence), None)


def _timed(call: Callable[[], tuple[SearchHit, ...]]) -> tuple[tuple[SearchHit, ...], float]:
    began = time.perf_counter()
    hits = call()
    return hits, (time.perf_counter() - began) * 1000


def _home(root: Path, model: OfflineModel) -> dict[str, str]:
    """A fresh memsearch home in *root*: the offline model and a Milvus Lite file of its own."""
    if root.exists():
        shutil.rmtree(root)
    config = root / "home" / ".memsearch" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        f'[embedding]\nprovider = "{model.provider}"\nmodel = "{model.model}"\n\n'
        f'[milvus]\nuri = "{root / "milvus.db"}"\n'
    )
    return isolated_environment(root / "home", root / "projects", model)


def _conversation(
    pimem: Pimem, conversation: Conversation, project: Path, log: Log
) -> dict[str, Any]:
    entries = write_store(conversation, project / ".memsearch" / "memory")
    (project / ".git").mkdir(exist_ok=True)
    scope = pimem.resolve_scope(project)
    began = time.perf_counter()
    report = pimem.index_memory(scope, "bench-locomo")
    seconds = time.perf_counter() - began
    if report.failed_files or report.indexed_chunks != entries:
        raise RuntimeError(
            f"{conversation.name}: {entries} entries made {report.indexed_chunks} chunks "
            f"({len(report.failed_files)} files failed)"
        )
    log(f"{conversation.name}: {entries} entries indexed in {seconds:.1f} s")
    index = memsearch_index(pimem, scope)
    questions = []
    for question in conversation.questions:
        text = question.text
        ours, ours_ms = _timed(partial(pimem_search, pimem, scope, text, TOP_K))
        theirs, theirs_ms = _timed(partial(memsearch_search, index, text, TOP_K))
        similar = index.similar(question.text, 3)
        chosen = select_chunks(similar, min_similarity=DEFAULT_MIN_SIMILARITY, snapshot=None)
        questions.append(
            {
                "category": question.category,
                "ranks": {
                    "pimem": _rank(ours, question.evidence),
                    "memsearch": _rank(theirs, question.evidence),
                },
                "ms": {"pimem": ours_ms, "memsearch": theirs_ms},
                "top_relevance": ours[0].score if ours else None,
                "injected": len(chosen),
                "served": any(_turn(hit) in question.evidence for hit in chosen),
            }
        )
    off_topic = []
    for name, text in OFF_TOPIC:
        if name != conversation.name:
            continue
        hits = pimem_search(pimem, scope, text, TOP_K)
        similar = index.similar(text, 3)
        chosen = select_chunks(similar, min_similarity=DEFAULT_MIN_SIMILARITY, snapshot=None)
        off_topic.append(
            {"top_relevance": hits[0].score if hits else None, "injected": len(chosen)}
        )
    return {
        "conversation": conversation.name,
        "entries": entries,
        "index_s": seconds,
        "questions": questions,
        "off_topic": off_topic,
    }


def run_locomo(
    zip_path: Path, workdir: Path, model: OfflineModel, log: Log, *, quick: bool
) -> dict[str, Any]:
    """Measure every development conversation (two with *quick*); raw records and summary."""
    conversations = read(zip_path, QUICK if quick else DEVELOPMENT)
    root = workdir / "locomo"
    raw = []
    with environment(_home(root, model)):
        pimem = Pimem.from_env()
        index = None
        for conversation in conversations:
            raw.append(
                _conversation(pimem, conversation, root / "projects" / conversation.name, log)
            )
            index = memsearch_index(
                pimem, pimem.resolve_scope(root / "projects" / conversation.name)
            )
        if index is not None:
            index.queue.run("release", index.engine.release)
    return {
        "zip": zip_path.name,
        "memsearch": importlib.metadata.version("memsearch"),
        "conversations": raw,
        "summary": summarize_runs(raw),
    }


def summarize_runs(raw: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per ranker, overall and per category: R@1/5/10, MRR@10; latency; index throughput;
    calibration; auto-context."""
    questions = [q for run in raw for q in run["questions"]]
    off_topic = [q for run in raw for q in run["off_topic"]]

    def scores(selected: Sequence[dict[str, Any]]) -> dict[str, Any]:
        return {name: score(q["ranks"][name] for q in selected).to_json() for name in RANKERS}

    by_category = {
        label: scores([q for q in questions if q["category"] == number])
        for number, label in CATEGORIES.items()
    }
    right = [q for q in questions if q["ranks"]["pimem"] == 1]
    entries = sum(run["entries"] for run in raw)
    seconds = sum(run["index_s"] for run in raw)
    return {
        "conversations": [run["conversation"] for run in raw],
        "questions": len(questions),
        "entries": entries,
        "overall": scores(questions),
        "categories": by_category,
        "latency_ms": {name: summarize([q["ms"][name] for q in questions]) for name in RANKERS},
        "index": {"entries": entries, "seconds": seconds, "entries_per_s": entries / seconds},
        "calibration": {
            "threshold": RELEVANCE_THRESHOLD,
            "right_top_hits": len(right),
            "right_top_hits_above": _share(
                q["top_relevance"] >= RELEVANCE_THRESHOLD for q in right
            ),
            "off_topic": len(off_topic),
            "off_topic_below": _share(
                q["top_relevance"] is None or q["top_relevance"] < RELEVANCE_THRESHOLD
                for q in off_topic
            ),
        },
        "auto_context": {
            "floor": DEFAULT_MIN_RELEVANCE,
            # Every question has evidence in its store: a perfect ranker serves them all.
            "served_ceiling": len(questions),
            "served": sum(q["served"] for q in questions),
            "served_share": _share(q["served"] for q in questions),
            "no_answer_injected": _share(q["injected"] > 0 for q in off_topic),
        },
    }


def _share(flags: Any) -> float:
    values = [bool(flag) for flag in flags]
    return sum(values) / len(values) if values else 0.0
