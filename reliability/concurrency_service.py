"""Scenario 1 through the memory service: the same eight writers, indexer and searcher as
:mod:`reliability.concurrency`, with every pimem client on ``PIMEM_SERVICE=on``.

Sessions are ``pimem serve`` bridges relaying to the service (``memory.write``), the CLI writer
is ``pimem write`` through the thin client, the index and search loops are ``pimem index`` and
``pimem search`` through it; the four raw appenders are as before. Beside them a ``memsearch``
CLI indexes its own notes into the same Milvus Lite database and searches them, retrying a
failed call as an agent's hook would. Afterwards: one service served everyone, no pimem call
failed on the database lock or fell back to in process, every entry is in the day file exactly
once, and after a final index (through the service) every entry is in the collection and a
sample is found by search; the memsearch CLI got every call through within its retries.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pimem_core.doors import service_client, service_wire
from reliability import concurrency
from reliability.concurrency import FULL, LOCK_MESSAGE, QUICK, Plan, _finish
from reliability.outcome import Outcome
from reliability.sandbox import Sandbox, make_sandbox, offline_model
from reliability.workers import entry_content

#: Which writer each of the eight is: the shape of today's scenario, through the service.
WRITERS = ("append-relay",) * 3 + ("append-cli",) + ("append-raw",) * 4
SERVICE = {"PIMEM_SERVICE": "on"}


def _spawn(kind: str, args: dict[str, Any], env: dict[str, str]) -> subprocess.Popen[bytes]:
    module = (
        "reliability.workers" if kind in ("append-raw", "verify") else "reliability.workers_service"
    )
    return subprocess.Popen(
        [sys.executable, "-m", module, kind, json.dumps(args)], env=env, stderr=subprocess.PIPE
    )


def service_log(env: dict[str, str]) -> Path:
    """The log of the service *env*'s clients use."""
    return service_wire.log_path(env)


def services_started(box: Sandbox, extra: dict[str, str] | None = None) -> int:
    """How many services the clients started (each logs one ``listening at`` line)."""
    log = service_log(box.env({**SERVICE, **(extra or {})}))
    try:
        return log.read_text(errors="replace").count(" listening at ")
    except OSError:
        return 0


def stop_service(box: Sandbox, extra: dict[str, str] | None = None) -> None:
    """``pimem service stop``, then make sure: no service outlives its scenario."""
    import os
    import signal

    extra = {**SERVICE, **(extra or {})}
    found = service_client.probe(service_wire.socket_path(box.env(extra)))
    if found is None:
        return
    pid = found.hello.pid
    found.close()
    box.pimem("service", "stop", extra=extra, timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)


def side_by_side(quick: bool) -> list[Outcome]:
    """Today's in-process row, then the service row with the in-process figures beside its own."""
    in_process = concurrency.run(quick)
    served = run(quick)
    for key in ("backend_calls", "backoff_retries", "writers_seconds"):
        if key in in_process.details:
            served.details[f"in_process_{key}"] = in_process.details[key]
    return [in_process, served]


