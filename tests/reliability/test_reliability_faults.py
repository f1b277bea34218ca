"""The reliability suite's fault scenarios that need no embedding model, at their quick size."""

from __future__ import annotations

from reliability import faults_bridge, faults_distiller, faults_store, safety_shell


def test_store_faults_lose_nothing_and_a_hung_store_command_is_bounded() -> None:
    outcomes = faults_store.run(quick=True)
    assert [(o.scenario, o.result) for o in outcomes if not o.passed] == []
    assert [o.entries_lost for o in outcomes[:4]] == [0, 0, 0, 0]


def test_a_killed_bridge_leaves_whole_entries_and_its_exchange_is_captured_later() -> None:
    result = faults_bridge.run(quick=True)
    assert result.problems == []
    assert result.details["recaptured"] == result.details["interrupted_exchanges"]
    assert result.details["torn"] == 0


def test_a_distiller_down_or_slow_leaves_markers_and_never_stalls() -> None:
    outcomes = faults_distiller.run(quick=True)
    assert [(o.scenario, o.result) for o in outcomes if not o.passed] == []


def test_pimem_never_runs_a_shell() -> None:
    result = safety_shell.run(quick=True)
    assert result.problems == []
    assert result.details["subprocess_call_sites"] >= 2
