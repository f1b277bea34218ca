"""The workload's usage comparison: pimem's usage record beside what the scripted model knows,
on hand-made request records, record lines and a pi session file (no pi)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.workload_usage import (
    bench_counts,
    compare,
    exchange_turns,
    targets,
    truth,
    turn_key,
)
from pimem_plugins.usage.record import session_digest

from pi_sessions import HEADER, assistant, session_file, user

KAFKA = "- the team decided to use Kafka for the audit cache"
DIGEST = session_digest(str(HEADER["id"]))


def rec(session: int, exchange: int, tool: str | None = None, **more: Any) -> dict[str, Any]:
    return {"session": session, "exchange": exchange, "tool": tool, "failed": False, **more}


def used(turn: str, term: str, evidence: str = "name") -> dict[str, Any]:
    return {"kind": "used", "session": DIGEST, "turn": turn, "term": term, "evidence": evidence}


RECORDS = [
    rec(0, 0),  # a decision
    rec(0, 1, used=KAFKA),  # a question answered from the snapshot
    rec(0, 2),
    rec(0, 2, "memory_search"),
    rec(0, 2, "memory_expand", used=KAFKA),  # a recall answered from the expanded hit
    rec(0, 3, injected=True),  # small talk, with a context message
    rec(0, 4),
    rec(0, 4, "memory_search", failed=True),  # met the killed bridge, then called again
    rec(0, 4, "memory_search"),
    rec(0, 5),
    rec(0, 5, "memory_write"),
]
TURNS = {turn_key(DIGEST, f"t{n}"): (0, n) for n in range(6)}
COUNTS = {"recalls": 2, "expands": 1, "injections": 1, "captures": 3}


def test_the_truth_is_the_exchanges_whose_answer_restated_memory() -> None:
    assert truth(RECORDS) == {(0, 1): KAFKA, (0, 2): KAFKA}


def test_the_bench_counts_successful_calls_context_messages_and_captured_entries() -> None:
    # Four entries written, one of them by memory_write: three captures.
    assert bench_counts(RECORDS, entries_written=4) == COUNTS


def test_a_record_that_agrees_has_precision_and_recall_1_and_equal_counts() -> None:
    lines = [used("t1", "Kafka"), used("t2", "2026-09-01 10:00", "citation"), used("t2", "Kafka")]
    result = compare(RECORDS, lines, TURNS, COUNTS, entries_written=4)
    assert (result["precision"], result["recall"]) == (1.0, 1.0)
    assert (result["used_bench"], result["used_pimem"], result["used_attributed"]) == (2, 2, 2)
    assert result["counts"]["captures"] == {"pimem": 3, "bench": 3}
    assert all(check["met"] for check in targets("workload, pi 1.6", result))


def test_misses_extras_and_unplaced_lines_count_against_recall_and_precision() -> None:
    lines = [
        used("t1", "Kafka"),
        used("t3", "Redis"),  # small talk: no use
        used("t9", "Kafka"),  # a turn of no exchange of the script
    ]
    counts = {**COUNTS, "captures": 2}
    result = compare(RECORDS, lines, TURNS, counts, entries_written=4)
    assert result["recall"] == 0.5  # (0, 2) missed
    assert result["precision"] == pytest.approx(1 / 3)  # (0, 1) of (0, 1), (0, 3), unplaced
    assert (result["missed"], result["extra"], result["used_lines_unplaced"]) == (
        [[0, 2]],
        [[0, 3]],
        1,
    )
    by_target = {check["target"]: check for check in targets("w", result)}
    assert not by_target['w: precision of "used" per exchange at least 0.9']["met"]
    assert not by_target['w: recall of "used" per exchange at least 0.9']["met"]
    assert not by_target["w: usage record's captures equal the bench's"]["met"]
    assert by_target["w: usage record's captures equal the bench's"]["measured"] == (
        "2 recorded, 3 by the bench"
    )
    assert by_target["w: usage record's recalls equal the bench's"]["met"]


def test_a_use_for_the_wrong_entry_is_not_attributed() -> None:
    result = compare(RECORDS, [used("t1", "Redis")], TURNS, COUNTS, entries_written=4)
    assert (result["used_both"], result["used_attributed"]) == (1, 0)


def test_nothing_used_and_nothing_said_is_no_figure_and_misses_the_targets() -> None:
    result = compare([rec(0, 0)], [], TURNS, COUNTS, entries_written=0)
    assert (result["precision"], result["recall"]) == (None, None)
    checks = targets("w", result)
    assert not checks[0]["met"]
    assert checks[0]["measured"].startswith("- (0 of 0")


def test_each_transcript_entry_belongs_to_the_exchange_of_the_user_message_before_it(
    tmp_path: Path,
) -> None:
    path = session_file(
        tmp_path / "s.jsonl",
        [
            user("u1", None, 1, "We decided to use Kafka for the audit cache."),
            assistant("a1", "u1", 2, "Noted."),
            user("u2", "a1", 3, "Which   option for the audit cache?"),
            assistant("a2", "u2", 4, "Kafka."),
        ],
    )
    prompts = [
        ["We decided to use Kafka for the audit cache.", "Which option for the audit cache?"]
    ]
    turns = exchange_turns([path], prompts)
    assert turns == {
        turn_key(DIGEST, "u1"): (0, 0),
        turn_key(DIGEST, "a1"): (0, 0),
        turn_key(DIGEST, "u2"): (0, 1),
        turn_key(DIGEST, "a2"): (0, 1),
    }
    with pytest.raises(ValueError, match="is not the script's"):
        exchange_turns([path], [["something else", "and more"]])


def test_the_report_shows_each_figure_and_marks_a_count_that_differs() -> None:
    from bench.workload_report import _usage_section

    lines = [used("t1", "Kafka"), used("t2", "Kafka")]
    result = compare(RECORDS, lines, TURNS, {**COUNTS, "expands": 0}, entries_written=4)
    table = _usage_section([{"pi": "1.6.0", "label": "after", "usage": result}])
    assert '| Precision of "used" | 1.00 |' in table
    assert "| Captures: pimem / the bench | 3 / 3 |" in table
    assert "| Expands: pimem / the bench | 0 / 1 **differ** |" in table
    assert _usage_section([{"pi": "0.73.0", "label": "before", "usage": None}]) == (
        "No run kept a usage record."
    )


def test_the_usage_command_target_needs_both_the_time_and_the_chart() -> None:
    base = {
        "used_both": 1,
        "used_pimem": 1,
        "used_bench": 1,
        "precision": 1.0,
        "recall": 1.0,
        "counts": {
            count: {"pimem": 1, "bench": 1}
            for count in ("recalls", "expands", "injections", "captures")
        },
    }
    quick = targets("w", base | {"usage_seconds": 0.4, "usage_chart": True})
    slow = targets("w", base | {"usage_seconds": 1.2, "usage_chart": True})
    bare = targets("w", base | {"usage_seconds": 0.4, "usage_chart": False})
    picked = [
        next(check for check in checks if "pimem usage" in check["target"])
        for checks in (quick, slow, bare)
    ]
    assert [check["met"] for check in picked] == [True, False, False]
    assert picked[0]["measured"] == "0.40 s"
    assert picked[2]["measured"] == "0.40 s, no chart"
    assert not any("pimem usage" in check["target"] for check in targets("w", base))
