"""``python -m bench [--quick] [--only PARTS] [--workdir DIR] [--out DIR] [--report-only]``.

The whole benchmark suite, in ten parts:

* ``latency``: search and append latency against the memsearch CLI (2k and 20k chunks),
  capture's cost to the host and auto-context (latency and relevance);
* ``pi``: the adapter inside the real pi process (both pi lines), and what it adds to a
  one-prompt ``pi -p`` run and to pi's exit beside pi without it;
* ``quality``: retrieval quality on generated coding sessions (1k and 10k entries of seed 0, 10k
  of seed 1), pimem's ranker beside memsearch's hybrid search on the same collection (and its
  dense and BM25 halves alone), the relevance score, abstention, anchors and transcript turns;
* ``locomo``: recall on LoCoMo's public conversations (its development conversations, from the
  zip given with ``--locomo PATH``; skipped without it), pimem's ranker beside memsearch's hybrid
  search on the first searches after each index run, per question category, with the relevance's
  calibration and auto-context on them;
* ``scaling``: the cost of every memory operation against store size on the same worlds (and a
  partly synthetic 100k read model), beside the memsearch CLI, with its curves;
* ``workload``: what memory holds after scripted multi-session pi runs (decisions, chatter,
  recall, writes, forgets, a killed bridge), this checkout beside the code before the capture
  gates (``bench/workload.py``);
* ``service``: the memory service (``PIMEM_SERVICE=on``): ``pimem search`` from a shell warm,
  cold, in process and beside the memsearch CLI (20k chunks), the resident memory of four
  sessions through it beside one in process, its RSS over 10,000 requests, and a relayed
  session's reconnect after a SIGKILL (``bench/service.py``);
* ``milvus``: several agents (in process and through the memory service) writing, indexing and
  searching at once through one ``milvus_lite server`` endpoint: latency by kind, nothing lost
  (``bench/milvus_server.py``);
* ``realstores``: memory pimem did not write (public repositories' committed memsearch stores, the
  development set prepared with ``python -m bench.realstores.prepare PATH`` and given with
  ``--realstores PATH``; skipped without it), copied cold: the first search, every search while
  indexing runs, index time and peak memory and recall while and after indexing, beside
  memsearch's CLI on the same files (``bench/realstores/``);
* ``usage``: what the usage record costs ``before_agent_start`` and a ``memory_search`` call in
  the real pi, on and off in the same run, and its bytes per exchange (``bench/usage_cost.py``).

Each part writes its raw results as JSON under OUT; the report (``OUT/benchmarks.md``) is
rendered from those files alone, and a full run publishes it as ``docs/benchmarks.md`` with
its plots and JSON in ``docs/benchmarks/``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results"
DOCS = ROOT / "docs"
PARTS = (
    "latency",
    "pi",
    "quality",
    "locomo",
    "scaling",
    "workload",
    "service",
    "milvus",
    "realstores",
    "usage",
)
#: What ``--quick`` measures without ``--only``: the service part (two minutes of whole
#: processes even on its small store) is left to ``--quick --only service``.
QUICK_PARTS = tuple(part for part in PARTS if part != "service")


def _parts(text: str) -> tuple[str, ...]:
    chosen = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = sorted(set(chosen) - set(PARTS))
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(
            f"parts are a comma-separated choice of {', '.join(PARTS)}: {text!r}"
        )
    return tuple(part for part in PARTS if part in chosen)


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"sizes are entry counts like 1000,10000: {text!r}"
        ) from None
    if not sizes or min(sizes) < 100:
        raise argparse.ArgumentTypeError("every size needs at least 100 entries")
    return tuple(sorted(set(sizes)))


def _seeds(text: str) -> tuple[int, ...]:
    try:
        seeds = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds are generator seeds like 0,1: {text!r}") from None
    if not seeds or min(seeds) < 0:
        raise argparse.ArgumentTypeError("seeds are whole numbers from 0")
    return tuple(sorted(set(seeds)))


def parse(argv: Sequence[str] | None, prog: str = "python -m bench") -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the smallest store of each part and fewer samples (under five minutes with "
        "kept stores); never published",
    )
    parser.add_argument(
        "--only",
        type=_parts,
        help=f"the parts to measure, comma-separated (default all: {','.join(PARTS)}; with "
        "--quick all but service); the report takes the others from the JSON already in OUT",
    )
    parser.add_argument(
        "--sizes",
        type=_sizes,
        help="entries in the searched project for quality and scaling (default: quality 1000 "
        "and 10000, scaling 1000, 10000 and 100000)",
    )
    parser.add_argument(
        "--seeds",
        type=_seeds,
        help="generator seeds of the quality worlds, each at every size (default: 1000 and "
        "10000 on seed 0, 10000 on seed 1; --sizes alone measures seed 0)",
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"results directory (default {DEFAULT_OUT})"
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        help="keep the generated stores here and reuse them when they match (skips indexing; "
        "the index throughput at build is the one recorded when the store was built)",
    )
    parser.add_argument(
        "--locomo",
        type=Path,
        metavar="PATH",
        help="LoCoMo's data/locomo10.zip (snap-research/locomo) for the locomo part; only its "
        "development conversations are read",
    )
    parser.add_argument(
        "--realstores",
        type=Path,
        metavar="PATH",
        help="the real-store development set, as `python -m bench.realstores.prepare PATH` "
        "exports it, for the realstores part",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="re-render the report from the JSON in OUT without measuring",
    )
    parser.add_argument("--no-publish", action="store_true", help="leave docs/ alone")
    args = parser.parse_args(argv)
    if args.only is None:
        args.only = QUICK_PARTS if args.quick else PARTS
    return args


def _log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _meta(started_at: str, started: float, quick: bool) -> dict[str, Any]:
    from bench.report import machine

    return {
        "command": shlex.join(["python", "-m", "bench", *sys.argv[1:]]),
        "started_at": started_at,
        "duration_s": time.perf_counter() - started,
        "quick": quick,
        "machine": machine(),
    }


def _latency(args: argparse.Namespace, workdir: Path, model: Any) -> dict[str, Any]:
    from bench import auto_context_run, capture, latency

    started_at = datetime.now().astimezone().isoformat(timespec="seconds")
    started = time.perf_counter()
    plan = latency.QUICK if args.quick else latency.FULL
    ac_plan = auto_context_run.AC_QUICK if args.quick else auto_context_run.AC_FULL
    results = latency.run_plan(plan, workdir, model, _log)
    # On the stores the latency benchmark left, released and restored to the corpus.
    auto_context = auto_context_run.run_auto_context(
        ac_plan, plan.sizes, plan.seed, workdir, model, _log
    )
    results["capture"] = capture.measure_settled(50 if args.quick else 200, _log)
    results["targets"].append(capture.target(results["capture"]))
    results["auto_context"] = auto_context
    results["targets"] += auto_context["targets"]
    results["meta"] = _meta(started_at, started, args.quick)
    return results


def _pi(args: argparse.Namespace, workdir: Path, model: Any) -> dict[str, Any]:
    from bench import pi_latency

    started_at = datetime.now().astimezone().isoformat(timespec="seconds")
    started = time.perf_counter()
    plan = pi_latency.PI_QUICK if args.quick else pi_latency.PI_FULL
    results = pi_latency.run_pi(plan, workdir, model, _log)
    results["meta"] = _meta(started_at, started, args.quick)
    return results


def _usage(args: argparse.Namespace, workdir: Path, model: Any) -> dict[str, Any] | None:
    from bench import usage_cost

    started_at = datetime.now().astimezone().isoformat(timespec="seconds")
    started = time.perf_counter()
    plan = usage_cost.USAGE_QUICK if args.quick else usage_cost.USAGE_FULL
    raw = usage_cost.run_usage(plan, workdir, model, _log)
    if raw is None:
        return None
    summary = usage_cost.summarize_usage(raw)
    return {
        **raw,
        "summary": summary,
        "targets": usage_cost.targets(raw, summary),
        "meta": _meta(started_at, started, args.quick) | {"format": usage_cost.FORMAT},
    }


def _quality(args: argparse.Namespace, workdir: Path, model: Any) -> dict[str, Any]:
    from dataclasses import asdict

    from bench.quality import run, summary

    started_at = datetime.now().astimezone().isoformat(timespec="seconds")
    started = time.perf_counter()
    plan = (run.QUICK if args.quick else run.FULL).choose(args.sizes, args.seeds)
    raw = [run.measure_size(plan, size, seed, workdir, model, _log) for size, seed in plan.worlds]
    summaries = [summary.summarize_size(result) for result in raw]
    meta = _meta(started_at, started, args.quick)
    return {
        "meta": {**meta, "format": summary.FORMAT, "seeds": plan.seeds, "plan": asdict(plan)},
        "summaries": summaries,
        "targets": summary.targets(summaries),
        "raw": raw,
    }


def _locomo(args: argparse.Namespace, workdir: Path, model: Any) -> dict[str, Any] | None:
    from bench.locomo import report, run

    if args.locomo is None:
        _log("locomo: skipped (give LoCoMo's data/locomo10.zip with --locomo PATH)")
        return None
    started_at = datetime.now().astimezone().isoformat(timespec="seconds")
    started = time.perf_counter()
    results = run.run_locomo(args.locomo, workdir, model, _log, quick=args.quick)
    results["targets"] = report.targets(results["summary"])
    results["meta"] = _meta(started_at, started, args.quick) | {"format": run.FORMAT}
    return results


def _realstores(args: argparse.Namespace, workdir: Path, model: Any) -> dict[str, Any] | None:
    from bench.realstores import report, run

    if args.realstores is None:
        _log(
            "realstores: skipped (prepare the set with `python -m bench.realstores.prepare PATH` "
            "and give it with --realstores PATH)"
        )
        return None
    started_at = datetime.now().astimezone().isoformat(timespec="seconds")
    started = time.perf_counter()
    results = run.run_realstores(args.realstores, workdir, model, _log, quick=args.quick)
    results["targets"] = report.targets(results["summary"])
    results["meta"] = _meta(started_at, started, args.quick) | {"format": run.FORMAT}
    return results


def _scaling(args: argparse.Namespace, workdir: Path, model: Any) -> dict[str, Any]:
    from bench import scaling, scaling_report

    started_at = datetime.now().astimezone().isoformat(timespec="seconds")
    started = time.perf_counter()
    plan = scaling.SCALING_QUICK if args.quick else scaling.SCALING_FULL
    if args.sizes:
        plan = replace(plan, sizes=args.sizes)
    results = scaling.run_scaling(plan, workdir, model, _log)
    results["targets"] = scaling_report.targets(results["summary"])
    results["meta"] = _meta(started_at, started, args.quick) | {"format": scaling.FORMAT}
    return results


def _workload(args: argparse.Namespace, workdir: Path, model: Any) -> dict[str, Any]:
    from bench import workload

    started_at = datetime.now().astimezone().isoformat(timespec="seconds")
    started = time.perf_counter()
    plan = workload.WORKLOAD_QUICK if args.quick else workload.WORKLOAD_FULL
    results = workload.run_workload(plan, workdir, model, _log)
    results["meta"] = _meta(started_at, started, args.quick) | {"format": workload.FORMAT}
    return results


def _service(args: argparse.Namespace, workdir: Path, model: Any) -> dict[str, Any]:
    from bench import service

    started_at = datetime.now().astimezone().isoformat(timespec="seconds")
    started = time.perf_counter()
    plan = service.SERVICE_QUICK if args.quick else service.SERVICE_FULL
    results = service.run_service(plan, workdir, model, _log)
    results["meta"] = _meta(started_at, started, args.quick) | {
        "format": service.FORMAT,
        "sizes": [plan.size],
    }
    return results


def _milvus(args: argparse.Namespace, workdir: Path, model: Any) -> dict[str, Any]:
    from bench import milvus_server

    started_at = datetime.now().astimezone().isoformat(timespec="seconds")
    started = time.perf_counter()
    results = milvus_server.run(workdir / "milvus", args.quick, _log)
    results["meta"] = _meta(started_at, started, args.quick)
    results["targets"] = milvus_server.targets(results)
    return results


#: Parts measured size by size: where their per-size lists are, and how targets are judged.
SIZED = {"quality": ("raw", "summaries"), "scaling": ("raw", "summary")}


def _key(item: dict[str, Any]) -> tuple[int, int]:
    """A measured world: its size and its seed (scaling's are all of the plan's seed)."""
    return int(item["size"]), int(item.get("seed", 0))


def _compatible(part: str, fresh: dict[str, Any], previous: dict[str, Any]) -> bool:
    """Whether *previous* may lend *fresh* the worlds it did not measure: both full runs, of
    the same layout (and for scaling the same seed)."""
    if previous["meta"].get("quick") or fresh["meta"]["quick"]:
        return False
    if previous["meta"].get("format") != fresh["meta"].get("format"):
        return False
    return part == "quality" or previous["plan"]["seed"] == fresh["plan"]["seed"]


def _runs(results: dict[str, Any], sizes: list[int]) -> list[dict[str, Any]]:
    meta = results["meta"]
    runs: list[dict[str, Any]] = meta.get("runs") or [
        {key: meta[key] for key in ("command", "started_at", "duration_s")} | {"sizes": sizes}
    ]
    return runs


def _targets(part: str, results: dict[str, Any]) -> list[dict[str, Any]]:
    from bench import scaling_report
    from bench.quality import summary

    if part == "quality":
        return summary.targets(results["summaries"])
    return scaling_report.targets(results["summary"])


def keep_other_sizes(
    part: str, fresh: dict[str, Any], previous: dict[str, Any] | None
) -> dict[str, Any]:
    """*fresh* with the worlds it did not measure taken from *previous* (a world of 100,000
    entries takes long to build: `--sizes 100000` adds it to the sizes already measured;
    `--sizes 10000 --seeds 1` one quality world to the others).

    Only a full run of the same layout is combined; its runs stay listed beside this one.
    """
    raw_key, _ = SIZED[part]
    measured = sorted(_key(item) for item in fresh[raw_key])
    fresh["meta"]["runs"] = _runs(fresh, sorted({size for size, _ in measured}))
    if part == "quality":
        for run in fresh["meta"]["runs"]:
            run.setdefault("worlds", [list(world) for world in measured])
    if previous is None or not _compatible(part, fresh, previous):
        return fresh
    kept_worlds = {_key(item) for item in previous[raw_key]} - set(measured)
    if not kept_worlds:
        return fresh
    for key in SIZED[part]:
        kept = [item for item in previous[key] if _key(item) in kept_worlds]
        fresh[key] = sorted(kept + fresh[key], key=lambda item: _key(item)[::-1])
    earlier = []
    for run in _runs(previous, sorted({size for size, _ in kept_worlds})):
        worlds = [tuple(world) for world in run.get("worlds", ())] or [
            (size, 0) for size in run["sizes"]
        ]
        chosen = [world for world in worlds if world in kept_worlds]
        if chosen:
            earlier.append(
                {
                    **run,
                    "sizes": sorted({size for size, _ in chosen}),
                    **({"worlds": [list(world) for world in chosen]} if part == "quality" else {}),
                }
            )
    fresh["meta"]["runs"] = earlier + fresh["meta"]["runs"]
    fresh["targets"] = _targets(part, fresh)
    return fresh


MEASURES: dict[str, Callable[[argparse.Namespace, Path, Any], dict[str, Any] | None]] = {
    "latency": _latency,
    "pi": _pi,
    "usage": _usage,
    "quality": _quality,
    "locomo": _locomo,
    "realstores": _realstores,
    "scaling": _scaling,
    "workload": _workload,
    "service": _service,
    "milvus": _milvus,
}


def _measure(args: argparse.Namespace, out: Path) -> None:
    from bench.pages import raw_path
    from pimem_plugins.memsearch.offline_model import install_offline_model

    # Where `make model` installs it (pimem's data directory, or $PIMEM_HOME); never a model hub.
    model = install_offline_model(progress=_log).model
    # huggingface_hub reads these once, at import: set before anything imports memsearch.
    os.environ.update(model.environment())
    # Every part measures pimem in process unless it says otherwise: the memory service (on by
    # default) is measured by its own parts, service and milvus, beside pimem in process.
    os.environ["PIMEM_SERVICE"] = "off"
    with tempfile.TemporaryDirectory(prefix="pimem-bench-") as scratch:
        workdir = args.workdir.absolute() if args.workdir else Path(scratch)
        for part in args.only:
            _log(f"part: {part}")
            results = MEASURES[part](args, workdir, model)
            if results is None:
                continue
            path = raw_path(out, part)
            if part in SIZED:
                previous = json.loads(path.read_text()) if path.is_file() else None
                kept = previous if args.sizes or args.seeds else None
                results = keep_other_sizes(part, results, kept)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(results, separators=(",", ":")) + "\n")
            _log(f"raw results: {path}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    out: Path = args.out.absolute()
    if not args.report_only:
        _measure(args, out)

    from bench.pages import load, publish, render

    results = load(out)
    if not results:
        _log(f"no results in {out}: run without --report-only first")
        return 1
    page = render(results, out)
    _log(f"report: {page}")
    for check in (check for part in results.values() for check in part["targets"]):
        chunks = check.get("chunks", check.get("size"))
        size = "-" if chunks is None else f"{chunks:,}"
        seed = f"/{check['seed']}" if "seed" in check else ""
        _log(f"{'met   ' if check['met'] else 'MISSED'} {size + seed:>9} {check['target']}")
    quick = any(part["meta"]["quick"] for part in results.values())
    if not (args.no_publish or quick):
        _log(f"published: {publish(results, out, DOCS)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
