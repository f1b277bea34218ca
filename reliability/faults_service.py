"""Scenario 2, the memory service: killed mid-capture and mid-index, a stale socket, an old
version answering, and a runtime directory it cannot use.

Real processes throughout: ``pimem service run`` started by its clients, ``pimem serve``
bridges relaying to it, the thin client. After a SIGKILL the clients must go on with a new
service (the time until the next request is answered is measured; the issue aims at 1 s),
and nothing acknowledged or being captured may be lost or written twice. A stale socket and an
outdated service are replaced without a word; an unusable runtime directory leaves every
command working in process after exactly one warning line.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from pimem_core.doors import service_client, service_wire
from reliability.concurrency import _finish
from reliability.concurrency_service import SERVICE, services_started, stop_service
from reliability.host import Bridge, SessionFile, echo_bullets, start_params, wait_until
from reliability.integrity import parse
from reliability.outcome import Outcome
from reliability.sandbox import CLOCK, DAY_FILE, Sandbox, make_sandbox, offline_model
from reliability.workers import RAW_ENTRY
from reliability.workers_service import FALLBACK, Relayed

#: The issue's aim for a client to be answered again after the service died.
RECONNECT_TARGET_S = 1.0
NO_INDEX = {"PIMEM_DISABLE_PLUGINS": "memsearch-index"}


def run(quick: bool, seed: int = 1) -> list[Outcome]:
    return [
        killed_mid_capture(quick),
        killed_mid_index(quick, seed),
        stale_socket(),
        outdated_service(),
        unusable_runtime_dir(),
    ]


def _service_pid(box: Sandbox, extra: dict[str, str]) -> int | None:
    found = service_client.probe(service_wire.socket_path(box.env({**SERVICE, **extra})))
    if found is None:
        return None
    found.close()
    return found.hello.pid


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (a child of this process) is dead too.
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    return True


def _kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not _alive(pid), 10)


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median": round(ordered[len(ordered) // 2], 3),
        "max": round(ordered[-1], 3),
    }


# -- a) SIGKILL ------------------------------------------------------------------------------


def killed_mid_capture(quick: bool) -> Outcome:
    rounds = 3 if quick else 12
    outcome = Outcome(
        scenario="Fault: service SIGKILL mid-capture",
        load=f"{rounds} relayed `pimem serve` sessions, each with an acknowledged `memory.write` "
        "and an exchange the host's model is still distilling when the service is killed",
        faults="SIGKILL of `pimem service run`",
    )
    extra = {**SERVICE, **NO_INDEX}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pimem-rel-svc-kill-") as scratch:
        root = Path(scratch)
        box = make_sandbox(root / "box")
        transcript = SessionFile(box.project / "killed.jsonl", "sess-svc-kill")
        acknowledged: dict[tuple[str, str], str] = {}
        questions: list[str] = []
        reconnect: list[float] = []
        held: set[str] = set()
        try:
            for number in range(rounds):
                question = f"question {number} about the service"
                questions.append(question)
                held.add(question)

                def answer(params: dict[str, Any]) -> dict[str, Any] | None:
                    if any(q in params["prompt"] for q in held):
                        return None  # the model is still thinking when the service is killed
                    return {"result": {"text": echo_bullets(params["prompt"])}}

                bridge = Bridge(box, extra, answer=answer)
                reply = bridge.call("session.start", **start_params(box, transcript))
                outcome.expect("result" in reply, f"round {number}: session.start {reply}")
                content = f"- fact of service round {number}"
                write = bridge.call("memory.write", content=content, turn=f"w{number}")
                if "result" in write:
                    acknowledged[(transcript.session_id, f"w{number}")] = content
                leaf = transcript.exchange(question, f"answer {number}")
                bridge.send("session.settled", leaf=leaf)
                asked = wait_until(functools.partial(_asked_about, bridge, question), 30)
                outcome.expect(asked, f"round {number}: the service never asked the host's model")
                pid = _service_pid(box, NO_INDEX)
                if not outcome.expect(pid is not None, f"round {number}: no service answers"):
                    bridge.kill()
                    continue
                assert pid is not None
                asked_before = len(bridge.asked)
                # Stopped first: the next service's question is answered, and the dying one
                # can take no answer meanwhile.
                os.kill(pid, signal.SIGSTOP)
                held.discard(question)
                _kill(pid)
                killed = time.perf_counter()
                ping = bridge.call("ping", timeout=60)
                reconnect.append(time.perf_counter() - killed)
                outcome.expect(ping.get("result") == {"pong": True}, f"round {number}: {ping}")
                new = _service_pid(box, NO_INDEX)
                outcome.expect(new not in (None, pid), f"round {number}: no new service took over")
                asked_again = wait_until(functools.partial(_asked_more, bridge, asked_before), 30)
                outcome.expect(asked_again, f"round {number}: the new service never asked again")
                shutdown = bridge.call("session.shutdown", timeout=120)
                outcome.expect(
                    shutdown.get("result", {}).get("captured_in_time") is True,
                    f"round {number}: shutdown {shutdown}",
                )
                outcome.expect(bridge.close() == 0, f"round {number}: the bridge failed")
            text = box.day_file.read_text(encoding="utf-8") if box.day_file.exists() else ""
        finally:
            stop_service(box, NO_INDEX)
        parsed = parse(text)
        entries = parsed.by_anchor()
        lost = [key for key in acknowledged if key not in entries]
        duplicated = [key for key, found in entries.items() if len(found) > 1]
        outcome.expect(not duplicated, f"entries written twice: {duplicated[:3]}")
        outcome.expect(not parsed.torn, f"torn bytes: {parsed.torn[:1]}")
        missing = [q for q in questions if sum(q in "\n".join(c) for c in entries.values()) != 1]
        outcome.expect(
            not missing, f"interrupted exchanges not captured exactly once: {missing[:3]}"
        )
        outcome.inputs = rounds
        outcome.entries_lost = len(lost) + len(missing)
        outcome.details = {
            "acknowledged_writes": len(acknowledged),
            "interrupted_exchanges": len(questions),
            "recaptured": len(questions) - len(missing),
            "reconnect_s": _summary(reconnect) if reconnect else None,
            "reconnect_target_s": RECONNECT_TARGET_S,
            "reconnect_within_target": sum(r <= RECONNECT_TARGET_S for r in reconnect),
        }
    outcome.seconds = time.perf_counter() - started
    return outcome


def _asked_more(bridge: Bridge, before: int) -> bool:
    return len(bridge.asked) > before


def _asked_about(bridge: Bridge, question: str) -> bool:
    return any(question in params.get("prompt", "") for params in list(bridge.asked))


def _big_store(box: Sandbox, entries: int) -> list[str]:
    """*entries* entries over three day files, written as memsearch's plugins append them."""
    tokens = []
    box.memory_dir.mkdir(parents=True, exist_ok=True)
    days = [DAY_FILE, "2026-08-12.md", "2026-08-11.md"]
    blocks: dict[str, list[str]] = {day: [f"\n## Session {CLOCK[-5:]}\n\n"] for day in days}
    for number in range(entries):
        token = f"ix{number:05d}tok"
        tokens.append(token)
        blocks[days[number % 3]].append(
            RAW_ENTRY.format(
                time=CLOCK[-5:],
                session="big",
                turn=f"t{number:05d}",
                transcript="/t/big.jsonl",
                content=f"- indexed fact {number} about module {number % 17}, token {token}",
            )
        )
    for day, parts in blocks.items():
        (box.memory_dir / day).write_text("".join(parts), encoding="utf-8")
    return tokens


