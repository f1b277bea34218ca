"""The quality section of the benchmark page: plots and markdown, from the results JSON only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.quality.facts import STYLES
from bench.quality.offtopic import OFF_TOPIC
from bench.quality.summary import (
    MEMSEARCH_CUT,
    NEAR_BUCKETS,
    RANKERS,
    RETRIEVERS,
    TARGET_ALL_MRR,
    TARGET_ALL_R5,
    TARGET_MARGIN,
    TARGET_PARAPHRASE_R5,
    TARGET_SIZE,
)

NAMES = {
    "pimem": "pimem",
    "memsearch": "memsearch hybrid",
    "dense": "memsearch dense only",
    "bm25": "memsearch BM25 only",
}
COLORS = {"pimem": "#2b7bba", "memsearch": "#d9822b", "dense": "#9ecae1", "bm25": "#bbbbbb"}
PLOTS = ("quality-recall.png", "quality-scaling.png", "quality-score.png")
RAW = "quality.json"
SCORE_GROUPS = (
    ("right", "answerable, top hit right"),
    ("wrong", "answerable, top hit wrong"),
    ("none", "no-answer (coding subjects)"),
    ("offtopic", "off-topic (everyday subjects)"),
)

Summary = Mapping[str, Any]


def _f(value: float) -> str:
    return f"{value:.3f}"


def _pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def _delta(value: float) -> str:
    return f"{value:+.3f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return [*lines, ""]


def world(summary: Summary) -> str:
    return f"{summary['size']:,} entries, seed {summary.get('seed', 0)}"


def _target_world(summaries: Sequence[Summary]) -> list[Summary]:
    return [s for s in summaries if s["size"] == TARGET_SIZE]


# -- plots -------------------------------------------------------------------------------------


def plot(results: Mapping[str, Any], out: Path) -> list[str]:
    """Write the PNGs; the names of those written (none when matplotlib is missing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    summaries = results["summaries"]
    written = []
    styles = (*STYLES, "all")

    figure, axes = plt.subplots(
        len(summaries), 2, figsize=(11, 3.3 * len(summaries)), squeeze=False
    )
    for row, summary in enumerate(summaries):
        for column, metric in enumerate(("r5", "mrr")):
            axis = axes[row][column]
            width = 0.2
            for offset, retriever in enumerate(RETRIEVERS):
                values = [summary["l1"][retriever][style][metric] for style in styles]
                positions = [i + (offset - 1.5) * width for i in range(len(styles))]
                axis.bar(positions, values, width, label=NAMES[retriever], color=COLORS[retriever])
            axis.set_xticks(range(len(styles)), styles)
            axis.set_ylim(0, 1)
            label = "R@5" if metric == "r5" else "MRR@10"
            axis.set_title(f"{label}, {world(summary)}")
            if summary["size"] == TARGET_SIZE:
                floor = TARGET_ALL_R5 if metric == "r5" else TARGET_ALL_MRR
                axis.plot([2.6, 3.4], [floor, floor], color="black", linestyle=":", linewidth=1)
                if metric == "r5":
                    axis.plot(
                        [0.6, 1.4],
                        [TARGET_PARAPHRASE_R5] * 2,
                        color="black",
                        linestyle=":",
                        linewidth=1,
                    )
            axis.grid(axis="y", alpha=0.3)
    axes[0][0].legend(loc="lower left", fontsize=7)
    figure.tight_layout()
    figure.savefig(out / PLOTS[0], dpi=110)
    plt.close(figure)
    written.append(PLOTS[0])

    seeds = sorted({int(s.get("seed", 0)) for s in summaries})
    figure, axes = plt.subplots(1, len(styles), figsize=(14, 3.4), squeeze=False)
    for column, style in enumerate(styles):
        axis = axes[0][column]
        for ranker in RANKERS:
            for seed in seeds:
                chosen = [s for s in summaries if int(s.get("seed", 0)) == seed]
                sizes = [s["size"] for s in chosen]
                values = [s["l1"][ranker][style]["r5"] for s in chosen]
                axis.plot(
                    sizes,
                    values,
                    marker="o" if seed == seeds[0] else "s",
                    linestyle="-" if seed == seeds[0] else "none",
                    fillstyle="full" if seed == seeds[0] else "none",
                    color=COLORS[ranker],
                    label=f"{NAMES[ranker]}, seed {seed}",
                )
        axis.set_xscale("log")
        axis.set_ylim(0, 1)
        axis.set_title(f"R@5, {style}")
        axis.set_xlabel("entries in the searched project")
        axis.grid(alpha=0.3)
    axes[0][0].legend(loc="lower left", fontsize=7)
    figure.tight_layout()
    figure.savefig(out / PLOTS[1], dpi=110)
    plt.close(figure)
    written.append(PLOTS[1])

    shown = _target_world(summaries) or summaries[-1:]
    figure, axes = plt.subplots(len(shown), 2, figsize=(11, 3.3 * len(shown)), squeeze=False)
    bins = [i / 40 for i in range(41)]
    for row, summary in enumerate(shown):
        table = summary["score"]
        for column, ranker in enumerate(RANKERS):
            axis = axes[row][column]
            groups = table[ranker]["groups"]
            for name, label in SCORE_GROUPS:
                axis.hist(
                    groups[name], bins=bins, alpha=0.55, label=f"{label} ({len(groups[name])})"
                )
            cut = table[ranker]["threshold"]
            axis.axvline(cut, color="black", linestyle=":", label=f"threshold {cut:g}")
            axis.set_yscale("log")
            what = "relevance" if ranker == "pimem" else "rank-fusion score"
            axis.set_xlabel(f"top hit's {what}")
            axis.set_ylabel("queries")
            axis.set_title(f"{NAMES[ranker]}, {world(summary)}")
            axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(out / PLOTS[2], dpi=110)
    plt.close(figure)
    written.append(PLOTS[2])
    return written


# -- markdown ----------------------------------------------------------------------------------


def _side_by_side(summaries: Sequence[Summary]) -> list[str]:
    rows = []
    for summary in summaries:
        l1 = summary["l1"]
        for style in (*STYLES, "all"):
            ours, theirs = l1["pimem"][style], l1["memsearch"][style]
            rows.append(
                [
                    world(summary),
                    style,
                    _f(ours["r5"]),
                    _f(theirs["r5"]),
                    _delta(ours["r5"] - theirs["r5"]),
                    _f(ours["mrr"]),
                    _f(theirs["mrr"]),
                    _delta(ours["mrr"] - theirs["mrr"]),
                ]
            )
    return _table(
        (
            "world",
            "style",
            "pimem R@5",
            "memsearch R@5",
            "difference",
            "pimem MRR",
            "memsearch MRR",
            "difference",
        ),
        rows,
    )


def _l1_section(summary: Summary) -> list[str]:
    rows = []
    for retriever in RETRIEVERS:
        for style in (*STYLES, "all"):
            scores = summary["l1"][retriever][style]
            rows.append(
                [
                    NAMES[retriever],
                    style,
                    str(scores["n"]),
                    *(_f(scores[key]) for key in ("r1", "r5", "r10", "mrr", "ndcg10")),
                ]
            )
    lines = _table(("retriever", "style", "queries", "R@1", "R@5", "R@10", "MRR", "NDCG@10"), rows)
    top5 = summary["l1_top5"]
    lines += [
        "Each ranker as an agent calls it (`top_k=5`; memsearch fuses two candidate lists only",
        "as deep as `top_k`, so its top 5 can differ from the top 5 of a `top_k=10` call;",
        "pimem's candidates are 100 deep whatever `top_k` is):",
        "",
    ]
    lines += _table(
        ("style", *(f"{NAMES[r]} {m}" for r in RANKERS for m in ("R@1", "R@5", "MRR@5"))),
        [
            [
                style,
                *(
                    _f(top5[ranker][style][key])
                    for ranker in RANKERS
                    for key in ("r1", "r5", "mrr")
                ),
            ]
            for style in (*STYLES, "all")
        ],
    )
    near = summary["near_duplicates"]
    lines += [
        "R@5 by how crowded the gold's neighbourhood is: near-duplicates are facts of the same",
        "kind that share all but one of the slots the query names (failure, operation, data,",
        f"component...; {near['n_facts']} gold facts name three slots or more, median "
        f"{near['median']:g} near-duplicates):",
        "",
    ]
    lines += _table(
        ("style", "near-duplicates", "queries", *(NAMES[r] for r in RETRIEVERS)),
        [
            [
                style,
                bucket,
                str(near[style][bucket]["n"]),
                *(_f(near[style][bucket][r]) for r in RETRIEVERS),
            ]
            for style in STYLES
            for bucket, _, _ in NEAR_BUCKETS
        ],
    )
    kinds = summary["by_kind"]
    names = sorted(kinds["pimem"])
    lines += ["R@5 per kind of fact (all three styles):", ""]
    lines += _table(
        ("kind", "queries", *(NAMES[r] for r in RETRIEVERS)),
        [
            [kind, str(kinds["pimem"][kind]["n"]), *(_f(kinds[r][kind]["r5"]) for r in RETRIEVERS)]
            for kind in names
        ],
    )
    return lines


def _auc(value: float | None) -> str:
    return "-" if value is None else _f(value)


def _score_section(summaries: Sequence[Summary]) -> list[str]:
    rows = []
    for summary in summaries:
        for ranker in RANKERS:
            table = summary["score"][ranker]
            n = table["n"]
            what = (
                f"pimem relevance >= {table['threshold']:g}"
                if ranker == "pimem"
                else f"memsearch score >= {table['threshold']:g}"
            )
            rows.append(
                [
                    world(summary),
                    what,
                    f"{_pct(table['none_below'])} of {n['none']}",
                    f"{n['offtopic'] - table['offtopic_above_count']} of {n['offtopic']} "
                    f"(max {table['max']['offtopic']:.3f})",
                    f"{_pct(table['right_above'])} of {n['right']}",
                    f"{_pct(table['wrong_above'])} of {n['wrong']}",
                    _auc(table["auc"]),
                    _pct(table["at_one"]),
                ]
            )
    return _table(
        (
            "world",
            "score and cut",
            "no-answer queries below",
            "off-topic queries below",
            "right top hits at or above",
            "wrong top hits at or above",
            "AUC, right top hits vs no-answer and off-topic",
            "top scores of 0.999 or more",
        ),
        rows,
    )


def _abstention_section(summary: Summary) -> list[str]:
    table = summary["abstention"]
    floors = summary["floors"]
    rows = []
    for name, label in (
        ("pimem", f"pimem's ranker: relevance >= {floors['pimem_relevance']:g}"),
        (
            "pimem_similarity",
            f"memsearch's ranker: cosine similarity >= {floors['pimem_similarity']:g}",
        ),
        ("memsearch", f"pi-memsearch: memsearch score >= {floors['memsearch_score']:g}"),
    ):
        rule = table[name]
        rows.append(
            [
                label,
                _pct(rule["abstained"]),
                f"{rule['mean_injected_no_answer']:.2f}",
                _pct(rule["gold_injected"]),
                _pct(rule["only_wrong_injected"]),
            ]
        )
    return _table(
        (
            "injection rule (top 3 hits)",
            "no-answer and off-topic: nothing injected",
            "no-answer and off-topic: chunks injected (mean)",
            "answerable: gold injected",
            "answerable: only wrong chunks injected",
        ),
        rows,
    )


def _cross_section(summary: Summary) -> list[str]:
    cross = summary["cross"]
    rows = [
        [
            style,
            str(cross[style]["n"]),
            *(_f(cross[style][key]) for key in ("r1", "r5", "r10", "mrr")),
        ]
        for style in (*STYLES, "all")
    ]
    return [
        *_table(("style", "queries", "R@1", "R@5", "R@10", "MRR"), rows),
        f"Gold found with the right label: {_pct(cross['label_correct_when_found'])}; the top hit "
        f"comes from the gold's project: {_pct(cross['top_hit_from_gold_project'])}.",
        "",
    ]


def _anchor_section(summary: Summary) -> list[str]:
    l2 = summary["l2"]
    rows = []
    for name, label in (
        ("l3_chain", "anchors of the gold hits (search, expand, transcript)"),
        ("l3_sweep", "every anchor of the world"),
    ):
        l3 = summary[name]
        for part, title in (
            (l3, "all"),
            (l3["in_branched_sessions"], "in sessions with an abandoned branch"),
            (l3["in_forks"], "in forked sessions"),
        ):
            rows.append(
                [
                    label if title == "all" else f"… {title}",
                    f"{part['exact']}/{part['checked']}",
                    str(part["target_wrong"]),
                    str(part["abandoned_turns"]),
                    str(part["foreign_turns"]),
                ]
            )
    return [
        f"L2: expanding the gold hit gives the gold entry's anchor for "
        f"{l2['project']['correct']}/{l2['project']['checked']} gold chunks found in the project, "
        f"{l2['cross']['correct']}/{l2['cross']['checked']} found across projects.",
        "",
        *_table(
            (
                "anchors",
                "exact",
                "wrong target turn",
                "turns from an abandoned branch",
                "turns not on the live branch",
            ),
            rows,
        ),
    ]


def _notes(summary: Summary, checks: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the numbers say about the missed targets of one world, from the numbers."""
    mine = [
        c
        for c in checks
        if c["size"] == summary["size"] and c.get("seed", 0) == summary.get("seed", 0)
    ]
    missed = [c for c in mine if not c["met"]]
    if not missed:
        return []
    l1, near = summary["l1"], summary["near_duplicates"]
    notes = [f"- **{c['target']}**: {c['measured']}." for c in missed]
    if any("paraphrase" in c["target"] for c in missed):
        notes.append(
            f"- A paraphrase keeps {summary['overlap']['paraphrase']:.0%} of its content words "
            "from its entry, so the lexical leg has little to match and the dense model carries "
            "it alone: dense alone (memsearch's chunk vectors) reaches "
            f"{_f(l1['dense']['paraphrase']['r5'])}. With three or more near-duplicates of the "
            f"gold fact, pimem's paraphrase R@5 is {_f(near['paraphrase']['3+']['pimem'])} "
            f"({near['paraphrase']['3+']['n']} queries). A reranker plugin (the rerank hook) or "
            "a stronger embedding model is what moves it further."
        )
    return notes


def _targets(results: Mapping[str, Any]) -> list[str]:
    checks = sorted(
        results["targets"],
        key=lambda check: (not check["at_target_size"], check.get("seed", 0), check["size"]),
    )
    return _table(
        ("target", "world", "measured", "met"),
        [
            [
                check["target"],
                f"{check['size']:,}, seed {check.get('seed', 0)}",
                check["measured"],
                ("**met**" if check["met"] else "**missed**")
                if check["at_target_size"]
                else ("met" if check["met"] else "missed"),
            ]
            for check in checks
        ],
    )


def _example(results: Mapping[str, Any]) -> list[str]:
    """One gold fact's three queries, as the run asked them."""
    raw = results.get("raw") or []
    records = [r for r in (raw[0]["records"] if raw else []) if r["group"] == "project"]
    # A bug or a fix shows best what a paraphrase replaces.
    first = next(
        (r for r in records if r["kind"] in ("bug", "fix")), records[0] if records else None
    )
    asked = [r for r in records if first is not None and r.get("gold") == first.get("gold")]
    if len(asked) != len(STYLES):
        return []
    return [
        f"For example, one {first['kind'] if first else ''} fact of the run, asked three ways:",
        "",
        *(f"- {r['style']}: “{r['text']}”" for r in asked),
        "",
    ]


def _worlds_table(summaries: Sequence[Summary]) -> list[str]:
    rows = []
    for summary in summaries:
        entries, sessions, overlap = summary["entries"], summary["sessions"], summary["overlap"]
        queries = summary["queries"]
        rows.append(
            [
                f"{summary['size']:,}",
                str(summary.get("seed", 0)),
                "chose every setting"
                if (summary["size"], summary.get("seed", 0)) == (1_000, 0)
                else "reported, settings fixed",
                f"{sum(entries.values()):,}",
                f"{sessions['files']:,} ({sessions['branched']} branched, {sessions['forks']} forks)",
                f"{queries['project']} / {queries['cross']} / {queries['none']} / "
                f"{queries.get('offtopic', 0)}",
                " / ".join(f"{overlap[style]:.2f}" for style in STYLES),
            ]
        )
    return _table(
        (
            "entries in atlas-api",
            "seed",
            "role",
            "entries, all projects",
            "session files",
            "queries: project / cross / no-answer / off-topic",
            "query words found in the gold entry: keyword / paraphrase / question",
        ),
        rows,
    )


def render(results: Mapping[str, Any], plots: str) -> str:
    """The section, from *results* alone; *plots* is the PNGs' directory relative to the page."""
    summaries = results["summaries"]
    shown = set(results.get("plots", ()))
    floors = summaries[0]["floors"] if summaries else {}
    lines = [
        "# Retrieval quality",
        "",
        "Does pimem find the right memory, and does its score say when there is none? pimem's",
        "own ranker (the default) beside memsearch's hybrid search (what `PIMEM_RANKER=memsearch`",
        "selects: the baseline), both on the same memsearch collection in the same run, with the",
        "offline all-MiniLM-L6-v2 model; memsearch's dense and BM25 halves alone for reference.",
        "pimem's ranker scores a chunk as its best fact (one vector per bullet, which pimem",
        "computes and keeps in its read model), fuses that with a BM25 leg on the chunk's words",
        "on per-query z-scores (and with context legs where neighbouring entries share a",
        "subject: none in these worlds, ADR 0018), and gives each hit a relevance in [0, 1].",
        "",
        "**Settings were chosen on these worlds and LoCoMo's development conversations",
        "together** (the fusion weights, candidates 100 deep per leg, the lexical words and BM25",
        f"parameters; the relevance function and its threshold "
        f"{floors.get('pimem_relevance', 0.3):g} on the 1,000-entry world of seed 0 only), and",
        "are reported fixed on every size. The "
        f"{len(OFF_TOPIC)} off-topic queries (`bench/quality/offtopic.py`) were written once and",
        "never tuned on.",
        "",
        f"Raw results: [`{RAW}`]({plots}/{RAW}); the runs that measured them are listed at the "
        "top of the page.",
        "",
        "## The worlds",
        "",
        "Four repositories (`atlas-api`, the searched one, and `harbor-mobile`, `lumen-etl`,",
        "`quill-cli` with a tenth of its entries each), generated from a seed: multi-day sessions",
        "with bugs found and later fixed, decisions and their reversals, renames, dependency",
        "upgrades, flaky tests, preferences, configuration and rotated credentials (secret-shaped",
        "values that pimem's scrubber must keep out of memory). Each captured exchange is one",
        "entry in pimem's own format, anchored to the final answer of that exchange in a pi",
        "session file; some sessions went back to an earlier turn (an abandoned branch in the",
        "file) and some are `/fork`s into a new file.",
        "",
        "Each gold fact is asked three ways: **keyword** (the terms someone would type),",
        "**paraphrase** (the same meaning with every descriptive word replaced: the failure,",
        "the operation, the data and the component; names of libraries, identifiers and",
        "versions have no other words and stay) and **question** (a natural question that uses",
        "the code's own names for what it asks about and other words for the rest). Only facts",
        "whose wording no other fact of the store shares are asked for, so each query has one",
        "right entry. **No-answer** queries ask about coding subjects no session touched;",
        "**off-topic** ones about everyday life (cooking, gardening, travel, sport...).",
        "",
        *_example(results),
        *_worlds_table(summaries),
        "## Targets",
        "",
        f"The issue sets them at {TARGET_SIZE:,} entries on both worlds (every style's R@5 and "
        f"MRR at least {TARGET_MARGIN:.2f} above memsearch's, all styles R@5 >= "
        f"{TARGET_ALL_R5:.2f} and MRR >= {TARGET_ALL_MRR:.2f}, paraphrase R@5 >= "
        f"{TARGET_PARAPHRASE_R5:.2f}, and the score's); never below memsearch's, L3 and secrets",
        "hold on every world.",
        "",
        *_targets(results),
    ]
    for summary in summaries:
        notes = _notes(summary, results["targets"])
        if notes:
            lines += [f"What the numbers of {world(summary)} say about the misses:", "", *notes, ""]
    lines += [
        "## pimem beside memsearch",
        "",
        "R@5 and MRR@10 of each ranker on the same queries of the same collection:",
        "",
        *_side_by_side(summaries),
    ]
    if PLOTS[0] in shown:
        lines += [f"![R@5 and MRR per style, every world]({plots}/{PLOTS[0]})", ""]
    if PLOTS[1] in shown:
        lines += [f"![R@5 against store size, both rankers]({plots}/{PLOTS[1]})", ""]
    lines += ["## L1 in detail", ""]
    for summary in summaries:
        lines += [f"### {world(summary)}", "", *_l1_section(summary)]
    lines += [
        "## The score: does the top hit's score say there is no answer?",
        "",
        "pimem's hits carry a relevance in [0, 1] (`score_kind` `relevance`): a logistic",
        "function of the best fact's cosine and of the share of the query's rare words that the",
        "chunk holds, fitted on the 1,000-entry world of seed 0. memsearch's score is a rank",
        "fusion normalised per query, so its top hit scores high whatever the query;",
        f"pi-memsearch cut it at {MEMSEARCH_CUT:g}. The AUC is the chance that a right top hit",
        "scores above a no-answer or off-topic query's top hit (1 separates them perfectly).",
        "",
        *_score_section(summaries),
    ]
    if PLOTS[2] in shown:
        lines += [f"![Top scores of each kind of query]({plots}/{PLOTS[2]})", ""]
    lines += [
        "## Abstention: what auto-context would inject",
        "",
        "The 3 best hits of each query under each injection rule; nothing should be injected",
        "for a no-answer or off-topic query, the gold for an answerable one (the latency section",
        "measures auto-context itself, through a bridge):",
        "",
    ]
    for summary in summaries:
        lines += [f"### {world(summary)}", "", *_abstention_section(summary)]
    lines += [
        "## Cross-repo recall",
        "",
        "Queries for facts of the other three projects, asked from `atlas-api` with",
        "`search_everywhere` (`PI_MEMSEARCH_SCAN_ROOTS` = the generated projects), pimem's",
        "ranker; a hit counts only with the right project label.",
        "",
    ]
    for summary in summaries:
        lines += [f"### {world(summary)}", "", *_cross_section(summary)]
    lines += [
        "## L2 and L3: from the hit to its anchor and its turn",
        "",
        "L3: `read_transcript` at the anchor's transcript and turn (3 turns of context).",
        "",
    ]
    for summary in summaries:
        lines += [f"### {world(summary)}", "", *_anchor_section(summary)]
    lines += ["## Secrets", ""]
    lines += _table(
        (
            "world",
            "secrets in transcripts",
            "in memory files",
            "in search results",
            "redacted chunks returned",
        ),
        [
            [
                world(s),
                f"{s['secrets']['in_transcripts']}/{s['secrets']['secrets']}",
                str(s["secrets"]["in_memory_files"]),
                str(s["secrets"]["in_search_results"]),
                str(s["secrets"].get("redacted_chunks_returned", 0)),
            ]
            for s in summaries
        ],
    )
    lines += ["## What the run cost", ""]
    lines += _table(
        ("world", "generate", "index", "read models ready", "queries (all rankers)", "L2 + L3"),
        [
            [
                world(s),
                f"{s['timings']['generate_s']:.1f} s",
                f"{s['index']['chunks']:,} chunks, {s['index']['seconds']:.0f} s "
                f"({s['index']['chunks_per_s']:.1f} chunks/s)"
                + (" (kept store; measured when built)" if s["index_reused"] else ""),
                _read_model(s),
                f"{s['timings']['queries_s']:.0f} s",
                f"{s['timings']['l2_l3_s']:.0f} s",
            ]
            for s in summaries
        ],
    )
    return "\n".join(lines).rstrip() + "\n"


def _read_model(summary: Summary) -> str:
    ready = summary.get("read_model") or {}
    if not ready:
        return "-"
    origins = sorted({item["origin"] for item in ready.values()})
    seconds = summary["timings"].get("read_model_s", 0.0)
    return f"{seconds:.0f} s (from the {' and '.join(origins)})"
