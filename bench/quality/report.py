"""The quality section of the benchmark page: plots and markdown, from the results JSON only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.quality.facts import STYLES
from bench.quality.summary import NEAR_BUCKETS, RETRIEVERS, TARGET_MRR, TARGET_R5, TARGET_SIZE

NAMES = {"pimem": "pimem (hybrid)", "dense": "dense only", "bm25": "BM25 only"}
PLOTS = ("quality-recall.png", "quality-scaling.png", "quality-abstention.png")
RAW = "quality.json"


def _f(value: float) -> str:
    return f"{value:.3f}"


def _pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return [*lines, ""]


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

    figure, axes = plt.subplots(
        len(summaries), 2, figsize=(10, 3.2 * len(summaries)), squeeze=False
    )
    for row, summary in enumerate(summaries):
        for column, metric in enumerate(("r5", "mrr")):
            axis = axes[row][column]
            width = 0.26
            for offset, retriever in enumerate(RETRIEVERS):
                values = [summary["l1"][retriever][style][metric] for style in STYLES]
                positions = [i + (offset - 1) * width for i in range(len(STYLES))]
                axis.bar(positions, values, width, label=NAMES[retriever])
            axis.set_xticks(range(len(STYLES)), STYLES)
            axis.set_ylim(0, 1)
            axis.set_title(f"{'R@5' if metric == 'r5' else 'MRR@10'}, {summary['size']:,} entries")
            if metric == "r5":
                axis.axhline(TARGET_R5, color="grey", linestyle=":", linewidth=1)
            axis.grid(axis="y", alpha=0.3)
    axes[0][0].legend(loc="lower left", fontsize=8)
    figure.tight_layout()
    figure.savefig(out / "quality-recall.png", dpi=110)
    plt.close(figure)
    written.append("quality-recall.png")

    if len(summaries) > 1:
        figure, axes = plt.subplots(1, len(STYLES), figsize=(11, 3.4), squeeze=False)
        sizes = [summary["size"] for summary in summaries]
        for column, style in enumerate(STYLES):
            axis = axes[0][column]
            for retriever in RETRIEVERS:
                values = [summary["l1"][retriever][style]["r5"] for summary in summaries]
                axis.plot(sizes, values, marker="o", label=NAMES[retriever])
            axis.set_xscale("log")
            axis.set_ylim(0, 1)
            axis.set_title(f"R@5, {style}")
            axis.set_xlabel("entries in the searched project")
            axis.grid(alpha=0.3)
        axes[0][0].legend(loc="lower left", fontsize=8)
        figure.tight_layout()
        figure.savefig(out / "quality-scaling.png", dpi=110)
        plt.close(figure)
        written.append("quality-scaling.png")

    largest = summaries[-1]
    similarity = largest["abstention"]["top_similarity"]
    figure, axis = plt.subplots(figsize=(7, 3.2))
    bins = [i / 40 for i in range(-4, 41)]
    axis.hist(similarity["answerable"], bins=bins, alpha=0.6, label="answerable queries")
    axis.hist(similarity["no_answer"], bins=bins, alpha=0.6, label="no-answer queries")
    floor = results["summaries"][-1]["floors"]["pimem_similarity"]
    axis.axvline(floor, color="black", linestyle=":", label=f"pimem floor {floor:g}")
    axis.set_xlabel("best cosine similarity among the top 3 hits")
    axis.set_ylabel("queries")
    axis.set_title(f"Auto-context: what the floor separates ({largest['size']:,} entries)")
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(out / "quality-abstention.png", dpi=110)
    plt.close(figure)
    written.append("quality-abstention.png")
    return written


# -- markdown ----------------------------------------------------------------------------------


def _l1_section(summary: Mapping[str, Any]) -> list[str]:
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
        "pimem as an agent calls it (`top_k=5`; RRF fuses two candidate lists of 5, so the",
        "order can differ from the top 5 of a `top_k=10` call):",
        "",
    ]
    lines += _table(
        ("style", "R@1", "R@5", "MRR@5"),
        [
            [style, _f(top5[style]["r1"]), _f(top5[style]["r5"]), _f(top5[style]["mrr"])]
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


def _abstention_section(summary: Mapping[str, Any], floors: Mapping[str, float]) -> list[str]:
    table = summary["abstention"]
    rows = []
    for name, label in (
        ("pimem", f"pimem: cosine similarity >= {floors['pimem_similarity']:g}"),
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
    return [
        f"{table['n_no_answer']} no-answer queries (subjects no session touched) and "
        f"{table['n_answerable']} answerable ones. pimem's auto-context takes the 3 chunks most "
        "similar to the query and keeps those at the similarity floor; pi-memsearch's took "
        "memsearch's hybrid top 3 and kept those scoring 0.5 or more:",
        "",
        *_table(
            (
                "injection rule",
                "no-answer: nothing injected",
                "no-answer: chunks injected (mean)",
                "answerable: gold injected",
                "answerable: only wrong chunks injected",
            ),
            rows,
        ),
    ]


def _cross_section(summary: Mapping[str, Any]) -> list[str]:
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
        "Queries for facts of the other three projects, asked from `atlas-api` with",
        "`search_everywhere` (`PI_MEMSEARCH_SCAN_ROOTS` = the generated projects); a hit counts",
        "only with the right project label.",
        "",
        *_table(("style", "queries", "R@1", "R@5", "R@10", "MRR"), rows),
        f"Gold found with the right label: {_pct(cross['label_correct_when_found'])}; the top hit "
        f"comes from the gold's project: {_pct(cross['top_hit_from_gold_project'])}.",
        "",
    ]


def _anchor_section(summary: Mapping[str, Any]) -> list[str]:
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
        "L3: `read_transcript` at the anchor's transcript and turn (3 turns of context):",
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


def _notes(summary: Mapping[str, Any], smaller: Mapping[str, Any] | None) -> list[str]:
    """What the numbers say about the missed targets, from the numbers."""
    l1 = summary["l1"]
    notes = []
    for style in STYLES:
        hybrid, dense, bm25 = (l1[name][style]["r5"] for name in RETRIEVERS)
        best, value = ("dense", dense) if dense >= bm25 else ("BM25", bm25)
        if hybrid < value:
            notes.append(
                f"- **{style}**: hybrid R@5 {_f(hybrid)} is below {best} alone ({_f(value)}). "
                "RRF gives both lists the same weight: where one retriever's list is mostly "
                "wrong for a style, fusing it in pushes the other's right answer down. A "
                "weighted fusion (or a per-query choice of retriever) would close it."
            )
        elif hybrid == value:
            notes.append(
                f"- **{style}**: hybrid R@5 {_f(hybrid)} ties with {best} alone; the target "
                "asks for a win."
            )
    paraphrase = l1["pimem"]["paraphrase"]
    if paraphrase["r5"] < TARGET_R5 or paraphrase["mrr"] < TARGET_MRR:
        near = summary["near_duplicates"]
        before = (
            f"; at {smaller['size']:,} entries {_f(smaller['l1']['pimem']['paraphrase']['r5'])}"
            if smaller is not None
            else ""
        )
        notes.append(
            f"- **paraphrase**: hybrid R@5 {_f(paraphrase['r5'])}, MRR {_f(paraphrase['mrr'])} "
            f"(dense alone {_f(l1['dense']['paraphrase']['r5'])}, BM25 alone "
            f"{_f(l1['bm25']['paraphrase']['r5'])}){before}. A paraphrase keeps "
            f"{summary['overlap']['paraphrase']:.0%} of its content words from its entry, so "
            "BM25 has little to match and the dense model has to carry a paraphrase of every "
            "part of the fact at once: with no near-duplicate in the store, hybrid R@5 is "
            f"{_f(near['paraphrase']['0']['pimem'])} ({near['paraphrase']['0']['n']} queries). "
            f"The store is also crowded: the median gold fact naming three slots or more has "
            f"{near['median']:g} near-duplicates (same kind, all but one slot the same), and "
            f"with three or more R@5 is {_f(near['paraphrase']['3+']['pimem'])}. What would "
            "raise it: a stronger embedding model than all-MiniLM-L6-v2 (memsearch reports "
            "R@5 0.78-0.82 with bge-m3 on real memory files), memsearch's cross-encoder "
            "reranker, or letting the host model rewrite the query into the code's own words."
        )
    l3 = summary["l3_sweep"]
    if l3["exact"] != l3["checked"]:
        notes.append(f"- **L3**: {l3['checked'] - l3['exact']} anchors did not read back exactly.")
    return notes


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


def render(results: Mapping[str, Any], plots: str) -> str:
    """The section, from *results* alone; *plots* is the PNGs' directory relative to the page."""
    meta = results["meta"]
    summaries = results["summaries"]
    lines = [
        "# Retrieval quality",
        "",
        "Does pimem find the right memory, and does it stay quiet when there is none? Measured on",
        "a generated world of coding sessions, with the offline all-MiniLM-L6-v2 model, against",
        "the two halves of memsearch's hybrid search run alone on the same collection.",
        "",
        f"Raw results: [`{RAW}`]({plots}/{RAW}); the runs that measured them are listed at the "
        "top of the page.",
        "",
        "## The corpus",
        "",
        "Four repositories (`atlas-api`, the searched one, and `harbor-mobile`, `lumen-etl`,",
        "`quill-cli` with a tenth of its entries each), generated by seed "
        f"{meta['seed']}: multi-day sessions with bugs found and later fixed, decisions and their",
        "reversals, renames, dependency upgrades, flaky tests, preferences, configuration and",
        "rotated credentials (secret-shaped values that pimem's scrubber must keep out of memory).",
        "Each captured exchange is one entry in pimem's own format, anchored to the final answer",
        "of that exchange in a pi session file; some sessions went back to an earlier turn",
        "(an abandoned branch in the file) and some are `/fork`s into a new file.",
        "",
        "Each gold fact is asked three ways: **keyword** (the terms someone would type),",
        "**paraphrase** (the same meaning with every descriptive word replaced: the failure,",
        "the operation, the data and the component; names of libraries, identifiers and",
        "versions have no other words and stay) and **question** (a natural question that uses",
        "the code's own names for what it asks about and other words for the rest). Only facts",
        "whose wording no other fact of the store shares are asked for, so each query has one",
        "right entry. The generator and its queries were written before any number was",
        "measured and were not changed after.",
        "",
        *_example(results),
    ]
    rows = []
    for summary in summaries:
        entries = summary["entries"]
        sessions = summary["sessions"]
        overlap = summary["overlap"]
        rows.append(
            [
                f"{summary['size']:,}",
                f"{sum(entries.values()):,}",
                f"{sessions['files']:,} ({sessions['branched']} branched, {sessions['forks']} forks)",
                f"{summary['queries']['project']} / {summary['queries']['cross']} / {summary['queries']['none']}",
                " / ".join(f"{overlap[style]:.2f}" for style in STYLES),
            ]
        )
    lines += _table(
        (
            "entries in atlas-api",
            "entries, all projects",
            "session files",
            "queries: project / cross / no-answer",
            "query words found in the gold entry: keyword / paraphrase / question",
        ),
        rows,
    )
    lines += ["## Targets", ""]
    lines += [
        f"The issue sets them at {TARGET_SIZE:,} entries; smaller sizes are shown for reference.",
        "",
    ]
    lines += _table(
        ("target", "entries", "measured", "met"),
        [
            [
                check["target"],
                f"{check['size']:,}",
                check["measured"],
                ("**met**" if check["met"] else "**missed**")
                if check["at_target_size"]
                else ("met" if check["met"] else "missed"),
            ]
            # The targets' own size first, then the others for reference.
            for check in sorted(results["targets"], key=lambda check: not check["at_target_size"])
        ],
    )
    for number, summary in enumerate(summaries):
        notes = _notes(summary, summaries[number - 1] if number else None)
        if notes and summary["size"] == TARGET_SIZE:
            lines += [
                f"What the {TARGET_SIZE:,}-entry numbers say about the misses:",
                "",
                *notes,
                "",
            ]
    lines += ["## L1: finding the entry", ""]
    if "quality-recall.png" in results.get("plots", ()):
        lines += [f"![R@5 and MRR per style]({plots}/quality-recall.png)", ""]
    if "quality-scaling.png" in results.get("plots", ()):
        lines += [f"![R@5 against store size]({plots}/quality-scaling.png)", ""]
    for summary in summaries:
        lines += [f"### {summary['size']:,} entries", ""]
        lines += _l1_section(summary)
    lines += ["## Abstention: what auto-context would inject", ""]
    if "quality-abstention.png" in results.get("plots", ()):
        lines += [
            f"![Best similarity, answerable and no-answer]({plots}/quality-abstention.png)",
            "",
        ]
    for summary in summaries:
        lines += [f"### {summary['size']:,} entries", ""]
        lines += _abstention_section(summary, summary["floors"])
    lines += ["## Cross-repo recall", ""]
    for summary in summaries:
        lines += [f"### {summary['size']:,} entries", ""]
        lines += _cross_section(summary)
    lines += ["## L2 and L3: from the hit to its anchor and its turn", ""]
    for summary in summaries:
        lines += [f"### {summary['size']:,} entries", ""]
        lines += _anchor_section(summary)
    lines += ["## Secrets", ""]
    lines += _table(
        (
            "entries",
            "secrets in transcripts",
            "in memory files",
            "in search results",
            "redacted chunks returned",
        ),
        [
            [
                f"{s['size']:,}",
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
        ("entries", "generate", "index", "queries (all retrievers)", "L2 + L3"),
        [
            [
                f"{s['size']:,}",
                f"{s['timings']['generate_s']:.1f} s",
                f"{s['index']['chunks']:,} chunks, {s['index']['seconds']:.0f} s "
                f"({s['index']['chunks_per_s']:.1f} chunks/s)"
                + (" (kept store; measured when built)" if s["index_reused"] else ""),
                f"{s['timings']['queries_s']:.0f} s",
                f"{s['timings']['l2_l3_s']:.0f} s",
            ]
            for s in summaries
        ],
    )
    return "\n".join(lines).rstrip() + "\n"
