"""Running one fuzz target: hypothesis with an explicit budget, counted and reported as a row.

A target is a property over generated input. It may raise ``AssertionError`` for a broken
expectation; any other exception escaping it is an unhandled exception in pimem. Either way
hypothesis shrinks the input, and the row records the smallest failing example.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.reporting import with_reporter

from reliability.outcome import Outcome


def run_property(
    outcome: Outcome,
    strategy: st.SearchStrategy[Any],
    check: Callable[[Any], None],
    *,
    examples: int,
    seed_value: int,
    label: str = "",
) -> int:
    """Try *check* on *examples* inputs drawn from *strategy*; record a failure in *outcome*.

    Returns how many inputs were tried (shrinking included: every call is an input).
    """
    tried = 0
    notes: list[object] = []

    def body(value: Any) -> None:
        nonlocal tried
        tried += 1
        check(value)

    test = seed(seed_value)(
        settings(
            max_examples=examples,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
            # No "explain" phase: it re-runs failing examples many times for little gain here.
            phases=(Phase.explicit, Phase.generate, Phase.target, Phase.shrink),
            print_blob=False,
        )(given(body_input=strategy)(lambda body_input: body(body_input)))
    )
    started = time.perf_counter()
    try:
        with with_reporter(notes.append):
            test()
    except Exception as error:  # noqa: BLE001 - the finding itself: recorded, never raised
        first: BaseException = error
        if isinstance(error, BaseExceptionGroup):  # flaky: replaying gave other failures
            first = error.exceptions[0]
        where = traceback.extract_tb(first.__traceback__)[-1]
        found = [str(note) for note in [*notes, *getattr(error, "__notes__", ())]]
        example = " ".join(next((note for note in found if "body_input=" in note), "").split())
        outcome.problems.append(
            f"{label or 'input'}: {type(first).__name__}: {str(first)[:300]} "
            f"(at {where.filename.rsplit('/', 1)[-1]}:{where.lineno}; {example[:500]})"
        )
    outcome.inputs += tried
    outcome.details.setdefault("targets", {})[label or "input"] = {
        "inputs": tried,
        "seconds": round(time.perf_counter() - started, 2),
    }
    return tried
