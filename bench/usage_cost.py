"""What the usage record costs the agent, in the real pi: ``before_agent_start`` and a
``memory_search`` call with the record on (the default) and off
(``PIMEM_DISABLE_PLUGINS=usage``), in the same run, and its bytes on disk per exchange.

One pi line (1.6 when installed, else 0.73) runs two RPC sessions at once, each in its own copy
of one project (the same corpus, indexed once per copy) with its own memsearch home, and so its
own memory service: the record's switch is part of the service's settings. Every prompt makes
the scripted model call ``memory_search`` once and then answer with the first hit's words, so
each exchange gives the record a snapshot's worth of shown entries, a search and a use to judge.

Prompts alternate between the two sessions in ABBA order (on, off, off, on, ...), each
``UsagePlan.think_s`` after the answer before it, so a slow moment of the machine, a capture or
an index run weighs on both alike. The adapter's timing switch (``PIMEM_PI_TIMINGS``) times
``before_agent_start`` (the snapshot's round trip to the bridge, auto-context off) and each
``memory_search`` call as pi awaits it (the request to the bridge and its answer). Each
session's first prompt, which may wait for its bridge to start, is left out.

The difference is the on-variant's median minus the off-variant's, with a percentile
bootstrap 95% interval (each variant resampled on its own); the record adds no measurable time
when the interval contains 0 or the difference is under ``NEGLIGIBLE_MS``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench.corpus import generate_corpus
from bench.latency import CpuClock, summarize
from bench.pi_host import (
    PI_LINES,
    ChatRequest,
    ModelServer,
    PiLine,
    PiWorld,
    Rule,
    Text,
    ToolCall,
    after_tool,
    isolated_environment,
    on_distill,
    pimem_command,
    write_memsearch_config,
)
from bench.pi_latency import (
    INDEX_DEBOUNCE_S,
    prompts,
    read_timings,
    stop_services,
    wait_until_services_idle,
)
from pimem_plugins.memsearch.offline_model import OfflineModel

FORMAT = 1
VARIANTS = ("on", "off")
#: What each variant adds to the environment pi (and so its bridge and service) runs with.
SWITCH = {"on": {}, "off": {"PIMEM_DISABLE_PLUGINS": "usage"}}
#: The steps compared, as the adapter names them in its timing lines.
STEPS = ("before_agent_start", "memory_search")
#: Below this the record's cost is taken as none, whatever the interval says.
NEGLIGIBLE_MS = 0.5
#: The issue's bound on the record's growth per exchange.
TARGET_BYTES_PER_EXCHANGE = 1024
LEVEL = 0.95
RESAMPLES = 10_000
#: The pi lines in the order they are tried: one is measured.
PREFERRED_LINES = ("1.6", "0.73")


@dataclass(frozen=True)
class UsagePlan:
    """How much to measure: ``pairs`` prompts per variant after each session's first."""

    pairs: int = 80
    think_s: float = 0.3
    store_entries: int = 300
    seed: int = 0


USAGE_FULL = UsagePlan()
USAGE_QUICK = UsagePlan(pairs=16, store_entries=100)


# -- the statistics ----------------------------------------------------------------------------


def median_difference(
    on: Sequence[float],
    off: Sequence[float],
    *,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
    seed: int = 0,
) -> dict[str, float]:
    """The median of *on* minus the median of *off*, with a percentile bootstrap interval at
    *level*: each sample resampled with replacement on its own, *resamples* times."""
    if not on or not off:
        raise ValueError("both samples need at least one value")
    rng = random.Random(seed)
    differences = sorted(
        statistics.median(rng.choices(on, k=len(on)))
        - statistics.median(rng.choices(off, k=len(off)))
        for _ in range(resamples)
    )
    tail = (1 - level) / 2
    return {
        "difference": statistics.median(on) - statistics.median(off),
        "low": _quantile(differences, tail),
        "high": _quantile(differences, 1 - tail),
        "level": level,
        "resamples": resamples,
    }


def _quantile(ordered: Sequence[float], q: float) -> float:
    """The *q* quantile of *ordered*, interpolated between the closest ranks."""
    rank = q * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def unmeasurable(compared: Mapping[str, float], negligible: float = NEGLIGIBLE_MS) -> bool:
    """Whether *compared* (:func:`median_difference`) shows no measurable cost: its interval
    contains 0, or the difference is under *negligible* milliseconds."""
    return compared["low"] <= 0 <= compared["high"] or compared["difference"] < negligible


