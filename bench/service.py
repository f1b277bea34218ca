"""The memory service (``PIMEM_SERVICE=on``): whole processes, as a shell or an agent host sees them.

On the latency benchmark's store (``store-N`` in the workdir, built and reused as that part
builds it: 20,000 chunks, a quick run 500), in this order:

1. ``pimem search QUERY`` from a shell, timed whole, in rounds whose order turns: through the
   service already running (warm), in process (``PIMEM_SERVICE=off``), ``memsearch search``
   on the same collection and configuration, and with the service on but stopped before the
   run (cold: the client starts it). The database lease is let go between two runs. Then
   ``pimem status`` through the warm service.
2. Resident memory: four ``pimem serve`` sessions in four projects through one service (each a
   scripted host: ``session.start``, writes, searches, a ``settled`` whose ``complete`` it
   answers), plus ``pimem search`` calls through the same service; the service and the four
   relays (with their children) beside one session served in process doing the same work. The
   same again in the real pi, and with each project holding long entries first (as distilled
   sessions write them), read once every read model has their facts.
3. A leak: the service's RSS after a warm-up and again after many requests (searches,
   expands, statuses on the store, writes in a scratch project) sent on its socket by this
   process, as the thin client sends them.
4. Reconnect: a relayed session's ``ping`` answered again after the service is SIGKILLed.
5. Long entries: a service's RSS, idle after ``pimem index`` and a search of 1,000 long
   entries (a quick run 100), beside the same after as many short ones.

Everything runs in private directories under the workdir: the store's own ``HOME``, a runtime
directory of the bench's own (``XDG_RUNTIME_DIR``), never the user's service.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import IO, Any

from bench.corpus import generate_corpus, generate_long_corpus
from bench.latency import (
    MEMSEARCH,
    TOP_K,
    environment,
    index_store,
    memsearch_index,
    prepare_store,
    release_database,
    summarize,
)
from bench.read_model import PIMEM
from pimem_core import Pimem
from pimem_core.doors import service_client, service_wire
from pimem_plugins.memsearch.offline_model import OfflineModel

Log = Callable[[str], None]
FORMAT = 1
#: Seconds between two runs that may each open the database: the default lease (1 s) let go.
LEASE_S = 1.3
PATIENCE_S = 120.0
SESSION_MODEL = {"provider": "anthropic", "id": "small", "input_cost": 1, "output_cost": 5}
EXCHANGE = [
    {"id": "u1", "kind": "message", "role": "user", "text": "which cache do we use?"},
    {"id": "a1", "kind": "message", "role": "assistant", "text": "Redis, with a 5 minute TTL"},
]
NOTE = "- the cache is Redis with a five minute TTL"
SESSION_QUERIES = ("which cache do we use", "node version we pin", "the deploy checklist")


@dataclass(frozen=True)
class ServicePlan:
    size: int
    seed: int = 0
    #: Rounds of one run of each kind (warm, in process, memsearch CLI, cold).
    rounds: int = 20
    sessions: int = 4
    writes: int = 2
    cli_calls: int = 3
    leak_warmup: int = 500
    leak_ops: int = 10_000
    reconnects: int = 5
    #: Entries indexed through a service, long ones beside short ones, and the idle time
    #: before its RSS is read.
    entries: int = 1_000
    idle_s: float = 30.0
    #: Long entries in each project of the sessions' memory on long entries.
    session_entries: int = 250
    #: Quick runs index too few entries to judge the memory they leave.
    judge_entries: bool = True
    #: Quick runs measure too few requests to judge a leak.
    judge_leak: bool = True


SERVICE_FULL = ServicePlan(size=20_000)
SERVICE_QUICK = ServicePlan(
    size=500,
    rounds=4,
    leak_warmup=50,
    leak_ops=300,
    reconnects=2,
    judge_leak=False,
    entries=100,
    idle_s=5.0,
    session_entries=20,
    judge_entries=False,
)


# -- processes ---------------------------------------------------------------------------------


def _status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of *pid* in KiB (empty when it is gone)."""
    found = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                found[name] = int(value.split()[0])
    return found


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            parent = int(stat[stat.rindex(")") + 2 :].split()[1])
            tree.setdefault(parent, []).append(int(entry.name))
    return tree


def _command(pid: int) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None


