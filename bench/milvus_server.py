"""Several agents on one Milvus server: ``python -m milvus_lite server`` as the shared engine.

memsearch's ``milvus.uri`` names a server instead of a local database directory, and every
agent (pimem in process, or pimem's memory service, each agent its own process) writes,
indexes and searches one project's store through it, all at once. Measured: each operation's
latency by kind and agent mode, and that nothing is lost: every entry written is in the day
files exactly once, in the collection after a final ``pimem index``, and found by a search
for its own text.

Run alone: ``python -m bench.milvus_server [--quick] [--workdir DIR]`` prints the markdown
section and writes ``milvus_server.json`` in the work directory. Agents are this module too
(``python -m bench.milvus_server agent SPEC``), so they start without the bench's imports.

:class:`MilvusServer` is also the test suite's server endpoint (``tests/plugins/memsearch/test_milvus_server.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

Log = Callable[[str], None]

#: Seconds a server is given to listen, and an agent to finish all of its operations.
SERVER_START_S = 60.0
AGENT_TIMEOUT_S = 900.0
READY_TIMEOUT_S = 120.0
#: Operations in an agent's mix: (kind, share). An index is ``pimem index`` of the whole store.
MIX = (("write", 0.5), ("search", 0.35), ("index", 0.15))
KINDS = tuple(kind for kind, _ in MIX)
MODES = ("in-process", "service")
#: Agents and operations per agent: (in-process agents, service agents, operations).
FULL = (3, 3, 100)
QUICK = (1, 2, 10)
TOPICS = (
    "the cache layer",
    "the login redirect",
    "the nightly backup",
    "the billing export",
    "the search index",
    "the deploy pipeline",
    "the rate limiter",
    "the schema migration",
)
VERBS = ("moved", "fixed", "documented", "benchmarked", "split", "renamed", "retried", "pinned")


def free_port() -> int:
    """A TCP port on 127.0.0.1 free right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class MilvusServer:
    """``python -m milvus_lite server`` on 127.0.0.1 with its data under *data_dir*: started on
    a free port, waited for (bounded), killed on exit. ``uri`` is what ``milvus.uri`` takes."""

    def __init__(self, data_dir: Path, *, python: str = sys.executable) -> None:
        self.data_dir = data_dir
        self.python = python
        self.port = 0
        self.log_path = data_dir.with_name(data_dir.name + ".log")
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> MilvusServer:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> None:
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        # A port can be taken between the probe and the server's bind: try a few.
        for _ in range(3):
            self.port = free_port()
            self._log = self.log_path.open("wb")
            self._process = subprocess.Popen(
                [
                    self.python,
                    "-m",
                    "milvus_lite",
                    "server",
                    "--data-dir",
                    str(self.data_dir),
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--max-workers",
                    "16",
                ],
                stdout=self._log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                # No proxy may stand between a client and a loopback server.
                env={**os.environ, "no_proxy": "127.0.0.1,localhost", "NO_PROXY": "127.0.0.1"},
            )
            if self._wait_ready(time.monotonic() + SERVER_START_S):
                return
            self.stop()
        raise RuntimeError(f"milvus_lite server did not start: {self._tail()}")

    def _wait_ready(self, deadline: float) -> bool:
        """Whether the server listens (its log says so and a connection is taken) in time."""
        assert self._process is not None
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                return False
            if "listening on" in self._tail():
                with socket.socket() as probe:
                    probe.settimeout(1.0)
                    if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                        return True
            time.sleep(0.1)
        return False

    def _tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        if self._log is not None:
            self._log.close()
            self._log = None


def memsearch_config(uri: str, provider: str, model: str) -> str:
    """memsearch's global ``config.toml`` naming the server: what the docs show."""
    return f'[embedding]\nprovider = "{provider}"\nmodel = "{model}"\n\n[milvus]\nuri = "{uri}"\n'


# -- one agent (a process of its own) ------------------------------------------------------------


def _plan(seed: int, ops: int) -> list[str]:
    rng = random.Random(seed)
    plan = rng.choices([kind for kind, _ in MIX], weights=[share for _, share in MIX], k=ops)
    plan[0] = "write"  # every agent writes at least once
    return plan


def _content(agent: int, n: int, rng: random.Random) -> tuple[str, str]:
    """An entry's bullet and its marker, a word found nowhere else."""
    marker = f"lt{agent}x{n}q{rng.randrange(10**6):06d}"
    topic, verb = rng.choice(TOPICS), rng.choice(VERBS)
    return f"- agent {agent} {verb} {topic} on port {rng.randrange(1024, 65535)} ({marker})", marker


