"""The scaling section: cost against store size, pimem beside the memsearch CLI, from the JSON."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench import report

RAW = "scaling.json"
PLOTS = ("scaling-latency.png", "scaling-session.png", "scaling-memory.png")
#: Issue 16's, at 100,000 entries (a partly synthetic read model): pimem's search p50 and its
#: spread, also with the other core busy; the read model's memory per 100k entries.
RANKER_AT = 100_000
RANKER_P50_MS = 20.0
RANKER_SPREAD = 1.5
READ_MODEL_MB_PER_100K = 250.0

#: The earlier issues' figures, checked at 10,000 entries. Between the search targets set
#: for 2,000 chunks (15 ms) and 20,000 (40 ms), a 10,000-entry store is held to the larger.
AT_SIZE = 10_000
SEARCH_P50_MS = 40.0
SPEEDUP = 50.0
SEARCHABLE_MS = 300.0
SETTLED_P95_MS = 5.0
AUTO_CONTEXT_P95_MS = 120.0
WITHIN_CAP = 0.99
BRIDGE_RSS_MB = 700.0


def _check(target: str, size: int, measured: float, unit: str, met: bool) -> dict[str, Any]:
    return {"target": target, "chunks": size, "measured": measured, "unit": unit, "met": met}


def _ranker_targets(size: Mapping[str, Any]) -> list[dict[str, Any]]:
    n = size["size"]
    search = size["search"]
    label = " (partly synthetic read model)" if size.get("synthetic") else ""
    checks = []
    for stats, how in ((search["pimem"], ""), (search["busy"], ", the other core busy")):
        checks += [
            _check(
                f"pimem's search p50 <= {RANKER_P50_MS:g} ms{how}{label}",
                n,
                stats["p50"],
                "ms",
                stats["p50"] <= RANKER_P50_MS,
            ),
            _check(
                f"pimem's search p95 <= {RANKER_SPREAD:g}x its p50{how}{label}",
                n,
                stats["p95"] / stats["p50"],
                "x",
                stats["p95"] <= RANKER_SPREAD * stats["p50"],
            ),
        ]
    per_100k = size["read_model"]["mb_per_100k"]
    checks.append(
        _check(
            f"read-model memory <= {READ_MODEL_MB_PER_100K:g} MB per 100k entries{label}",
            n,
            per_100k,
            "MB",
            per_100k <= READ_MODEL_MB_PER_100K,
        )
    )
    return checks


def targets(summaries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The latency targets of the earlier issues at the 10,000-entry world, and issue 16's at
    100,000 entries."""
    checks = []
    for size in summaries:
        if size["size"] == RANKER_AT:
            checks += _ranker_targets(size)
        if size["size"] != AT_SIZE or size["bridge"] is None:
            continue
        n = size["size"]
        search, append, bridge = size["search"], size["append"], size["bridge"]
        speedup = search["cli"]["p50"] / search["pimem"]["p50"]
        settled = size["capture"]["pimem"]["p95"]
        checks += [
            _check(
                f"warm search p50 <= {SEARCH_P50_MS:g} ms",
                n,
                search["pimem"]["p50"],
                "ms",
                search["pimem"]["p50"] <= SEARCH_P50_MS,
            ),
            _check(
                f">= {SPEEDUP:g}x faster per search than the CLI (p50)",
                n,
                speedup,
                "x",
                speedup >= SPEEDUP,
            ),
            _check(
                f"appended entry searchable <= {SEARCHABLE_MS:g} ms (p50)",
                n,
                append["pimem"]["p50"],
                "ms",
                append["pimem"]["p50"] <= SEARCHABLE_MS and append["found"],
            ),
            _check(
                f"settled returns <= {SETTLED_P95_MS:g} ms (p95)",
                n,
                settled,
                "ms",
                settled <= SETTLED_P95_MS
                and size["capture"]["captured"] == size["capture"]["exchanges"],
            ),
            _check(
                f"auto-context p95 <= {AUTO_CONTEXT_P95_MS:g} ms (warm)",
                n,
                bridge["auto_context"]["p95"],
                "ms",
                bridge["auto_context"]["p95"] <= AUTO_CONTEXT_P95_MS and bridge["skipped"] == 0,
            ),
            _check(
                f"auto-context within the 300 ms cap >= {WITHIN_CAP:.0%}",
                n,
                bridge["within_cap"],
                "share",
                bridge["within_cap"] >= WITHIN_CAP,
            ),
            _check(
                f"bridge RSS with auto-context on <= {BRIDGE_RSS_MB:g} MB",
                n,
                bridge["rss_mb"],
                "MB",
                bridge["rss_mb"] <= BRIDGE_RSS_MB,
            ),
        ]
    return checks


