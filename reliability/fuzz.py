"""Scenario 3: every fuzz target, one row each, with explicit budgets.

The full run tries at least 100,000 inputs across these targets and the fuzzed parts of the
safety scenario; ``--quick`` a few thousand.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import attrs

from reliability import (
    fuzz_bridge,
    fuzz_day_file,
    fuzz_index_state,
    fuzz_store_command,
    fuzz_transcript,
)
from reliability.outcome import Outcome
from reliability.sandbox import make_sandbox


@attrs.frozen
class Target:
    scenario: str
    faults: str
    full: int
    quick: int
    run: Callable[[Outcome, int, int], None]
    #: Whether the target is about entries in a file (its row counts entries lost).
    entries: bool = False


def _bridge(outcome: Outcome, examples: int, seed_value: int) -> None:
    with tempfile.TemporaryDirectory(prefix="pimem-rel-fuzz-bridge-") as scratch:
        fuzz_bridge.run(outcome, examples, seed_value, make_sandbox(Path(scratch)))


TARGETS = (
    Target(
        scenario="Fuzz: pi transcript reader",
        faults="junk and cut-off JSONL, wrong types, JSON nested 50,000 deep, 3,000-entry "
        "chains, parentId cycles, odd timestamps",
        full=25_000,
        quick=600,
        run=fuzz_transcript.run,
    ),
    Target(
        scenario="Fuzz: index-state parser",
        faults="drifted schema, wrong-typed fields, junk, truncated and deeply nested JSON",
        full=20_000,
        quick=600,
        run=fuzz_index_state.run,
    ),
    Target(
        scenario="Fuzz: day-file surgery (forget)",
        faults="random daily files (entries, session headings, compact blocks, titles, junk, "
        "CRLF), forgets by day and by chunk window",
        full=20_000,
        quick=600,
        run=fuzz_day_file.run,
        entries=True,
    ),
    Target(
        scenario="Fuzz: store-command output",
        faults="arbitrary bytes, exit statuses, signals, timeouts, spawn failures (a tenth "
        "through a real executable)",
        full=10_000,
        quick=400,
        run=fuzz_store_command.run,
    ),
    Target(
        scenario="Fuzz: bridge JSON-lines protocol",
        faults="malformed, oversized, wrong-typed and unknown requests; odd host answers to "
        "`complete` (a twentieth against a real `pimem serve`)",
        full=20_000,
        quick=600,
        run=_bridge,
    ),
)


def run(quick: bool, seed_value: int) -> list[Outcome]:
    outcomes = []
    for target in TARGETS:
        budget = target.quick if quick else target.full
        outcome = Outcome(
            scenario=target.scenario,
            load=f"hypothesis, {budget:,} examples",
            faults=target.faults,
        )
        started = time.perf_counter()
        target.run(outcome, budget, seed_value)
        outcome.seconds = time.perf_counter() - started
        if target.entries and not outcome.problems:
            outcome.entries_lost = 0
        outcomes.append(outcome)
    return outcomes
