"""Plots and the markdown report of a benchmark run."""

from __future__ import annotations

import importlib.metadata
import os
import platform
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.latency import RANKER_P50_MS, TARGET_P50_MS, TARGET_SEARCHABLE_MS, TOP_K

PACKAGES = ("pimem", "memsearch", "milvus-lite", "pymilvus", "onnxruntime", "tokenizers", "numpy")


def _proc(name: str) -> str:
    path = Path("/proc") / name
    return path.read_text() if path.is_file() else ""


def _field(text: str, name: str) -> str | None:
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == name:
            return value.strip()
    return None


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    cpuinfo, meminfo = _proc("cpuinfo"), _proc("meminfo")
    flags = set((_field(cpuinfo, "flags") or "").split())
    memory_kb = (_field(meminfo, "MemTotal") or "0 kB").split()[0]
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return {
        "cpu": _field(cpuinfo, "model name") or platform.processor() or "unknown",
        "cpu_flags": sorted(flags & {"avx", "avx2", "avx512f", "avx512_vnni", "fma", "amx_tile"}),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)),
        "ram_gb": int(memory_kb) / 1024 / 1024,
        "os": platform.platform(),
        "python": platform.python_version(),
        "packages": versions,
    }


# -- formatting --------------------------------------------------------------------------------


def _time(ms: float) -> str:
    if ms < 0:
        return f"-{_time(-ms)}"
    if ms >= 1000:
        return f"{ms / 1000:.2f} s"
    if ms >= 100:
        return f"{ms:.0f} ms"
    if ms < 0.1:
        return f"{ms * 1000:.1f} µs"
    return f"{ms:.1f} ms"


def _count(value: int) -> str:
    return f"{value:,}"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _measured(check: Mapping[str, Any]) -> str:
    value = float(check["measured"])
    text = {
        "x": f"{value:.2f}x" if value < 10 else f"{value:.0f}x",
        "share": f"{value:.1%}" if 0 < value < 1 else f"{value:.0%}",
        "MB": f"{value:.0f} MB",
        "s": f"{value:.1f} s",
    }.get(check["unit"]) or _time(value)
    return f"{text} ({check['detail']})" if check.get("detail") else text


# -- plots -------------------------------------------------------------------------------------

#: Above this share of the CPUs taken by other processes, the report warns.
CONTENTION_WARNING = 0.05
SEARCH_PLOT = "search-latency.png"
APPEND_PLOT = "append-latency.png"
BREAKDOWN_PLOT = "search-breakdown.png"
CONDITIONS = (
    ("pimem", "pimem's ranker (default)", "#2b7bba"),
    ("busy", "pimem's ranker, the other core busy", "#7fb8e0"),
    ("memsearch", "memsearch hybrid, in-process, database leased", "#f0b27a"),
    ("cold", "memsearch hybrid, PIMEM_DB_LINGER_MS=0", "#c08552"),
    ("cli", "memsearch search (CLI)", "#d9822b"),
)
APPEND_PATHS = (
    ("append", "read_your_write_ms", "pimem: write returned, until a search finds it", "#9ecae1"),
    ("append", "index_ms", "pimem: index the day file", "#7fb8e0"),
    ("append", "searchable_ms", "pimem: index + first search", "#2b7bba"),
    ("cli_append_file", "searchable_ms", "CLI: index the day file + search", "#f0b27a"),
    ("cli_append_store", "searchable_ms", "CLI: index the store + search", "#d9822b"),
)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a build machine
    import matplotlib.pyplot as plt

    return plt


def _grouped_bars(
    ax: Any,
    sizes: Sequence[Mapping[str, Any]],
    series: Sequence[tuple[str, str, Callable[[Mapping[str, Any]], Mapping[str, float]]]],
) -> None:
    """Bars at p50 with a whisker up to p95, one group per corpus size, on a log scale."""
    width = 0.8 / len(series)
    for number, (label, color, pick) in enumerate(series):
        xs = [group + (number - (len(series) - 1) / 2) * width for group in range(len(sizes))]
        p50 = [pick(size)["p50"] for size in sizes]
        p95 = [pick(size)["p95"] for size in sizes]
        ax.bar(xs, p50, width * 0.92, label=label, color=color)
        ax.vlines(xs, p50, p95, color="black", linewidth=1)
        ax.scatter(xs, p95, marker="_", color="black", s=60, zorder=3)
        for x, value in zip(xs, p50, strict=True):
            ax.annotate(
                _time(value), (x, value), textcoords="offset points", xytext=(0, -12),
                ha="center", fontsize=7, color="white",
            )  # fmt: skip
    ax.set_xticks(range(len(sizes)), [f"{_count(size['chunks'])} chunks" for size in sizes])
    ax.set_yscale("log")
    ax.set_ylim(bottom=1)  # bars on a log scale need a common floor: 1 ms
    ax.grid(axis="y", which="both", alpha=0.3)


def plot_search(summary: Mapping[str, Any], path: Path) -> None:
    plt = _pyplot()
    sizes = summary["sizes"]
    fig, ax = plt.subplots(figsize=(8, 4.8))
    series = [(label, color, lambda size, key=key: size[key]) for key, label, color in CONDITIONS]
    _grouped_bars(ax, sizes, series)
    width = 0.8 / len(CONDITIONS)
    for group, size in enumerate(sizes):
        target = TARGET_P50_MS.get(size["chunks"])
        x = group - 2 * width
        if target is not None:
            ax.hlines(target, x - width / 2, x + width / 2, colors="red", linestyles="dashed")
        target = RANKER_P50_MS.get(size["chunks"])
        if target is not None:
            ax.hlines(target, x - width / 2, x + width / 2, colors="purple", linestyles="dotted")
    ax.plot([], [], color="purple", linestyle="dotted", label="issue 16 target p50 (pimem)")
    ax.plot([], [], color="red", linestyle="dashed", label="earlier target p50 (pimem)")
    ax.set_ylabel("milliseconds per query (bar p50, whisker p95; log)")
    ax.set_title("Warm L1 search: pimem's ranker beside memsearch's, same store, same run")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_append(summary: Mapping[str, Any], path: Path) -> None:
    plt = _pyplot()
    sizes = summary["sizes"]
    fig, ax = plt.subplots(figsize=(8, 4.8))
    series = [
        (label, color, lambda size, group=group, key=key: size[group][key])
        for group, key, label, color in APPEND_PATHS
    ]
    _grouped_bars(ax, sizes, series)
    ax.axhline(TARGET_SEARCHABLE_MS, color="red", linestyle="dashed", label="target (pimem)")
    ax.set_ylabel("milliseconds from index start (bar p50, whisker p95; log)")
    ax.set_title("One appended entry: until a search finds it")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# The steps are timed one by one, so their p50s need not add up to the whole call's p50.
