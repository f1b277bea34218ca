"""The child processes of the concurrency scenario through the memory service:
``python -m reliability.workers_service KIND ARGS``.

Every pimem client here runs with ``PIMEM_SERVICE=on``: sessions are ``pimem serve`` bridges
relaying to the service, commands go through the thin client. Beside them a ``memsearch`` CLI
indexes and searches the same Milvus Lite database, retrying as an agent's hook would.
Arguments and results as in :mod:`reliability.workers`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from reliability import workers
from reliability.workers import _paced, _wait_for, entry_content

#: The thin client's line when it runs a command in process instead.
FALLBACK = "running in process, the memory service is unavailable"
LOCK_MESSAGE = "another process kept the Milvus Lite database open"
#: What the memsearch CLI worker allows itself per call: attempts, and the pause between them.
MEMSEARCH_ATTEMPTS = 6
MEMSEARCH_PAUSE_S = 1.0


def thin_client(argv: Sequence[str]) -> tuple[int, str, str]:
    """One command through the memory service, in this process (the thin client imports no
    more than the standard library, so this is what a ``pimem`` process does after start-up).
    A command the client hands back runs in process, as the launcher would run it."""
    from pimem_core.doors import service_client

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = service_client.run_through_service(list(argv))
        if code is None:
            from pimem_core.doors.cli import main

            code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def cli_process(argv: Sequence[str]) -> tuple[int, str, str]:
    """One command as its own ``pimem`` process (the launcher and the thin client)."""
    done = subprocess.run(
        [sys.executable, "-m", "pimem_core", *argv], capture_output=True, text=True, check=False
    )
    return done.returncode, done.stdout, done.stderr


def append_cli(args: dict[str, Any]) -> dict[str, Any]:
    """``pimem write`` through the service: a process per entry, or (quick) the thin client in
    this process."""
    session = f"session-{args['worker']}"
    errors: list[str] = []
    fallbacks = 0

    def write(number: int) -> bool:
        nonlocal fallbacks
        argv = [
            "write",
            entry_content(args["worker"], number, args["padding"]),
            "--cwd",
            args["project"],
            "--session",
            session,
            "--turn",
            f"t{number:04d}",
            "--transcript",
            f"/t/{session}.jsonl",
        ]
        code, _, stderr = (thin_client if args.get("in_process") else cli_process)(argv)
        fallbacks += stderr.count(FALLBACK)
        if code != 0:
            errors.append(stderr.strip()[-300:])
        return code == 0

    result = _paced(args, write)
    result["errors"] = errors[:5]
    result["fallbacks"] = fallbacks
    return result


class Relayed:
    """A ``pimem serve`` bridge with the service on; requests one at a time."""

    def __init__(self, project: Path, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pimem_core", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=project,
            env=env,
        )
        self._ids = 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self._ids += 1
        line = json.dumps({"id": self._ids, "method": method, "params": params}) + "\n"
        self.process.stdin.write(line.encode())
        self.process.stdin.flush()
        for raw in iter(self.process.stdout.readline, b""):
            message: dict[str, Any] = json.loads(raw)
            if message.get("method") == "complete":  # no exchange settles here: never asked
                answer = {"id": message["id"], "result": {"text": "- nothing was asked"}}
                self.process.stdin.write((json.dumps(answer) + "\n").encode())
                self.process.stdin.flush()
            elif message.get("id") == self._ids:
                return message
        raise EOFError(f"the bridge exited during {method}")

    def close(self) -> tuple[int, str]:
        assert self.process.stdin is not None
        assert self.process.stderr is not None
        self.process.stdin.close()
        try:
            code = self.process.wait(120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        return code, self.process.stderr.read().decode(errors="replace")


def append_relay(args: dict[str, Any]) -> dict[str, Any]:
    """A pi session through a relaying ``pimem serve``: ``memory.write`` per entry."""
    session = f"session-{args['worker']}"
    project = Path(args["project"])
    transcript = Path(args["transcripts"]) / f"{session}.jsonl"
    header = {"type": "session", "version": 3, "id": session, "cwd": str(project)}
    transcript.write_text(json.dumps(header) + "\n")
    bridge = Relayed(project)
    errors: list[str] = []
    model = {"provider": "fake", "id": "small", "input_cost": 1, "output_cost": 1}
    started = bridge.call(
        "session.start",
        session_id=session,
        cwd=str(project),
        transcript=str(transcript),
        model=model,
        models=[model],
    )
    if "result" not in started:
        errors.append(f"session.start: {started}")

    def write(number: int) -> bool:
        content = entry_content(args["worker"], number, args["padding"])
        reply = bridge.call("memory.write", content=content, turn=f"t{number:04d}")
        if "result" not in reply:
            errors.append(str(reply)[:300])
        return "result" in reply

    result = _paced(args, write)
    shutdown = bridge.call("session.shutdown")
    if "result" not in shutdown:
        errors.append(f"session.shutdown: {shutdown}")
    code, stderr = bridge.close()
    if code != 0:
        errors.append(f"the bridge exited {code}: {stderr.strip()[-300:]}")
    result["errors"] = errors[:5]
    result["fallbacks"] = stderr.count("memory service is unavailable")
    return result


def backend(args: dict[str, Any]) -> dict[str, Any]:
    """``pimem index`` and ``pimem search`` (role index) or ``pimem search`` (role search)
    through the service in a loop, each call's outcome counted: ok, ok after waiting on the
    database, the lock message, a fallback to in process, nothing indexed yet, anything else."""
    rng = random.Random(args["seed"])
    tally = {"ok": 0, "ok_after_backoff": 0, "locked": 0, "collection_missing": 0, "other": 0}
    fallbacks = 0
    others: list[str] = []
    locked_messages: set[str] = set()
    stop, day_file = Path(args["stop"]), Path(args["day_file"])
    latencies: list[float] = []

    def call(argv: list[str]) -> None:
        nonlocal fallbacks
        started = time.perf_counter()
        code, _, stderr = thin_client(argv)
        latencies.append(time.perf_counter() - started)
        fallbacks += stderr.count(FALLBACK)
        if LOCK_MESSAGE in stderr:
            tally["locked"] += 1
            locked_messages.add(stderr.strip()[-300:])
        elif code == 0:
            tally["ok_after_backoff" if "waiting on" in stderr else "ok"] += 1
        elif "never indexed" in stderr or "no memory" in stderr.lower():
            tally["collection_missing"] += 1  # nothing indexed yet: a normal early answer
        else:
            tally["other"] += 1
            others.append(f"exit {code}: {stderr.strip()[-300:]}")

    project = args["project"]
    _wait_for(Path(args["go"]))
    while not stop.exists():
        token = f"token w{rng.randrange(args['workers']):02d}e{rng.randrange(args['count']):04d}"
        if args["role"] == "index" and day_file.exists():
            call(["index", "--cwd", project])
        call(["search", token, "--cwd", project, "-k", "3"])
        time.sleep(args["pause"])
    latencies.sort()
    return {
        "calls": tally,
        "fallbacks": fallbacks,
        "other_errors": others[:10],
        "lock_messages": sorted(locked_messages),
        "median_call_s": round(latencies[len(latencies) // 2], 3) if latencies else None,
    }


def _memsearch(argv: Sequence[str], log: IO[str]) -> tuple[bool, int, str]:
    """One memsearch CLI call with its retries: (succeeded, attempts, last error)."""
    error = ""
    for attempt in range(1, MEMSEARCH_ATTEMPTS + 1):
        done = subprocess.run(
            [str(Path(sys.executable).parent / "memsearch"), *argv],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode == 0:
            return True, attempt, ""
        error = (done.stderr.strip() or done.stdout.strip())[-300:]
        log.write(f"attempt {attempt} of {argv[0]}: {error}\n")
        time.sleep(MEMSEARCH_PAUSE_S)
    return False, MEMSEARCH_ATTEMPTS, error


def memsearch_cli(args: dict[str, Any]) -> dict[str, Any]:
    """Another agent's memsearch: ``memsearch index`` of its own notes into its own collection
    of the same database, then ``memsearch search``, in a loop, retrying a failed call."""
    notes = Path(args["notes"])
    notes.mkdir(parents=True, exist_ok=True)
    tally = {"ok": 0, "ok_after_retry": 0, "failed": 0}
    failures: list[str] = []
    stop = Path(args["stop"])
    log = io.StringIO()
    rounds = 0
    _wait_for(Path(args["go"]))
    while not stop.exists() or rounds == 0:
        (notes / f"note-{rounds}.md").write_text(f"# Note {rounds}\n\nmemsearch note {rounds}\n")
        for argv in (
            ["index", str(notes), "--collection", "other_agent"],
            ["search", f"memsearch note {rounds}", "--collection", "other_agent", "-j"],
        ):
            ok, attempts, error = _memsearch(argv, log)
            tally["failed" if not ok else "ok" if attempts == 1 else "ok_after_retry"] += 1
            if not ok:
                failures.append(f"{argv[0]}: {error}")
        rounds += 1
        time.sleep(args["pause"])
    return {
        "calls": tally,
        "rounds": rounds,
        "failures": failures[:5],
        "log": log.getvalue()[-2000:],
    }


KINDS = {
    "append-cli": append_cli,
    "append-relay": append_relay,
    "backend": backend,
    "memsearch-cli": memsearch_cli,
}


if __name__ == "__main__":
    os.environ.setdefault("PIMEM_SERVICE", "on")
    raise SystemExit(workers.main(sys.argv[1:], KINDS))