def abba(pairs: int) -> list[tuple[str, str]]:
    """The order of each pair of prompts: on first, then off first, then off first, ..."""
    first, second = VARIANTS
    return [(first, second) if i % 4 in (0, 3) else (second, first) for i in range(pairs)]


def record_bytes(lines: Sequence[str]) -> dict[str, int]:
    """Bytes on disk of a record's JSON *lines* (each with its newline), by ``kind``."""
    sizes: dict[str, int] = {}
    for line in lines:
        if line.strip():
            kind = str(json.loads(line).get("kind"))
            sizes[kind] = sizes.get(kind, 0) + len(line.encode()) + 1
    return sizes


# -- the run -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Copy:
    """One variant's project, memsearch home and environment."""

    variant: str
    repo: Path
    home: Path
    env: dict[str, str]


def _line() -> PiLine | None:
    for name in PREFERRED_LINES:
        if PI_LINES[name].missing() is None:
            return PI_LINES[name]
    return None


def _copies(root: Path, plan: UsagePlan, model: OfflineModel) -> tuple[dict[str, Copy], str]:
    """Each variant's copy of the corpus, indexed through its own memory service (which stays
    warm for the sessions); and ``PIMEM_NOW``, the store's last evening."""
    corpus = generate_corpus(plan.store_entries, seed=plan.seed)
    copies = {}
    for variant in VARIANTS:
        base = root / variant
        repo = base / "project"
        (repo / ".git").mkdir(parents=True)
        corpus.write(repo / ".memsearch" / "memory")
        home = base / "home"
        write_memsearch_config(
            home, provider=model.provider, model=model.model, milvus_uri=base / "milvus.db"
        )
        extra = {**model.environment(), "PIMEM_SERVICE": "on", **SWITCH[variant]}
        env = isolated_environment(home, extra)
        # An installed pimem runs from compiled bytecode, as the pi part explains.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        subprocess.run(
            [pimem_command(), "index", "--cwd", str(repo)],
            env=env,
            check=True,
            capture_output=True,
            timeout=600,
        )
        copies[variant] = Copy(variant=variant, repo=repo, home=home, env=env)
    evening = datetime.combine(corpus.days[-1], datetime.min.time()) + timedelta(hours=23)
    return copies, evening.isoformat(timespec="minutes")


def _first_hit(request: ChatRequest) -> Text:
    """The answer after the search: the first hit's words, so the record has a use to judge."""
    result = request.last_tool_result
    lines = [] if result is None else result.content.splitlines()
    said = next((line[2:] for line in lines if line.startswith("- ")), "nothing found")
    return Text(f"From memory: {said[:300]}")


def _rules() -> list[Rule]:
    ask = Rule(
        "search first",
        lambda r: not r.is_distillation and r.last.get("role") == "user",
        lambda r: ToolCall("memory_search", {"query": r.prompt.split("] ", 1)[-1]}),
    )
    return [ask, after_tool("memory_search", _first_hit), on_distill()]


def _record_files(home: Path) -> list[Path]:
    return sorted(home.glob(".local/state/pimem/usage/*/*.jsonl"))