class _InProcess:
    """pimem's API in this process, one facade for the agent's life (a pi session's view)."""

    def __init__(self, repo: Path) -> None:
        from pimem_core import Pimem

        self.pimem = Pimem.from_env()
        self.scope = self.pimem.resolve_scope(repo)

    def write(self, content: str, session: str, turn: str) -> None:
        from pimem_core.types import Anchor, Entry

        entry = Entry(
            anchor=Anchor(session=session, turn=turn, transcript=f"/agents/{session}.jsonl"),
            content=content,
            written_at=self.pimem.settings.now(),
        )
        self.pimem.append_entry(self.scope, entry)

    def search(self, text: str) -> str:
        from pimem_core.types import SearchQuery

        hits = self.pimem.search_memory(self.scope, SearchQuery(text=text, top_k=5))
        return "\n".join(hit.content for hit in hits)

    def index(self) -> None:
        self.pimem.index_memory(self.scope, "load test")


class _Commands:
    """The ``pimem`` command per operation (through the memory service when it is on)."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo

    def _run(self, command: str, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "pimem_core", command, "--cwd", str(self.repo), *args],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(done.stderr.strip()[-500:] or f"exit {done.returncode}")
        return done.stdout

    def write(self, content: str, session: str, turn: str) -> None:
        transcript = f"/agents/{session}.jsonl"
        self._run(
            "write", content, "--session", session, "--turn", turn, "--transcript", transcript
        )

    def search(self, text: str) -> str:
        return self._run("search", "-k", "5", "--json", "--", text)

    def index(self) -> None:
        self._run("index")


def agent(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Run one agent's operations from *spec*; its samples and what it wrote."""
    agent_id, repo = int(spec["agent"]), Path(spec["repo"])
    rng = random.Random(int(spec["seed"]) * 1000 + agent_id)
    runner = _InProcess(repo) if spec["mode"] == "in-process" else _Commands(repo)
    session = f"agent{agent_id}"
    warm_up = time.perf_counter()
    runner.search("warm-up")  # the model and the database, before the clock starts
    warm_ms = (time.perf_counter() - warm_up) * 1000
    # Everyone starts together, once all are warm: the operations overlap as much as they can.
    Path(spec["ready"]).write_text(str(warm_ms))
    go, deadline = Path(spec["go"]), time.monotonic() + READY_TIMEOUT_S
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    samples: list[dict[str, Any]] = []
    written: list[dict[str, str]] = []
    for n, kind in enumerate(_plan(int(spec["seed"]) + agent_id, int(spec["ops"]))):
        content, marker = _content(agent_id, n, rng)
        error = None
        started = time.perf_counter()
        try:
            if kind == "write":
                runner.write(content, session, f"t{n}")
            elif kind == "search":
                recent = written[-1]["content"] if written else "the cache layer"
                runner.search(recent.removeprefix("- "))
            else:
                runner.index()
        except Exception as failure:  # noqa: BLE001 - counted, the agent goes on
            error = f"{type(failure).__name__}: {failure}"[:500]
        samples.append({"kind": kind, "ms": (time.perf_counter() - started) * 1000, "error": error})
        if kind == "write" and error is None:
            written.append({"marker": marker, "content": content})
    return {"agent": agent_id, "mode": spec["mode"], "warm_ms": warm_ms, "samples": samples,
            "written": written}  # fmt: skip


def verify(spec: Mapping[str, Any]) -> dict[str, Any]:
    """After every agent: each written entry once in the day files, then (after one more
    ``pimem index``) in the collection and found by a search for its own text."""
    repo = Path(spec["repo"])
    markers: dict[str, str] = dict(spec["written"])
    memory = repo / ".memsearch" / "memory"
    text = "".join(path.read_text() for path in sorted(memory.glob("????-??-??.md")))
    in_files = {marker: text.count(marker) for marker in markers}
    runner = _InProcess(repo)
    engine = runner.pimem.index(runner.scope).engine  # type: ignore[attr-defined]
    # What the agents' own indexing left in the collection, before the final run mends it.
    before = "\n".join(str(row["content"]) for row in engine.reads.rows(runner.scope))
    started = time.perf_counter()
    runner.index()
    index_ms = (time.perf_counter() - started) * 1000
    rows = engine.reads.rows(runner.scope)
    chunks = "\n".join(str(row["content"]) for row in rows)
    found = 0
    search_ms: list[float] = []
    for marker, content in markers.items():
        started = time.perf_counter()
        hits = runner.search(content.removeprefix("- "))
        search_ms.append((time.perf_counter() - started) * 1000)
        found += marker in hits
    return {
        "written": len(markers),
        "once_in_files": sum(count == 1 for count in in_files.values()),
        "missing_in_files": sum(count == 0 for count in in_files.values()),
        "duplicated_in_files": sum(count > 1 for count in in_files.values()),
        "in_collection_before_final_index": sum(marker in before for marker in markers),
        "in_collection": sum(marker in chunks for marker in markers),
        "found_by_search": found,
        "chunks": len(rows),
        "final_index_ms": index_ms,
        "verify_search": _summary(search_ms),
    }


