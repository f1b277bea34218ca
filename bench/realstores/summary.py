"""The realstores part's figures, from its raw records alone (no model, no store needed)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from bench.latency import summarize as latency
from bench.quality.metrics import score
from pimem_core.types import RELEVANCE_THRESHOLD

Record = Mapping[str, Any]
#: The result lists each store keeps: pimem's (first answers, during and after indexing) and
#: memsearch's.
PIMEM_LISTS = ("during", "after")


def quality(records: Sequence[Record], *, judge_no_answer: bool = True) -> dict[str, Any]:
    """R@1/5/10 and MRR@10 on the answerable queries; the share of no-answer queries whose
    best hit falls below the relevance threshold (memsearch's scores are ranks, not
    relevance: not judged)."""
    answerable = [r for r in records if r["kind"] != "no-answer"]
    unanswerable = [r for r in records if r["kind"] == "no-answer"]
    below = [
        r["ok"] and (not r["scores"] or r["scores"][0] < RELEVANCE_THRESHOLD) for r in unanswerable
    ]
    return {
        **score(r["rank"] for r in answerable).to_json(),
        "no_answer": len(unanswerable),
        "no_answer_below": (sum(below) / len(below)) if judge_no_answer and below else None,
    }


def speed(records: Sequence[Record]) -> dict[str, Any]:
    return {
        **latency([r["ms"] for r in records]),
        "searches": len(records),
        "failures": sum(1 for r in records if not r["ok"] and not r["timeout"]),
        "timeouts": sum(1 for r in records if r["timeout"]),
    }


def lists(records: Iterable[Record]) -> dict[str, int]:
    """How many best-first lists, and how many of them have a score rising down the list."""
    seen = [r for r in records if r["ok"]]
    return {"lists": len(seen), "rising": sum(1 for r in seen if r["rises"])}


def _ratio(ours: float | None, theirs: float | None) -> float | None:
    return ours / theirs if ours is not None and theirs else None


def summarize_store(raw: Record) -> dict[str, Any]:
    index, theirs = raw["pimem_index"], raw["memsearch_index"]
    pimem_lists = [raw["first_cold"], raw["first_warm"], *raw["during"], *raw["after"]]
    during, after = quality(raw["during"]), quality(raw["after"])
    settled_s = index["settled_s"]
    return {
        "store": raw["store"],
        "agent": raw["agent"],
        "entries": raw["entries"],
        "files": raw["files"],
        "queries": raw["queries"],
        "first": {
            "cold_ms": raw["first_cold"]["ms"],
            "warm_ms": raw["first_warm"]["ms"],
            "cold_ok": raw["first_cold"]["ok"],
            "warm_ok": raw["first_warm"]["ok"],
            "memsearch_ms": raw["memsearch"][0]["ms"] if raw["memsearch"] else None,
        },
        "during": {
            "speed": speed(raw["during"]),
            "while_index_ran": sum(1 for r in raw["during"] if r.get("indexing")),
            "quality": during,
        },
        "after": {"speed": speed(raw["after"]), "quality": after},
        "memsearch": {
            "speed": speed(raw["memsearch"]),
            "quality": quality(raw["memsearch"], judge_no_answer=False),
        },
        "r5_during_over_after": _ratio(during["r5"], after["r5"]) if raw["during"] else None,
        "index": {
            "pimem_s": index["ms"] / 1000,
            "pimem_settled_s": settled_s,
            "memsearch_s": theirs["ms"] / 1000,
            "ratio": _ratio(index["ms"], theirs["ms"]),
            "settled_ratio": _ratio(settled_s, theirs["ms"] / 1000),
            "pimem_chunks": index["chunks"],
            "memsearch_chunks": theirs["chunks"],
            "pimem_peak_mb": index["peak_rss_mb"],
            "pimem_at_return_mb": index["rss_at_return_mb"],
            "pimem_settled_mb": index["rss_settled_mb"],
            "memsearch_peak_mb": theirs["peak_rss_mb"],
            "warm_returned_s": raw["index"]["returned_s"],
            "warm_settled_s": raw["index"]["settled_s"],
        },
        "lists": {"pimem": lists(pimem_lists), "memsearch": lists(raw["memsearch"])},
    }


def summarize(raw: Sequence[Record]) -> dict[str, Any]:
    stores = [summarize_store(run) for run in raw]
    during = [r for run in raw for r in run["during"]]
    after = [r for run in raw for r in run["after"]]
    theirs = [r for run in raw for r in run["memsearch"]]
    overall_during, overall_after = quality(during), quality(after)
    return {
        "threshold": RELEVANCE_THRESHOLD,
        "stores": stores,
        "overall": {
            "during": {"speed": speed(during), "quality": overall_during},
            "after": {"speed": speed(after), "quality": overall_after},
            "memsearch": {
                "speed": speed(theirs),
                "quality": quality(theirs, judge_no_answer=False),
            },
            "r5_during_over_after": _ratio(overall_during["r5"], overall_after["r5"])
            if during
            else None,
            "lists": {
                "pimem": {
                    key: sum(s["lists"]["pimem"][key] for s in stores)
                    for key in ("lists", "rising")
                },
                "memsearch": {
                    key: sum(s["lists"]["memsearch"][key] for s in stores)
                    for key in ("lists", "rising")
                },
            },
        },
    }