def run_usage(
    plan: UsagePlan, workdir: Path, model: OfflineModel, log: Callable[[str], None]
) -> dict[str, Any] | None:
    """Both variants on one pi line, prompt by prompt; ``None`` when no pi line is installed."""
    line = _line()
    if line is None:
        log("usage: skipped (no pi line installed: run `make node`)")
        return None
    root = workdir / "usage"
    if root.exists():
        shutil.rmtree(root)
    log(f"usage: two copies of a project with {plan.store_entries} entries, indexed once each")
    copies, now = _copies(root, plan, model)
    texts = prompts(plan.pairs + 1)
    timings = {variant: root / f"timings-{variant}.jsonl" for variant in VARIANTS}
    # A prompt is two agent requests and a distillation, per variant; maintenance may ask the
    # model too. The bound only stops a runaway tool loop.
    limit = 2 * 6 * (plan.pairs + 1) + 50
    load_before = os.getloadavg()
    try:
        with ModelServer(_rules(), max_requests=limit) as server:
            worlds = {
                variant: PiWorld.create(
                    line,
                    repo=copy.repo,
                    agent_dir=copy.home.parent / "agent",
                    server=server,
                    base_env=copy.env,
                    extra_env={"PIMEM_NOW": now, "PIMEM_PI_TIMINGS": str(timings[variant])},
                )
                for variant, copy in copies.items()
            }
            sessions = {variant: world.rpc() for variant, world in worlds.items()}
            try:
                log(f"usage: pi {line.name}, the first prompt of each session, then idle")
                for pi in sessions.values():
                    pi.prompt(texts[0], timeout=120)
                # The captures' index runs wait out their debounce; the bridges only relay.
                time.sleep(INDEX_DEBOUNCE_S + 1)
                for copy in copies.values():
                    wait_until_services_idle(copy.env)
                log(f"usage: {plan.pairs} prompts per variant, alternating (ABBA)")
                clock = CpuClock.now()
                started = time.perf_counter()
                for text, order in zip(texts[1:], abba(plan.pairs), strict=True):
                    for variant in order:
                        sessions[variant].prompt(text, timeout=120)
                        time.sleep(plan.think_s)
                seconds = time.perf_counter() - started
                contention = CpuClock.now().others_since(clock)
                load_after = os.getloadavg()
            finally:
                codes = {variant: pi.close(timeout=60) for variant, pi in sessions.items()}
            failures = list(server.failures)
            requests = {
                "agent": len(server.agent_requests()),
                "distillation": len(server.distillations()),
            }
        for copy in copies.values():
            wait_until_services_idle(copy.env)
    finally:
        for copy in copies.values():
            stop_services(copy.env)
    if failures or any(codes.values()):
        raise RuntimeError(f"usage: pi exited with {codes}; the model server saw {failures}")
    if not _record_files(copies["on"].home):
        raise RuntimeError(f"usage: no usage record under {copies['on'].home}")
    samples = {variant: read_timings(path) for variant, path in timings.items()}
    record = {
        variant: [
            line for path in _record_files(copy.home) for line in path.read_text().splitlines()
        ]
        for variant, copy in copies.items()
    }
    return {
        "plan": asdict(plan),
        "line": line.name,
        "seconds": seconds,
        "contention": contention,
        "load": {"before": list(load_before), "after": list(load_after)},
        "samples": {
            variant: {step: steps.get(step, [])[1:] for step in STEPS}
            for variant, steps in samples.items()
        },
        "exchanges": plan.pairs + 1,
        "model_requests": requests,
        "record_bytes": {variant: record_bytes(lines) for variant, lines in record.items()},
    }


def summarize_usage(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Per step: each variant's summary and the difference; the record's bytes per exchange."""
    steps = {}
    for step in STEPS:
        on, off = (raw["samples"][variant][step] for variant in VARIANTS)
        compared = median_difference(on, off)
        steps[step] = {
            "on": summarize(on),
            "off": summarize(off),
            **compared,
            "unmeasurable": unmeasurable(compared),
        }
    sizes = raw["record_bytes"]["on"]
    total = sum(sizes.values())
    return {
        "steps": steps,
        "bytes": total,
        "bytes_per_exchange": total / raw["exchanges"],
        "bytes_off": sum(raw["record_bytes"]["off"].values()),
    }


def targets(raw: Mapping[str, Any], summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    checks = []
    labels = {"before_agent_start": "before_agent_start", "memory_search": "a memory_search call"}
    for step, label in labels.items():
        compared = summary["steps"][step]
        checks.append(
            {
                "target": f"the usage record adds no measurable time to {label} (pi "
                f"{raw['line']}; the median difference's {LEVEL:.0%} interval contains 0, or "
                f"it is under {NEGLIGIBLE_MS:g} ms)",
                "chunks": None,
                "measured": f"{_signed(compared['difference'])} ms ({_signed(compared['low'])} "
                f"to {_signed(compared['high'])})",
                "unit": "ms",
                "met": compared["unmeasurable"],
            }
        )
    per_exchange = summary["bytes_per_exchange"]
    checks.append(
        {
            "target": f"the usage record takes <= {TARGET_BYTES_PER_EXCHANGE // 1024} KB per "
            "exchange on disk",
            "chunks": None,
            "measured": f"{per_exchange:,.0f} bytes",
            "unit": "bytes",
            "met": per_exchange <= TARGET_BYTES_PER_EXCHANGE,
        }
    )
    return checks


def _signed(ms: float) -> str:
    return f"{ms:+.2f}"