PIMEM_STEPS = ("check", "embed", "legs", "fuse")


def _pimem_parts(size: Mapping[str, Any]) -> dict[str, float]:
    return {f"pimem_{name}": size["pimem_breakdown"][name]["p50"] for name in PIMEM_STEPS}


def _warm_parts(size: Mapping[str, Any]) -> dict[str, float]:
    return {name: size["breakdown"][name]["p50"] for name in ("config", "embed", "database")}


def _cold_parts(size: Mapping[str, Any]) -> dict[str, float]:
    parts = {name: size["breakdown"][name]["p50"] for name in ("config", "embed")}
    for name in ("open", "first_search", "close"):
        parts[name] = size["open_close"][name]["p50"]
    return parts


PART_COLORS = {
    "pimem_check": "#cccccc",
    "pimem_embed": "#2b7bba",
    "pimem_legs": "#31a354",
    "pimem_fuse": "#a1d99b",
    "config": "#999999",
    "embed": "#2b7bba",
    "database": "#d9822b",
    "open": "#8c564b",
    "first_search": "#e377c2",
    "close": "#bcbd22",
}


PART_LABELS = {
    "pimem_check": "pimem: files changed?",
    "pimem_embed": "pimem: query embedding",
    "pimem_legs": "pimem: dense + lexical legs",
    "pimem_fuse": "pimem: fusion, relevance",
    "embed": "memsearch: query embedding",
    "database": "memsearch: database (hybrid)",
}


def plot_breakdown(summary: Mapping[str, Any], path: Path) -> None:
    plt = _pyplot()
    rows = []
    for size in summary["sizes"]:
        chunks = _count(size["chunks"])
        rows.append((f"{chunks}, pimem", _pimem_parts(size), size["pimem"]["p50"]))
        rows.append((f"{chunks}, memsearch leased", _warm_parts(size), size["memsearch"]["p50"]))
        rows.append((f"{chunks}, memsearch linger 0", _cold_parts(size), size["cold"]["p50"]))
    fig, ax = plt.subplots(figsize=(8, 1.6 + 0.55 * len(rows)), layout="constrained")
    labelled: set[str] = set()
    for y, (_, parts, whole) in enumerate(rows):
        left = 0.0
        for name, value in parts.items():
            label = None if name in labelled else PART_LABELS.get(name, name.replace("_", " "))
            labelled.add(name)
            ax.barh(y, value, left=left, color=PART_COLORS[name], label=label)
            left += value
        ax.vlines(whole, y - 0.45, y + 0.45, colors="black", linewidth=2,
                  label=None if y else "whole call (p50)")  # fmt: skip
    ax.set_yticks(range(len(rows)), [label for label, _, _ in rows])
    ax.invert_yaxis()
    ax.set_xlabel("milliseconds (p50 of each step, timed one by one)")
    ax.set_title("Where one search goes")
    fig.legend(fontsize=7, ncol=4, loc="outside lower center")
    ax.grid(axis="x", alpha=0.3)
    fig.savefig(path, dpi=120)
    plt.close(fig)


PI_PLOT = "pi-latency.png"
AUTO_CONTEXT_PLOT = "auto-context-latency.png"
RELEVANCE_PLOT = "auto-context-relevance.png"
SERIES_COLORS = ("#7fb8e0", "#2b7bba", "#d9822b", "#999999")
#: The pi adapter's steps as the report names them: (key in a line's summary, label, target).
PI_STEPS = (
    ("before_agent_start", "before_agent_start\n(after the first prompt)", 10.0),
    ("startup_window", "before_agent_start\n(bridge starting up)", None),
    ("first_prompts", "first prompt\n(waits for the bridge)", None),
    ("agent_settled", "agent_settled\nhandler", 10.0),
    ("bridge_ready", "memory ready\nafter opening", 300.0),
)


def plot_pi(lines: Sequence[Mapping[str, Any]], path: Path) -> None:
    """Per step, one bar per pi line at p50 with a whisker to p95 (log scale)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.8))
    width = 0.8 / max(1, len(lines))
    for number, line in enumerate(lines):
        steps = [(x, line[key]) for x, (key, _, _) in enumerate(PI_STEPS) if line[key]]
        xs = [x + (number - (len(lines) - 1) / 2) * width for x, _ in steps]
        # A log scale has no zero: the fastest steps take microseconds.
        p50 = [max(stats["p50"], 0.01) for _, stats in steps]
        p95 = [max(stats["p95"], 0.01) for _, stats in steps]
        color = SERIES_COLORS[number % len(SERIES_COLORS)]
        ax.bar(xs, p50, width * 0.92, color=color, label=f"pi {line['pi']} (Node {line['node']})")
        ax.vlines(xs, p50, p95, color="black", linewidth=1)
        ax.scatter(xs, p95, marker="_", color="black", s=60, zorder=3)
    for x, (_, _, target) in enumerate(PI_STEPS):
        if target is not None:
            ax.hlines(target, x - 0.45, x + 0.45, colors="red", linestyles="dashed")
    ax.plot([], [], color="red", linestyle="dashed", label="target")
    ax.set_xticks(range(len(PI_STEPS)), [label for _, label, _ in PI_STEPS], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylim(bottom=0.01)
    ax.set_ylabel("milliseconds (bar p50, whisker p95; log)")
    ax.set_title("The pi adapter inside the real pi process")
    ax.grid(axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _distribution(ax: Any, samples: Sequence[float], **style: Any) -> None:
    ordered = sorted(samples)
    shares = [(n + 1) / len(ordered) for n in range(len(ordered))]
    ax.step(ordered, shares, where="post", **style)


def plot_auto_context(auto_context: Mapping[str, Any], path: Path) -> None:
    """Each size's latencies as a distribution: prompts back to back, and spaced out."""
    from bench.auto_context import HOST_CAP_MS, TARGET_P95_MS

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for number, run in enumerate(auto_context["runs"]):
        color = SERIES_COLORS[(number + 1) % len(SERIES_COLORS)]
        chunks = _count(run["chunks"])
        _distribution(ax, run["warm"]["samples_ms"], color=color, label=f"{chunks}, back to back")
        spaced = f"{chunks}, {run['spaced']['pause_s']:g} s apart"
        _distribution(ax, run["spaced"]["samples_ms"], color=color, linestyle=":", label=spaced)
        target = TARGET_P95_MS.get(run["chunks"])
        if target is not None:
            ax.axvline(target, color=color, linestyle="--", linewidth=0.8)
    ax.axvline(HOST_CAP_MS, color="red", linestyle="dashed", label="the host's 300 ms cap")
    ax.axhline(0.95, color="grey", linewidth=0.6)
    ax.set_xscale("log")
    ax.set_xlabel("milliseconds from the host's call to the answer (log; thin dashes: p95 target)")
    ax.set_ylabel("share of prompts answered within")
    ax.set_title("Auto-context: per-prompt latency through the bridge")
    ax.grid(which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _relevance_panel(ax: Any, size: Mapping[str, Any]) -> None:
    relevance = size["relevance"]
    curve, fused = relevance["curve"], relevance["rank_fusion_floor"]
    floors = [point["floor"] for point in curve]
    irrelevant = [point["irrelevant_injection_rate"] for point in curve]
    served = [p["answerable_prompts_served"] / p["answerable_prompts"] for p in curve]
    ax.plot(floors, irrelevant, "o-", color="#d9822b", label="no-answer prompts injected")
    ax.plot(floors, served, "s-", color="#2b7bba", label="answerable prompts served")
    fused_served = fused["answerable_prompts_served"] / fused["answerable_prompts"]
    ax.axhline(fused["irrelevant_injection_rate"], color="#d9822b", linestyle=":",
               label="rank fusion >= 0.5: no-answer injected")  # fmt: skip
    ax.axhline(fused_served, color="#2b7bba", linestyle=":", label="rank fusion >= 0.5: served")
    similar = relevance["similarity_floor"]
    ax.axhline(similar["answerable_prompts_served"] / similar["answerable_prompts"],
               color="#2b7bba", linestyle="-.", label="cosine >= 0.5 (memsearch's ranker): served")  # fmt: skip
    ax.axvline(relevance["relevance_floor"]["floor"], color="grey", linestyle="--",
               label="default relevance floor")  # fmt: skip
    ax.set_title(f"{_count(size['chunks'])} chunks, {relevance['prompts']} labelled prompts")
    ax.set_xlabel("pimem's relevance floor")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)


