"""From raw query records to the tables of the report, and the issue's targets (pure)."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bench.quality.facts import STYLES
from bench.quality.metrics import score, share

RETRIEVERS = ("pimem", "dense", "bm25")
TARGET_SIZE = 10_000
TARGET_R5 = 0.90
TARGET_MRR = 0.75

Record = Mapping[str, Any]


def _group(records: Sequence[Record], group: str) -> list[Record]:
    return [record for record in records if record["group"] == group]


def l1_tables(records: Sequence[Record]) -> dict[str, dict[str, dict[str, float]]]:
    """Scores per retriever and style (and over all styles), on the project queries."""
    project = _group(records, "project")
    tables: dict[str, dict[str, dict[str, float]]] = {}
    for retriever in RETRIEVERS:
        row = {
            style: score(r["ranks"][retriever] for r in project if r["style"] == style).to_json()
            for style in STYLES
        }
        row["all"] = score(r["ranks"][retriever] for r in project).to_json()
        tables[retriever] = row
    return tables


def top5_table(records: Sequence[Record]) -> dict[str, dict[str, float]]:
    """pimem called with its default top_k=5, as an agent calls it: R@1, R@5, MRR@5."""
    project = _group(records, "project")
    table = {}
    for style in (*STYLES, "all"):
        chosen = [r for r in project if style in ("all", r["style"])]
        scores = score((r["ranks"]["pimem_k5"] for r in chosen), cutoff=5)
        table[style] = {"n": scores.n, "r1": scores.r1, "r5": scores.r5, "mrr": scores.mrr}
    return table


def by_kind(records: Sequence[Record]) -> dict[str, dict[str, dict[str, float]]]:
    """R@5 per fact kind (all styles together) for each retriever."""
    project = _group(records, "project")
    kinds = sorted({r["kind"] for r in project})
    return {
        retriever: {
            kind: {
                "n": (
                    scores := score(r["ranks"][retriever] for r in project if r["kind"] == kind)
                ).n,
                "r5": scores.r5,
            }
            for kind in kinds
        }
        for retriever in RETRIEVERS
    }


NEAR_BUCKETS = (("0", 0, 0), ("1-2", 1, 2), ("3+", 3, 10**9))


def near_duplicate_table(records: Sequence[Record]) -> dict[str, Any]:
    """R@5 by how many near-duplicates the gold fact has (facts naming three slots or more),
    per style and retriever: what a bigger store makes harder."""
    project = [r for r in _group(records, "project") if r.get("near_duplicates") is not None]
    table: dict[str, Any] = {
        "median": statistics.median(r["near_duplicates"] for r in project) if project else 0,
        "n_facts": len(project) // len(STYLES),
    }
    for style in STYLES:
        row = {}
        for name, low, high in NEAR_BUCKETS:
            chosen = [
                r for r in project if r["style"] == style and low <= r["near_duplicates"] <= high
            ]
            row[name] = {
                "n": len(chosen),
                **{
                    retriever: score(r["ranks"][retriever] for r in chosen).r5
                    for retriever in RETRIEVERS
                },
            }
        table[style] = row
    return table


def overlap(records: Sequence[Record]) -> dict[str, float]:
    """Mean share of a query's content words found in its gold entry, per style."""
    project = _group(records, "project")
    return {
        style: statistics.fmean(r["overlap"] for r in project if r["style"] == style)
        for style in STYLES
        if any(r["style"] == style for r in project)
    }


def _rules(
    floors: Mapping[str, float],
) -> dict[str, tuple[str, Callable[[Mapping[str, Any]], bool]]]:
    """Each auto-context rule: the candidates it looks at, and which of them it keeps."""
    return {
        "pimem": ("recall", lambda hit: bool(hit["similarity"] >= floors["pimem_similarity"])),
        "memsearch": (
            "hybrid_recall",
            lambda hit: bool(hit["score"] >= floors["memsearch_score"]),
        ),
    }


