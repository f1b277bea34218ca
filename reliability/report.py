"""The report: ``reliability.md`` with the table, and ``reliability.json`` with everything."""

from __future__ import annotations

import json
import platform
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reliability.outcome import Outcome

HEADER = """# Reliability and security

Memory is only worth keeping if it survives what agent meshes do to it: several agents and
worktrees appending to one daily file, another agent's memsearch holding the database, processes
killed mid-write, damaged files, hostile or malformed input. `python -m reliability` (`make
reliability`) runs each of those as a scenario and measures what survived; this page is its
output, written by `reliability/report.py`, and [reliability.json](reliability.json) holds the
raw figures. CI runs the reduced form (`python -m reliability --quick`) after `make test`.
"""

CAVEATS = """## What the figures do not cover

- **File systems.** Appends rely on `O_APPEND` writes landing whole, which local file systems
  guarantee and network file systems may not. Everything here ran on a local disk.
- **A full disk is simulated** (the write is made to fail, or to stop half-way, in the child
  process), as is a second user (as root, the child drops the capabilities that override file
  permissions). A short write is cut back off the file unless another writer appended after
  it; then the torn entry stays, as it would for any appender.
- **File permissions** follow the umask: pimem creates daily files with mode `0666 & ~umask`,
  keeps a rewritten file's mode, and memsearch and Milvus Lite do the same. Under umask 077
  nothing pimem creates can be read by another user; under the common 022 other users can read
  memory but not change it. A store meant to be private needs umask 077, or a private directory.
- **Session anchors** (`session:`, `turn:`, `transcript:`) are identifiers the host makes up and
  are written as given; only the memory text is scrubbed. Secrets are matched by shape (the
  bundled patterns); a secret with no recognisable shape is not caught, and an assignment
  whose value runs straight into `(` or `[` (`PASSWORD=x(`) reads as code and is left alone.
- **Lock contention is waited out, not queued fairly.** A process keeps the database open for
  `PIMEM_DB_LINGER_MS` (1 s) after each call, so one that calls without pause keeps it: another
  process's call then fails with the lock message after its ~4 s of backoff. The concurrency row
  drives two such loops at once; `backend_calls` in reliability.json counts how many calls
  succeeded and how many ended with the lock message.
- **Another agent's bytes.** Entries written by other agents' plugins are indexed as they are;
  pimem scrubs what it writes and what it sends to a model (compaction included), not what
  others wrote.
"""


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _figure(value: int | None) -> str:
    return "n/a" if value is None else f"{value:,}"


def table(outcomes: Sequence[Outcome]) -> str:
    lines = [
        "| Scenario | Load | Faults injected | Inputs tried | Entries lost | Result |",
        "| --- | --- | --- | ---: | ---: | --- |",
    ]
    for outcome in outcomes:
        lines.append(
            "| "
            + " | ".join(
                [
                    _cell(outcome.scenario),
                    _cell(outcome.load),
                    _cell(outcome.faults),
                    _figure(outcome.inputs),
                    _figure(outcome.entries_lost),
                    _cell(outcome.result),
                ]
            )
            + " |"
        )
    return "\n".join(lines)


def _value(value: object) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return (
            "["
            + ", ".join(_value(v) for v in value[:8])
            + (", ..." if len(value) > 8 else "")
            + "]"
        )
    return str(value)


def details(outcomes: Sequence[Outcome]) -> str:
    """One line of figures behind each row that has any."""
    lines = ["## Figures behind the rows", ""]
    for outcome in outcomes:
        shown = {k: v for k, v in outcome.details.items() if k != "targets"}
        if shown:
            figures = "; ".join(f"{key}: {_cell(_value(value))}" for key, value in shown.items())
            lines.append(f"- **{outcome.scenario}** ({outcome.seconds:.0f} s): {figures}")
    return "\n".join(lines) + "\n"


def fuzzed_inputs(outcomes: Sequence[Outcome]) -> int:
    """Inputs hypothesis generated, over every row (the property-based rows and targets)."""
    return sum(
        target["inputs"]
        for outcome in outcomes
        for target in outcome.details.get("targets", {}).values()
    )


def summary(outcomes: Sequence[Outcome], meta: dict[str, Any]) -> str:
    failed = [o for o in outcomes if not o.passed and o.skipped is None]
    lost = sum(o.entries_lost or 0 for o in outcomes)
    return (
        f"**{len(outcomes) - len(failed)} of {len(outcomes)} scenarios passed**"
        f"{'' if not failed else ' (FAILED: ' + ', '.join(o.scenario for o in failed) + ')'}; "
        f"{lost} entries lost; {fuzzed_inputs(outcomes):,} fuzzed inputs "
        f"({'reduced run' if meta['quick'] else 'full run'}), "
        f"{sum(o.inputs for o in outcomes):,} inputs in all; {meta['duration_s'] / 60:.1f} min."
    )


def render(outcomes: Sequence[Outcome], meta: dict[str, Any], findings: str) -> str:
    return "\n".join(
        [
            HEADER,
            "## Results",
            "",
            summary(outcomes, meta),
            "",
            table(outcomes),
            "",
            f"Run `{meta['command']}` on {meta['started_at']}, seed {meta['seed']}, "
            f"{meta['machine']}. Per-scenario times and details are in reliability.json.",
            "",
            details(outcomes),
            findings,
            CAVEATS,
        ]
    )


def machine() -> str:
    import os

    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def write(out: Path, outcomes: Sequence[Outcome], meta: dict[str, Any], findings: str) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    raw = {
        "meta": meta,
        "fuzzed_inputs": fuzzed_inputs(outcomes),
        "scenarios": [o.to_json() for o in outcomes],
    }
    (out / "reliability.json").write_text(json.dumps(raw, indent=1) + "\n")
    report = out / "reliability.md"
    report.write_text(render(outcomes, meta, findings))
    return report


def load(raw: Path) -> tuple[list[Outcome], dict[str, Any]]:
    """The outcomes and meta data of a ``reliability.json``."""
    data = json.loads(raw.read_text())
    outcomes = [
        Outcome(
            scenario=row["scenario"],
            load=row["load"],
            faults=row["faults"],
            inputs=row["inputs"],
            entries_lost=row["entries_lost"],
            problems=row["problems"],
            seconds=row["seconds"],
            details=row["details"],
            skipped=row["skipped"],
        )
        for row in data["scenarios"]
    ]
    return outcomes, data["meta"]


def publish(out: Path, docs: Path) -> None:
    for name in ("reliability.md", "reliability.json"):
        shutil.copyfile(out / name, docs / name)
