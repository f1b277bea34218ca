"""Whether pimem's usage record says what the workload's scripted model did with memory.

The scripted model knows, for every exchange, whether its answer restated what memory gave it
(a snapshot line, an expanded entry: the ``used`` field of the exchange's request records,
:func:`bench.workload.from_memory`), and the requests the model server saw say how many
searches and expands succeeded and how many per-prompt context messages came. The run's day
files say how many entries capture wrote. pimem's record says the same things its own way:
``used`` lines, each naming its exchange by the transcript's turn id, and the counts of
``pimem usage --json``.

The unit of "used" is the exchange: an exchange counts as used by pimem when a ``used`` line
names one of its turns. Per exchange and entry is no unit here: the workload's clock is fixed
(``PIMEM_NOW``), so every entry has the same address (day and ``HH:MM``), and the record names
entries by address. A ``used`` line whose turn is no exchange's counts against precision.

:func:`compare` is pure: the run gathers its inputs (:func:`exchange_turns`,
:func:`read_record`, :func:`pimem_usage`).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pimem_plugins.pi_transcript import read_pi_branch
from pimem_plugins.usage.record import read_records, session_digest

#: The issue's floor for the precision and the recall of "used".
FLOOR = 0.9
#: The counts compared, each as the record names it and as the bench knows it.
COUNTS = ("recalls", "expands", "injections", "captures")
#: The tool whose successful calls each count is (the others come from elsewhere).
COUNTED_TOOLS = {"recalls": "memory_search", "expands": "memory_expand"}

Exchange = tuple[int, int]


def turn_key(session: str, turn: str) -> str:
    """How a turn is named across sessions: the record's session digest and the turn id."""
    return f"{session}/{turn}"


def exchange_turns(
    sessions: Sequence[Path], prompts: Sequence[Sequence[str]]
) -> dict[str, Exchange]:
    """Every transcript entry of each session's file (*sessions*, in the script's order) named
    by :func:`turn_key`, with the exchange it belongs to: the entries from a user message up to
    the next one are the exchange of that prompt (*prompts*, per session, in order)."""
    turns: dict[str, Exchange] = {}
    for number, path in enumerate(sessions):
        header = json.loads(path.read_text(encoding="utf-8").split("\n", 1)[0])
        digest = session_digest(str(header["id"]))
        index = -1
        for entry in read_pi_branch(path) or ():
            if entry.kind == "message" and entry.role == "user":
                index += 1
                expected = prompts[number][index] if index < len(prompts[number]) else None
                if " ".join(entry.text.split()) != " ".join((expected or "").split()):
                    raise ValueError(f"{path.name}: user message {index} is not the script's")
            if index >= 0:
                turns[turn_key(digest, entry.id)] = (number, index)
    return turns


def read_record(home: Path) -> list[dict[str, Any]]:
    """Every line of the usage record under *home*'s pimem state directory, file by file."""
    files = sorted(home.glob(".local/state/pimem/usage/*/*.jsonl"))
    return [line for path in files for line in read_records(path)]


def _usage_command(env: Mapping[str, str], cwd: Path, *args: str) -> tuple[float, str]:
    """``pimem usage *args`` of this checkout in the run's project and environment, a fresh
    process as a user runs it: its wall time and its stdout."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pimem_core", "usage", *args],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        command = " ".join(("pimem usage", *args))
        raise RuntimeError(f"{command} failed ({done.returncode}): {done.stderr[-500:]}")
    return seconds, done.stdout


def pimem_usage(env: Mapping[str, str], cwd: Path) -> dict[str, Any]:
    """``pimem usage --json`` in the run's project."""
    report: dict[str, Any] = json.loads(_usage_command(env, cwd, "--json")[1])
    return report


#: What ``pimem usage`` may take, start to end, to print its summary and chart.
USAGE_SECONDS = 1.0
_CHART_HEADING = re.compile(r"^\s*day\s+recalls\s+used\s*$", re.M)


def timed_usage_text(env: Mapping[str, str], cwd: Path) -> tuple[float, bool]:
    """How long ``pimem usage`` (its text: the summary, then the chart) takes, and whether its
    text holds the chart."""
    seconds, text = _usage_command(env, cwd)
    return seconds, _CHART_HEADING.search(text) is not None


