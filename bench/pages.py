"""The benchmark page: every part's section, rendered from the parts' JSON files alone.

``OUT/benchmarks.md`` with the plots beside the JSON in OUT; published, ``docs/benchmarks.md``
with the plots and JSON under ``docs/benchmarks/`` (latency at its top, quality and scaling in
folders of their own).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench import (
    milvus_server,
    report,
    scaling_report,
    service_report,
    usage_cost_report,
    workload_report,
)
from bench.locomo import report as locomo_report
from bench.quality import report as quality_report
from bench.realstores import report as realstores_report

RAW = {
    "latency": "latency.json",
    "pi": "pi/pi.json",
    "usage": "usage/usage.json",
    "quality": "quality/quality.json",
    "locomo": "locomo/locomo.json",
    "realstores": "realstores/realstores.json",
    "scaling": "scaling/scaling.json",
    "workload": "workload/workload.json",
    "service": "service/service.json",
    "milvus": "milvus/milvus_server.json",
}
TITLES = {
    "latency": "Latency",
    "pi": "The pi adapter",
    "usage": "What the usage record costs",
    "quality": "Retrieval quality",
    "locomo": "Recall on public conversational memory (LoCoMo)",
    "realstores": "Memory pimem did not write (real stores)",
    "scaling": "Cost against store size",
    "workload": "Memory under a workload",
    "service": "The memory service",
    "milvus": "Several agents on one Milvus server",
}
PAGE = "benchmarks.md"
Results = Mapping[str, Mapping[str, Any]]


def raw_path(out: Path, part: str) -> Path:
    return out / RAW[part]


def load(out: Path) -> dict[str, dict[str, Any]]:
    """Each part's results found in *out*, in the page's order."""
    found = {}
    for part in RAW:
        path = raw_path(out, part)
        if path.is_file():
            found[part] = json.loads(path.read_text())
    latency = found.get("latency")
    if "pi" in found and latency is not None and "pi" in latency:
        # Latency results from before pi was a part of its own: the pi part replaces them.
        found["latency"] = {
            **{key: value for key, value in latency.items() if key != "pi"},
            "targets": [t for t in latency["targets"] if not t["target"].startswith("pi ")],
        }
    return found


def _assets(results: Results, directory: Path) -> None:
    """Every part's plots in *directory* (quality and scaling in their folders)."""
    if "latency" in results:
        report.write_plots(results["latency"], directory)
    if "pi" in results:
        (directory / "pi").mkdir(parents=True, exist_ok=True)
        report.plot_pi_part(results["pi"], directory / "pi")
    if "quality" in results:
        (directory / "quality").mkdir(parents=True, exist_ok=True)
        quality_report.plot(results["quality"], directory / "quality")
    if "scaling" in results:
        (directory / "scaling").mkdir(parents=True, exist_ok=True)
        scaling_report.plot(results["scaling"]["summary"], directory / "scaling")


def _demote(markdown: str) -> str:
    """One heading level down, outside code blocks: each part's page becomes a section."""
    lines, fenced = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        lines.append("#" + line if not fenced and re.match(r"#+ ", line) else line)
    return "\n".join(lines)


def _anchor(title: str) -> str:
    return re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-")


def _measured(check: Mapping[str, Any]) -> str:
    measured = check["measured"]
    return measured if isinstance(measured, str) else report._measured(check)


def _targets(results: Results) -> str:
    rows = []
    for part, result in results.items():
        checks = result["targets"]
        # Quality targets are set for one size; the others are shown in their section.
        if any(check.get("at_target_size") for check in checks):
            checks = [check for check in checks if check.get("at_target_size", True)]
        for check in checks:
            size = check.get("chunks", check.get("size"))
            label = "-" if size is None else f"{size:,}"
            if "seed" in check:
                label += f" (seed {check['seed']})"
            rows.append(
                (
                    TITLES[part],
                    check["target"],
                    label,
                    _measured(check),
                    "met" if check["met"] else "**missed**",
                )
            )
    return report._table(("Part", "Target", "Size", "Measured", "Result"), rows)


def _sizes(run: Mapping[str, Any]) -> str:
    """A run's sizes; a quality run's worlds by seed ("1,000 and 10,000 (seed 0)")."""
    worlds = run.get("worlds")
    if not worlds:
        return ", ".join(f"{size:,}" for size in run.get("sizes", ()))
    seeds = sorted({int(seed) for _, seed in worlds})
    return "; ".join(
        " and ".join(f"{size:,}" for size, at in worlds if at == seed) + f" (seed {seed})"
        for seed in seeds
    )


def _runs(results: Results) -> str:
    rows = []
    for part, result in results.items():
        meta = result["meta"]
        for run in meta.get("runs") or [meta]:
            sizes = _sizes(run)
            rows.append(
                (
                    f"[{TITLES[part]}](#{_anchor(TITLES[part])})",
                    sizes or "-",
                    f"`{run['command']}`",
                    run["started_at"],
                    f"{run['duration_s'] / 60:.1f} min",
                )
            )
    return report._table(("Part", "Sizes", "Command", "Started", "Took"), rows)