def tree(pid: int) -> list[int]:
    """*pid* and its descendants (Milvus Lite's server is a child of the process using it). A
    child still running its parent's command is a fork about to run another (the service
    starting ``git``): it shares its parent's pages, and counting them would count them twice."""
    children, found, todo = _children(), [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        command = _command(current)
        todo += [child for child in children.get(current, []) if _command(child) != command]
    return found


def memory_of(pids: Sequence[int]) -> dict[str, Any]:
    """Resident memory of the processes *pids* and their descendants (each once), in MB: now
    and each process's own peak (VmHWM) added up."""
    rows, seen = [], set()
    for root in pids:
        # A relay that started the service is its parent: each process counted once, with the
        # first of *pids* it descends from.
        for pid in tree(root):
            status = _status(pid)
            if status and pid not in seen:
                seen.add(pid)
                rows.append({"pid": pid, "root": root, **status})
    return {
        "processes": rows,
        "rss_mb": sum(row.get("VmRSS", 0) for row in rows) / 1024,
        "hwm_mb": sum(row.get("VmHWM", 0) for row in rows) / 1024,
    }


class Sampler:
    """The largest sum of resident memory seen while it runs (every 0.2 s)."""

    def __init__(self, roots: Callable[[], Sequence[int]]) -> None:
        self._roots = roots
        self.peak_mb = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._done.wait(0.2):
            self.peak_mb = max(self.peak_mb, memory_of(self._roots())["rss_mb"])

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        self.peak_mb = max(self.peak_mb, memory_of(self._roots())["rss_mb"])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
            return False
    return True


def _wait(
    done: Callable[[], bool], what: str, patience: float = PATIENCE_S, pause: float = 0.02
) -> None:
    deadline = time.monotonic() + patience
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(f"gave up waiting for {what}")
        time.sleep(pause)


def service_pid(env: Mapping[str, str]) -> int | None:
    found = service_client.probe(service_wire.socket_path(dict(env)))
    if found is None:
        return None
    found.close()
    return found.hello.pid


def stop_service(env: Mapping[str, str]) -> None:
    """Stop the service of *env*, if one runs, and wait for its process to end."""
    path = service_wire.socket_path(dict(env))
    found = service_client.probe(path)
    if found is None:
        return
    pid = found.hello.pid
    service_client.stop(found, path)
    with contextlib.suppress(RuntimeError):
        _wait(lambda: not _alive(pid), "the service to exit", 30.0)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def timed(command: Sequence[str], cwd: Path, env: Mapping[str, str]) -> tuple[float, str]:
    """One whole process: its wall time in ms and its output; a failure raises."""
    start = time.perf_counter()
    done = subprocess.run(
        list(command), cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=600
    )
    elapsed = _ms(start)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.strip()[-2000:]}")
    if "running in process" in done.stderr:
        raise RuntimeError(f"{' '.join(command)} did not use the service: {done.stderr.strip()}")
    return elapsed, done.stdout


# -- 1. search from a shell --------------------------------------------------------------------

KINDS = ("warm", "in_process", "memsearch", "cold")


def _pimem_search(query: str) -> list[str]:
    return [str(PIMEM), "search", query, "--json", "-k", str(TOP_K)]


def measure_search(
    plan: ServicePlan,
    project: Path,
    env: Mapping[str, str],
    collection: str,
    queries: Sequence[str],
    log: Log,
) -> dict[str, Any]:
    """Rounds of one run of each kind, their order turned each round."""
    off = {**env, "PIMEM_SERVICE": "off"}
    on = {**env, "PIMEM_SERVICE": "on"}
    memsearch = [str(MEMSEARCH), "search", "", "-j", "-k", str(TOP_K), "-c", collection]

    def found(out: str, what: str) -> None:
        if not json.loads(out):
            raise RuntimeError(f"{what} found nothing")

    def run_in_process(query: str) -> float:
        time.sleep(LEASE_S)
        elapsed, out = timed(_pimem_search(query), project, off)
        found(out, "pimem search in process")
        return elapsed

    def run_memsearch(query: str) -> float:
        time.sleep(LEASE_S)
        elapsed, out = timed([*memsearch[:2], query, *memsearch[3:]], project, off)
        found(out, "memsearch search")
        return elapsed

    def run_service(query: str, kind: str) -> float:
        if kind == "cold":
            stop_service(on)
            time.sleep(LEASE_S)
        elif service_pid(on) is None:
            raise RuntimeError("the warm service is gone")
        elapsed, out = timed(_pimem_search(query), project, on)
        found(out, f"pimem search through the service ({kind})")
        return elapsed

    samples: dict[str, list[float]] = {kind: [] for kind in KINDS}
    # Untimed: the page cache, the read model's cache, a service left warm.
    run_in_process(queries[0])
    run_memsearch(queries[0])
    run_service(queries[0], "cold")
    run_service(queries[0], "warm")

    def pair(query: str) -> None:
        # The cold run leaves the service running: the warm run follows it.
        samples["cold"].append(run_service(query, "cold"))
        samples["warm"].append(run_service(query, "warm"))

    slots: list[Callable[[str], None]] = [
        lambda query: samples["in_process"].append(run_in_process(query)),
        lambda query: samples["memsearch"].append(run_memsearch(query)),
        pair,
    ]
    for number in range(plan.rounds):
        query = queries[1 + number % (len(queries) - 1)]
        for slot in slots[number % 3 :] + slots[: number % 3]:
            slot(query)
        if number % 5 == 4 or number == plan.rounds - 1:
            log(f"service {plan.size}: search round {number + 1}/{plan.rounds}")
    # More of the cheap one: warm runs alone, back to back.
    for number in range(plan.rounds):
        samples["warm"].append(run_service(queries[number % len(queries)], "warm"))
    return {"samples_ms": samples, "summary": {k: summarize(v) for k, v in samples.items()}}