#: A client connecting to the service for its configuration, starting a new one if need be.
_CONNECT = "from pimem_core.doors import service_client; service_client.ensure().close()"


def killed_mid_index(quick: bool, seed: int) -> Outcome:
    rounds, entries = (1, 600) if quick else (3, 3000)
    outcome = Outcome(
        scenario="Fault: service SIGKILL mid-index",
        load=f"{rounds} `pimem index` runs of a {entries}-entry store through the service, "
        "the service killed part-way; then the next client's status, index and search",
        faults="SIGKILL of `pimem service run` during an index run",
    )
    rng = random.Random(seed)
    started = time.perf_counter()
    reconnect: list[float] = []
    first_answer: list[float] = []
    killed_clients: list[str] = []
    with tempfile.TemporaryDirectory(prefix="pimem-rel-svc-index-") as scratch:
        root = Path(scratch)
        box = make_sandbox(root / "box", offline_model())
        tokens = _big_store(box, entries)
        env = box.env(SERVICE)
        try:
            for number in range(rounds):
                if number:
                    # A fresh collection each round, so every kill lands inside a long run.
                    box.pimem("service", "stop", extra=SERVICE)
                    shutil.rmtree(box.database, ignore_errors=True)
                    shutil.rmtree(box.root / "pimem-home" / "state", ignore_errors=True)
                warm = box.pimem("status", "--cwd", str(box.project), extra=SERVICE)
                outcome.expect(warm.returncode == 0, f"status failed: {warm.stderr[-300:]}")
                pid = _service_pid(box, {})
                if not outcome.expect(pid is not None, "no service after status"):
                    break
                assert pid is not None
                indexing = subprocess.Popen(
                    [sys.executable, "-m", "pimem_core", "index", "--cwd", str(box.project)],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    cwd=box.project,
                    env=env,
                )
                time.sleep(rng.uniform(1.5, 3.0))  # into the run: embedding the chunks
                outcome.expect(indexing.poll() is None, f"round {number}: the index ended early")
                _kill(pid)
                killed = time.perf_counter()
                # Reconnected: a client is connected to a live service (started anew).
                connected = subprocess.run(
                    [sys.executable, "-c", _CONNECT],
                    capture_output=True,
                    text=True,
                    cwd=box.project,
                    env=box.env(SERVICE),
                    timeout=60,
                    check=False,
                )
                reconnect.append(time.perf_counter() - killed)
                outcome.expect(connected.returncode == 0, f"round {number}: {connected.stderr}")
                status = box.pimem("status", "--cwd", str(box.project), extra=SERVICE)
                first_answer.append(time.perf_counter() - killed)
                outcome.expect(
                    status.returncode == 0 and FALLBACK not in status.stderr,
                    f"round {number}: the next status: {status.stderr.strip()[-300:]}",
                )
                _, raw_err = indexing.communicate(timeout=900)
                err = raw_err.decode(errors="replace")
                # A read (index) the service died during is asked again of the new service.
                killed_clients.append(f"exit {indexing.returncode}, warnings {err.count(FALLBACK)}")
                outcome.expect(
                    indexing.returncode == 0 and err.count(FALLBACK) == 0,
                    f"round {number}: the interrupted `pimem index` exited "
                    f"{indexing.returncode}: {err.strip()[-300:]}",
                )
                again = box.pimem("index", "--cwd", str(box.project), extra=SERVICE, timeout=900)
                outcome.expect(
                    again.returncode == 0 and FALLBACK not in again.stderr,
                    f"round {number}: the next index: {again.stderr.strip()[-300:]}",
                )
                token = rng.choice(tokens)
                found = box.pimem(
                    "search", f"token {token}", "--cwd", str(box.project), extra=SERVICE
                )
                outcome.expect(
                    found.returncode == 0 and token in found.stdout,
                    f"round {number}: search for {token}: {found.stderr.strip()[-300:]}",
                )
        finally:
            stop_service(box)
        verified = _finish(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "reliability.workers",
                    "verify",
                    json.dumps(
                        {
                            "project": str(box.project),
                            "tokens": tokens,
                            "sample": 10,
                            "seed": seed,
                            "result": str(root / "verify.json"),
                        }
                    ),
                ],
                env=box.env(),
                stderr=subprocess.PIPE,
            ),
            root / "verify.json",
            timeout=900,
        )
        outcome.expect("crashed" not in verified, f"verification crashed: {verified}")
        outcome.expect(
            verified.get("missing_count", 1) == 0 and verified.get("chunks") == entries,
            f"after the kill and the next index the collection holds {verified.get('chunks')} "
            f"chunks for {entries} entries, {verified.get('missing_count')} missing",
        )
        outcome.expect(
            verified.get("not_found_count", 1) == 0,
            f"search missed {verified.get('not_found_by_search')}",
        )
        outcome.inputs = rounds
        outcome.entries_lost = verified.get("missing_count", entries)
        outcome.details = {
            "entries": entries,
            "reconnect_s": _summary(reconnect) if reconnect else None,
            "reconnect_target_s": RECONNECT_TARGET_S,
            "reconnect_within_target": sum(r <= RECONNECT_TARGET_S for r in reconnect),
            # The first status waits its turn behind the interrupted index, resumed by the new
            # service in its one queue.
            "first_status_s": _summary(first_answer) if first_answer else None,
            "interrupted_clients": killed_clients,
            "chunks_after": verified.get("chunks"),
            "services_started": services_started(box),
        }
    outcome.seconds = time.perf_counter() - started
    return outcome


