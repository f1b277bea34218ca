"""What the pi adapter costs inside the real pi process, on both pi lines.

For each pi line (0.73 on Node 20, 1.6 on Node 22), pi runs in a temporary project with a modest,
indexed memory store and an isolated memsearch home on the offline model, against a scripted
model server on 127.0.0.1. The adapter's timing switch (``PIMEM_PI_TIMINGS=<file>``) makes it
append one JSON line per measured step:

- ``before_agent_start``: the handler, from pi's call until its promise settles. With
  auto-context off that is the snapshot's round trip to the bridge. The first prompt of a
  session may also wait for the bridge to come up (the adapter's ``FIRST_PROMPT_WAIT_MS``), so
  it is reported apart from the rest.
- ``agent_settled``: the handler's own time; capture is queued, never awaited. pi 0.73 has no
  such event: there capture is queued from ``agent_end``, which is not timed.
- ``bridge_ready``: from spawning ``pimem serve`` to its ready line.

Per line, with capture on as a user has it:

1. one RPC session: the first prompt; then, once the bridge is idle (its start-up work, the
   catch-up index and the first capture done: a user's second prompt comes after the agent's
   first answer, and the scripted model answers at once), the other prompts one after another,
   each ``PiPlan.think_s`` after the answer before it: sent the instant the answer ends, a
   prompt meets the previous exchange's capture at work in pi (its distillation runs through
   pi's model) and in the service, which no person's next prompt does;
2. a short RPC session whose prompts follow each other from the start, while the bridge still
   imports memsearch and catches up its index: what prompts pay in a session's first seconds;
3. short ``pi -p`` runs, each starting a bridge of its own: more ``bridge_ready`` samples and
   first prompts.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench import pi_prompt
from bench.corpus import generate_corpus
from bench.latency import CpuClock, summarize
from bench.pi_host import (
    MODEL,
    PI_LINES,
    ModelServer,
    PiLine,
    PiWorld,
    RpcSession,
    Rule,
    Text,
    bridge_pids,
    bridges_in,
    cpu_ticks,
    gone,
    isolated_environment,
    on_distill,
    pimem_command,
    wait_for,
    write_memsearch_config,
)
from pimem_core.doors import service_client
from pimem_plugins.memsearch.offline_model import OfflineModel

#: The issue's targets, in milliseconds.
TARGET_BEFORE_AGENT_START_P95_MS = 10.0
#: What the adapter may add to a one-prompt ``pi -p`` run, and to pi's exit (medians of pairs).
TARGET_PRINT_RUN_EXTRA_MS = 50.0
TARGET_EXIT_EXTRA_MS = 50.0
#: What the adapter added before, with bridges in process (the page shows them beside).
BEFORE_PRINT_RUN_EXTRA_MS = {"0.73": 307.0, "1.6": 385.0}
#: The previous publication, the adapter's eleven modules loaded one by one and the snapshot
#: built at session.start: added to a run, and to exit.
PREVIOUS_EXTRA_MS = {"0.73": (26.5, 11.8), "1.6": (54.3, 22.9)}
TARGET_BRIDGE_READY_MS = 300.0
TARGET_AGENT_SETTLED_P95_MS = 10.0
#: Bridge start-up is judged on every spawn measured, not on a percentile.
BRIDGE_READY_STAT = "max"
STEPS = ("before_agent_start", "agent_settled", "bridge_ready")
#: The bridge counts as idle below this many CPU ticks (of 10 ms) per quiet window.
IDLE_TICKS = 2
IDLE_TIMEOUT_S = 90.0
#: pimem indexes a capture once no write came for this long (``pimem_core.runtime.indexer``).
INDEX_DEBOUNCE_S = 5.0


@dataclass(frozen=True)
class PiPlan:
    """How much to measure, per pi line."""

    prompts: int = 40
    #: Prompts of the session that does not wait for its bridge to be idle.
    startup_prompts: int = 6
    print_runs: int = 10
    #: Pairs of one-prompt ``pi -p`` runs, without the adapter and with it, alternating.
    paired_runs: int = 12
    #: Seconds between an answer and the next prompt in the first RPC session (a person reads
    #: for longer; the previous exchange's capture takes tens of milliseconds).
    think_s: float = 0.3
    store_entries: int = 300
    seed: int = 0


PI_FULL = PiPlan()
PI_QUICK = PiPlan(prompts=20, startup_prompts=4, print_runs=2, paired_runs=3)


@dataclass(frozen=True)
class Project:
    """The project every pi line works in, and the environment pi runs with."""

    root: Path
    repo: Path
    env: dict[str, str]
    #: ``PIMEM_NOW``: the store's last day, so the snapshot holds real entries.
    now: str


def prepare_project(root: Path, plan: PiPlan, model: OfflineModel) -> Project:
    """A git project with *plan*'s corpus in its memory directory, indexed once."""
    corpus = generate_corpus(plan.store_entries, seed=plan.seed)
    repo = root / "project"
    (repo / ".git").mkdir(parents=True)
    corpus.write(repo / ".memsearch" / "memory")
    home = root / "home"
    write_memsearch_config(
        home, provider=model.provider, model=model.model, milvus_uri=root / "milvus.db"
    )
    # Bridges relay to this user's memory service, as users run them (on by default).
    env = isolated_environment(home, {**model.environment(), "PIMEM_SERVICE": "on"})
    # An installed pimem runs from compiled bytecode; without it every bridge would compile
    # pimem's modules again, a cost no user pays.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    # Already indexed, as a project in use is: the bridge's catch-up at start finds nothing new.
    subprocess.run(
        [pimem_command(), "index", "--cwd", str(repo)],
        env=env,
        check=True,
        capture_output=True,
        timeout=600,
    )
    evening = datetime.combine(corpus.days[-1], datetime.min.time()) + timedelta(hours=23)
    return Project(root=root, repo=repo, env=env, now=evening.isoformat(timespec="minutes"))


