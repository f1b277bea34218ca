"""The reliability suite's fuzz targets on a small budget (``make reliability`` runs the real one).

Each target must pass, and must really try what it claims (forgets that remove entries, refusals,
a bridge that answers).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from reliability import (
    fuzz_bridge,
    fuzz_day_file,
    fuzz_index_state,
    fuzz_store_command,
    fuzz_transcript,
    safety_paths,
    safety_secrets,
)
from reliability.outcome import Outcome
from reliability.sandbox import make_sandbox

SEED = 20260813


def outcome() -> Outcome:
    return Outcome(scenario="test", load="", faults="")


@pytest.mark.parametrize(
    "target",
    [
        fuzz_transcript.run,
        fuzz_index_state.run,
        fuzz_store_command.run,
        safety_paths.run,
        safety_secrets.fuzz,
    ],
    ids=["transcript", "index-state", "store-command", "paths", "secrets"],
)
def test_a_fuzz_target_passes_on_a_small_budget(
    target: Callable[[Outcome, int, int], None],
) -> None:
    result = outcome()
    target(result, 60, SEED)
    assert result.problems == []
    assert result.inputs >= 50


def test_day_file_surgery_removes_entries_and_refuses_ambiguity() -> None:
    result = outcome()
    fuzz_day_file.run(result, 200, SEED)
    assert result.problems == []
    assert result.details["forgets"]["entry"] > 0
    assert result.details["forgets"]["refused"] > 0


def test_the_bridge_answers_every_fuzzed_line(tmp_path: Path) -> None:
    result = outcome()
    fuzz_bridge.run(result, 80, SEED, make_sandbox(tmp_path))
    assert result.problems == []
    assert result.details["targets"]["bridge-process"]["inputs"] >= 4