# -- b) c) d) --------------------------------------------------------------------------------


def _cli_and_bridge(box: Sandbox, outcome: Outcome, label: str, *, warnings: int) -> None:
    """A `pimem write`, a `pimem search` and a relayed session: each must work, with *warnings*
    lines of fallback on its stderr (0: served by the service, 1: in process)."""
    session = ("--session", "s", "--transcript", "/t/s.jsonl", "--cwd", str(box.project))
    turn = "w-" + "-".join(label.split())
    for argv, stdin in (
        (("write", "-", "--turn", turn, *session), f"- a fact written with {label}\n"),
        (("status", "--cwd", str(box.project)), ""),
    ):
        done = box.pimem(*argv, extra=SERVICE, stdin=stdin)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        said = [line for line in lines if "memory service" in line]
        outcome.expect(
            done.returncode == 0, f"{label}: `pimem {argv[0]}` exited {done.returncode}: {lines}"
        )
        outcome.expect(
            len(said) == warnings and len(lines) == warnings,
            f"{label}: `pimem {argv[0]}` said {lines} (expected {warnings} warning lines)",
        )
    bridge = Relayed(box.project, box.env(SERVICE))
    started = bridge.call("session.start", session_id="s", cwd=str(box.project))
    pong = bridge.call("ping")
    code, stderr = bridge.close()
    lines = [line for line in stderr.splitlines() if line.strip()]
    outcome.expect(
        "result" in started and pong.get("result") == {"pong": True} and code == 0,
        f"{label}: the relayed session: {started} {pong} exit {code}",
    )
    outcome.expect(
        len(lines) == warnings and all("memory service" in line for line in lines),
        f"{label}: the bridge said {lines} (expected {warnings} warning lines)",
    )