def bench_counts(records: Sequence[Mapping[str, Any]], entries_written: int) -> dict[str, int]:
    """What the bench knows of each count: successful searches and expands (the tool results
    the model received), exchanges whose first request carried a context message, and the
    entries written less those ``memory_write`` wrote (an entry is capture's or a write's)."""

    def calls(tool: str) -> int:
        return sum(1 for r in records if r["tool"] == tool and not r["failed"])

    first: dict[Exchange, Mapping[str, Any]] = {}
    for item in records:
        first.setdefault((int(item["session"]), int(item["exchange"])), item)
    return {
        **{name: calls(tool) for name, tool in COUNTED_TOOLS.items()},
        "injections": sum(1 for r in first.values() if r.get("injected")),
        "captures": entries_written - calls("memory_write"),
    }


def truth(records: Iterable[Mapping[str, Any]]) -> dict[Exchange, str]:
    """The exchanges whose answer restated memory, with the memory text it restated."""
    return {
        (int(r["session"]), int(r["exchange"])): str(r["used"]) for r in records if r.get("used")
    }


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def compare(
    records: Sequence[Mapping[str, Any]],
    used_lines: Sequence[Mapping[str, Any]],
    turns: Mapping[str, Exchange],
    pimem_counts: Mapping[str, int],
    entries_written: int,
) -> dict[str, Any]:
    """pimem's record beside the bench's knowledge: precision and recall of "used" per
    exchange, and each count both ways."""
    known = truth(records)
    said: dict[Exchange, list[Mapping[str, Any]]] = {}
    unplaced = 0
    for line in used_lines:
        where = turns.get(turn_key(str(line.get("session")), str(line.get("turn"))))
        if where is None:
            unplaced += 1
        else:
            said.setdefault(where, []).append(line)
    both = sorted(set(known) & set(said))
    # An exchange pimem judged used for the right reason: a line's term is in the memory text
    # the model restated, or it is a citation (the model cited the entry it restated).
    attributed = sum(
        1
        for where in both
        if any(
            line.get("evidence") == "citation"
            or str(line.get("term", "")).casefold() in known[where].casefold()
            for line in said[where]
        )
    )
    precision = _share(len(both), len(said) + unplaced)
    recall = _share(len(both), len(known))
    bench = bench_counts(records, entries_written)
    counts = {
        name: {"pimem": int(pimem_counts.get(name, 0)), "bench": bench[name]} for name in COUNTS
    }
    return {
        "unit": "exchange",
        "used_bench": len(known),
        "used_pimem": len(said) + unplaced,
        "used_both": len(both),
        "used_attributed": attributed,
        "used_lines": len(used_lines),
        "used_lines_unplaced": unplaced,
        "precision": precision,
        "recall": recall,
        "missed": [list(where) for where in sorted(set(known) - set(said))],
        "extra": [list(where) for where in sorted(set(said) - set(known))],
        "counts": counts,
    }


def targets(name: str, usage: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The issue's checks on one run's comparison (:func:`compare`)."""

    def check(target: str, met: bool, measured: str) -> dict[str, Any]:
        return {"target": f"{name}: {target}", "chunks": None, "measured": measured, "met": met}

    def figure(share: float | None, part: int, whole: int, of: str) -> str:
        value = "-" if share is None else f"{share:.2f}"
        return f"{value} ({part} of {whole} {of})"

    both = usage["used_both"]
    checks = [
        check(
            f'precision of "used" per exchange at least {FLOOR}',
            usage["precision"] is not None and usage["precision"] >= FLOOR,
            figure(usage["precision"], both, usage["used_pimem"], "exchanges pimem says used"),
        ),
        check(
            f'recall of "used" per exchange at least {FLOOR}',
            usage["recall"] is not None and usage["recall"] >= FLOOR,
            figure(usage["recall"], both, usage["used_bench"], "exchanges that used memory"),
        ),
    ]
    if "usage_seconds" in usage:
        seconds = usage["usage_seconds"]
        checks.append(
            check(
                f"`pimem usage` prints its summary and chart in under {USAGE_SECONDS:.0f} s",
                seconds < USAGE_SECONDS and usage["usage_chart"],
                f"{seconds:.2f} s" + ("" if usage["usage_chart"] else ", no chart"),
            )
        )
    for count in COUNTS:
        pair = usage["counts"][count]
        checks.append(
            check(
                f"usage record's {count} equal the bench's",
                pair["pimem"] == pair["bench"],
                f"{pair['pimem']} recorded, {pair['bench']} by the bench",
            )
        )
    return checks
