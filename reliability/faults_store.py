"""Scenario 2, the store: a full disk, a read-only store, a store command that hangs.

A full or read-only store must fail with a clear error, leave every byte already written as
it was, and take appends again once it recovers, with the exchange captured during the fault
written late rather than lost. A hanging store command must fail within its timeout, take
its children with it, and write nothing anywhere.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reliability.host import drop_file_privileges, wait_until
from reliability.integrity import audit
from reliability.outcome import Outcome
from reliability.sandbox import make_sandbox

MODES = {
    "enospc": ("ENOSPC on every append (os.write patched in the child)", "No space left on device"),
    "short-write": ("the disk fills mid-write: half an entry lands", "is the disk full"),
    "readonly-file": ("the daily memory file chmod 0444", "Permission denied"),
    "readonly-dir": (
        "the memory directory chmod 0555, before the day's file exists",
        "Permission denied",
    ),
}


def _expected(mode: str) -> dict[tuple[str, str], str]:
    numbers = [3, 4] if mode == "readonly-dir" else [0, 1, 2, 3, 4]
    expected = {("s-fault", f"a{n}"): f"- the user asked: question {n}" for n in numbers}
    for n in [2] if mode == "readonly-dir" else [0, 2]:
        expected[("s-fault", f"w{n}")] = f"- written fact {n}"
    return expected


def _store_fault(mode: str, root: Path) -> Outcome:
    what, error_text = MODES[mode]
    outcome = Outcome(
        scenario=f"Fault: {mode}",
        load="one session: 5 captured exchanges and 3 writes, 1 of each during the fault",
        faults=what,
    )
    box = make_sandbox(root / mode)
    result = root / f"{mode}.json"
    args = {
        "project": str(box.project),
        "transcript": str(root / f"{mode}.jsonl"),
        "memory_dir": str(box.memory_dir),
        "day_file": str(box.day_file),
        "result": str(result),
    }
    done = subprocess.run(
        [sys.executable, "-m", "reliability.fault_child", mode, json.dumps(args)],
        env=box.env({"PIMEM_DISABLE_PLUGINS": "memsearch-index"}),
        capture_output=True,
        text=True,
        timeout=180,
        preexec_fn=drop_file_privileges,
        check=False,
    )
    if done.returncode != 0 or not result.exists():
        outcome.problems.append(
            f"the child failed ({done.returncode}): {done.stderr.strip()[-400:]}"
        )
        return outcome
    report = json.loads(result.read_text())
    outcome.inputs = 8
    outcome.expect(report["unchanged_during_fault"], "the fault changed bytes already written")
    outcome.expect(
        any(error_text in error for error in report["write_errors"]),
        f"no clear error for the refused write: {report['write_errors']}",
    )
    outcome.expect(
        any("waiting to be written" in line for line in report["status"]),
        "status did not say that a captured entry waits to be written",
    )
    outcome.expect(report["captured_in_time"], "shutdown did not drain capture in time")
    outcome.expect(
        max(report["settled_ms"]) < 50, f"settled took {max(report['settled_ms']):.1f} ms"
    )
    found = audit(report["text"], _expected(mode))
    outcome.entries_lost = len(found.lost)
    outcome.problems.extend(found.problems)
    outcome.details = {
        "write_error": report["write_errors"][:1],
        "settled_ms_max": round(max(report["settled_ms"]), 3),
    }
    return outcome


def _hung_store_command(root: Path, quick: bool) -> Outcome:
    timeout = 2 if quick else 30
    outcome = Outcome(
        scenario="Fault: store command hangs",
        load=f"`pimem write` and a bridge's session.start; timeout {timeout} s"
        + (" (30 s in the full run)" if quick else ""),
        faults="a store command that sleeps, with a child of its own",
    )
    box = make_sandbox(root / "hang")
    pid_file = root / "hang-child.pid"
    script = root / "hang.sh"
    script.write_text(f"#!/bin/sh\nsleep 3600 &\necho $! > {pid_file}\nwait\n")
    script.chmod(0o755)
    env = box.env(
        {"PI_MEMSEARCH_STORE_CMD": str(script), "PIMEM_DISABLE_PLUGINS": "memsearch-index"}
    )
    # The quick run shortens the 30 s limit in the child; the full run keeps pimem's own.
    prelude = (
        f"import pimem_plugins.store_command as s; s.TIMEOUT_SECONDS = {timeout}; "
        "from pimem_core.doors.cli import main; import sys; sys.exit(main(sys.argv[1:]))"
    )
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", prelude, *box.write_args("- a fact", session="s", turn="t")],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout + 60,
        check=False,
    )
    elapsed = time.perf_counter() - started
    outcome.inputs = 2
    outcome.expect(done.returncode == 1, f"`pimem write` exited {done.returncode}")
    outcome.expect(
        f"did not answer within {timeout} s" in done.stderr, f"unclear error: {done.stderr[-300:]}"
    )
    outcome.expect("Traceback" not in done.stderr, "a traceback instead of an error message")
    outcome.expect(elapsed < timeout + 15, f"`pimem write` took {elapsed:.1f} s")
    outcome.expect(_gone(pid_file), "the store command's child outlived the timeout")
    outcome.expect(not (box.project / ".memsearch").exists(), "a store was created anyway")
    outcome.details["write_seconds"] = round(elapsed, 2)

    serve = subprocess.Popen(
        [sys.executable, "-c", prelude, "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=box.project,
        env=env,
    )
    assert serve.stdin is not None
    assert serve.stdout is not None
    serve.stdout.readline()  # ready
    started = time.perf_counter()
    request = {
        "id": 1,
        "method": "session.start",
        "params": {"session_id": "s", "cwd": str(box.project), "transcript": None},
    }
    serve.stdin.write(
        (json.dumps(request) + "\n" + json.dumps({"id": 2, "method": "ping"}) + "\n").encode()
    )
    serve.stdin.flush()
    replies = [json.loads(serve.stdout.readline()) for _ in range(2)]
    elapsed = time.perf_counter() - started
    serve.stdin.close()
    serve.wait(60)
    serve.stdout.close()
    by_id = {reply.get("id"): reply for reply in replies}
    error = by_id.get(1, {}).get("error") or {}
    outcome.expect(error.get("type") == "memory", f"session.start answered {by_id.get(1)}")
    outcome.expect(
        f"did not answer within {timeout} s" in str(error.get("message")), "unclear bridge error"
    )
    outcome.expect(by_id.get(2, {}).get("result") == {"pong": True}, "the bridge stopped serving")
    outcome.details["session_start_seconds"] = round(elapsed, 2)

    script.write_text(
        f'#!/bin/sh\ncase "$1" in memory-dir) echo {box.memory_dir};; collection) echo ms_recovered;; esac\n'
    )
    after = subprocess.run(
        [
            sys.executable,
            "-m",
            "pimem_core",
            *box.write_args("- after the fix", session="s", turn="t2"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    outcome.expect(after.returncode == 0, f"writing after the fix failed: {after.stderr[-300:]}")
    return outcome


def _gone(pid_file: Path) -> bool:
    """Whether the process in *pid_file* is dead (given a moment to die after its kill)."""
    try:
        pid = int(pid_file.read_text())
    except (OSError, ValueError):
        return False

    def dead() -> bool:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0]
        except (FileNotFoundError, IndexError):
            return True
        return state in ("Z", "X")

    return wait_until(dead, 5)


def run(quick: bool) -> list[Outcome]:
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="pimem-rel-store-") as scratch:
        for mode in MODES:
            started = time.perf_counter()
            outcome = _store_fault(mode, Path(scratch))
            outcome.seconds = time.perf_counter() - started
            outcomes.append(outcome)
        started = time.perf_counter()
        outcome = _hung_store_command(Path(scratch), quick)
        outcome.seconds = time.perf_counter() - started
        outcomes.append(outcome)
    return outcomes