def prompts(count: int) -> list[str]:
    """Ordinary coding prompts; with auto-context off their words do not matter, except that
    each states something, so that every exchange is distilled as the measured exit expects (a
    question answered without a tool call is not captured, ADR 0021)."""
    asks = (
        "The retry loop in the sync worker gives up early; find out why.",
        "Add a test for the pagination cursor.",
        "Rename the billing client's flush method.",
        "We evict the cache by LRU from now on.",
    )
    return [f"[{number}] {asks[number % len(asks)]}" for number in range(count)]


def _any_prompt() -> Rule:
    return Rule("any agent request", lambda request: not request.is_distillation, Text("Done."))


def read_timings(path: Path) -> dict[str, list[float]]:
    """The adapter's timing lines, per step, in the order they were written."""
    steps: dict[str, list[float]] = {step: [] for step in STEPS}
    if path.is_file():
        for line in path.read_text().splitlines():
            record = json.loads(line)
            steps.setdefault(str(record["step"]), []).append(float(record["ms"]))
    return steps


def _version(line: PiLine) -> dict[str, str]:
    package = json.loads((line.cli.parent.parent / "package.json").read_text())
    node = subprocess.run(
        [str(line.node), "--version"], capture_output=True, text=True, check=True
    ).stdout
    return {"pi": str(package["version"]), "node": node.strip()}


def wait_until_idle(
    pi: RpcSession, env: Mapping[str, str], *, at_least: float, quiet: float = 1.5
) -> float:
    """Wait until pi's memory (its bridge, if it started one, and the memory service a session
    attached to directly) used (almost) no CPU for *quiet* seconds, and *at_least* seconds
    passed: the index after a capture waits five seconds for more writes before it runs."""
    return _wait_quiet(bridge_pids(pi.pid) + _service_pids(env), quiet=quiet, at_least=at_least)


def _rpc_session(
    world: PiWorld,
    texts: Sequence[str],
    timings: Path,
    *,
    idle_after_first: bool,
    think_s: float = 0.0,
) -> dict[str, Any]:
    world.env["PIMEM_PI_TIMINGS"] = str(timings)
    started = time.perf_counter()
    idle_wait = 0.0
    with world.rpc() as pi:
        for number, text in enumerate(texts):
            pi.prompt(text, timeout=120)
            if number == 0 and idle_after_first:
                idle_wait = wait_until_idle(pi, world.env, at_least=INDEX_DEBOUNCE_S + 2)
            elif think_s:
                time.sleep(think_s)
        code = pi.close(timeout=60)
    if code != 0:
        raise RuntimeError(f"pi {world.line.name} (rpc) exited with {code}")
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "idle_wait_s": idle_wait, **read_timings(timings)}


