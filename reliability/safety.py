"""Scenario 4: paths, inputs, shells, permissions and secrets, one row each."""

from __future__ import annotations

import time

from reliability import safety_paths, safety_permissions, safety_secrets, safety_shell
from reliability.outcome import Outcome


def _paths(quick: bool, seed_value: int) -> Outcome:
    budget = 400 if quick else 8_000
    outcome = Outcome(
        scenario="Safety: writes stay in the store; addresses checked",
        load=f"hypothesis, {budget:,} examples",
        faults="chunk sources with .., absolute paths and links out; an append and a "
        "compaction block through a daily file linked out; junk dates, times, chunk hashes "
        "(quotes, filter syntax, non-ASCII digits) and project labels",
    )
    started = time.perf_counter()
    safety_paths.run(outcome, budget, seed_value)
    outcome.seconds = time.perf_counter() - started
    return outcome


def run(quick: bool, seed_value: int) -> list[Outcome]:
    return [
        _paths(quick, seed_value),
        safety_shell.run(quick),
        *safety_permissions.run(quick),
        safety_secrets.run(quick, seed_value),
    ]