# -- the run -------------------------------------------------------------------------------------


def _summary(samples: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples)
    if not ordered:
        return {"n": 0}
    rank = 0.95 * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return {
        "n": len(ordered),
        "p50": statistics.median(ordered),
        "p95": ordered[low] + (ordered[high] - ordered[low]) * (rank - low),
        "max": ordered[-1],
    }


def _child(env: Mapping[str, str], command: str, spec: Mapping[str, Any], out: Path) -> Any:
    spec_path = out.with_suffix(".spec.json")
    spec_path.write_text(json.dumps(spec))
    return subprocess.Popen(
        [sys.executable, "-m", "bench.milvus_server", command, str(spec_path), str(out)],
        env=dict(env),
        cwd=Path(__file__).resolve().parent.parent,
        stdout=subprocess.DEVNULL,
        stderr=out.with_suffix(".err").open("wb"),
    )


def _collect(process: Any, out: Path, timeout: float) -> dict[str, Any]:
    try:
        code = process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)
        code = "timeout"
    if code != 0:
        tail = out.with_suffix(".err").read_text(errors="replace")[-1500:]
        raise RuntimeError(f"{out.stem} failed ({code}): {tail}")
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def _stop_service(env: Mapping[str, str]) -> None:
    from pimem_core.doors import service_client, service_wire

    path = service_wire.socket_path(dict(env))
    found = service_client.probe(path)
    if found is not None:
        service_client.stop(found, path)


def run(workdir: Path, quick: bool, log: Log) -> dict[str, Any]:
    """Start a server, run the agents against it at once, verify; the figures as JSON."""
    from pimem_plugins.memsearch.offline_model import default_hf_home, install_offline_model

    in_process, service, ops = QUICK if quick else FULL
    seed = 19
    root = workdir / "milvus-server"
    shutil.rmtree(root, ignore_errors=True)
    repo = root / "repo"
    (repo / ".git").mkdir(parents=True)
    home = root / "home"
    (home / ".memsearch").mkdir(parents=True)
    model = install_offline_model(default_hf_home()).model
    base = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PIMEM_", "PI_MEMSEARCH_", "MEMSEARCH_"))
    }
    base |= {"HOME": str(home), **model.environment(), "PIMEM_HOME": str(root / "pimem-home")}
    with MilvusServer(root / "milvus-data") as server:
        log(f"milvus server: {server.uri} ({server.data_dir})")
        (home / ".memsearch" / "config.toml").write_text(
            memsearch_config(server.uri, model.provider, model.model)
        )
        # One entry indexed first: the collection exists when the agents warm up.
        for args in (
            (
                "write",
                "- the load test starts here",
                "--session",
                "s0",
                "--turn",
                "t0",
                "--transcript",
                "/s0",
            ),
            ("index",),
        ):
            subprocess.run(
                [sys.executable, "-m", "pimem_core", *args, "--cwd", str(repo)],
                env=base,
                capture_output=True,
                check=True,
                timeout=300,
            )
        modes = ["in-process"] * in_process + ["service"] * service
        envs = [
            base | {"PIMEM_HOME": str(root / f"pimem-home-{n}"), "PIMEM_SERVICE": "off"}
            if mode == "in-process"  # pimem's own state (ledger, read-model cache) apart
            else base | {"PIMEM_SERVICE": "on"}  # one memory service for these agents
            for n, mode in enumerate(modes)
        ]
        go = root / "go"
        children = []
        for n, (mode, env) in enumerate(zip(modes, envs, strict=True)):
            out = root / f"agent-{n}.json"
            spec = {"agent": n, "mode": mode, "repo": str(repo), "seed": seed, "ops": ops,
                    "ready": str(out.with_suffix(".ready")), "go": str(go)}  # fmt: skip
            children.append((_child(env, "agent", spec, out), out))
        log(f"{len(modes)} agents x {ops} operations ({', '.join(modes)})")
        try:
            deadline = time.monotonic() + READY_TIMEOUT_S
            while time.monotonic() < deadline and not all(
                out.with_suffix(".ready").exists() or process.poll() is not None
                for process, out in children
            ):
                time.sleep(0.05)
            go.touch()
            started = time.monotonic()
            agents = [_collect(process, out, AGENT_TIMEOUT_S) for process, out in children]
        finally:
            for process, _ in children:
                if process.poll() is None:
                    process.kill()
            _stop_service(base | {"PIMEM_SERVICE": "on"})
        wall_s = time.monotonic() - started
        written = {item["marker"]: item["content"] for a in agents for item in a["written"]}
        log(f"agents done in {wall_s:.0f} s; verifying {len(written)} entries")
        out = root / "verify.json"
        checked = _collect(
            _child(base, "verify", {"repo": str(repo), "written": written}, out), out, 600
        )
    samples = [s for a in agents for s in a["samples"]]
    by_kind: dict[str, Any] = {}
    for kind in KINDS:
        for mode in (*MODES, "all"):
            ms = [
                s["ms"]
                for a in agents
                for s in a["samples"]
                if s["kind"] == kind and s["error"] is None and mode in (a["mode"], "all")
            ]
            by_kind.setdefault(kind, {})[mode] = _summary(ms)
    errors = [s["error"] for s in samples if s["error"] is not None]
    lost = checked["written"] - min(
        checked["once_in_files"], checked["in_collection"], checked["found_by_search"]
    )
    return {
        "agents": {"in-process": in_process, "service": service},
        "ops_per_agent": ops,
        "ops": len(samples),
        "errors": len(errors),
        "error_examples": sorted(set(errors))[:5],
        "latency_ms": by_kind,
        "warm_ms": [a["warm_ms"] for a in agents],
        "verify": checked,
        "lost": lost,
        "wall_s": wall_s,
        "quick": quick,
    }


