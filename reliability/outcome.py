"""What one scenario reports: one row of the table, plus the detail behind it."""

from __future__ import annotations

from typing import Any

import attrs


@attrs.define(kw_only=True)
class Outcome:
    """One row of the reliability table.

    ``problems`` lists every violated expectation in words; the row passes when it is empty.
    """

    scenario: str
    load: str
    faults: str
    inputs: int = 0
    #: Entries that should be in a file and are not; ``None`` where no entries are at stake.
    entries_lost: int | None = None
    problems: list[str] = attrs.Factory(list)
    seconds: float = 0.0
    details: dict[str, Any] = attrs.Factory(dict)
    #: Set when the scenario could not run here (the reason); it then neither passes nor fails.
    skipped: str | None = None

    @property
    def passed(self) -> bool:
        return self.skipped is None and not self.problems and not self.entries_lost

    @property
    def result(self) -> str:
        if self.skipped is not None:
            return f"skipped ({self.skipped})"
        if self.passed:
            return "pass"
        return "FAIL: " + "; ".join(self.problems[:3]) + (" ..." if len(self.problems) > 3 else "")

    def expect(self, condition: bool, problem: str) -> bool:
        """Record *problem* unless *condition* holds; returns *condition*."""
        if not condition:
            self.problems.append(problem)
        return condition

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "load": self.load,
            "faults": self.faults,
            "inputs": self.inputs,
            "entries_lost": self.entries_lost,
            "passed": self.passed,
            "result": self.result,
            "problems": self.problems,
            "seconds": round(self.seconds, 2),
            "skipped": self.skipped,
            "details": self.details,
        }