# -- plots ---------------------------------------------------------------------------------------


def plot(summaries: Sequence[Mapping[str, Any]], out: Path) -> list[str]:
    """Cost against size, on log axes; the names of the PNGs written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    sizes = [size["size"] for size in summaries]

    def series(path: str, stat: str = "p50") -> tuple[list[int], list[float]]:
        """The sizes that measured *path*, and its values there."""
        found: tuple[list[int], list[float]] = ([], [])
        for size in summaries:
            value: Any = size
            for key in path.split("."):
                value = None if value is None else value[key]
            if value is None:
                continue
            found[0].append(size["size"])
            found[1].append(float(value[stat]) if isinstance(value, Mapping) else float(value))
        return found

    def axes_for(axis: Any, title: str, unit: str) -> None:
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xticks(sizes, [f"{size:,}" for size in sizes])
        axis.set_xlabel("entries in the searched project")
        axis.set_ylabel(unit)
        axis.set_title(title)
        axis.grid(alpha=0.3, which="both")
        axis.legend(fontsize=8)

    figure, grid = plt.subplots(1, 4, figsize=(18, 4))
    for axis, (phase, title, theirs) in zip(
        grid,
        (
            ("search", "search (top 5)", "cli"),
            ("expand", "expand a hit", "cli"),
            ("transcript", "transcript window of an anchor", "cli"),
            ("append", "one entry, until searchable", "cli"),
        ),
        strict=True,
    ):
        axis.plot(*series(f"{phase}.pimem"), "o-", label="pimem p50")
        axis.plot(*series(f"{phase}.pimem", "p95"), "o:", label="pimem p95")
        if phase == "search":
            axis.plot(*series("search.busy"), "o--", label="pimem p50, other core busy")
            axis.plot(*series("search.memsearch"), "s-", label="memsearch hybrid p50")
        axis.plot(*series(f"{phase}.{theirs}"), "s--", label="memsearch CLI p50")
        if phase == "append":
            axis.plot(*series("append.cli_store"), "^--", label="CLI indexing the store")
        axes_for(axis, title, "ms")
    figure.tight_layout()
    figure.savefig(out / PLOTS[0], dpi=110)
    plt.close(figure)

    figure, grid = plt.subplots(1, 2, figsize=(11, 4))
    axis = grid[0]
    for path, label in (
        ("snapshot.pimem", "session snapshot"),
        ("capture.pimem", "capture: settled returns"),
        ("bridge.auto_context", "auto-context, end to end"),
    ):
        axis.plot(*series(path, "p95"), "o-", label=f"{label} p95")
    axes_for(axis, "per call, in a session", "ms")
    axis = grid[1]
    for key, label in (
        ("bridge.ready_ms", "bridge ready"),
        ("bridge.session_started_ms", "session.start answered"),
    ):
        axis.plot(*series(key), "o-", label=label)
    warm_sizes, warm = series("bridge.warm_after_s")
    axis.plot(warm_sizes, [1000 * value for value in warm], "o-", label="warm")
    first_sizes, first = series("read_model.first_result")
    axis.plot(first_sizes, first, "s--", label="`pimem search`, whole process")
    axes_for(axis, "start-up (from spawn)", "ms")
    figure.tight_layout()
    figure.savefig(out / PLOTS[1], dpi=110)
    plt.close(figure)

    figure, grid = plt.subplots(1, 2, figsize=(11, 4))
    axis = grid[0]
    axis.plot(*series("index.pimem_chunks_per_s"), "o-", label="pimem")
    axis.plot(*series("index.cli_chunks_per_s"), "s--", label="memsearch CLI")
    axes_for(axis, "index throughput (a batch of new entries)", "chunks/s")
    axis = grid[1]
    for key, label in (
        ("memory.bridge_rss_mb", "bridge, auto-context on"),
        ("memory.in_process_rss_mb", "embedding process (all sizes so far)"),
        ("memory.cli_search_peak_rss_mb", "memsearch search (peak)"),
        ("memory.read_model_mb", "read model (RSS growth on load)"),
    ):
        axis.plot(*series(key), "o-", label=label)
    axes_for(axis, "resident memory", "MB")
    figure.tight_layout()
    figure.savefig(out / PLOTS[2], dpi=110)
    plt.close(figure)
    return list(PLOTS)


# -- markdown ------------------------------------------------------------------------------------


def _ms(value: float) -> str:
    return f"{value:,.1f} ms" if value < 100 else f"{value:,.0f} ms"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return [*report._table(header, rows).splitlines(), ""]


def _label(size: Mapping[str, Any]) -> str:
    return f"{size['size']:,}" + (" (partly synthetic)" if size.get("synthetic") else "")


def _ratio(theirs: Mapping[str, float] | None, ours: Mapping[str, float]) -> str:
    return "-" if theirs is None else f"{theirs['p50'] / ours['p50']:.0f}x"


def _p50(stats: Mapping[str, float] | None) -> str:
    return "-" if stats is None else _ms(stats["p50"])


def _pair_rows(summaries: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    rows = []
    for size in summaries:
        for phase, label in (
            ("search", "search"),
            ("expand", "expand"),
            ("transcript", "transcript"),
            ("index_one", "index one new entry"),
            ("append", "one new entry, until searchable"),
        ):
            if size[phase] is None:
                continue
            ours, theirs = size[phase]["pimem"], size[phase]["cli"]
            rows.append(
                [
                    _label(size),
                    label,
                    _ms(ours["p50"]),
                    _ms(ours["p95"]),
                    _p50(theirs),
                    _ratio(theirs, ours),
                ]
            )
            if phase == "search":
                rows += _search_rows(size)
        for phase, label in (
            ("index_one", "index one new entry, CLI on the whole store"),
            ("append", "one new entry until searchable, CLI indexing the whole store"),
        ):
            if size[phase] is None:
                continue
            whole, ours = size[phase]["cli_store"], size[phase]["pimem"]
            rows.append(
                [
                    _label(size),
                    label,
                    "",
                    "",
                    _ms(whole["p50"]),
                    f"{whole['p50'] / ours['p50']:.0f}x",
                ]
            )
    return rows


def _search_rows(size: Mapping[str, Any]) -> list[list[str]]:
    """pimem's search with the other core busy, and memsearch's hybrid search beside it."""
    search = size["search"]
    rows = [
        [
            _label(size),
            "search, other core busy",
            _ms(search["busy"]["p50"]),
            _ms(search["busy"]["p95"]),
            "",
            "",
        ]
    ]
    if search["memsearch"] is not None:
        rows.append(
            [
                _label(size),
                "search, memsearch's hybrid (interleaved with pimem's "
                f"{_ms(search['paired']['p50'])})",
                _ms(search["memsearch"]["p50"]),
                _ms(search["memsearch"]["p95"]),
                "",
                f"{search['speedup_memsearch']:.0f}x slower",
            ]
        )
    return rows


def _growth(summaries: Sequence[Mapping[str, Any]], value: Any) -> str:
    measured = [size for size in summaries if value(size) is not None]
    first, last = measured[0], measured[-1]
    return (
        f"{_ms(value(first))} at {first['size']:,} entries to {_ms(value(last))} at "
        f"{last['size']:,} ({value(last) / value(first):.1f}x for {last['size'] / first['size']:.0f}x "
        "the entries)"
    )


def _cli_p50(size: Mapping[str, Any], phase: str) -> float | None:
    stats = size[phase]["cli"]
    return None if stats is None else float(stats["p50"])


def _notes(
    summaries: Sequence[Mapping[str, Any]], checks: Sequence[Mapping[str, Any]]
) -> list[str]:
    """What the numbers show, computed from them; what would close each missed target."""
    if len(summaries) < 2:
        return ["- One size only: no curve to read."]
    built = [size for size in summaries if size["index"] is not None]
    notes = [
        "- pimem's warm search (p50) goes from "
        + _growth(summaries, lambda size: size["search"]["pimem"]["p50"])
        + "; the CLI's from "
        + _growth(summaries, lambda size: _cli_p50(size, "search"))
        + ".",
        "- The read model's memory (a fresh process's RSS growth when it loads) goes from "
        + ", ".join(
            f"{size['read_model']['probe']['rss_growth_mb']:.0f} MB at {size['size']:,}"
            for size in summaries
        )
        + " entries; it loads from its cache in "
        + ", ".join(_ms(size["read_model"]["probe"]["load_s"] * 1000) for size in summaries)
        + ".",
        "- Expand (p50) goes from "
        + _growth(summaries, lambda size: size["expand"]["pimem"]["p50"])
        + "; the transcript window from "
        + _growth(summaries, lambda size: size["transcript"]["pimem"]["p50"])
        + " (it reads one session file).",
    ]
    if built:
        notes.append(
            "- The first index of a whole world slows as the store grows: "
            + ", ".join(
                f"{size['index']['at_build']['chunks_per_s']:.1f} chunks/s at {size['size']:,}"
                for size in built
            )
            + ". memsearch asks Milvus Lite for the chunk hashes of every file it indexes, and "
            "Milvus Lite answers from its in-memory table by going through every row not yet "
            "flushed, so a first index of N entries costs about N squared. That is why the "
            "largest size's read model is built without memsearch (see below)."
        )
    largest = summaries[-1]
    steps = largest["search"].get("steps") or {}
    if steps:
        files = largest.get("day_files")
        notes.append(
            f"- At {largest['size']:,} entries pimem's search spends "
            f"{_ms(steps['check']['p50'])} checking the store's "
            + (f"{files:,} " if files else "")
            + "day files for changes (a stat of each, on every search), "
            f"{_ms(steps['legs']['p50'])} in both legs (faiss over the fact vectors, bm25s, and "
            f"the candidates' scores gathered in Python), {_ms(steps['embed']['p50'])} embedding "
            f"the query and {_ms(steps['fuse']['p50'])} fusing: the first two grow with the store, "
            "the embedding does not."
        )
    expand = largest["expand"]["pimem"]["p50"]
    if largest.get("synthetic") and expand > 5:
        notes.append(
            f"- Expand takes {_ms(expand)} at {largest['size']:,} entries: the read model "
            "looks the hash up in a map of every chunk that it builds on each call."
        )
    synthetic = [size for size in summaries if size.get("synthetic")]
    for size in synthetic:
        built_with = size["read_model"]["ready"] or {}
        notes.append(
            f"- {size['size']:,} entries are partly synthetic: no memsearch collection exists, so "
            "memsearch's search, the CLI, indexing, append, capture and the bridge are not "
            f"measured there; the read model ({built_with.get('chunks', 0):,} chunks) was loaded "
            f"from its {built_with.get('origin', '?')} as any is."
        )
    missed = [check for check in checks if not check["met"]]
    for check in missed:
        notes.append(f"- Missed: {check['target']} at {check['chunks']:,} entries.")
    return notes


def _read_model_rows(summaries: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    rows = []
    for size in summaries:
        read = size["read_model"]
        probe, startup, first = read["probe"], read["startup"], read["first_result"]
        rows.append(
            [
                _label(size),
                f"{probe['chunks']:,} / {probe['facts']:,}",
                _ms(probe["load_s"] * 1000),
                f"{probe['rss_growth_mb']:.0f} MB ({read['mb_per_100k']:.0f} MB per 100k)",
                _ms(startup["embedder"] * 1000),
                _ms(startup["read_model"] * 1000),
                _ms(startup["whole"] * 1000),
                f"{_ms(first['p50'])} (max {_ms(first['max'])})",
            ]
        )
    return rows


STEPS = (
    ("check", "store files changed? (stat)"),
    ("embed", "query embedding"),
    ("legs", "dense + lexical legs"),
    ("fuse", "fusion and relevance"),
)


def _step_rows(summaries: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    rows = []
    for size in summaries:
        steps = size["search"].get("steps") or {}
        if not steps:
            continue
        rows.append(
            [
                _label(size),
                *(_ms(steps[name]["p50"]) for name, _ in STEPS),
                _ms(sum(steps[name]["p50"] for name, _ in STEPS)),
                _ms(size["search"]["pimem"]["p50"]),
            ]
        )
    return rows


def _session_rows(summaries: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    rows = []
    for size in summaries:
        snapshot = size["snapshot"]["pimem"]
        row = [
            _label(size),
            f"{_ms(snapshot['p50'])} / {_ms(snapshot['p95'])}",
        ]
        if size["bridge"] is None:
            rows.append([*row, "-", "-", "-", "-"])
            continue
        bridge = size["bridge"]
        rows.append(
            [
                *row,
                f"{size['capture']['pimem']['p50']:.2f} / {size['capture']['pimem']['p95']:.2f} ms",
                _ms(bridge["ready_ms"]),
                _ms(bridge["session_started_ms"]),
                f"{_ms(bridge['auto_context']['p50'])} / {_ms(bridge['auto_context']['p95'])}"
                + (f" ({bridge['skipped']} skipped)" if bridge["skipped"] else ""),
            ]
        )
    return rows


def _resource_rows(summaries: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    rows = []
    for size in summaries:
        index, memory = size["index"], size["memory"]
        contention = "-" if size.get("contention") is None else f"{size['contention']:.0%}"
        if index is None:
            rows.append([_label(size), "-", "-", "read model built directly", "-", "-", contention])
            continue
        rows.append(
            [
                _label(size),
                f"{index['pimem_chunks_per_s']:.1f} chunks/s",
                f"{index['cli_chunks_per_s']:.1f} chunks/s",
                f"{index['at_build']['chunks_per_s']:.1f} chunks/s",
                f"{memory['bridge_rss_mb']:.0f} MB",
                f"{memory['cli_search_peak_rss_mb']:.0f} MB",
                contention,
            ]
        )
    return rows


def render(results: Mapping[str, Any], plots: str) -> str:
    """The section; *plots* is the PNGs' directory relative to the page."""
    summaries = results["summary"]
    plan = results["plan"]
    synthetic = [size for size in summaries if size.get("synthetic")]
    built = [
        (size, raw["index_at_build"])
        for size, raw in zip(summaries, results.get("raw", ()), strict=False)
        if size.get("synthetic")
    ]
    lines = [
        "# Cost against store size",
        "",
        "What each memory operation costs as the store grows, measured on the worlds of the",
        "retrieval-quality benchmark (the searched project holds the size; three other projects",
        "a tenth each), with memsearch's hybrid search and the `memsearch` CLI doing the same",
        "work in the same run where they have an equivalent. Searches are pimem's search API",
        "with its own ranker (the default), query embedding included. Raw results: "
        f"[`{RAW}`]({plots}/{RAW}).",
        "",
    ]
    if synthetic:
        lines += [
            "**Partly synthetic:** "
            + ", ".join(f"{size['size']:,}" for size in synthetic)
            + " entries. Indexing that many entries with memsearch takes hours on this machine",
            "(about 20 chunks/s, and slower as the collection grows), so no memsearch collection",
            "is built there, and pimem's ledger records the day files as indexed (a search would",
            "otherwise index them first). The world is generated and written like the others; its",
            "read model is built directly from its files: each day file cut by memsearch's own",
            "chunker with",
            "memsearch's chunk hashes (what pimem's read model does with any changed file), each",
            "distinct fact embedded once by the same model, saved as the read model's cache, which",
            "pimem then loads as it loads any. The vectors are real; only the collection (and",
            "memsearch's chunk vectors, which a complete read model does not use) is missing, so",
            "memsearch's search, the CLI, indexing, capture and the bridge are not measured there.",
            "",
        ]
        for size, build in built:
            lines += [
                f"- {size['size']:,} entries: {build['chunks']:,} chunks, {build['facts']:,} facts "
                f"({build['distinct_facts']:,} distinct) embedded at {build['facts_per_s']:.0f}/s "
                f"in {build['embedding_s'] / 60:.0f} min when the read model was built.",
            ]
        lines += [""]
    lines += [
        f"![Search, expand and append against store size]({plots}/{PLOTS[0]})",
        "",
        *_table(
            ("Entries", "Operation", "pimem p50", "pimem p95", "CLI p50", "CLI / pimem"),
            _pair_rows(summaries),
        ),
        "Where pimem's search goes, its steps timed one by one (p50; as `Recall.search` runs "
        "them):",
        "",
        *_table(
            ("Entries", *(label for _, label in STEPS), "sum of the steps", "whole search p50"),
            _step_rows(summaries),
        ),
        "The read model in fresh processes (its cache present): chunks and facts, the load, "
        "the resident memory it adds, and a new process's first search step by step "
        "(`python -m bench.read_model` and a start-up script, see the latency section):",
        "",
        *_table(
            (
                "Entries",
                "chunks / facts",
                "load from the cache",
                "RSS growth",
                "embedder load",
                "read-model load",
                "start-up script, whole",
                "`pimem search`, whole (median)",
            ),
            _read_model_rows(summaries),
        ),
        f"![Session costs against store size]({plots}/{PLOTS[1]})",
        "",
        *_table(
            (
                "Entries",
                "Snapshot p50 / p95",
                "settled p50 / p95",
                "Bridge ready",
                "session.start",
                "Auto-context p50 / p95",
            ),
            _session_rows(summaries),
        ),
        f"![Index throughput and resident memory against store size]({plots}/{PLOTS[2]})",
        "",
        *_table(
            (
                "Entries",
                "Index pimem",
                "Index CLI",
                "Index at build",
                "Bridge RSS",
                "CLI search peak RSS",
                "CPU taken by others",
            ),
            _resource_rows(summaries),
        ),
        "## What the curves say",
        "",
        *_notes(summaries, results.get("targets", ())),
        "",
        "## How these were measured",
        "",
        f"- **Search**: {plan['searches']} warm `Pimem.search_memory` calls (top 5, pimem's "
        f"ranker) after {plan['warmup']} warm-up ones, on answerable questions of the world, the "
        "read model loaded and complete first; the same queries with another process spinning on "
        "the second core; the same queries each followed by memsearch's hybrid search on the "
        "same engine (the speed-up is taken from these pairs); the CLI: "
        f"`memsearch search QUERY -j -k 5 -c COLLECTION`, {plan['cli_calls']} calls, after "
        "pimem's database lease is released.",
        "- **Expand**: the top hit of each search, `Pimem.expand_chunk`; the CLI: "
        "`memsearch expand HASH -j -c COLLECTION`.",
        f"- **Transcript**: `Pimem.read_transcript` on {plan['transcripts']} anchors of the world "
        "(the anchored turn with its window, on the session's live branch); the CLI: "
        "`memsearch transcript SESSION_FILE -t TURN`, whose reader ignores pi's branches.",
        f"- **Snapshot**: `Pimem.build_snapshot` as of the evening of the world's last day, "
        f"{plan['snapshots']} times; there is no CLI equivalent.",
        f"- **Index throughput**: {plan['batch']} new entries in a day file of their own, "
        "indexed by `Pimem.index_memory(files=...)`, then another batch by "
        '`memsearch index FILE` (its wall time, start-up included). "At build" is the whole '
        "world's first index, recorded when the world was built (possibly under other load).",
        f"- **Append**: one new entry, indexed by its file, until a search returns it: pimem "
        f"{plan['appends']} times; the CLI ({plan['cli_appends']} times each) "
        "`memsearch index FILE` or `memsearch index MEMORY_DIR`, then `memsearch search`.",
        f"- **Capture**: {plan['settles']} exchanges settled in the world's project by a "
        "`Session` whose distiller sleeps 200 ms like a model call, with the store's real "
        "index behind each capture; the time the host waits on `settled`.",
        f"- **Bridge**: a `pimem serve` child with auto-context on: spawn to its ready line, to "
        f"`session.start` answered, to auto-context warm; then {plan['prompts']} prompts "
        "(half answerable, half not) back to back, the first "
        f"{plan['warmup']} untimed; its resident memory after them.",
        "- **Read model**: `python -m bench.read_model probe` in a fresh process (pimem opened "
        "and the embedder warm, then the read model loaded: its RSS growth and load time); a "
        "start-up script timing each step of a first search; `pimem search QUERY` timed whole, "
        f"{plan.get('first_results', 5)} runs after an untimed one.",
        "- **CPU taken by others**: the share of all CPUs that other processes used while a "
        "size was measured; every time above grows with it.",
        "- Everything a phase added is emptied, indexed and deleted afterwards, and the chunk "
        "count must match the world's again.",
        "",
    ]
    return "\n".join(lines)