def targets(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets for this part: nothing lost, no operation failed."""
    return [
        {
            "target": "entries lost between agents on one server",
            "measured": f"{results['lost']} of {results['verify']['written']}",
            "met": results["lost"] == 0,
        },
        {
            "target": "operations failed",
            "measured": f"{results['errors']} of {results['ops']}",
            "met": results["errors"] == 0,
        },
    ]


def _ms(summary: Mapping[str, float]) -> str:
    if not summary.get("n"):
        return "-"
    return f"{summary['p50']:.0f} / {summary['p95']:.0f}"


def render(results: Mapping[str, Any]) -> list[str]:
    """The markdown lines of the Milvus-server section of ``docs/benchmarks.md``."""
    agents = results["agents"]
    total = agents["in-process"] + agents["service"]
    checked = results["verify"]
    lines = [
        "## Several agents on one Milvus server",
        "",
        f"{total} agents ({agents['in-process']} with pimem in process, {agents['service']} "
        f"through one memory service, `PIMEM_SERVICE=on`), each a process of its own, ran "
        f"{results['ops_per_agent']} operations each at the same time on one project's store, "
        "with memsearch's `milvus.uri` naming one `python -m milvus_lite server` endpoint on "
        "127.0.0.1. The mix: half writes, a third searches (for the agent's last entry), the "
        "rest `pimem index` of the whole store. A service agent's operation is one `pimem` "
        "command, its client's start included; an in-process one is a call of pimem's API.",
        "",
        "| operation | in process p50 / p95 (ms) | service p50 / p95 (ms) | all p50 / p95 (ms) | n |",
        "|---|---|---|---|---|",
    ]
    for kind in KINDS:
        row = results["latency_ms"][kind]
        lines.append(
            f"| {kind} | {_ms(row['in-process'])} | {_ms(row['service'])} | {_ms(row['all'])} "
            f"| {row['all'].get('n', 0)} |"
        )
    lines += [
        "",
        f"- Operations: {results['ops']}, failed: {results['errors']}; "
        f"{results['wall_s']:.0f} s from the agents' common start to the last one's end.",
        f"- Entries written: {checked['written']}; in the day files exactly once: "
        f"{checked['once_in_files']}; in the collection after a final `pimem index`: "
        f"{checked['in_collection']} ({checked['chunks']} chunks); found by a search for their "
        f"own text: {checked['found_by_search']}. **Lost: {results['lost']}.**",
    ]
    if "in_collection_before_final_index" in checked:
        lines.append(
            "- In the collection before that final index: "
            f"{checked['in_collection_before_final_index']} (a write does not index; the "
            "next index run, or a search's catch-up, takes it in)."
        )
    for example in results.get("error_examples", []):
        lines.append(f"- A failure: `{example}`")
    lines += [
        "",
        "Run it alone: `.venv/bin/python -m bench.milvus_server` (`--quick`: "
        f"{QUICK[0] + QUICK[1]} agents x {QUICK[2]} operations).",
    ]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.milvus_server")
    parser.add_argument("command", nargs="?", default="run", choices=("run", "agent", "verify"))
    parser.add_argument("spec", nargs="?")
    parser.add_argument("out", nargs="?")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args(argv)
    if args.command in ("agent", "verify"):
        spec = json.loads(Path(args.spec).read_text())
        result = agent(spec) if args.command == "agent" else verify(spec)
        Path(args.out).write_text(json.dumps(result))
        return 0
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="pimem-bench-milvus-"))
    workdir.mkdir(parents=True, exist_ok=True)
    results = run(workdir, args.quick, lambda message: print(message, file=sys.stderr))
    (workdir / "milvus_server.json").write_text(json.dumps(results, indent=2))
    print("\n".join(render(results)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
