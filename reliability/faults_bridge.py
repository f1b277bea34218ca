"""Scenario 2, the bridge: ``pimem serve`` killed with SIGKILL, again and again.

Two ways: while the host's model distils an exchange (pimem waits for ``complete``), and at a
random moment while a burst of ``memory.write`` requests is in flight. After every kill the
daily memory file must hold whole entries only; every write pimem acknowledged must be there;
and every exchange a killed bridge was capturing must be captured by the next bridge that
starts the session (or leave a marker), exactly once.
"""

from __future__ import annotations

import contextlib
import functools
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from reliability.concurrency_service import stop_service
from reliability.host import Bridge, SessionFile, echo_bullets, start_params, wait_until
from reliability.integrity import parse
from reliability.outcome import Outcome
from reliability.sandbox import make_sandbox

EXTRA = {"PIMEM_DISABLE_PLUGINS": "memsearch-index"}


def run(quick: bool, seed: int = 1, *, relayed: bool = False) -> Outcome:
    """*relayed*: every bridge a relay to the memory service, which outlives the kills."""
    rounds, bursts = (4, 6) if quick else (25, 40)
    extra = {**EXTRA, "PIMEM_SERVICE": "on" if relayed else "off"}
    outcome = Outcome(
        scenario="Fault: bridge SIGKILL" + (" (relays to the memory service)" if relayed else ""),
        load=f"{rounds} kills while the host's model distils, {bursts} kills amid a burst of "
        "30 `memory.write` requests",
        faults="SIGKILL of `pimem serve`",
    )
    rng = random.Random(seed)
    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory(prefix="pimem-rel-kill-") as scratch,
        contextlib.ExitStack() as cleanup,
    ):
        root = Path(scratch)
        box = make_sandbox(root / "box")
        if relayed:  # stopped before its directory goes
            cleanup.callback(stop_service, box, extra)
        transcript = SessionFile(root / "killed.jsonl", "sess-kill")
        acknowledged: dict[tuple[str, str], str] = {}
        questions: list[str] = []
        torn = 0

        def check_file(when: str) -> None:
            nonlocal torn
            if box.day_file.exists():
                parsed = parse(box.day_file.read_text(encoding="utf-8"))
                if parsed.torn:
                    torn += len(parsed.torn)
                    outcome.problems.append(f"torn bytes after {when}: {parsed.torn[0][:120]!r}")

        for number in range(rounds):
            question = f"question {number} about the cache"
            questions.append(question)

            def answer(params: dict[str, Any], question: str = question) -> dict[str, Any] | None:
                if question in params["prompt"]:
                    return None  # this round's exchange: the model is still thinking at the kill
                return {"result": {"text": echo_bullets(params["prompt"])}}

            bridge = Bridge(box, extra, answer=answer)
            reply = bridge.call("session.start", **start_params(box, transcript))
            outcome.expect("result" in reply, f"session.start failed: {reply}")
            write = bridge.call(
                "memory.write", content=f"- fact of round {number}", turn=f"w{number}"
            )
            if "result" in write:
                acknowledged[(transcript.session_id, f"w{number}")] = f"- fact of round {number}"
            leaf = transcript.exchange(question, f"answer {number}")
            bridge.send("session.settled", leaf=leaf)
            asked = wait_until(functools.partial(_asked_about, bridge, question), 30)
            outcome.expect(asked, f"round {number}: pimem never asked the host's model")
            bridge.kill()
            check_file(f"kill {number} (during distillation)")

        final = Bridge(box, extra)
        final.call("session.start", **start_params(box, transcript))
        final.call("session.shutdown")
        final.close()
        check_file("the last bridge")

        for burst in range(bursts):
            bridge = Bridge(box, extra)
            bridge.call("session.start", **start_params(box, transcript))
            ids = {
                bridge.send(
                    "memory.write", content=f"- burst {burst} fact {i}", turn=f"b{burst}-{i}"
                ): i
                for i in range(30)
            }
            time.sleep(rng.uniform(0.0, 0.08))
            bridge.kill()
            for request_id, i in ids.items():
                answered = bridge.reply(request_id, timeout=0)
                if answered is not None and "result" in answered:
                    acknowledged[(transcript.session_id, f"b{burst}-{i}")] = (
                        f"- burst {burst} fact {i}"
                    )
            check_file(f"burst kill {burst}")

        text = box.day_file.read_text(encoding="utf-8")
        parsed = parse(text)
        entries = parsed.by_anchor()
        lost = [key for key in acknowledged if key not in entries]
        duplicated = [key for key, found in entries.items() if len(found) > 1]
        outcome.expect(not duplicated, f"entries written twice: {duplicated[:3]}")
        for key in acknowledged:
            if key in entries and entries[key][0] != acknowledged[key]:
                outcome.problems.append(f"entry {key} altered: {entries[key][0][:80]!r}")
        missing = [q for q in questions if sum(q in "\n".join(c) for c in entries.values()) != 1]
        outcome.expect(
            not missing, f"interrupted exchanges not captured exactly once: {missing[:3]}"
        )
        markers = sum("- [pimem]" in "\n".join(found) for found in entries.values())
        outcome.inputs = rounds + bursts
        outcome.entries_lost = len(lost) + len(missing)
        outcome.details = {
            "acknowledged_writes": len(acknowledged),
            "writes_lost": len(lost),
            "interrupted_exchanges": len(questions),
            "recaptured": len(questions) - len(missing),
            "markers": markers,
            "torn": torn,
            "entries_in_file": len(parsed.entries),
        }
    outcome.seconds = time.perf_counter() - started
    return outcome


def _asked_about(bridge: Bridge, question: str) -> bool:
    """Whether pimem has asked the host's model about *question*."""
    return any(question in params.get("prompt", "") for params in list(bridge.asked))
