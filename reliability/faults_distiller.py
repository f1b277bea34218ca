"""Scenario 2, distillation: the endpoint is down, the endpoint is slow, the host's model never
answers.

Capture must never hold up the agent: ``settled`` returns at once whatever the distiller does.
Every exchange still leaves an entry, a diagnostic marker saying why when no bullets came, and
shutdown stays within its cap.
"""

from __future__ import annotations

import socket
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pimem_core import Pimem
from pimem_core.paths import PimemPaths
from pimem_core.runtime.session import Session, SessionInfo
from pimem_core.types import BranchEntry
from reliability.host import Bridge, SessionFile, start_params
from reliability.integrity import parse
from reliability.outcome import Outcome
from reliability.sandbox import Sandbox, environment, make_sandbox

TIMEOUT_MS = 500


class _Slow(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that takes far longer than pimem waits."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        time.sleep(3)
        try:
            self.send_response(200)
            self.end_headers()
        except OSError:
            pass  # pimem hung up long ago

    def log_message(self, *args: object) -> None:
        pass


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port  # nothing listens there any more


def _capture_run(box: Sandbox, extra: dict[str, str], count: int) -> dict[str, Any]:
    """A real session in this process: *count* exchanges settled back to back, then shutdown."""
    env = box.env({"PIMEM_DISABLE_PLUGINS": "memsearch-index", **extra})
    with environment(env):
        pimem = Pimem.from_env(env)
        session = Session(pimem, paths=PimemPaths.from_env(env))
        session.start(
            SessionInfo(session_id="s-dist", cwd=box.project, transcript=box.root / "t.jsonl")
        )
        branch: list[BranchEntry] = []
        settled, prompts = [], []
        for number in range(count):
            branch += [
                BranchEntry(
                    id=f"u{number}", kind="message", role="user", text=f"question {number}"
                ),
                BranchEntry(
                    id=f"a{number}", kind="message", role="assistant", text=f"answer {number}"
                ),
            ]
            started = time.perf_counter()
            session.settled(leaf=f"a{number}", branch=list(branch))
            settled.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            session.before_prompt("next")
            prompts.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        report = session.shutdown()
        return {
            "settled_ms": settled,
            "before_prompt_ms": prompts,
            "shutdown_s": time.perf_counter() - started,
            "captured_in_time": report.captured_in_time,
            "text": box.day_file.read_text(encoding="utf-8") if box.day_file.exists() else "",
        }


def _judge(outcome: Outcome, run: dict[str, Any], count: int, reasons: tuple[str, ...]) -> None:
    entries = parse(run["text"]).by_anchor()
    turns = [f"a{n}" for n in range(count)]
    missing = [turn for turn in turns if ("s-dist", turn) not in entries]
    once = all(len(entries.get(("s-dist", turn), [])) <= 1 for turn in turns)
    contents = ["\n".join(found) for found in entries.values()]
    unexplained = [c for c in contents if not any(reason in c for reason in reasons)]
    outcome.inputs = count
    outcome.entries_lost = len(missing)
    outcome.expect(not missing, f"exchanges without an entry: {missing[:5]}")
    outcome.expect(once, "an exchange has two entries")
    outcome.expect(not unexplained, f"an entry without the expected reason: {unexplained[:1]}")
    slowest = max(run["settled_ms"])
    outcome.expect(slowest < 50, f"settled took {slowest:.1f} ms")
    outcome.expect(max(run["before_prompt_ms"]) < 200, "before_prompt stalled")
    outcome.expect(run["shutdown_s"] < 21, f"shutdown took {run['shutdown_s']:.1f} s (cap 15 s)")
    outcome.details = {
        "settled_ms_max": round(slowest, 3),
        "before_prompt_ms_max": round(max(run["before_prompt_ms"]), 3),
        "shutdown_s": round(run["shutdown_s"], 2),
        "captured_in_time": run["captured_in_time"],
        "markers": sum("- [pimem]" in c for c in contents),
    }


def _endpoint_down(root: Path, count: int) -> Outcome:
    outcome = Outcome(
        scenario="Fault: distiller endpoint down",
        load=f"{count} exchanges settled back to back",
        faults="PIMEM_DISTILL_URL points at a closed port",
    )
    extra = {
        "PIMEM_DISTILLER": "http",
        "PIMEM_DISTILL_URL": f"http://127.0.0.1:{_closed_port()}/v1",
        "PIMEM_DISTILL_MODEL": "m",
        "PIMEM_DISTILL_TIMEOUT_MS": str(TIMEOUT_MS),
    }
    run = _capture_run(make_sandbox(root / "down"), extra, count)
    _judge(outcome, run, count, ("cannot connect",))
    return outcome


def _endpoint_slow(root: Path, count: int) -> Outcome:
    outcome = Outcome(
        scenario="Fault: distiller endpoint slow",
        load=f"{count} exchanges settled back to back"
        + (" (more than the 15 s shutdown cap can distil)" if count * TIMEOUT_MS > 15_000 else ""),
        faults=f"every reply takes 3 s; PIMEM_DISTILL_TIMEOUT_MS={TIMEOUT_MS}",
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    server.daemon_threads = True
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    extra = {
        "PIMEM_DISTILLER": "http",
        "PIMEM_DISTILL_URL": f"http://127.0.0.1:{server.server_address[1]}/v1",
        "PIMEM_DISTILL_MODEL": "m",
        "PIMEM_DISTILL_TIMEOUT_MS": str(TIMEOUT_MS),
    }
    try:
        run = _capture_run(make_sandbox(root / "slow"), extra, count)
    finally:
        server.shutdown()
        server.server_close()
    _judge(outcome, run, count, (f"timed out after {TIMEOUT_MS}ms", "aborted by the shutdown cap"))
    return outcome


def _host_silent(root: Path, count: int) -> Outcome:
    outcome = Outcome(
        scenario="Fault: host model never answers",
        load=f"{count} exchanges through `pimem serve`"
        + (
            " (more than the 15 s shutdown cap can wait for)" if count * TIMEOUT_MS > 15_000 else ""
        ),
        faults=f"pimem's `complete` requests go unanswered; PIMEM_DISTILL_TIMEOUT_MS={TIMEOUT_MS}",
    )
    box = make_sandbox(root / "silent")
    transcript = SessionFile(root / "silent.jsonl", "s-dist")
    bridge = Bridge(
        box,
        {"PIMEM_DISABLE_PLUGINS": "memsearch-index", "PIMEM_DISTILL_TIMEOUT_MS": str(TIMEOUT_MS)},
        answer=lambda params: None,
    )
    bridge.call("session.start", **start_params(box, transcript))
    settled, leaves = [], []
    for number in range(count):
        leaf = transcript.exchange(f"question {number}", f"answer {number}")
        leaves.append(leaf)
        started = time.perf_counter()
        reply = bridge.call("session.settled", leaf=leaf)
        settled.append((time.perf_counter() - started) * 1000)
        outcome.expect(reply.get("result") == {"queued": True}, f"settled answered {reply}")
    started = time.perf_counter()
    bridge.call("session.shutdown", timeout=60)
    shutdown = time.perf_counter() - started
    bridge.close()
    text = box.day_file.read_text(encoding="utf-8") if box.day_file.exists() else ""
    entries = parse(text).by_anchor()
    missing = [leaf for leaf in leaves if ("s-dist", leaf) not in entries]
    outcome.inputs = count
    outcome.entries_lost = len(missing)
    outcome.expect(not missing, f"exchanges without an entry: {missing}")
    outcome.expect(
        all("timed out" in c[0] or "aborted by the shutdown cap" in c[0] for c in entries.values()),
        "an entry without the timeout (or shutdown cap) reason",
    )
    outcome.expect(max(settled) < 500, f"a settled round trip took {max(settled):.0f} ms")
    outcome.details = {
        "settled_round_trip_ms_max": round(max(settled), 1),
        "shutdown_s": round(shutdown, 2),
    }
    return outcome


def run(quick: bool) -> list[Outcome]:
    count = 8 if quick else 40
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="pimem-rel-distill-") as scratch:
        for scenario in (_endpoint_down, _endpoint_slow, _host_silent):
            started = time.perf_counter()
            outcome = scenario(Path(scratch), count)
            outcome.seconds = time.perf_counter() - started
            outcomes.append(outcome)
    return outcomes
