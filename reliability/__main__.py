"""``python -m reliability [--quick] [--only GROUP ...] [--seed N] [--out DIR] [--no-publish]``.

Runs the scenarios, writes ``OUT/reliability.md`` and ``OUT/reliability.json`` and, for a full
run of every group, publishes both to ``docs/``. Exits 1 when any scenario failed.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from reliability.outcome import Outcome
from reliability.sandbox import ROOT, clean_environ

DEFAULT_OUT = ROOT / "reliability" / "results"
DOCS = ROOT / "docs"
GROUPS = ("concurrency", "faults", "fuzz", "safety")


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m reliability", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="the reduced budgets CI runs (~2 min)")
    parser.add_argument("--only", nargs="+", choices=GROUPS, help="run only these groups")
    parser.add_argument("--seed", type=int, help="the fuzzing seed (default: a fresh one)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default {DEFAULT_OUT}")
    parser.add_argument("--no-publish", action="store_true", help="leave docs/ alone")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="re-render OUT/reliability.md from OUT/reliability.json without running anything",
    )
    return parser.parse_args(argv)


def _log(message: str) -> None:
    print(f"[reliability {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _groups(quick: bool, seed: int) -> dict[str, Callable[[], list[Outcome]]]:
    from reliability import concurrency_service, faults, fuzz, safety

    return {
        # Today's in-process row, then the same load through the memory service.
        "concurrency": lambda: concurrency_service.side_by_side(quick),
        "faults": lambda: faults.run(quick, seed),
        "fuzz": lambda: fuzz.run(quick, seed),
        "safety": lambda: safety.run(quick, seed),
    }


def _guarded(name: str, run: Callable[[], list[Outcome]]) -> list[Outcome]:
    """The group's rows; a group that crashes is one failed row, and the others still run."""
    try:
        return run()
    except Exception as error:  # noqa: BLE001 - reported as a failure, never hidden
        crashed = Outcome(scenario=f"{name} (crashed)", load="", faults="")
        crashed.problems.append(f"{type(error).__name__}: {str(error)[:300]}")
        return [crashed]


def _rerender(out: Path) -> int:
    from reliability.findings import markdown
    from reliability.report import load, write

    outcomes, meta = load(out / "reliability.json")
    _log(f"report: {write(out, outcomes, meta, markdown())}")
    return 0 if all(o.passed or o.skipped for o in outcomes) else 1


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2**31)
    out: Path = args.out.absolute()
    out.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        return _rerender(out)
    # pimem's own warnings from the in-process parts go to a log, not between the progress lines.
    logging.basicConfig(filename=out / "reliability.log", filemode="w", level=logging.WARNING)
    from reliability.sandbox import offline_model

    model = offline_model()
    saved = dict(os.environ)
    outcomes: list[Outcome] = []
    started_at = datetime.now().astimezone().isoformat(timespec="seconds")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pimem-rel-home-") as home:
        # Nothing here may touch the user's own memsearch or pimem state, even by mistake.
        os.environ.clear()
        os.environ.update(
            clean_environ(saved),
            HOME=home,
            PIMEM_HOME=home,
            PIMEM_SERVICE="off",
            **model.environment(),
        )
        try:
            for name, run in _groups(args.quick, seed).items():
                if args.only and name not in args.only:
                    continue
                _log(f"{name}...")
                for outcome in _guarded(name, run):
                    _log(
                        f"  {outcome.scenario}: {outcome.result} "
                        f"({outcome.inputs:,} inputs, {outcome.seconds:.1f} s)"
                    )
                    outcomes.append(outcome)
        finally:
            os.environ.clear()
            os.environ.update(saved)
    from reliability.findings import markdown
    from reliability.report import machine, publish, write

    meta = {
        "command": shlex.join(
            ["python", "-m", "reliability", *(argv if argv is not None else sys.argv[1:])]
        ),
        "started_at": started_at,
        "duration_s": time.perf_counter() - started,
        "quick": args.quick,
        "seed": seed,
        "groups": args.only or list(GROUPS),
        "machine": machine(),
    }
    report = write(out, outcomes, meta, markdown())
    _log(f"report: {report}")
    if not (args.no_publish or args.quick or args.only):
        publish(out, DOCS)
        _log(f"published: {DOCS / 'reliability.md'}")
    print(report.read_text().split("## Results\n\n", 1)[1].split("\n\nRun `", 1)[0])
    return 0 if all(o.passed or o.skipped for o in outcomes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