def render_page(results: Results, plots: str) -> str:
    """The page; *plots* is the directory of the plots and JSON relative to the page."""
    machine = next(iter(results.values()))["meta"]
    sections = []
    if "latency" in results:
        sections.append(report.render_markdown(results["latency"], plots))
    if "pi" in results:
        sections.append(report.render_pi(results["pi"], f"{plots}/pi"))
    if "usage" in results:
        sections.append(usage_cost_report.render(results["usage"]))
    if "quality" in results:
        quality = {**results["quality"], "plots": quality_report.PLOTS}
        sections.append(quality_report.render(quality, f"{plots}/quality"))
    if "locomo" in results:
        sections.append(locomo_report.render(results["locomo"]))
    if "realstores" in results:
        sections.append(realstores_report.render(results["realstores"]))
    if "scaling" in results:
        sections.append(scaling_report.render(results["scaling"], f"{plots}/scaling"))
    if "workload" in results:
        sections.append(workload_report.render(results["workload"], plots))
    if "service" in results:
        sections.append(service_report.render(results["service"], plots))
    if "milvus" in results:
        sections.append("\n".join(milvus_server.render(results["milvus"])))
    body = "\n\n".join(_demote(section.strip()) for section in sections)
    return f"""# Benchmarks

<!-- Generated by `python -m bench` from the JSON beside the plots; do not edit by hand. -->

Two questions decide whether a memory layer is worth having: does it find the right memory, and
does it stay out of the agent's way? Every figure below comes from one command, with the
offline embedding model and Milvus Lite, and is rendered from the raw JSON next to its plot:

```sh
make bench                       # every part (times below)
make bench BENCH_ARGS=--quick    # the smallest store of each part: under five minutes
make bench BENCH_ARGS="--only scaling --workdir /tmp/pimem-bench"   # one part, kept stores
make bench BENCH_ARGS="--only quality --sizes 10000 --seeds 1 --workdir /tmp/pimem-bench"
make bench BENCH_ARGS="--only locomo --locomo locomo10.zip"   # data/locomo10.zip of snap-research/locomo
python -m bench.realstores.prepare realstores   # the real stores, from fetched snapshots
make bench BENCH_ARGS="--only realstores --realstores realstores"
```

Search is pimem's own ranker (the default) everywhere, beside memsearch's hybrid search on the
same collection in the same run (`PIMEM_RANKER=memsearch` selects it; it is the baseline). The
settings of pimem's ranker were chosen on two development sets together: the quality worlds
(generated coding memory) and LoCoMo's development conversations (public conversational
memory); they are reported fixed on every other size and part. LoCoMo's held-out conversations
are never run here.

## The runs behind this page

{_runs(results)}

{report._machine_section(machine)}

## Against the targets

{_targets(results)}

{body}
"""


def render(results: Results, out: Path) -> Path:
    """The page in *out*, beside the JSON, with its plots."""
    _assets(results, out)
    page = out / PAGE
    page.write_text(render_page(results, "."), encoding="utf-8")
    return page


#: What a published page says for the directory a run kept its stores in.
PUBLISHED_WORKDIR = "/tmp/pimem-bench"
#: ... and for the other paths a run was given.
PUBLISHED_PATHS = {
    "--out": "bench/results",
    "--locomo": "locomo10.zip",
    "--realstores": "realstores",
}


def local_paths(results: Results) -> dict[str, str]:
    """This machine's paths in *results*, and what the published page says instead: the
    runs' ``--workdir``, the repository and the home directory."""
    places = {str(Path.home()): "~", str(Path(__file__).resolve().parents[1]): "."}
    for part in results.values():
        words = str(part.get("meta", {}).get("command", "")).split()
        for flag, value in itertools.pairwise(words):
            if flag == "--workdir":  # as given (absolute) or as it resolved here
                places[str(Path(value).absolute())] = PUBLISHED_WORKDIR
            elif flag in PUBLISHED_PATHS:  # the results directory, the user's data
                places[str(Path(value).absolute())] = PUBLISHED_PATHS[flag]
    return places


def portable(text: str, places: Mapping[str, str]) -> str:
    """*text* with each of *places* (longest first) written as the page says it."""
    for path in sorted(places, key=len, reverse=True):
        text = text.replace(path, places[path])
    return text


def publish(results: Results, out: Path, docs: Path) -> Path:
    """``docs/benchmarks.md`` with its plots and the JSON it was rendered from, without this
    machine's paths (a reader's machine has none of them)."""
    places = local_paths(results)
    assets = docs / "benchmarks"
    _assets(results, assets)
    for part in results:
        target = raw_path(assets, part)
        target.parent.mkdir(parents=True, exist_ok=True)
        raw = raw_path(out, part).read_text(encoding="utf-8")
        target.write_text(portable(raw, places), encoding="utf-8")
    page = docs / PAGE
    page.write_text(portable(render_page(results, "benchmarks"), places), encoding="utf-8")
    return page
