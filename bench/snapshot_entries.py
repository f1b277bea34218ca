"""How many entries the stable snapshot holds at the seed's budgets, in each layout (ADR 0022).

The store is the workload benchmark's (``bench/workload.py``): the daily memory file each of its
runs left, kept in its JSON (``docs/benchmarks/workload/workload.json``). The run kept its
anchors with ``<run>`` for the run's directory; that is put back (``/tmp/pimem-bench-<8>/workload
/<variant>-<line>``, named by the session directory in the same anchor), so the anchors are as
long as the run wrote them. ``--as-stored`` leaves ``<run>``.

The file is shown as today's (built at the workload's clock, budget 3000) and as yesterday's
(built the next day, budget 2000), in the seed's layout (``tail``) and in the default one
(``entries``). Counted per section: the entries shown with their heading, a bullet shown without
its heading (the seed's layout starts mid-entry), the decisions among them, and how much of the
section is session anchors.

    .venv/bin/python -m bench.snapshot_entries [--workload FILE] [--json] [--as-stored]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Any

from pimem_core import Pimem
from pimem_core.day_file import ANCHOR, ENTRY_HEADING
from pimem_plugins.snapshot import LAYOUT, LAYOUTS, TODAY_BUDGET, YESTERDAY_BUDGET

WORKLOAD = (
    Path(__file__).resolve().parents[1] / "docs" / "benchmarks" / "workload" / "workload.json"
)
#: The workload's scratch directory, as its sessions' directory names spell it.
_SCRATCH = re.compile(r"--tmp-pimem-bench-([A-Za-z0-9_]{8})-workload-")
_DECISION = re.compile(r"^- the team decided to use ", re.MULTILINE)
_BULLET = re.compile(r"^\s{0,3}[-*+]\s", re.MULTILINE)


@dataclass(frozen=True)
class Count:
    """What one section of one snapshot holds."""

    run: str
    layout: str
    section: str
    budget: int
    #: The day file's entries.
    in_file: int
    #: Entries shown with their ``### HH:MM`` heading.
    entries: int
    #: Bullets shown above the first heading: the end of an entry cut off from it.
    headless_bullets: int
    #: Decisions ("the team decided to use ...") among the entries shown whole.
    decisions: int
    #: Characters of the section (marker included) and of session anchors in it.
    chars: int
    anchor_chars: int


def as_written(text: str, variant: str, line: str) -> str:
    """*text* with the ``<run>`` placeholder back as the run's directory."""
    found = _SCRATCH.search(text)
    if found is None:
        return text
    return text.replace("<run>", f"/tmp/pimem-bench-{found.group(1)}/workload/{variant}-{line}")


def section_of(snapshot: str, label: str) -> str:
    """The text under ``### <label> (...)`` (up to the next section)."""
    found = re.search(rf"^### {label} \(\d{{4}}-\d{{2}}-\d{{2}}\)\n\n", snapshot, re.MULTILINE)
    if found is None:
        return ""
    rest = snapshot[found.end() :]
    following = re.search(r"\n\n### (?:Today|Yesterday) \(\d{4}-\d{2}-\d{2}\)\n", rest)
    return rest[: following.start()] if following else rest


def count(run: str, layout: str, label: str, budget: int, text: str, section: str) -> Count:
    lines = section.split("\n")
    first = next((i for i, line in enumerate(lines) if ENTRY_HEADING.match(line)), len(lines))
    whole = "\n".join(lines[first:])
    return Count(
        run=run,
        layout=layout,
        section=label,
        budget=budget,
        in_file=sum(1 for line in text.split("\n") if ENTRY_HEADING.match(line)),
        entries=sum(1 for line in lines if ENTRY_HEADING.match(line)),
        headless_bullets=len(_BULLET.findall("\n".join(lines[:first]))),
        decisions=len(_DECISION.findall(whole)),
        chars=len(section),
        anchor_chars=sum(len(anchor) for anchor in ANCHOR.findall(section)),
    )


def measure(runs: Sequence[Mapping[str, Any]], *, as_stored: bool = False) -> list[Count]:
    """Each run's day files in a project of their own, snapshots built by the installed
    plugins (``Pimem.build_snapshot``), in each layout."""
    pimems = {
        layout: Pimem.from_env({"HOME": str(Path.home()), LAYOUT.env: layout}) for layout in LAYOUTS
    }
    counts = []
    with tempfile.TemporaryDirectory(prefix="pimem-bench-snapshot-") as scratch:
        for number, run in enumerate(runs):
            name = f"{run['variant']}, pi {run['line']}"
            repo = Path(scratch) / f"project-{number}"
            memory = repo / ".memsearch" / "memory"
            memory.mkdir(parents=True)
            (repo / ".git").mkdir()
            for file, stored in sorted(run["day_files"].items()):
                text = stored if as_stored else as_written(stored, run["variant"], run["line"])
                (memory / file).write_text(text, encoding="utf-8")
                day = date.fromisoformat(file.removesuffix(".md"))
                for label, at, budget in (
                    ("Today", day, TODAY_BUDGET),
                    ("Yesterday", day + timedelta(days=1), YESTERDAY_BUDGET),
                ):
                    now = datetime.combine(at, time(18, 0))
                    for layout, pimem in sorted(pimems.items(), reverse=True):  # the seed's first
                        snapshot = pimem.build_snapshot(pimem.resolve_scope(repo), now) or ""
                        section = section_of(snapshot, label)
                        counts.append(count(name, layout, label, budget, text, section))
    return counts


def render(counts: Sequence[Count]) -> str:
    rows = [
        "| run | section (budget) | layout | entries shown whole (of the file's) | bullets "
        "without their heading | decisions | anchors, share of the section |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in counts:
        share = c.anchor_chars / c.chars if c.chars else 0.0
        rows.append(
            f"| {c.run} | {c.section} ({c.budget}) | {c.layout} | {c.entries} ({c.in_file}) | "
            f"{c.headless_bullets} | {c.decisions} | {share:.0%} |"
        )
    by_layout = {layout: sum(c.entries for c in counts if c.layout == layout) for layout in LAYOUTS}
    ratio = by_layout["entries"] / by_layout["tail"] if by_layout["tail"] else float("inf")
    rows.append("")
    rows.append(
        f"All sections: {by_layout['tail']} entries in the seed's layout, "
        f"{by_layout['entries']} in the entries layout ({ratio:.1f} times as many)."
    )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.snapshot_entries", description=__doc__)
    parser.add_argument("--workload", type=Path, default=WORKLOAD, help="a workload run's JSON")
    parser.add_argument("--json", action="store_true", help="the counts as JSON")
    parser.add_argument("--as-stored", action="store_true", help="keep <run> in the anchors")
    args = parser.parse_args(argv)
    runs = json.loads(args.workload.read_text(encoding="utf-8"))["runs"]
    counts = measure(runs, as_stored=args.as_stored)
    if args.json:
        print(json.dumps([asdict(c) for c in counts], indent=2))
    else:
        print(render(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