def stale_socket() -> Outcome:
    outcome = Outcome(
        scenario="Fault: stale service socket",
        load="`pimem write`, `pimem status` and a relayed session with a socket file nothing "
        "listens on",
        faults="a dead service's socket file left behind",
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pimem-rel-svc-stale-") as scratch:
        box = make_sandbox(Path(scratch) / "box", offline_model())
        path = service_wire.socket_path(box.env(SERVICE))
        path.parent.mkdir(mode=0o700, parents=True)
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(str(path))
        stale.close()  # the file stays; connecting to it is refused
        try:
            _cli_and_bridge(box, outcome, "a stale socket", warnings=0)
            outcome.expect(_service_pid(box, {}) is not None, "no service answers")
            outcome.details["services_started"] = services_started(box)
        finally:
            stop_service(box)
        outcome.inputs = 3
    outcome.seconds = time.perf_counter() - started
    return outcome


#: A service of another pimem version: answers its handshake, and stops when asked (or not).
OLD_SERVICE = """
import json, os, socket, sys
path, obeys = sys.argv[1], sys.argv[2] == "obeys"
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(path)
listener.listen(8)
print("listening", flush=True)
while True:
    conn, _ = listener.accept()
    stream = conn.makefile("rb")
    hello = {"service": "pimem", "version": "0.0.1-old", "protocol": 1, "pid": os.getpid(),
             "started": 0.0}
    conn.sendall((json.dumps(hello) + "\\n").encode())
    line = stream.readline()
    if line and json.loads(line).get("op") == "stop" and obeys:
        conn.sendall(b'{"stopping": true}\\n')
        os.unlink(path)
        sys.exit(0)
    conn.close()
"""


def outdated_service() -> Outcome:
    outcome = Outcome(
        scenario="Fault: two pimem versions installed",
        load="an older version's service answering on the socket, one that stops when asked "
        "and one that ignores the request; then `pimem write`, `pimem status`, a relayed session",
        faults="a service whose handshake names another version",
    )
    started = time.perf_counter()
    replaced_s: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="pimem-rel-svc-old-") as scratch:
        root = Path(scratch)
        script = root / "old_service.py"
        script.write_text(textwrap.dedent(OLD_SERVICE))
        for mode in ("obeys", "ignores"):
            box = make_sandbox(root / mode, offline_model())
            path = service_wire.socket_path(box.env(SERVICE))
            path.parent.mkdir(mode=0o700, parents=True)
            old = subprocess.Popen(
                [sys.executable, str(script), str(path), mode], stdout=subprocess.PIPE
            )
            try:
                assert old.stdout is not None
                outcome.expect(old.stdout.readline() == b"listening\n", "the old service failed")
                before = time.perf_counter()
                done = box.pimem("status", "--cwd", str(box.project), extra=SERVICE)
                replaced_s[mode] = round(time.perf_counter() - before, 2)
                outcome.expect(
                    done.returncode == 0 and FALLBACK not in done.stderr,
                    f"{mode}: status: {done.stderr.strip()[-300:]}",
                )
                found = service_client.probe(path)
                outcome.expect(
                    found is not None and found.hello.current and found.hello.pid != old.pid,
                    f"the old service ({mode} a stop) was not replaced: "
                    f"{found.hello if found else None}",
                )
                if found is not None:
                    found.close()
                if mode == "obeys":
                    outcome.expect(old.wait(timeout=30) == 0, "the old service was not stopped")
                _cli_and_bridge(box, outcome, f"an old service that {mode} a stop", warnings=0)
            finally:
                stop_service(box)
                if old.poll() is None:
                    old.kill()
                    old.wait()
                if old.stdout is not None:
                    old.stdout.close()
        outcome.inputs = 2
        outcome.details["replaced_within_s"] = replaced_s
    outcome.seconds = time.perf_counter() - started
    return outcome


