"""The LoCoMo section of the benchmark page and its targets, from the part's JSON alone."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: Issue 27's, on the development conversations, first searches after the index run.
TARGET_R5 = 0.70
TARGET_MRR = 0.50
TARGET_RIGHT_ABOVE = 0.97
TARGET_OFF_TOPIC_BELOW = 0.95


def _check(target: str, measured: str, met: bool) -> dict[str, Any]:
    return {"target": target, "measured": measured, "met": met}


def targets(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    overall = summary["overall"]
    ours, theirs = overall["pimem"], overall["memsearch"]
    checks = [
        _check(
            f"LoCoMo dev R@5 >= {TARGET_R5:.2f}",
            f"{ours['r5']:.3f} (memsearch {theirs['r5']:.3f})",
            ours["r5"] >= TARGET_R5,
        ),
        _check(
            f"LoCoMo dev MRR@10 >= {TARGET_MRR:.2f}",
            f"{ours['mrr']:.3f} (memsearch {theirs['mrr']:.3f})",
            ours["mrr"] >= TARGET_MRR,
        ),
    ]
    for label, scores in summary["categories"].items():
        ours, theirs = scores["pimem"], scores["memsearch"]
        checks.append(
            _check(
                f"LoCoMo dev {label}: R@5 and MRR >= memsearch's",
                f"R@5 {ours['r5']:.3f} vs {theirs['r5']:.3f}, "
                f"MRR {ours['mrr']:.3f} vs {theirs['mrr']:.3f}",
                ours["r5"] >= theirs["r5"] and ours["mrr"] >= theirs["mrr"],
            )
        )
    calibration = summary["calibration"]
    checks += [
        _check(
            f"LoCoMo dev right top hits above the threshold >= {TARGET_RIGHT_ABOVE:.0%}",
            f"{calibration['right_top_hits_above']:.1%} of {calibration['right_top_hits']}",
            calibration["right_top_hits_above"] >= TARGET_RIGHT_ABOVE,
        ),
        _check(
            f"LoCoMo off-topic questions below the threshold >= {TARGET_OFF_TOPIC_BELOW:.0%}",
            f"{calibration['off_topic_below']:.1%} of {calibration['off_topic']}",
            calibration["off_topic_below"] >= TARGET_OFF_TOPIC_BELOW,
        ),
    ]
    return checks


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _scores(label: str, scores: Mapping[str, Mapping[str, float]]) -> list[list[str]]:
    ours, theirs = scores["pimem"], scores["memsearch"]
    return [
        [
            label if name == "pimem" else "",
            name,
            f"{int(s['n'])}",
            f"{s['r1']:.3f}",
            f"{s['r5']:.3f}",
            f"{s['r10']:.3f}",
            f"{s['mrr']:.3f}",
        ]
        for name, s in (("pimem", ours), ("memsearch", theirs))
    ]


def render(results: Mapping[str, Any]) -> str:
    summary = results["summary"]
    rows = _scores("all", summary["overall"])
    for label, scores in summary["categories"].items():
        rows += _scores(label, scores)
    latency = summary["latency_ms"]
    index = summary["index"]
    calibration = summary["calibration"]
    auto = summary["auto_context"]
    conversations = ", ".join(summary["conversations"])
    return f"""# Recall on public conversational memory (LoCoMo)

LoCoMo's development conversations ({conversations}: {summary["entries"]:,} turns,
{summary["questions"]:,} questions of categories 1 to 4), each written as a store the way an agent
writes memory: a daily file per session, dated with the session's date, one entry per turn
(`- <speaker> said: <text>` under its `### HH:MM` heading and session anchor). Every store is
indexed by pimem's index run and asked every question at once, before anything else ran: the
first searches after an index run. A question is found at rank r when one of its evidence turns
is the r-th hit. Both rankers search the same collection in the same process. The other
conversations of the zip are held out and never opened here.

{_table(("questions", "ranker", "n", "R@1", "R@5", "R@10", "MRR@10"), rows)}

- **Latency** (pimem's search API in process, per question): pimem p50
  {latency["pimem"]["p50"]:.1f} ms, p95 {latency["pimem"]["p95"]:.1f} ms; memsearch's hybrid
  search p50 {latency["memsearch"]["p50"]:.1f} ms, p95 {latency["memsearch"]["p95"]:.1f} ms.
- **Index run**: {index["entries"]:,} entries in {index["seconds"]:.0f} s
  ({index["entries_per_s"]:.1f} entries/s), per-fact vectors and context included: the
  searches above are the first after it.
- **Calibration**: {calibration["right_top_hits_above"]:.1%} of the
  {calibration["right_top_hits"]} right top hits score at or above the documented threshold
  ({calibration["threshold"]}); {calibration["off_topic_below"]:.1%} of
  {calibration["off_topic"]} off-topic questions (about things these conversations never
  mention, `bench/locomo/offtopic.py`) have a best hit below it.
- **Auto-context** (its default relevance floor {auto["floor"]}, the question as the prompt):
  {auto["served"]} of the {auto["served_ceiling"]} questions ({auto["served_share"]:.1%}) get one
  of their evidence turns injected (every question has evidence: a perfect ranker serves them
  all); {auto["no_answer_injected"]:.1%} of the off-topic questions get anything injected.
"""