def plot_relevance(auto_context: Mapping[str, Any], path: Path) -> None:
    """Per size, the relevance floor's trade-off against the earlier filters' points."""
    plt = _pyplot()
    sizes = auto_context["summary"]
    fig, axes = plt.subplots(1, len(sizes), figsize=(5.5 * len(sizes), 4.4), squeeze=False)
    for ax, size in zip(axes[0], sizes, strict=True):
        _relevance_panel(ax, size)
    axes[0][0].set_ylabel("share of prompts")
    axes[0][-1].legend(fontsize=7, loc="center right")
    fig.suptitle("Auto-context relevance: what each filter lets through")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_plots(results: Mapping[str, Any], directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    summary = results["summary"]
    plot_search(summary, directory / SEARCH_PLOT)
    plot_append(summary, directory / APPEND_PLOT)
    plot_breakdown(summary, directory / BREAKDOWN_PLOT)
    # Results recorded before these measurements existed have none.
    auto_context = results.get("auto_context")
    if auto_context:
        plot_auto_context(auto_context, directory / AUTO_CONTEXT_PLOT)
        plot_relevance(auto_context, directory / RELEVANCE_PLOT)


# -- markdown ----------------------------------------------------------------------------------


def _machine_section(meta: Mapping[str, Any]) -> str:
    box = meta["machine"]
    packages = ", ".join(f"{name} {version}" for name, version in box["packages"].items())
    return "\n".join(
        [
            f"- CPU: {box['cpu']}, {box['usable_cpus']} of {box['logical_cpus']} logical CPUs "
            f"usable ({', '.join(box['cpu_flags']) or 'no SIMD flags reported'})",
            f"- RAM: {box['ram_gb']:.1f} GB; OS: {box['os']}",
            f"- Python {box['python']}; {packages}",
            "- Embedding: the offline all-MiniLM-L6-v2 ONNX model (`make model`), memsearch "
            "provider `onnx`, on the CPU; database: Milvus Lite (a local `milvus.db`)",
        ]
    )


def _targets_section(results: Mapping[str, Any]) -> str:
    rows = [
        (
            check["target"],
            "-" if check["chunks"] is None else _count(check["chunks"]),
            _measured(check),
            "met" if check["met"] else "**missed**",
        )
        for check in results["targets"]
    ]
    return _table(("Target", "Chunks", "Measured", "Result"), rows)


def _search_section(summary: Mapping[str, Any]) -> str:
    rows = []
    for size in summary["sizes"]:
        for key, label, _ in CONDITIONS:
            stats = size[key]
            rows.append(
                (
                    _count(size["chunks"]),
                    label,
                    _time(stats["p50"]),
                    _time(stats["p95"]),
                    f"{stats['p95'] / stats['p50']:.2f}x",
                    _time(stats["mean"]),
                    str(stats["n"]),
                )
            )
        paired = size["paired"]
        rows.append(
            (
                _count(size["chunks"]),
                "speed-up: memsearch hybrid p50 / pimem p50 (interleaved, pimem "
                f"{_time(paired['p50'])} there)",
                f"**{size['speedup_memsearch_p50']:.0f}x**",
                "",
                "",
                "",
                "",
            )
        )
        speedup = f"**{size['speedup_p50']:.0f}x**"
        rows.append(
            (_count(size["chunks"]), "speed-up: CLI p50 / pimem p50", speedup, "", "", "", "")
        )
    return _table(("Chunks", "Condition", "p50", "p95", "p95 / p50", "mean", "n"), rows)


def _breakdown_section(summary: Mapping[str, Any]) -> str:
    pimem_rows, warm_rows, cold_rows = [], [], []
    for size in summary["sizes"]:
        parts = _pimem_parts(size)
        pimem_rows.append(
            (
                _count(size["chunks"]),
                *(_time(parts[f"pimem_{name}"]) for name in PIMEM_STEPS),
                _time(sum(parts.values())),
                _time(size["pimem"]["p50"]),
            )
        )
        warm = _warm_parts(size)
        warm_rows.append(
            (
                _count(size["chunks"]),
                *(_time(warm[name]) for name in ("config", "embed", "database")),
                _time(sum(warm.values())),
                _time(size["memsearch"]["p50"]),
            )
        )
        cold = _cold_parts(size)
        cold_rows.append(
            (
                _count(size["chunks"]),
                *(_time(cold[name]) for name in ("open", "first_search", "close")),
                _time(size["breakdown"]["database"]["p50"]),
                _time(size["cold"]["p50"]),
            )
        )
    pimem_table = _table(
        (
            "Chunks",
            "store files changed? (stat)",
            "query embedding",
            "dense + lexical legs",
            "fusion and relevance",
            "sum of the steps",
            "whole search p50",
        ),
        pimem_rows,
    )
    warm_table = _table(
        (
            "Chunks",
            "configuration",
            "query embedding",
            "database (hybrid search)",
            "sum of the steps",
            "whole search p50",
        ),
        warm_rows,
    )
    cold_table = _table(
        ("Chunks", "open", "first search", "close", "(warm search)", "whole cold call p50"),
        cold_rows,
    )
    return (
        f"pimem's ranker (`Recall.search`, its steps timed one by one):\n\n{pimem_table}\n\n"
        f"memsearch's hybrid search on the same engine:\n\n{warm_table}\n\n"
        "A cold call of memsearch's (`PIMEM_DB_LINGER_MS=0`; pimem's ranker never opens the "
        f"database to search) adds:\n\n{cold_table}"
    )


def _read_model_section(summary: Mapping[str, Any]) -> str:
    rows, start_rows, backfill_rows = [], [], []
    for size in summary["sizes"]:
        read = size["read_model"]
        probe, startup, first = read["probe"], read["startup"], read["first_result"]
        rows.append(
            (
                _count(size["chunks"]),
                f"{probe['chunks']:,} chunks, {probe['facts']:,} facts",
                f"{probe['load_s'] * 1000:.0f} ms (from the {probe['origin']})",
                f"{probe['rss_growth_mb']:.0f} MB",
                f"{read['mb_per_100k']:.0f} MB",
                _time(probe["first_search_ms"]),
            )
        )
        start_rows.append(
            (
                _count(size["chunks"]),
                *(
                    _time(startup[name] * 1000)
                    for name in (
                        "python",
                        "import",
                        "open",
                        "embedder",
                        "read_model",
                        "first_search",
                        "whole",
                    )
                ),
                f"{_time(first['p50'])} (max {_time(first['max'])}, n {first['n']})",
            )
        )
        backfill = read["backfill"]
        searches = backfill["searches"]
        backfill_rows.append(
            (
                _count(size["chunks"]),
                _time(backfill["first_search_ms"]),
                f"{backfill['pending_at_start']:,}",
                f"{backfill['backfill_s']:.1f} s",
                f"{backfill['answered']}",
                f"{_time(searches['p50'])} / {_time(searches['p95'])}" if searches else "-",
                "yes" if backfill["cache_saved"] and backfill["pending_at_end"] == 0 else "no",
            )
        )
    memory = _table(
        (
            "Chunks",
            "read model",
            "load",
            "RSS growth",
            "per 100k entries",
            "first search after it",
        ),
        rows,
    )
    starts = _table(
        (
            "Chunks",
            "interpreter start and exit",
            "import pimem",
            "open pimem (plugins)",
            "load the embedder",
            "load the read model",
            "first search",
            "whole process",
            "`pimem search` timed whole (median)",
        ),
        start_rows,
    )
    backfills = _table(
        (
            "Chunks",
            "first search (reads the collection)",
            "chunks without fact vectors then",
            "backfill took",
            "searches answered during it",
            "their p50 / p95",
            "complete and cached",
        ),
        backfill_rows,
    )
    return (
        "A fresh process on the read model's cache (`python -m bench.read_model probe`): pimem "
        "opened and the embedder warm first, then the read model loaded as a first search loads "
        f"it; its resident-memory growth:\n\n{memory}\n\n"
        "A new process, from its start to its first result (the cache present): a small script "
        "timing each step, and `pimem search QUERY` timed whole:\n\n"
        f"{starts}\n\n"
        "A store indexed before the read model existed (its cache removed): the first search "
        "reads memsearch's rows and stored chunk vectors; the per-fact vectors are computed in "
        "the background while searches (one every "
        f"{summary['sizes'][0]['read_model']['backfill']['pause_s']:g} s) keep being answered:"
        f"\n\n{backfills}"
    )


def _append_section(summary: Mapping[str, Any]) -> str:
    rows = []
    for size in summary["sizes"]:
        for group, key, label, _ in APPEND_PATHS:
            stats = size[group][key]
            rows.append(
                (
                    _count(size["chunks"]),
                    label,
                    _time(stats["p50"]),
                    _time(stats["max"]),
                    str(stats["n"]),
                )
            )
    return _table(("Chunks", "Path", "p50", "max", "n"), rows)


def _resources_section(results: Mapping[str, Any]) -> str:
    rows = []
    for run, size in zip(results["runs"], results["summary"]["sizes"], strict=True):
        index = size["index"]
        reused = " (kept store: measured when it was built)" if run["index_reused"] else ""
        rows.append(
            (
                _count(size["chunks"]),
                _count(index["files"]),
                f"{index['seconds']:.0f} s{reused}",
                f"{index['chunks_per_s']:.1f}",
                f"{index['embedding_seconds']:.0f} s ({_share(index['embedding_seconds'], index['seconds'])})",
                f"{index['embedding_chunks_per_s']:.1f}",
                f"{run['rss']['end']['current_mb']:.0f} MB",
                f"{run['rss']['end']['peak_mb']:.0f} MB",
                f"{run['cli']['rss_mb']:.0f} MB",
            )
        )
    return _table(
        (
            "Chunks",
            "day files",
            "full index (in-process)",
            "chunks/s",
            "of which embedding",
            "embedding throughput, chunks/s",
            "RSS after the size",
            "RSS peak so far",
            "one `memsearch search`, peak RSS",
        ),
        rows,
    )


def _contention(results: Mapping[str, Any]) -> str:
    return ", ".join(
        f"{size['contention']['measurements']:.0%} at {_count(size['chunks'])} chunks"
        for size in results["summary"]["sizes"]
    )


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "n/a"


def _notes(summary: Mapping[str, Any]) -> list[str]:
    """Observations computed from this run's numbers, so they stay true when it is re-run."""
    sizes = summary["sizes"]
    notes = []
    for size in sizes:
        others = size["contention"]["measurements"]
        if others > CONTENTION_WARNING:
            notes.append(
                f"**Caution:** other processes took {others:.0%} of the CPUs while the "
                f"{_count(size['chunks'])}-chunk numbers were measured; they are slower than "
                "on an idle machine."
            )
    for size in sizes:
        parts = _pimem_parts(size)
        steps = sum(parts.values())
        embed = parts["pimem_embed"]
        notes.append(
            f"At {_count(size['chunks'])} chunks, pimem's search is {_time(embed)} of query "
            f"embedding ({_share(embed, steps)} of its steps), {_time(parts['pimem_legs'])} for "
            f"both legs (faiss over the fact vectors, bm25s), {_time(parts['pimem_fuse'])} of "
            f"fusion and relevance and {_time(parts['pimem_check'])} checking the store's files "
            f"for changes; memsearch's hybrid search on the same engine takes "
            f"{_time(size['memsearch']['p50'])}, {_time(size['breakdown']['database']['p50'])} "
            "of it in Milvus Lite."
        )
    for size in sizes:
        warm, steps = _warm_parts(size), sum(_warm_parts(size).values())
        larger = "the database" if warm["database"] >= warm["embed"] else "the query embedding"
        notes.append(
            f"At {_count(size['chunks'])} chunks, timed step by step, a warm search of "
            f"memsearch's is {_time(warm['database'])} of Milvus Lite's hybrid search "
            f"({_share(warm['database'], steps)}), {_time(warm['embed'])} of query embedding "
            f"({_share(warm['embed'], steps)}) and {_time(warm['config'])} of resolving "
            f"memsearch's configuration ({_share(warm['config'], steps)}); {larger} dominates."
        )
    for size in sizes:
        cpu = size["pimem_cpu_s"]
        notes.append(
            f"During pimem's warm searches at {_count(size['chunks'])} chunks "
            f"({cpu['wall']:.1f} s), "
            f"the process used {cpu['python']:.1f} s of CPU in Python threads and "
            f"{cpu['native']:.1f} s in native ones (the worker pools of ONNX Runtime, OpenBLAS "
            "and gRPC): on a small machine they take cores from the Python threads that do the "
            "search."
        )
    if len(sizes) > 1:
        first, last = sizes[0], sizes[-1]
        notes.append(
            f"From {_count(first['chunks'])} to {_count(last['chunks'])} chunks pimem's search "
            f"goes from {_time(first['pimem']['p50'])} to {_time(last['pimem']['p50'])} (its "
            f"legs from {_time(first['pimem_breakdown']['legs']['p50'])} to "
            f"{_time(last['pimem_breakdown']['legs']['p50'])}); memsearch's database "
            f"search grows from {_time(first['breakdown']['database']['p50'])} to "
            f"{_time(last['breakdown']['database']['p50'])}, while the query embedding does not "
            f"depend on the store ({_time(first['breakdown']['embed']['p50'])} and "
            f"{_time(last['breakdown']['embed']['p50'])}): Milvus Lite 3 is pure Python "
            "(brute-force dense scores plus BM25 over every chunk, merged by RRF), so its "
            "cost grows with the collection."
        )
    for size in sizes:
        opened = size["open_close"]
        notes.append(
            f"At {_count(size['chunks'])} chunks, opening the database costs "
            f"{_time(opened['open']['p50'])} and the first search on a fresh client "
            f"{_time(opened['first_search']['p50'])} (a warm one: "
            f"{_time(size['breakdown']['database']['p50'])}); that is why memsearch's ranker "
            "leases the database between calls: a cold call is "
            f"{_time(size['cold']['p50'])} at p50. pimem's ranker never opens it to search."
        )
    for size in sizes:
        floor, cli = size["cli_floor"]["p50"], size["cli"]["p50"]
        notes.append(
            f"A `memsearch search` call at {_count(size['chunks'])} chunks takes {_time(cli)}; "
            f"{_time(floor)} of it ({_share(floor, cli)}) is starting Python and the CLI "
            "(`memsearch --version`), the rest loading the ONNX model, opening the database "
            "and searching once."
        )
    for size in sizes:
        index = size["index"]
        notes.append(
            f"Indexing {_count(size['chunks'])} chunks in-process took "
            f"{index['seconds']:.0f} s ({index['chunks_per_s']:.1f} chunks/s): "
            f"{index['embedding_seconds']:.0f} s embedding "
            f"({index['embedding_chunks_per_s']:.0f} chunks/s), the rest memsearch and Milvus "
            "Lite around it (a lookup of each file's chunks, upserts with their BM25 vectors, "
            "flushes), which grows with the collection."
        )
    for size in sizes:
        append = size["append"]
        found = "found" if size["read_your_write_found"] else "NOT found"
        notes.append(
            f"At {_count(size['chunks'])} chunks, an appended entry is {found} by the next "
            f"search without waiting for its index: {_time(append['read_your_write_ms']['p50'])} "
            "from the write's return to that search's result (pimem's read model takes the day "
            "file's new chunk when the write returns)."
        )
        notes.append(
            f"At {_count(size['chunks'])} chunks, indexing one appended entry takes "
            f"{_time(append['index_ms']['p50'])} (memsearch re-embeds the new entry and the "
            "one before it, whose line range changed) and the first search after it "
            f"{_time(append['first_search_ms']['p50'])}: a few changed files are indexed "
            "through the database client the searches use, so the search after it stays warm."
        )
    return notes


def _capture_section(results: Mapping[str, Any]) -> str:
    capture = results.get("capture")
    if not capture:
        return ""
    settled = capture["settled_ms"]
    rows = [
        (
            f"{capture['exchanges']} exchanges",
            _time(settled["p50"]),
            _time(settled["p95"]),
            _time(settled["max"]),
            f"{capture['drain_seconds']:.1f} s",
        )
    ]
    table = _table(("Settled", "settled p50", "settled p95", "max", "all written after"), rows)
    return f"""
## Capture, off the agent's path

`Session.settled` only queues the exchange: the host gets control back at once while the
distiller (here one that takes {capture["distill_seconds"] * 1000:.0f} ms, like a small model
call) and the append run on the capture thread, one exchange after another.

{table}
"""


def _stats_row(label: str, stats: Mapping[str, float]) -> tuple[str, ...]:
    if not stats:
        return (label, "-", "-", "-", "0")
    return (label, _time(stats["p50"]), _time(stats["p95"]), _time(stats["max"]), str(stats["n"]))


def _pi_rows(line: Mapping[str, Any]) -> list[tuple[str, ...]]:
    name = f"{line['pi']} (Node {line['node']})"
    steps = (
        ("before_agent_start, after the first prompt", line["before_agent_start"]),
        ("before_agent_start, prompts while memory starts up", line["startup_window"]),
        ("first prompt of a session (memory's start included)", line["first_prompts"]),
        ("agent_settled handler", line["agent_settled"]),
        ("memory ready (attached, or a bridge's ready line), after opening", line["bridge_ready"]),
    )
    return [
        (name, *_stats_row(label, stats))
        if stats or label != "agent_settled handler"
        else (name, label, "no such event in pi 0.73", "", "", "")
        for label, stats in steps
    ]


def _pi_notes(lines: Sequence[Mapping[str, Any]]) -> list[str]:
    notes = []
    for line in lines:
        first, ready = line["first_prompts"], line["bridge_ready"]
        notes.append(
            f"pi {line['pi']}: the first prompt of a session waited {_time(first['p50'])} at "
            f"p50 ({_time(first['max'])} at most, {first['n']} sessions) for memory to "
            "start and answer `session.start`; the adapter lets it wait up to 3 s, later "
            "prompts at most 300 ms. A session's memory was ready (attached to the memory "
            f"service, or a bridge's ready line) {_time(ready['p50'])} after the adapter opened "
            f"it, at p50. After the first prompt pi's memory took {line['idle_wait_s']:.0f} s "
            "to become idle (the catch-up index, the first capture and its index)."
        )
    contention = max(line["contention"] for line in lines)
    if contention > CONTENTION_WARNING:
        notes.append(
            f"**Caution:** other processes took up to {contention:.0%} of the CPUs while pi was "
            "measured: every wake-up of pi and of the bridge may have waited for a CPU."
        )
    return notes


def _print_run_rows(line: Mapping[str, Any]) -> list[tuple[str, ...]]:
    name = f"{line['pi']} (Node {line['node']})"
    rows: list[tuple[str, ...]] = []
    for key, label in (("print_run", "one-prompt `pi -p`, whole"), ("exit", "pi's exit")):
        paired = line.get(key)
        if paired:
            extra = paired["extra"]
            rows.append(
                (
                    name,
                    label,
                    _time(paired["without"]["p50"]),
                    _time(paired["with"]["p50"]),
                    _time(extra["p50"]),
                    _time(extra["max"]),
                    str(extra["n"]),
                )
            )
    return rows


def _print_run_table(lines: Sequence[Mapping[str, Any]]) -> str:
    rows = [row for line in lines for row in _print_run_rows(line)]
    if not rows:
        return ""
    table = _table(
        ("pi", "What", "without (p50)", "with (p50)", "added (p50)", "added (max)", "pairs"),
        rows,
    )
    before, previous = _before(), _previous()
    return f"""

What the adapter costs a user who runs pi once: pairs of one-prompt `pi -p` runs in the same
project, the first without the adapter and the second with it, back to back, with the user's
memory service on, as pimem runs by default. The sessions attach to the service over its socket
and start no process, since an earlier session's relay named it
([ADR 0029](adr/0029-the-pi-adapter-attaches-to-the-memory-service-itself.md)). pi's exit is
timed from the first bytes of the answer on stdout to the process's end. The added time is the
median of the pairs' differences. Capture is flushed before pi exits, beside pi's own shutdown.
The last index run starts half a second after pi has gone
([the pi adapter](pi-adapter.md#what-pi-waits-for)). Each pair starts once the service has been
idle for 0.75 s. Before the memory service, with bridges in process, the adapter added
{before} to a one-prompt run. The previous publication, with the adapter's modules loaded one
by one ([ADR 0030](adr/0030-pi-loads-one-built-file.md)) and the snapshot built at
`session.start`, measured {previous}.

{table}"""


def _before() -> str:
    from bench.pi_latency import BEFORE_PRINT_RUN_EXTRA_MS

    return " and ".join(
        f"{ms:.0f} ms (pi {line})" for line, ms in sorted(BEFORE_PRINT_RUN_EXTRA_MS.items())
    )


def _previous() -> str:
    from bench.pi_latency import PREVIOUS_EXTRA_MS

    return " and ".join(
        f"{run:.0f} ms added to a run and {exit_:.0f} ms to exit (pi {line})"
        for line, (run, exit_) in sorted(PREVIOUS_EXTRA_MS.items())
    )


def _prompt_section(prompt: Mapping[str, Any]) -> str:
    """What pimem adds to every request, per pi line and store, beside the figure before the
    cut (issue 38)."""
    if not prompt:
        return ""
    from bench import pi_prompt

    return f"""
## What pimem adds to every request

Every request pi sends its model carries pimem's tools, its snapshot and its skills, on every
call of every session. Per line, one `pi -p` run without the adapter and one with it in the
same project, the same prompt and capture off; the characters the second request adds: the
memory tools' definitions as compact JSON (`tools`), the snapshot appended to the system
prompt (`snapshot`: pimem's instructions, then the latest entries), and the rest of the system
prompt's growth (the skills pi lists, with pi's paragraph that introduces them, and any tool
lines in pi's "Available tools"). An **empty** store is a project where nothing was written
yet, the **full** one the 300-entry store above, its last day as today. "today" is what pimem
added before its tool descriptions, its snapshot's paragraph and its skills' descriptions were
cut to what only pimem knows, measured at {pi_prompt.TODAY_COMMIT}; the skills' paths are
counted with the package's directory as `{pi_prompt.PACKAGE}`.

{pi_prompt.render(prompt)}
"""


def plot_pi_part(pi: Mapping[str, Any], directory: Path) -> None:
    if pi["summary"]:
        plot_pi(pi["summary"], directory / PI_PLOT)


def render_pi(pi: Mapping[str, Any], plots: str) -> str:
    """The pi part's section; *plots* is its plots' directory relative to the page."""
    meta, plan = pi["meta"], pi["plan"]
    kind = "quick run (`--quick`)" if meta["quick"] else "full run"
    skipped = "".join(
        f"\n\npi {name} was not measured: {reason}." for name, reason in pi["skipped"].items()
    )
    lines = pi["summary"]
    if not lines:
        return f"# The pi adapter, in the real pi process{skipped}\n"
    table = _table(
        ("pi", "Step", "p50", "p95", "max", "n"),
        [row for line in lines for row in _pi_rows(line)],
    )
    notes = "\n".join(f"- {note}" for note in _pi_notes(lines))
    return f"""# The pi adapter, in the real pi process

A {kind} started {meta["started_at"]}, taking {meta["duration_s"] / 60:.1f} minutes
(`make bench BENCH_ARGS="--only pi"` measures this part alone). Raw results:
[pi.json]({plots}/pi.json).

The real pi CLI of each line, with the adapter loaded and its timing switch on
(`PIMEM_PI_TIMINGS`), in a project whose memory holds {_count(plan["store_entries"])} indexed
entries, against a scripted model on 127.0.0.1 that answers at once; auto-context off, capture
on. Per line: one RPC session of {plan["prompts"]} prompts, which waits after the first prompt
until its bridge is idle (a user's second prompt comes after the agent's first answer), then
sends each prompt {plan.get("think_s", 0) * 1000:.0f} ms after the answer before it (sent the
instant it ends, a prompt meets the previous exchange's capture at work in pi and the service,
which no person's next prompt does; with capture off, back to back, the p95 was 2-3 ms); one of
{plan["startup_prompts"]} prompts sent back to back from the start; and {plan["print_runs"]}
runs of `pi -p`. With the memory service on (the default) the first session starts a relay,
which names the service; the later ones attach to the service themselves.

![The pi adapter]({plots}/{PI_PLOT})

{table}{skipped}{_print_run_table(lines)}

{notes}
{_prompt_section(pi.get("prompt") or {})}
## Method

pi's own CLI (`node cli.js -e adapters/pi --mode rpc` or `-p`; without `-e` for the baseline)
with `PIMEM_BIN` pointing at this checkout's `pimem`, an isolated `HOME` (memsearch
configuration, Milvus Lite database) and agent directory, the offline model, `PI_OFFLINE=1`;
the adapter times its handlers with `performance.now()` and appends them to the file named by
`PIMEM_PI_TIMINGS`. pi's memory (its bridge, if it started one, and the memory service)
counts as idle once its CPU time stood still for 1.5 s. pimem runs from compiled bytecode, as
an installed pimem does. Between two pairs of `pi -p` runs the bench waits for any bridge pi
released to exit, and for the memory service to be idle (its CPU time still for 0.75 s), so
that the last session's index run does not run into the next pair.
"""


def _latency_row(size: Mapping[str, Any], kind: str, prompts: str) -> tuple[str, ...]:
    stats = size[kind]
    within, skipped = (
        (size["within_cap"], size["skipped"])
        if kind == "warm"
        else (size["spaced_within_cap"], size["spaced_skipped"])
    )
    return (
        _count(size["chunks"]),
        prompts,
        _time(stats["p50"]),
        _time(stats["p95"]),
        _time(stats["max"]),
        f"{within:.1%}",
        str(skipped),
    )


def _auto_context_latency_table(sizes: Sequence[Mapping[str, Any]], pause: float) -> str:
    rows = [_latency_row(s, "warm", f"{s['warm']['n']}, back to back") for s in sizes]
    rows += [_latency_row(s, "spaced", f"{s['spaced']['n']}, {pause:g} s apart") for s in sizes]
    return _table(
        ("Chunks", "Prompts", "p50", "p95", "max", "within 300 ms", "answered without a search"),
        rows,
    )


def _bridge_memory_table(sizes: Sequence[Mapping[str, Any]]) -> str:
    return _table(
        ("Chunks", "warm after", "idle after", "RSS warm", "RSS after the prompts", "peak RSS"),
        [
            (
                _count(size["chunks"]),
                f"{size['warm_after_s']:.1f} s",
                f"{size['idle_after_s']:.1f} s",
                f"{size['rss_warm_mb']:.0f} MB",
                f"{size['rss_mb']:.0f} MB",
                f"{size['peak_rss_mb']:.0f} MB",
            )
            for size in sizes
        ],
    )


def _relevance_table(sizes: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for size in sizes:
        relevance = size["relevance"]
        for label, result in (
            (
                f"pimem's ranker, relevance >= {relevance['relevance_floor']['floor']:g} (default)",
                relevance["relevance_floor"],
            ),
            (
                f"memsearch's ranker, cosine similarity >= {relevance['similarity_floor']['floor']:g}",
                relevance["similarity_floor"],
            ),
            ("pi-memsearch, rank fusion score >= 0.5", relevance["rank_fusion_floor"]),
        ):
            rows.append(
                (
                    _count(size["chunks"]),
                    label,
                    f"{result['no_answer_prompts_injected']} of {result['no_answer_prompts']} "
                    f"({result['irrelevant_injection_rate']:.0%})",
                    f"{result['answerable_prompts_served']} of {result['answerable_prompts']}",
                    str(result["chunks_injected"]),
                    str(result["irrelevant_chunks"]),
                )
            )
    return _table(
        (
            "Chunks",
            "Filter",
            "prompts with no relevant memory given an injection",
            "answerable prompts given their entry",
            "chunks injected",
            "of them not the prompt's entry",
        ),
        rows,
    )


def _auto_context_notes(sizes: Sequence[Mapping[str, Any]]) -> list[str]:
    notes = []
    for size in sizes:
        warm, spaced = size["warm"], size["spaced"]
        notes.append(
            f"At {_count(size['chunks'])} chunks, prompts back to back take "
            f"{_time(warm['p50'])} at p50 and {_time(warm['p95'])} at p95; prompts further "
            "apart than the database's linger (`PIMEM_DB_LINGER_MS`, 1 s by default), as a "
            f"real session's prompts are, take {_time(spaced['p50'])} at p50 and "
            f"{_time(spaced['p95'])} at p95 ({size['spaced_skipped']} answered without a "
            "search): pimem's ranker searches its read model, so the database's linger no "
            "longer matters to a prompt."
        )
        if size["skipped"]:
            notes.append(
                f"**Caution:** at {_count(size['chunks'])} chunks, {size['skipped']} timed "
                "prompts were answered without a search (the deadline, or the backend busy)."
            )
    for size in sizes:
        relevance = size["relevance"]
        ours = relevance["relevance_floor"]
        reachable = max(point["answerable_prompts_served"] for point in relevance["curve"])
        ceiling = relevance.get("served_ceiling")
        notes.append(
            f"At {_count(size['chunks'])} chunks, {reachable} of {ours['answerable_prompts']} "
            "answerable prompts have their entry among auto-context's 3 hits at the lowest "
            f"relevance floor tried; the default floor keeps {ours['answerable_prompts_served']} "
            "of them. The rest is the search's recall on a corpus of look-alike entries, which "
            "no filter after it can win back"
            + (
                "."
                if ceiling is None
                else f": many prompts ask what several entries answer alike (the same symptom, "
                f"decision or preference), so even a perfect ranker would serve {ceiling:.0f} "
                f"of {ours['answerable_prompts']} on average."
            )
        )
    return notes


def _auto_context_section(results: Mapping[str, Any], plots: str) -> str:
    auto_context = results.get("auto_context")
    if not auto_context:
        return ""
    sizes, plan = auto_context["summary"], auto_context["plan"]
    notes = "\n".join(f"- {note}" for note in _auto_context_notes(sizes))
    return f"""
## Auto-context

`pimem serve` with `PI_MEMSEARCH_AUTO_CONTEXT=on` on each store, driven as an adapter drives
it: each `session.before_prompt` is timed from the request to the answer that carries the
injection (or none), which is what the host waits for. The prompts start once auto-context
reports itself warm (the embedder loaded, the read model loaded from its cache and searched
once; {plan["warmup"]} more prompts untimed); half of them are answered by an entry, half are
about nothing in memory.

![Auto-context latency]({plots}/{AUTO_CONTEXT_PLOT})

{_auto_context_latency_table(sizes, plan["pause_s"])}

The bridge from its spawn (warm: the embedder and the read model loaded; idle: the start-up
catch-up index done):

{_bridge_memory_table(sizes)}

### Relevance

{sizes[0]["relevance"]["prompts"]} labelled prompts: half ask about one entry of the store
(its bullets are the answer), half about subjects the store never mentions. pimem's auto-context
takes its ranker's 3 best hits for the prompt and keeps those whose relevance reaches the floor
(the plugin's own `select_chunks`); for contrast, pimem's earlier filter with memsearch's ranker
(the collection's 3 chunks most similar to the prompt, kept at a cosine similarity of 0.5) and
the original's (memsearch's hybrid top 3 kept at a rank-fusion score `>= 0.5`). A chunk counts
as relevant only if it is the prompt's own entry: the corpus holds many look-alike entries.

![Auto-context relevance]({plots}/{RELEVANCE_PLOT})

{_relevance_table(sizes)}

{notes}
"""


def render_markdown(results: Mapping[str, Any], plots: str) -> str:
    """The report; *plots* is the plots' directory relative to the report."""
    meta, summary, plan = results["meta"], results["summary"], results["plan"]
    sizes = ", ".join(_count(size["chunks"]) for size in summary["sizes"])
    kind = "quick run (`--quick`)" if meta["quick"] else "full run"
    notes = "\n".join(f"- {note}" for note in _notes(summary))
    return f"""# Latency

Warm L1 search through pimem's search API, which ranks on pimem's own read model of the
collection by default, side by side with memsearch's hybrid search on the same engine and the
`memsearch` CLI on the same store in the same run; the read model's memory, start-up and
backfill; append-to-searchable; auto-context's latency and what its relevance filter lets through. Raw results:
[latency.json]({plots}/latency.json).

## This run

A {kind} started {meta["started_at"]}, taking {meta["duration_s"] / 60:.1f} minutes, at
{sizes} chunks (`make bench BENCH_ARGS="--only latency"` measures this part alone).
Recorded command: `{meta["command"]}`. Share of the CPUs other processes took while it
measured (after indexing): {_contention(results)}.

{_machine_section(meta)}

## Against the targets

{_targets_section(results)}

## Search latency, per query

![Search latency]({plots}/{SEARCH_PLOT})

{_search_section(summary)}

## Where a search goes

![Where a search goes]({plots}/{BREAKDOWN_PLOT})

{_breakdown_section(summary)}

## The read model: memory, start-up, backfill

{_read_model_section(summary)}

## One appended entry

Measured from the moment the write returns until a search finds the entry (no index run:
pimem's read model takes the file's new chunk at once), then from the moment the index starts
until a search returns it; pimem's engine is warm (a search was just made).

![One appended entry]({plots}/{APPEND_PLOT})

{_append_section(summary)}

## Indexing and memory

{_resources_section(results)}
{_capture_section(results)}{_auto_context_section(results, plots)}
## Notes on search

{notes}

## Method

- **Corpus** (`bench/corpus.py`, seed {plan["seed"]}): daily memory files
  (`.memsearch/memory/YYYY-MM-DD.md`) in pimem's exact format, written by
  `pimem_core.day_file.format_entry`: working days, one to four sessions a day under
  `## Session HH:MM` headings, entries with session anchors and one to three bullets about
  bugs, fixes, decisions, renames, dependency upgrades, tests, measurements and preferences.
  Each `### HH:MM` entry is one chunk, so N entries make N chunks.
- **Store**: a temporary project with a `.git` directory and an isolated memsearch home (its
  own `config.toml` and `milvus.db`) per size, indexed in-process with
  `Pimem.index_memory(scope, "bench")`.
- **Queries**: distinct paraphrases of corpus bullets ("what caused ...", "how did we fix
  issue ...", "which tests cover ..."), top {TOP_K} hits, {plan["warmup"]} warm-up searches first.
- **pimem's ranker**: {plan["warm_queries"]} queries through `Pimem.search_memory` in this
  process (the default ranker; query embedding included), after the read model is loaded and
  complete; then the same queries again, each followed by memsearch's hybrid search
  (`engine.search` on the backend queue, the database leased with the default
  `PIMEM_DB_LINGER_MS` of 1000 ms: what `PIMEM_RANKER=memsearch` serves), interleaved so both
  see the same load (the speed-up is taken there); then pimem's again while another process
  spins on the second core (`while True: pass`). **Linger 0**: {plan["cold_queries"]} of
  memsearch's searches with `PIMEM_DB_LINGER_MS=0`, which opens and closes the database on
  every call.
- **Breakdown**: each ranker's steps timed one by one ({plan["breakdown_queries"]} queries):
  pimem's stat check of the store's files, the query embedding, both legs' candidates, the
  fusion with relevance; memsearch's `engine.config`, the embedder on the query, `store.search`
  on the leased client. Timed apart, their p50s need not add up to the whole call's, which also
  holds the queue hand-off, hook dispatch and building the hits.
- **Read model**: the backfill first, before any other search of the process (its cache
  removed; searches {plan["backfill_pause_s"]:g} s apart until the background worker saved the
  cache); then fresh processes on the cache: `python -m bench.read_model probe` (resident
  memory before and after the read model loads, pimem opened and the embedder warm first), a
  start-up script timing each step, and `pimem search QUERY` timed whole
  ({plan["first_results"]} runs after an untimed one).
- **CLI**: `memsearch search QUERY -j -k 5 -c COLLECTION` in a child process with the same
  `HOME`, `HF_HOME` and `HF_HUB_OFFLINE=1`, cwd the project: wall time of the child,
  {plan["cli_queries"]} queries after one untimed call; pimem's database is released first.
- **Appended entry**: {plan["appends"]} times, `Pimem.append_entry` with a word found nowhere
  else and a search for it at once, then `Pimem.index_memory(scope, "write", files=(day
  file,))` and a search for that word, which must be among the hits. The CLI ({plan["cli_appends"]} times each):
  `memsearch index DAY_FILE -c COLLECTION` or `memsearch index MEMORY_DIR -c COLLECTION`, then
  `memsearch search`.
- **Auto-context** (`bench/auto_context.py`): latency through a `pimem serve` child on each
  store, the same process an adapter starts, capture off; relevance in this process with the
  index's `similar` (pimem's ranker: the best hits with their relevance), as auto-context
  calls it, beside memsearch's hybrid search and its dense search (the earlier filters).
- Times are `time.perf_counter()` around each call; p95 interpolates between the closest
  ranks. RSS comes from `/proc/self/status` and `getrusage`: the peak includes indexing.
"""
