"""Scenario 1: eight writers on one daily memory file while two others index and search.

Writers: pimem sessions (``Pimem.append_entry`` in-process), ``pimem write`` (a process per
entry) and raw appenders in the shape memsearch's other agent plugins write. Meanwhile one
process indexes the day file and searches in a loop, another searches, both on the same Milvus
Lite database, so each waits out the other's lock. Afterwards: every entry intact exactly once,
every backend call either succeeded (after backoff if it had to) or failed with the lock
message, and after a final index the collection holds every entry.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from reliability.integrity import audit
from reliability.outcome import Outcome
from reliability.sandbox import CLOCK, make_sandbox, offline_model
from reliability.workers import entry_content

#: Which writer each of the eight is.
WRITERS = ("append-session",) * 3 + ("append-cli",) + ("append-raw",) * 4
LOCK_MESSAGE = "another process kept the Milvus Lite database open"


@attrs.frozen
class Plan:
    entries: int  # per writer
    interval: float  # seconds between entries, on average
    padding: int  # characters of filler per entry
    sample: int  # tokens looked up by search at the end


# The `pimem write` writer needs about half a second an entry on two CPUs: the others keep pace.
FULL = Plan(entries=500, interval=0.45, padding=120, sample=60)
QUICK = Plan(entries=40, interval=0.1, padding=120, sample=10)


Spawn = Callable[[str, dict[str, Any], dict[str, str]], subprocess.Popen[bytes]]
Writer = tuple[str, int, subprocess.Popen[bytes], Path]
Loop = tuple[str, subprocess.Popen[bytes], Path]


def _spawn(kind: str, args: dict[str, Any], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "reliability.workers", kind, json.dumps(args)],
        env=env,
        stderr=subprocess.PIPE,
    )


def common_args(root: Path, project: Path, day_file: Path, plan: Plan) -> dict[str, object]:
    """What every worker of the scenario is told: where, how many, how fast."""
    return {
        "project": str(project),
        "day_file": str(day_file),
        "go": str(root / "go"),
        "stop": str(root / "stop"),
        "count": plan.entries,
        "interval": plan.interval,
        "padding": plan.padding,
        "time": CLOCK[-5:],
    }


def check_day_file(
    outcome: Outcome, day_file: Path, expected: dict[tuple[str, str], str], total: int
) -> None:
    """Every acknowledged entry in the day file whole and once, and a heading per session."""
    text = day_file.read_text(encoding="utf-8")
    found = audit(text, expected)
    outcome.inputs = total
    outcome.entries_lost = len(found.lost)
    outcome.problems.extend(found.problems)
    headings = text.count("\n## Session ")
    outcome.details["file_bytes"] = len(text.encode())
    outcome.details["session_headings"] = headings
    outcome.expect(
        headings >= len(WRITERS),
        f"only {headings} session headings for {len(WRITERS)} writing sessions",
    )


def start_workers(
    writers: Sequence[str],
    common: dict[str, object],
    env: dict[str, str],
    *,
    root: Path,
    quick: bool,
    spawn: Spawn = _spawn,
) -> tuple[list[Writer], list[Loop]]:
    """The writers (each of its kind) and the index and search loops, waiting for ``go``."""
    started = []
    for worker, kind in enumerate(writers):
        result = root / f"w{worker}.json"
        args = {**common, "worker": worker, "result": str(result), "in_process": quick}
        started.append((kind, worker, spawn(kind, args, env), result))
    loops = []
    for role in ("index", "search"):
        args = {
            **common,
            "role": role,
            "seed": 7 if role == "index" else 11,
            "workers": len(writers),
            "pause": 0.05 if role == "index" else 0.3,
            "result": str(root / f"{role}.json"),
        }
        loops.append((role, spawn("backend", args, env), root / f"{role}.json"))
    return started, loops


def _finish(process: subprocess.Popen[bytes], result: Path, timeout: float) -> dict[str, Any]:
    try:
        _, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        _, stderr = process.communicate()
    if process.returncode != 0 or not result.exists():
        tail = stderr.decode(errors="replace").strip()[-500:]
        return {"crashed": f"exit {process.returncode}: {tail}"}
    loaded: dict[str, Any] = json.loads(result.read_text())
    return loaded


def run(quick: bool) -> Outcome:
    plan = QUICK if quick else FULL
    total = plan.entries * len(WRITERS)
    outcome = Outcome(
        scenario="Concurrency: one daily file",
        load=(
            f"8 writers x {plan.entries} entries ({total}): 3 pimem sessions, 1 `pimem write` "
            + ("(the CLI's main in-process per entry)" if quick else "(a process per entry)")
            + ", 4 raw memsearch-style appenders; 1 process indexing and searching, 1 searching, "
            "on one Milvus Lite database"
        ),
        faults="lock contention; concurrent O_APPEND writes",
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pimem-rel-concurrency-") as scratch:
        root = Path(scratch)
        box = make_sandbox(root / "box", offline_model())
        env = box.env()
        go, stop = root / "go", root / "stop"
        common = common_args(root, box.project, box.day_file, plan)
        writers, backends = start_workers(WRITERS, common, env, root=root, quick=quick)
        time.sleep(1.0)  # let every process import before the start signal
        go.touch()
        written = {
            worker: _finish(process, result, timeout=1800)
            for kind, worker, process, result in writers
        }
        stop.touch()
        loops = {role: _finish(process, result, timeout=600) for role, process, result in backends}
        outcome.details["writers_seconds"] = round(time.perf_counter() - started, 1)
        outcome.details["each_writer_seconds"] = [
            written[w].get("seconds") for w in sorted(written)
        ]

        expected = {}
        for kind, worker, _, _ in writers:
            report = written[worker]
            outcome.expect(
                "crashed" not in report, f"writer {worker} ({kind}): {report.get('crashed')}"
            )
            acknowledged = report.get("acknowledged", [])
            outcome.expect(
                len(acknowledged) == plan.entries,
                f"writer {worker} ({kind}) had {len(report.get('failed', []))} failed writes: "
                f"{report.get('errors', [])[:2]}",
            )
            for number in acknowledged:
                expected[(f"session-{worker}", f"t{number:04d}")] = entry_content(
                    worker, number, plan.padding
                )
        check_day_file(outcome, box.day_file, expected, total)

        calls: dict[str, int] = {}
        for role, loop in loops.items():
            outcome.expect("crashed" not in loop, f"the {role} loop crashed: {loop.get('crashed')}")
            for name, count in loop.get("calls", {}).items():
                calls[name] = calls.get(name, 0) + count
            outcome.expect(
                not loop.get("other_errors"),
                f"the {role} loop saw errors other than the lock message: {loop.get('other_errors')}",
            )
            for message in loop.get("lock_messages", []):
                outcome.expect(LOCK_MESSAGE in message, f"an unclear lock error: {message}")
        outcome.details["backend_calls"] = calls
        outcome.details["backoff_retries"] = sum(loop.get("retries", 0) for loop in loops.values())
        outcome.expect(
            calls.get("ok", 0) + calls.get("ok_after_backoff", 0) > 0, "no backend call succeeded"
        )

        final = box.pimem("index", "--json", "--cwd", str(box.project), timeout=1800)
        outcome.expect(
            final.returncode == 0, f"the final index failed: {final.stderr.strip()[-300:]}"
        )
        tokens = [
            f"w{int(session.split('-')[1]):02d}e{int(turn[1:]):04d}" for session, turn in expected
        ]
        check_args = {
            "project": str(box.project),
            "tokens": tokens,
            "sample": plan.sample,
            "seed": 3,
            "result": str(root / "verify.json"),
        }
        verified = _finish(_spawn("verify", check_args, env), root / "verify.json", timeout=900)
        outcome.details["index"] = verified
        outcome.expect(
            "crashed" not in verified, f"verification crashed: {verified.get('crashed')}"
        )
        outcome.expect(
            verified.get("missing_count", 1) == 0,
            f"{verified.get('missing_count')} entries are not in the collection after the final "
            f"index: {verified.get('missing_tokens')}",
        )
        outcome.expect(
            verified.get("chunks") == len(expected),
            f"the collection holds {verified.get('chunks')} chunks for {len(expected)} entries",
        )
        outcome.expect(
            verified.get("not_found_count", 1) == 0,
            f"search did not find {verified.get('not_found_count')} of {plan.sample} sampled "
            f"entries by their token: {verified.get('not_found_by_search')}",
        )
    outcome.seconds = time.perf_counter() - started
    return outcome