def abstention(records: Sequence[Record], floors: Mapping[str, float]) -> dict[str, Any]:
    """What an auto-context injection would have pushed, under pimem's similarity floor and
    under pi-memsearch's score floor: nothing for no-answer queries, the gold for the others."""
    none, answerable = _group(records, "none"), _group(records, "project")
    table: dict[str, Any] = {}
    for name, (candidates, kept) in _rules(floors).items():
        injected_none = [[hit for hit in r[candidates] if kept(hit)] for r in none]
        injected = [[hit for hit in r[candidates] if kept(hit)] for r in answerable]
        table[name] = {
            "abstained": share(not chunks for chunks in injected_none),
            "mean_injected_no_answer": statistics.fmean(len(c) for c in injected_none)
            if none
            else 0.0,
            "gold_injected": share(any(hit["gold"] for hit in chunks) for chunks in injected),
            "any_injected": share(bool(chunks) for chunks in injected),
            "only_wrong_injected": share(
                bool(chunks) and not any(hit["gold"] for hit in chunks) for chunks in injected
            ),
        }
    table["n_no_answer"] = len(none)
    table["n_answerable"] = len(answerable)
    table["top_similarity"] = {
        "no_answer": top_similarities(none),
        "answerable": top_similarities(answerable),
    }
    return table


def top_similarities(records: Sequence[Record]) -> list[float]:
    return [max((hit["similarity"] for hit in r["recall"]), default=0.0) for r in records]


def cross_table(records: Sequence[Record]) -> dict[str, Any]:
    """Cross-repo recall: the gold found with its project's label, per style."""
    cross = _group(records, "cross")
    table: dict[str, Any] = {}
    for style in (*STYLES, "all"):
        chosen = [r for r in cross if style in ("all", r["style"])]
        table[style] = score(r["rank"] if r["label_ok"] else None for r in chosen).to_json()
    found = [r for r in cross if r["rank"] is not None]
    table["label_correct_when_found"] = share(r["label_ok"] for r in found)
    table["top_hit_from_gold_project"] = share(r["top_label_ok"] for r in cross)
    return table


def summarize_size(result: Mapping[str, Any]) -> dict[str, Any]:
    records = result["records"]
    return {
        "size": result["size"],
        "entries": result["entries"],
        "sessions": result["sessions"],
        "queries": {group: len(_group(records, group)) for group in ("project", "cross", "none")},
        "overlap": overlap(records),
        "l1": l1_tables(records),
        "l1_top5": top5_table(records),
        "by_kind": by_kind(records),
        "near_duplicates": near_duplicate_table(records),
        "abstention": abstention(records, result["floors"]),
        "cross": cross_table(records),
        "l2": result["l2"],
        "l3_chain": result["l3_chain"],
        "l3_sweep": result["l3_sweep"],
        "secrets": result["secrets"],
        "index": result["index"],
        "index_reused": result["index_reused"],
        "timings": result["timings"],
        "floors": result["floors"],
    }


def _check(target: str, size: int, measured: str, met: bool) -> dict[str, Any]:
    return {
        "target": target,
        "size": size,
        "at_target_size": size == TARGET_SIZE,
        "measured": measured,
        "met": met,
    }


def targets(summaries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The issue's quality targets at each measured size (they are set for 10,000 entries)."""
    checks = []
    for summary in summaries:
        size, l1 = summary["size"], summary["l1"]
        paraphrase = l1["pimem"]["paraphrase"]
        checks.append(
            _check(
                f"hybrid R@5 >= {TARGET_R5:.2f} on paraphrase queries",
                size,
                f"{paraphrase['r5']:.3f}",
                paraphrase["r5"] >= TARGET_R5,
            )
        )
        checks.append(
            _check(
                f"hybrid MRR >= {TARGET_MRR:.2f} on paraphrase queries",
                size,
                f"{paraphrase['mrr']:.3f}",
                paraphrase["mrr"] >= TARGET_MRR,
            )
        )
        for style in STYLES:
            hybrid, dense, bm25 = (l1[name][style]["r5"] for name in RETRIEVERS)
            checks.append(
                _check(
                    f"hybrid beats dense and BM25 on R@5 ({style})",
                    size,
                    f"{hybrid:.3f} vs dense {dense:.3f}, BM25 {bm25:.3f}",
                    hybrid > dense and hybrid > bm25,
                )
            )
        for name in ("l3_sweep", "l3_chain"):
            l3 = summary[name]
            what = "every anchor" if name == "l3_sweep" else "anchors of the gold hits"
            checks.append(
                _check(
                    f"L3 turn exactness 100% ({what})",
                    size,
                    f"{l3['exact']}/{l3['checked']}",
                    l3["checked"] > 0 and l3["exact"] == l3["checked"],
                )
            )
        secrets = summary["secrets"]
        checks.append(
            _check(
                "no secret in memory files or search results",
                size,
                f"{secrets['in_memory_files']} in files, {secrets['in_search_results']} in results"
                f" (of {secrets['secrets']})",
                secrets["in_memory_files"] == 0 and secrets["in_search_results"] == 0,
            )
        )
    return checks