def measure_status(
    plan: ServicePlan, project: Path, env: Mapping[str, str], log: Log
) -> dict[str, Any]:
    """``pimem status`` through the warm service, each run once the database's lease lapsed
    (the collection is counted, or its count known, without a client holding it open)."""
    on = {**env, "PIMEM_SERVICE": "on"}
    if service_pid(on) is None:
        raise RuntimeError("the warm service is gone")

    def run() -> float:
        time.sleep(LEASE_S)
        elapsed, out = timed([str(PIMEM), "status", "--json"], project, on)
        if not json.loads(out)["chunks"]["indexed_chunks"]:
            raise RuntimeError("pimem status counted no chunks")
        return elapsed

    run()  # untimed: the first since the service started counts the collection
    samples = [run() for _ in range(plan.rounds * 2)]
    summary = summarize(samples)
    log(f"service {plan.size}: pimem status through the warm service, p50 {summary['p50']:.0f} ms")
    return {"samples_ms": samples, "summary": summary}


# -- 2. memory of sessions ---------------------------------------------------------------------


def write_transcript(path: Path, cwd: Path) -> None:
    """A pi session file (JSONL, version 3) holding the scripted exchange."""
    stamp = "2026-11-29T09:00:07.000Z"

    def message(entry: Mapping[str, str], parent: str | None) -> dict[str, Any]:
        body = {"role": entry["role"], "content": [{"type": "text", "text": entry["text"]}]}
        if entry["role"] == "assistant":
            body |= {"provider": "fake", "model": "fake-model", "stopReason": "stop"}
        return {
            "type": "message",
            "id": entry["id"],
            "parentId": parent,
            "timestamp": stamp,
            "message": {**body, "timestamp": 1_795_000_000_000},
        }

    header = {"type": "session", "version": 3, "id": path.stem, "timestamp": stamp}
    lines = [header | {"cwd": str(cwd)}, message(EXCHANGE[0], None), message(EXCHANGE[1], "u1")]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def reap(run: Path) -> None:
    """End any service still running from the runtime directory *run* (this bench's own): a
    run cut short, or a socket name its stop did not find."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            command = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
            if b"service" in command and f"XDG_RUNTIME_DIR={run}".encode() in environ:
                os.kill(int(entry.name), signal.SIGKILL)


class Host:
    """A scripted agent host on one ``pimem serve``: it sends requests and answers the bridge's
    ``complete`` with a fixed note."""

    def __init__(self, env: Mapping[str, str], cwd: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pimem_core", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=dict(env),
            cwd=cwd,
        )
        self.cwd = cwd
        self.next_id = 0
        self.read()  # the ready line

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        return self.process.stdin, self.process.stdout

    def read(self) -> dict[str, Any]:
        line = self._pipes()[1].readline()
        if not line:
            raise RuntimeError("the bridge closed its output")
        message: dict[str, Any] = json.loads(line)
        return message

    def send(self, message: Mapping[str, Any]) -> None:
        stdin = self._pipes()[0]
        stdin.write(json.dumps(message) + "\n")
        stdin.flush()

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        while True:
            message = self.read()
            if message.get("method") == "complete":
                self.send({"id": message["id"], "result": {"text": NOTE}})
                continue
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method} failed: {message['error']}")
                return message

    def start(self, session: str) -> None:
        transcript = self.cwd / f"{session}.jsonl"
        write_transcript(transcript, self.cwd)
        self.call(
            "session.start",
            session_id=session,
            cwd=str(self.cwd),
            transcript=str(transcript),
            model=SESSION_MODEL,
            models=[SESSION_MODEL],
        )

    def work(self, plan: ServicePlan, number: int) -> None:
        for write in range(plan.writes):
            self.call("memory.write", content=f"- note {write} of session {number}", turn="a1")
        for query in SESSION_QUERIES:
            self.call("memory.search", query=query)
        self.call("session.settled", leaf="a1", branch=EXCHANGE)

    def captured(self) -> bool:
        text = str(self.call("memory.status")["result"]["text"])
        return "capture (this session): 1 captured" in text

    def close(self) -> None:
        stdin, stdout = self._pipes()
        with contextlib.suppress(OSError):
            stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        stdout.close()


def _project(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    (path / ".git").mkdir(parents=True)
    return path


def _home(root: Path, model: OfflineModel) -> Path:
    """A memsearch home of its own, with its own Milvus Lite database."""
    config = root / "home" / ".memsearch" / "config.toml"
    if root.exists():
        shutil.rmtree(root)
    config.parent.mkdir(parents=True)
    config.write_text(
        f'[embedding]\nprovider = "{model.provider}"\nmodel = "{model.model}"\n\n'
        f'[milvus]\nuri = "{root / "milvus.db"}"\n'
    )
    return root / "home"


def _facts_embedded(host: Host) -> bool:
    """Whether the session's read model is loaded with every chunk's facts embedded."""
    text = str(host.call("memory.status")["result"]["text"])
    return "read model of" in text and "still ranked by their chunk vector" not in text


def _sessions(
    plan: ServicePlan,
    env: Mapping[str, str],
    projects: Sequence[Path],
    log: Log,
    label: str,
    settle_s: float = 0.0,
) -> dict[str, Any]:
    """*projects* each with a session on *env*; their work, then the CLI searches; the memory
    of the bridges and (when on) the service, with their children, once captures are in (with
    *settle_s*, once every session's read model has its facts too, and that long after)."""
    on = env.get("PIMEM_SERVICE") == "on"
    hosts: list[Host] = []

    def roots() -> list[int]:
        pid = service_pid(env) if on else None
        return ([pid] if pid else []) + [host.process.pid for host in hosts]

    try:
        with Sampler(roots) as sampler:
            started = time.perf_counter()
            for number, directory in enumerate(projects):
                hosts.append(Host(env, directory))
                hosts[-1].start(f"s{number}")
            for number, host in enumerate(hosts):
                host.work(plan, number)
            for number in range(plan.cli_calls):
                directory = projects[number % len(projects)]
                timed(_pimem_search(SESSION_QUERIES[0]), directory, env)
            for host in hosts:
                _wait(host.captured, f"{label}: a session's capture")
            if settle_s:
                for host in hosts:
                    facts = partial(_facts_embedded, host)
                    _wait(facts, f"{label}: a read model's facts", 1800.0, pause=0.5)
                time.sleep(settle_s)
            seconds = time.perf_counter() - started
            now = memory_of(roots())
        pid = service_pid(env) if on else None
        log(f"service {plan.size}: {label}: {now['rss_mb']:.0f} MB resident")
        return {
            "sessions": len(hosts),
            "work_s": seconds,
            "service_pid": pid,
            "bridge_pids": [host.process.pid for host in hosts],
            "peak_total_mb": sampler.peak_mb,
            **now,
        }
    finally:
        for host in hosts:
            host.close()


def measure_memory(
    plan: ServicePlan, root: Path, model: OfflineModel, log: Log, long_entries: int = 0
) -> dict[str, Any]:
    """Four sessions through one service beside one served in process, each side with a fresh
    memsearch home and fresh projects (the service's runtime directory its own). With
    *long_entries*, each project holds that many long entries first, indexed in process; the
    memory is read once every read model has their facts and the service was idle a while."""
    base = {key: value for key, value in os.environ.items() if not key.startswith("PIMEM_")}
    base.pop("PIMEM_RANKER", None)
    results = {}
    for label, count, on in (
        ("through the service", plan.sessions, True),
        ("in process", 1, False),
    ):
        side = root / ("service" if on else "in-process")
        home = _home(side, model)
        env = {**base, "HOME": str(home), **model.environment(), "PIMEM_SERVICE": "off"}
        projects = [_project(side / f"project-{n}") for n in range(count)]
        for number, project in enumerate(projects if long_entries else ()):
            generate_long_corpus(long_entries, seed=number).write(project / ".memsearch" / "memory")
            timed([str(PIMEM), "index"], project, env)
        if on:
            run = side / "run"
            run.mkdir(mode=0o700)
            env |= {"PIMEM_SERVICE": "on", "XDG_RUNTIME_DIR": str(run)}
        settle = plan.idle_s if long_entries else 0.0
        try:
            results["service" if on else "in_process"] = _sessions(
                plan, env, projects, log, label, settle
            )
        finally:
            if on:
                stop_service(env)
                reap(run)
    return results


def _holds_a_day_file(memory_dir: Path) -> bool:
    return any(memory_dir.glob("????-??-??.md"))


def measure_memory_pi(
    plan: ServicePlan, root: Path, model: OfflineModel, log: Log
) -> dict[str, Any]:
    """The same comparison in the real pi (RPC mode, the newest line): four pi sessions in four
    projects whose bridges relay to one service, beside one pi session whose bridge serves in
    process. Each session captures an exchange and searches memory with a tool call; then a
    shell's ``pimem search`` in each project. Counted: pimem's processes (the service and the
    bridges); pi's own processes are given beside."""
    from bench.pi_host import (
        PI_LINES,
        ModelServer,
        PiWorld,
        Text,
        ToolCall,
        after_tool,
        bridge_pids,
        isolated_environment,
        on_distill,
        on_prompt,
    )

    line = PI_LINES["1.6"]
    rules = [
        on_prompt("[keep]", Text("Noted: Redis for the cache, five minute TTLs.")),
        on_prompt("[ask]", ToolCall("memory_search", {"query": "which cache do we use"})),
        after_tool("memory_search", Text("Redis."), marker="[ask]"),
        on_distill(marker="[keep]"),
        on_distill(marker="[ask]"),
    ]
    results: dict[str, Any] = {"pi": line.name}
    with ModelServer(rules) as server:
        for label, count, on in (("service", plan.sessions, True), ("in_process", 1, False)):
            side = root / label
            home = _home(side, model)
            extra = {
                **model.environment(),
                "PIMEM_SERVICE": "on" if on else "off",
                "PIMEM_HOME": str(side / "pimem-home"),
            }
            base = isolated_environment(home, extra)
            base.pop("PYTHONDONTWRITEBYTECODE", None)
            worlds = [
                PiWorld.create(
                    line,
                    repo=_project(side / f"project-{n}"),
                    agent_dir=side / f"agent-{n}",
                    server=server,
                    base_env=base,
                )
                for n in range(count)
            ]
            sessions = [world.rpc() for world in worlds]
            try:
                for session in sessions:
                    session.prompt("[keep] We cache with Redis, five minute TTLs.")
                for world in worlds:  # captured before the search, which then loads the model
                    memory_dir = world.repo / ".memsearch" / "memory"
                    _wait(partial(_holds_a_day_file, memory_dir), f"pi {label}: a capture")
                for session in sessions:
                    session.prompt("[ask] Which cache do we use?")
                for world in worlds:
                    timed(_pimem_search("which cache"), world.repo, world.env)
                service = service_pid(worlds[0].env) if on else None
                bridges = [pid for session in sessions for pid in bridge_pids(session.pid)]
                pimem = memory_of(([service] if service else []) + bridges)
                pi_own = sum(_status(session.pid).get("VmRSS", 0) for session in sessions) / 1024
                log(
                    f"service: real pi, {label}: pimem {pimem['rss_mb']:.0f} MB, pi {pi_own:.0f} MB"
                )
                results[label] = {
                    "sessions": count,
                    "service_pid": service,
                    "bridge_pids": bridges,
                    "pi_rss_mb": pi_own,
                    **pimem,
                }
            finally:
                for session in sessions:
                    with contextlib.suppress(Exception):
                        session.close()
                if on:
                    stop_service(worlds[0].env)
    return results


# -- 3. a leak ---------------------------------------------------------------------------------


class SocketClient:
    """Requests on one connection to the service, as the thin client sends them."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)
        self.connection = service_client.connect(service_wire.socket_path(self.env))
        self.fingerprint = service_wire.env_fingerprint(self.env)

    def run(self, cwd: Path, *argv: str) -> dict[str, object]:
        # The service serves a client for the directory it runs in.
        os.chdir(cwd)
        request: dict[str, object] = {
            "op": "run",
            "argv": list(argv),
            "cwd": str(cwd),
            "env": self.fingerprint,
        }
        service_wire.send(self.connection.sock, request)
        while True:
            reply = service_wire.receive(self.connection.stream)
            if reply is None:
                raise RuntimeError("the service closed the connection")
            if not reply.get("working"):
                break
        if reply.get("exit") != 0:
            raise RuntimeError(f"{argv} through the service: {reply}")
        return reply

    def status(self) -> None:
        self.connection.ask({"op": "status"})

    def close(self) -> None:
        self.connection.close()


def _operations(
    client: SocketClient, store: Path, scratch: Path, queries: Sequence[str]
) -> Iterator[tuple[str, Callable[[], None]]]:
    """An endless mix: of 20 requests 11 searches, 2 expands, 3 statuses (the command), 2 of
    the socket's own status, 2 writes in the scratch project."""
    hashes: list[str] = []
    number = 0

    def search() -> None:
        reply = client.run(store, *_pimem_search(queries[number % len(queries)])[1:])
        hits = json.loads(str(reply["stdout"]))
        hits = hits.get("hits", hits) if isinstance(hits, dict) else hits
        hashes[:] = [str(hit["chunk_hash"]) for hit in hits if "chunk_hash" in hit][:3]

    def expand() -> None:
        if hashes:
            client.run(store, "expand", hashes[number % len(hashes)], "--json")
        else:
            search()

    def write() -> None:
        content = f"- scratch note {number}: the {queries[number % len(queries)]}"
        client.run(scratch, "write", content, "--session", "bench", "--turn", f"t{number}",
                   "--transcript", str(scratch / "session.jsonl"))  # fmt: skip

    def status() -> None:
        client.run(store, "status")

    def hello() -> None:
        client.status()

    cycle: list[tuple[str, Callable[[], None]]] = (
        [("search", search)] * 11
        + [("expand", expand)] * 2
        + [("status", status)] * 3
        + [("hello", hello)] * 2
        + [("write", write)] * 2
    )
    order = [cycle[(n * 7) % len(cycle)] for n in range(len(cycle))]  # spread, deterministic
    while True:
        for item in order:
            yield item
            number += 1


def measure_leak(
    plan: ServicePlan, store: Path, scratch: Path, env: Mapping[str, str], queries: Sequence[str],
    log: Log,
) -> dict[str, Any]:  # fmt: skip
    on = {**env, "PIMEM_SERVICE": "on"}
    stop_service(on)
    time.sleep(LEASE_S)
    timed([str(PIMEM), "status"], store, on)  # starts it
    pid = service_pid(on)
    if pid is None:
        raise RuntimeError("no service to measure")
    (scratch / "session.jsonl").touch()
    client = SocketClient(on)
    here = Path.cwd()
    counts: dict[str, int] = {}
    seconds: dict[str, float] = {}
    trace: list[tuple[int, float]] = []
    try:
        ops = _operations(client, store, scratch, queries)
        started = time.perf_counter()
        for _ in range(plan.leak_warmup):
            next(ops)[1]()
        warmup_s = time.perf_counter() - started
        time.sleep(LEASE_S)
        before = _status(pid)
        log(f"service {plan.size}: {plan.leak_ops} requests after {plan.leak_warmup} warm-up")
        started = time.perf_counter()
        for number in range(plan.leak_ops):
            kind, op = next(ops)
            begun = time.perf_counter()
            op()
            counts[kind] = counts.get(kind, 0) + 1
            seconds[kind] = seconds.get(kind, 0.0) + time.perf_counter() - begun
            if number % max(1, plan.leak_ops // 20) == 0:
                trace.append((number, _status(pid).get("VmRSS", 0) / 1024))
        ops_s = time.perf_counter() - started
        time.sleep(LEASE_S)
        after = _status(pid)
        trace.append((plan.leak_ops, after.get("VmRSS", 0) / 1024))
    finally:
        os.chdir(here)
        client.close()
        stop_service(on)
    growth = after["VmRSS"] / before["VmRSS"] - 1
    log(
        f"service {plan.size}: RSS {before['VmRSS'] / 1024:.0f} -> {after['VmRSS'] / 1024:.0f} MB "
        f"({growth:+.1%}) over {plan.leak_ops} requests in {ops_s:.0f} s"
    )
    return {
        "pid": pid,
        "warmup_ops": plan.leak_warmup,
        "warmup_s": warmup_s,
        "ops": plan.leak_ops,
        "ops_s": ops_s,
        "counts": counts,
        "mean_ms": {kind: seconds[kind] / counts[kind] * 1000 for kind in counts},
        "before_mb": before["VmRSS"] / 1024,
        "after_mb": after["VmRSS"] / 1024,
        "hwm_mb": after["VmHWM"] / 1024,
        "growth": growth,
        "trace_mb": trace,
    }


# -- 4. reconnect ------------------------------------------------------------------------------


def measure_reconnect(
    plan: ServicePlan, root: Path, model: OfflineModel, log: Log
) -> dict[str, Any]:
    """A session's ``ping`` answered again after its service is SIGKILLed: a new bridge each
    time (a relay attaches again a bounded number of times)."""
    side = root / "reconnect"
    home = _home(side, model)
    run = side / "run"
    run.mkdir(mode=0o700)
    base = {key: value for key, value in os.environ.items() if not key.startswith("PIMEM_")}
    env = {**base, "HOME": str(home), **model.environment(), "PIMEM_SERVICE": "on",
           "XDG_RUNTIME_DIR": str(run)}  # fmt: skip
    directory = _project(side / "project")
    samples, services = [], []
    try:
        for number in range(plan.reconnects):
            host = Host(env, directory)
            try:
                host.start(f"r{number}")
                host.call("ping")
                time.sleep(LEASE_S)  # the session's start-up settled
                pid = service_pid(env)
                if pid is None:
                    raise RuntimeError("the session has no service")
                started = time.perf_counter()
                os.kill(pid, signal.SIGKILL)
                host.call("ping")
                samples.append(_ms(started))
                new = service_pid(env)
                services.append({"killed": pid, "new": new})
                if new is None or new == pid:
                    raise RuntimeError("no new service took over")
            finally:
                host.close()
    finally:
        stop_service(env)
        reap(run)
    log(f"service: ping again after SIGKILL: {', '.join(f'{s:.0f} ms' for s in samples)}")
    return {"samples_ms": samples, "summary": summarize(samples), "services": services}


# -- 5. memory after indexing long entries -----------------------------------------------------


def _ranker(project: Path, env: Mapping[str, str]) -> dict[str, Any]:
    """The ranker section of ``pimem status --json`` in *project*."""
    _, out = timed([str(PIMEM), "status", "--json"], project, env)
    ranker: dict[str, Any] = json.loads(out).get("ranker", {})
    return ranker


def _facts_done(project: Path, env: Mapping[str, str]) -> bool:
    ranker = _ranker(project, env)
    return bool(ranker.get("loaded")) and not ranker.get("facts_pending")


def _indexed_store(
    kind: str, count: int, root: Path, model: OfflineModel, log: Log, idle_s: float
) -> dict[str, Any]:
    """A service on a fresh home and a project of *count* entries (*kind*: the bench's
    usual short ones, or long ones): ``pimem index`` and a ``pimem search`` through it, the
    read model's facts embedded, then *idle_s* seconds of nothing; its RSS at each step."""
    corpus = generate_long_corpus(count) if kind == "long" else generate_corpus(count)
    side = root / kind
    home = _home(side, model)
    run = side / "run"
    run.mkdir(mode=0o700)
    base = {key: value for key, value in os.environ.items() if not key.startswith("PIMEM_")}
    env = {**base, "HOME": str(home), **model.environment(), "PIMEM_SERVICE": "on",
           "XDG_RUNTIME_DIR": str(run)}  # fmt: skip
    project = _project(side / "project")
    corpus.write(project / ".memsearch" / "memory")
    lengths = sorted(len(item.entry.content) for item in corpus.entries)
    try:
        timed([str(PIMEM), "status"], project, env)  # starts the service
        pid = service_pid(env)
        if pid is None:
            raise RuntimeError("no service to measure")
        started = _status(pid)
        begun = time.perf_counter()
        timed([str(PIMEM), "index"], project, env)
        index_s = time.perf_counter() - begun
        indexed = _status(pid)
        timed(_pimem_search(corpus.queries(1)[0].text), project, env)
        # Each look is a command of its own: one a second.
        _wait(partial(_facts_done, project, env), f"{kind}: the facts", 1800.0, pause=1.0)
        facts_s = time.perf_counter() - begun
        ready = _status(pid)
        time.sleep(idle_s)
        idle = _status(pid)
        chunks = _ranker(project, env).get("chunks")
        if service_pid(env) != pid:
            raise RuntimeError("the service was replaced while it was measured")
    finally:
        stop_service(env)
        reap(run)
    log(
        f"service: {count} {kind} entries: RSS {started['VmRSS'] / 1024:.0f} MB at start, "
        f"{indexed['VmRSS'] / 1024:.0f} MB indexed, {ready['VmRSS'] / 1024:.0f} MB with the "
        f"facts, {idle['VmRSS'] / 1024:.0f} MB after {idle_s:g} s idle "
        f"(peak {idle['VmHWM'] / 1024:.0f} MB)"
    )
    return {
        "entries": count,
        "chunks": chunks,
        "median_chars": lengths[len(lengths) // 2],
        "over_1400": sum(length > 1400 for length in lengths) / len(lengths),
        "longest_chars": lengths[-1],
        "index_s": index_s,
        "facts_s": facts_s,
        "started_mb": started["VmRSS"] / 1024,
        "indexed_mb": indexed["VmRSS"] / 1024,
        "facts_mb": ready["VmRSS"] / 1024,
        "idle_mb": idle["VmRSS"] / 1024,
        "hwm_mb": idle["VmHWM"] / 1024,
        "idle_s": idle_s,
    }


def measure_long_entries(
    plan: ServicePlan, root: Path, model: OfflineModel, log: Log
) -> dict[str, Any]:
    """The service's RSS, idle after indexing *plan.entries* long entries, beside the same
    after as many short ones; each on a service, a home and a project of its own."""
    return {
        kind: _indexed_store(kind, plan.entries, root, model, log, plan.idle_s)
        for kind in ("short", "long")
    }


# -- the part ----------------------------------------------------------------------------------


def _store(plan: ServicePlan, workdir: Path, model: OfflineModel, log: Log) -> dict[str, Any]:
    """The latency part's store of *plan.size* (indexed here when not kept), released."""
    corpus = generate_corpus(plan.size, seed=plan.seed)
    store, reused = prepare_store(workdir / f"store-{plan.size}", corpus, model)
    env = store.environment(model)
    with environment(env):
        pimem = Pimem.from_env()
        scope = pimem.resolve_scope(store.project)
        if reused:
            log(f"service {plan.size}: reusing the indexed store in {store.root}")
            index = json.loads(store.marker.read_text())["index"]
        else:
            log(f"service {plan.size}: indexing {plan.size} entries in-process")
            index = index_store(pimem, scope, store, model)
        release_database(memsearch_index(pimem, scope))
    queries = [query.text for query in corpus.queries(40)]
    return {
        "store": store,
        "env": env,
        "collection": scope.collection,
        "queries": queries,
        "index": index,
        "reused": reused,
    }


def run_service(plan: ServicePlan, workdir: Path, model: OfflineModel, log: Log) -> dict[str, Any]:
    root = workdir / "service"
    root.mkdir(parents=True, exist_ok=True)
    built = _store(plan, workdir, model, log)
    store = built["store"]
    run = root / "run"
    if run.exists():
        shutil.rmtree(run)
    run.mkdir(mode=0o700)
    # The store's own HOME (the latency part's read-model cache with it); the bench's own
    # runtime directory, whatever PIMEM_HOME the caller has.
    env = {key: value for key, value in built["env"].items() if key != "PIMEM_HOME"}
    env["XDG_RUNTIME_DIR"] = str(run)
    results: dict[str, Any] = {
        "plan": asdict(plan),
        "size": plan.size,
        "store": {"root": store.root.name, "index": built["index"], "reused": built["reused"]},
    }
    try:
        log(f"service {plan.size}: pimem search four ways, {plan.rounds} rounds")
        results["search"] = measure_search(
            plan, store.project, env, built["collection"], built["queries"], log
        )
        results["status"] = measure_status(plan, store.project, env, log)
        stop_service({**env, "PIMEM_SERVICE": "on"})
        results["leak"] = measure_leak(
            plan, store.project, _project(root / "scratch"), env, built["queries"], log
        )
    finally:
        stop_service({**env, "PIMEM_SERVICE": "on"})
        reap(run)
    log(f"service {plan.size}: {plan.sessions} sessions through the service, one in process")
    results["memory"] = measure_memory(plan, root / "memory", model, log)
    log(
        f"service {plan.size}: {plan.sessions} real pi sessions through the service, one in process"
    )
    results["memory_pi"] = measure_memory_pi(plan, root / "memory-pi", model, log)
    log(
        f"service {plan.size}: {plan.sessions} sessions on {plan.session_entries} long entries "
        "each through the service, one in process"
    )
    results["memory_long"] = measure_memory(
        plan, root / "memory-long", model, log, long_entries=plan.session_entries
    )
    log(f"service: {plan.entries} long entries beside {plan.entries} short ones")
    results["entries"] = measure_long_entries(plan, root / "entries", model, log)
    log(f"service {plan.size}: reconnect after SIGKILL, {plan.reconnects} times")
    results["reconnect"] = measure_reconnect(plan, root, model, log)
    from bench.service_report import targets

    results["targets"] = targets(results)
    return results
