"""Scenario 2: every injected fault, one row each."""

from __future__ import annotations

from reliability import faults_bridge, faults_distiller, faults_index, faults_service, faults_store
from reliability.outcome import Outcome


def run(quick: bool, seed_value: int) -> list[Outcome]:
    return [
        faults_bridge.run(quick, seed_value),
        faults_bridge.run(quick, seed_value, relayed=True),
        *faults_store.run(quick),
        *faults_index.run(quick),
        *faults_distiller.run(quick),
        *faults_service.run(quick, seed_value),
    ]