def run(quick: bool) -> Outcome:
    plan = QUICK if quick else FULL
    total = plan.entries * len(WRITERS)
    outcome = Outcome(
        scenario="Concurrency: one daily file, through the memory service",
        load=(
            f"8 writers x {plan.entries} entries ({total}), every pimem client with "
            "PIMEM_SERVICE=on: 3 relayed `pimem serve` sessions, 1 `pimem write` "
            + ("(the thin client in-process per entry)" if quick else "(a process per entry)")
            + ", 4 raw memsearch-style appenders; `pimem index` + `pimem search` in a loop, "
            "`pimem search` in a loop; a `memsearch` CLI indexing and searching the same "
            "Milvus Lite database"
        ),
        faults="lock contention (service vs memsearch CLI); concurrent O_APPEND writes",
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pimem-rel-concurrency-svc-") as scratch:
        root = Path(scratch)
        box = make_sandbox(root / "box", offline_model())
        env = box.env(SERVICE)
        transcripts = root / "transcripts"
        transcripts.mkdir()
        go, stop = root / "go", root / "stop"
        common = {
            **concurrency.common_args(root, box.project, box.day_file, plan),
            "transcripts": str(transcripts),
        }
        try:
            writers, loops = concurrency.start_workers(
                WRITERS, common, env, root=root, quick=quick, spawn=_spawn
            )
            memsearch_args = {
                **common,
                "notes": str(root / "other-agent-notes"),
                "pause": 0.5,
                "result": str(root / "memsearch.json"),
            }
            memsearch = _spawn("memsearch-cli", memsearch_args, env)
            time.sleep(1.0)  # let every process import before the start signal
            go.touch()
            written = {
                worker: _finish(process, result, timeout=1800)
                for kind, worker, process, result in writers
            }
            stop.touch()
            backend = {
                role: _finish(process, result, timeout=600) for role, process, result in loops
            }
            other = _finish(memsearch, root / "memsearch.json", timeout=600)
            outcome.details["writers_seconds"] = round(time.perf_counter() - started, 1)
            outcome.details["each_writer_seconds"] = [
                written[w].get("seconds") for w in sorted(written)
            ]
            expected = _check_writers(outcome, plan, writers, written)
            concurrency.check_day_file(outcome, box.day_file, expected, total)
            _check_loops(outcome, backend)
            _check_memsearch(outcome, other)
            _check_index(outcome, box, root, expected, plan.sample)
            outcome.details["services_started"] = services_started(box)
            outcome.expect(
                outcome.details["services_started"] == 1,
                f"{outcome.details['services_started']} services were started, not one",
            )
        finally:
            stop_service(box)
    outcome.seconds = time.perf_counter() - started
    return outcome


def _check_writers(
    outcome: Outcome,
    plan: Plan,
    writers: list[concurrency.Writer],
    written: dict[int, dict[str, Any]],
) -> dict[tuple[str, str], str]:
    expected = {}
    fallbacks = 0
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
        outcome.expect(
            not report.get("errors"), f"writer {worker} ({kind}): {report.get('errors', [])[:2]}"
        )
        fallbacks += report.get("fallbacks", 0)
        for number in acknowledged:
            expected[(f"session-{worker}", f"t{number:04d}")] = entry_content(
                worker, number, plan.padding
            )
    outcome.details["writer_fallbacks"] = fallbacks
    outcome.expect(fallbacks == 0, f"{fallbacks} pimem writes fell back to in process")
    return expected


def _check_loops(outcome: Outcome, loops: dict[str, dict[str, Any]]) -> None:
    calls: dict[str, int] = {}
    fallbacks = 0
    for role, loop in loops.items():
        outcome.expect("crashed" not in loop, f"the {role} loop crashed: {loop.get('crashed')}")
        for name, count in loop.get("calls", {}).items():
            calls[name] = calls.get(name, 0) + count
        fallbacks += loop.get("fallbacks", 0)
        outcome.expect(
            not loop.get("other_errors"),
            f"the {role} loop saw errors other than the lock message: {loop.get('other_errors')}",
        )
        for message in loop.get("lock_messages", []):
            outcome.expect(LOCK_MESSAGE in message, f"an unclear lock error: {message}")
    outcome.details["backend_calls"] = calls
    outcome.details["backend_fallbacks"] = fallbacks
    outcome.details["median_call_s"] = {
        role: loop.get("median_call_s") for role, loop in loops.items()
    }
    outcome.expect(
        calls.get("locked", 0) == 0, f"{calls.get('locked')} pimem calls failed on the lock"
    )
    outcome.expect(fallbacks == 0, f"{fallbacks} pimem calls fell back to in process")
    outcome.expect(
        calls.get("ok", 0) + calls.get("ok_after_backoff", 0) > 0, "no backend call succeeded"
    )


def _check_memsearch(outcome: Outcome, other: dict[str, Any]) -> None:
    outcome.expect(
        "crashed" not in other, f"the memsearch CLI loop crashed: {other.get('crashed')}"
    )
    outcome.details["memsearch_cli_calls"] = other.get("calls")
    outcome.expect(
        other.get("calls", {}).get("failed", 1) == 0,
        f"the memsearch CLI failed {other.get('calls', {}).get('failed')} calls through all its "
        f"retries: {other.get('failures', [])[:2]}",
    )


def _check_index(
    outcome: Outcome,
    box: Sandbox,
    root: Path,
    expected: dict[tuple[str, str], str],
    sample: int,
) -> None:
    final = box.pimem("index", "--json", "--cwd", str(box.project), extra=SERVICE, timeout=1800)
    outcome.expect(final.returncode == 0, f"the final index failed: {final.stderr.strip()[-300:]}")
    outcome.expect(
        "running in process" not in final.stderr,
        f"the final index fell back to in process: {final.stderr.strip()[-300:]}",
    )
    tokens = [
        f"w{int(session.split('-')[1]):02d}e{int(turn[1:]):04d}" for session, turn in expected
    ]
    # A sample searched through the service, then the whole collection read in process.
    searched_not_found = []
    for token in tokens[:: max(1, len(tokens) // sample)][:sample]:
        done = box.pimem(
            "search", f"token {token}", "-k", "10", "--cwd", str(box.project), extra=SERVICE
        )
        if done.returncode != 0 or token not in done.stdout:
            searched_not_found.append(token)
    outcome.details["service_search_not_found"] = len(searched_not_found)
    outcome.expect(
        not searched_not_found,
        f"search through the service did not find {searched_not_found[:5]}",
    )
    stop_service(box)
    check_args = {
        "project": str(box.project),
        "tokens": tokens,
        "sample": sample,
        "seed": 3,
        "result": str(root / "verify.json"),
    }
    verified = _finish(_spawn("verify", check_args, box.env()), root / "verify.json", timeout=900)
    outcome.details["index"] = verified
    outcome.expect("crashed" not in verified, f"verification crashed: {verified.get('crashed')}")
    outcome.expect(
        verified.get("missing_count", 1) == 0,
        f"{verified.get('missing_count')} entries are not in the collection after the final "
        f"index: {verified.get('missing_tokens')}",
    )
    outcome.expect(
        verified.get("chunks") == len(expected),
        f"the collection holds {verified.get('chunks')} chunks for {len(expected)} entries",
    )