def _print_run(world: PiWorld, text: str, timings: Path) -> dict[str, Any]:
    world.env["PIMEM_PI_TIMINGS"] = str(timings)
    run = world.run(text, timeout=120)
    if run.code != 0:
        raise RuntimeError(f"pi {world.line.name} -p exited with {run.code}: {run.stderr[-2000:]}")
    return {"seconds": run.seconds, **read_timings(timings)}


def _timed_print_run(world: PiWorld, text: str, *, adapter: bool) -> dict[str, float]:
    """One ``pi -p`` run as a whole process, and its exit: from the first bytes of the answer
    on stdout (pi prints it when the agent is done) to the process's end."""
    command = world.line.command("--model", MODEL, "-p", text, adapter=adapter)
    started = time.perf_counter()
    process = subprocess.Popen(
        command,
        cwd=world.repo,
        env=world.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    answered: list[float] = []
    said: list[bytes] = []

    def read_stdout() -> None:
        assert process.stdout is not None
        descriptor = process.stdout.fileno()
        while chunk := os.read(descriptor, 65536):
            if not answered and chunk.strip():
                answered.append(time.perf_counter())

    def read_stderr() -> None:
        assert process.stderr is not None
        said.append(process.stderr.read())

    readers = [
        threading.Thread(target=read, name=f"pi-{read.__name__}")
        for read in (read_stdout, read_stderr)
    ]
    for reader in readers:
        reader.start()
    # A blocking wait, with a timer to kill a run that hangs: Popen.wait(timeout=...) polls
    # with sleeps of up to 50 ms, which would round the process's end by as much.
    deadline = threading.Timer(120, process.kill)
    deadline.start()
    try:
        process.wait()
    finally:
        deadline.cancel()
    ended = time.perf_counter()
    for reader in readers:
        reader.join(timeout=5)
    stderr = b"".join(said)
    if process.returncode != 0 or not answered:
        raise RuntimeError(
            f"pi {world.line.name} -p ({'with' if adapter else 'without'} the adapter) exited "
            f"with {process.returncode}: {stderr.decode(errors='replace')[-2000:]}"
        )
    return {"seconds": ended - started, "exit_s": ended - answered[0]}


def paired_print_runs(world: PiWorld, texts: Sequence[str]) -> list[dict[str, Any]]:
    """Each text as a one-prompt ``pi -p`` run without the adapter, then with it: pairs taken
    back to back, so a slow moment of the machine weighs on both sides alike."""
    pairs = []
    for text in texts:
        # What the last session left to the service (its index run, the read model's
        # embedding) must not run into this pair: the relay exits before the service is done.
        wait_until_services_idle(world.env)
        pair = {"without": _timed_print_run(world, text, adapter=False)}
        pair["with"] = _timed_print_run(world, text, adapter=True)
        # The bridge that pi left to index must not run into the next pair's baseline.
        wait_for(lambda: not bridges_in(world.repo), 60, "the released bridge to exit")
        pairs.append(pair)
    return pairs


def wait_until_services_idle(env: Mapping[str, str], *, quiet: float = 0.75) -> float:
    """Wait until this environment's memory services used (almost) no CPU for *quiet*
    seconds; the seconds waited."""
    return _wait_quiet(_service_pids(env), quiet=quiet)


def _service_pids(env: Mapping[str, str]) -> list[int]:
    return [running.hello.pid for running in service_client.every_service(dict(env))]


def _wait_quiet(pids: Sequence[int], *, quiet: float, at_least: float = 0.0) -> float:
    """Wait until *pids* together used (almost) no CPU for *quiet* seconds and *at_least*
    seconds passed (at most ``IDLE_TIMEOUT_S``); the seconds waited."""
    started = time.monotonic()
    last, since = sum(map(cpu_ticks, pids)), time.monotonic()
    while time.monotonic() - started < IDLE_TIMEOUT_S:
        time.sleep(0.25)
        ticks = sum(map(cpu_ticks, pids))
        if ticks - last > IDLE_TICKS:
            last, since = ticks, time.monotonic()
        elif time.monotonic() - since >= quiet and time.monotonic() - started >= at_least:
            break
    return time.monotonic() - started


def measure_line(
    line: PiLine, project: Project, plan: PiPlan, log: Callable[[str], None]
) -> dict[str, Any]:
    """One RPC session of ``plan.prompts`` prompts, then ``plan.print_runs`` ``pi -p`` runs."""
    texts = prompts(plan.prompts)
    # Each prompt is one agent request and one distillation; nothing else may get through.
    # A pair is one request without the adapter, and one request and its distillation with it.
    limit = 2 * (plan.prompts + plan.startup_prompts + plan.print_runs) + 3 * plan.paired_runs + 10
    with ModelServer([_any_prompt(), on_distill()], max_requests=limit) as server:
        world = PiWorld.create(
            line,
            repo=project.repo,
            agent_dir=project.root / f"agent-{line.name}",
            server=server,
            base_env=project.env,
            extra_env={"PIMEM_NOW": project.now},
        )
        clock = CpuClock.now()
        log(f"pi {line.name}: one RPC session of {plan.prompts} prompts, idle after the first")
        timings = project.root / f"timings-{line.name}"
        rpc = _rpc_session(
            world,
            texts,
            Path(f"{timings}-rpc.jsonl"),
            idle_after_first=True,
            think_s=plan.think_s,
        )
        log(f"pi {line.name}: {plan.startup_prompts} prompts from the session's start")
        startup = _rpc_session(
            world,
            texts[: plan.startup_prompts],
            Path(f"{timings}-startup.jsonl"),
            idle_after_first=False,
        )
        log(f"pi {line.name}: {plan.print_runs} runs of pi -p")
        runs = [
            _print_run(world, text, Path(f"{timings}-print-{n}.jsonl"))
            for n, text in enumerate(texts[: plan.print_runs])
        ]
        world.env.pop("PIMEM_PI_TIMINGS", None)
        log(f"pi {line.name}: {plan.paired_runs} pairs of pi -p, without the adapter and with it")
        paired = paired_print_runs(
            world,
            [
                f"[pair {n}] {text}"
                for n, text in enumerate((texts * plan.paired_runs)[: plan.paired_runs])
            ],
        )
        contention = CpuClock.now().others_since(clock)
        failures = list(server.failures)
    if failures:
        raise RuntimeError(f"pi {line.name}: the model server saw {failures}")
    return {
        "line": line.name,
        **_version(line),
        "settled_event": line.settled_event,
        "rpc": rpc,
        "startup": startup,
        "print_runs": runs,
        "paired": paired,
        "contention": contention,
    }


def summarize_line(run: Mapping[str, Any]) -> dict[str, Any]:
    """Per step: the prompts after the first of the RPC session (the targets), the prompts
    during the start-up of the other, every session's first prompt, every bridge start."""
    sessions = [run["rpc"], run["startup"], *run["print_runs"]]
    before = run["rpc"]["before_agent_start"]
    firsts = [session["before_agent_start"][0] for session in sessions]
    return {
        "line": run["line"],
        "pi": run["pi"],
        "node": run["node"],
        "before_agent_start": summarize(before[1:]),
        "first_prompt_ms": before[0],
        "first_prompts": summarize(firsts),
        "startup_window": summarize(run["startup"]["before_agent_start"][1:]),
        "idle_wait_s": run["rpc"]["idle_wait_s"],
        "agent_settled": summarize(run["rpc"]["agent_settled"] + run["startup"]["agent_settled"]),
        "bridge_ready": summarize([ms for s in sessions for ms in s["bridge_ready"]]),
        "prompts": len(before),
        "contention": run["contention"],
        "print_run": _paired_summary(run.get("paired", []), "seconds"),
        "exit": _paired_summary(run.get("paired", []), "exit_s"),
    }


def _paired_summary(pairs: Sequence[Mapping[str, Any]], field: str) -> dict[str, Any]:
    """*field* in milliseconds without the adapter, with it, and what it added per pair."""
    if not pairs:
        return {}
    without = [pair["without"][field] * 1000 for pair in pairs]
    with_ = [pair["with"][field] * 1000 for pair in pairs]
    return {
        "without": summarize(without),
        "with": summarize(with_),
        "extra": summarize([w - o for w, o in zip(with_, without, strict=True)]),
    }


def targets(summaries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Issue 5's latency targets, per pi line measured."""
    checks = []
    for line in summaries:
        name = f"pi {line['line']}"
        before = line["before_agent_start"]["p95"]
        checks.append(
            _check(
                f"{name}: before_agent_start, auto-context off, <= "
                f"{TARGET_BEFORE_AGENT_START_P95_MS:g} ms (p95, first prompt apart)",
                before,
                TARGET_BEFORE_AGENT_START_P95_MS,
            )
        )
        ready = line["bridge_ready"][BRIDGE_READY_STAT]
        checks.append(
            _check(
                f"{name}: memory ready <= {TARGET_BRIDGE_READY_MS:g} ms after it is opened "
                f"({BRIDGE_READY_STAT} of {line['bridge_ready']['n']} sessions)",
                ready,
                TARGET_BRIDGE_READY_MS,
            )
        )
        for key, label, limit in (
            ("print_run", "a one-prompt pi -p run", TARGET_PRINT_RUN_EXTRA_MS),
            ("exit", "pi's exit", TARGET_EXIT_EXTRA_MS),
        ):
            if line.get(key):
                extra = line[key]["extra"]
                checks.append(
                    _check(
                        f"{name}: the adapter adds <= {limit:g} ms to {label} (median of "
                        f"{extra['n']} pairs)",
                        extra["p50"],
                        limit,
                    )
                )
        if line["agent_settled"]:
            checks.append(
                _check(
                    f"{name}: agent_settled handler <= {TARGET_AGENT_SETTLED_P95_MS:g} ms (p95)",
                    line["agent_settled"]["p95"],
                    TARGET_AGENT_SETTLED_P95_MS,
                )
            )
    return checks


def _check(target: str, measured: float, limit: float) -> dict[str, Any]:
    met = measured <= limit
    return {"target": target, "chunks": None, "measured": measured, "unit": "ms", "met": met}


def stop_services(env: Mapping[str, str]) -> None:
    """Stop the memory services the runs started (every one of this environment's user), and
    wait for their processes to end: a service stops listening first, then finishes the last
    index run of a session that attached to it directly."""
    for running in service_client.every_service(dict(env)):
        found = service_client.probe(running.path)
        if found is not None:
            service_client.stop(found, running.path)
        wait_for(functools.partial(gone, running.hello.pid), 60, "the memory service to exit")


def run_pi(
    plan: PiPlan, workdir: Path, model: OfflineModel, log: Callable[[str], None]
) -> dict[str, Any]:
    """Every pi line that is installed; a missing one is recorded with the reason."""
    root = workdir / "pi"
    if root.exists():
        shutil.rmtree(root)
    log(f"pi: a project with {plan.store_entries} entries, indexed once")
    project = prepare_project(root, plan, model)
    runs, skipped, prompt = [], {}, {}
    stores = {"empty": pi_prompt.empty_project(root), "full": project.repo}
    try:
        for name, line in sorted(PI_LINES.items()):
            reason = line.missing()
            if reason is not None:
                log(f"pi {name}: not measured ({reason})")
                skipped[name] = reason
                continue
            # Before the latency runs, whose captures would add to the store's last day.
            prompt[name] = pi_prompt.measure_line(line, stores, root, project.env, project.now, log)
            runs.append(measure_line(line, project, plan, log))
    finally:
        stop_services(project.env)
    summaries = [summarize_line(run) for run in runs]
    return {
        "plan": asdict(plan),
        "runs": runs,
        "summary": summaries,
        "skipped": skipped,
        "prompt": prompt,
        "targets": targets(summaries) + pi_prompt.targets(prompt),
    }