def unusable_runtime_dir() -> Outcome:
    root_user = os.geteuid() == 0
    ways = {
        "a file in its place": lambda run: run.write_text("not a directory"),
        ("a directory of uid 65534" if root_user else "a directory of mode 0500"): _foreign_dir,
    }
    outcome = Outcome(
        scenario="Fault: service runtime directory unusable",
        load="`pimem write`, `pimem status` and a relayed session with the runtime directory "
        + " / ".join(ways),
        faults="PIMEM_HOME/run unusable",
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pimem-rel-svc-rundir-") as scratch:
        for number, (label, spoil) in enumerate(ways.items()):
            box = make_sandbox(Path(scratch) / f"box{number}", offline_model())
            run = service_wire.runtime_dir(box.env(SERVICE))
            run.parent.mkdir(parents=True, exist_ok=True)
            spoil(run)
            try:
                _cli_and_bridge(box, outcome, label, warnings=1)
                outcome.expect(_service_pid(box, {}) is None, f"{label}: a service answers anyway")
            finally:
                stop_service(box)
                with contextlib.suppress(OSError):
                    run.chmod(0o700)
        outcome.inputs = len(ways)
    outcome.seconds = time.perf_counter() - started
    return outcome


def _foreign_dir(run: Path) -> None:
    run.mkdir(mode=0o700)
    if os.geteuid() == 0:
        os.chown(run, 65534, 65534)  # root ignores mode bits: another owner is refused
    else:
        run.chmod(0o500)
