"""``pimem usage`` through the real command line, on a temporary project whose state holds a
usage record: the text with its chart, ``--json``, ``--since``, ``--all``, and its time on a
month of records."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from datetime import date, timedelta
from pathlib import Path

import pytest

from pimem_core.plugin import Command, Scope, hookimpl
from pimem_core.testing import RunPimem, TempProject
from pimem_plugins.markdown_store import MarkdownStore
from pimem_plugins.scope_default import DefaultScope
from pimem_plugins.usage.command import COMMANDS

from conftest import run_cli

NOW = "2026-08-13T22:41"
DAY = "2026-08-12"
DAY_FILE = f"""## Session 09:00

### 09:14
<!-- session:s1 turn:t1 transcript:/t/s1.jsonl -->
- chose redis for the queue

### 10:00
<!-- session:s1 turn:t2 transcript:/t/s1.jsonl -->
- {"tabs, never spaces " * 20}
"""


class UsageCommands:
    """The command as the usage plugin adds it, without its record's hooks."""

    @hookimpl
    def pimem_collect_commands(self) -> Iterable[Command]:
        return COMMANDS


PLUGINS = (DefaultScope, MarkdownStore, UsageCommands)


def line(kind: str, session: str = "aaaaaaaaaaaa", **more: object) -> str:
    return json.dumps(
        {"v": 1, "at": "2026-08-12T09:20:00+02:00", "session": session, "kind": kind, **more}
    )


def make_store(scope: Scope) -> None:
    scope.memory_dir.mkdir(parents=True, exist_ok=True)
    (scope.memory_dir / f"{DAY}.md").write_text(DAY_FILE)


def make_record(home: Path, scope: Scope, lines: Iterable[str], day: str = DAY) -> None:
    directory = home / "state" / "usage" / scope.collection
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / f"{day}.jsonl").open("a") as file:
        file.writelines(f"{x}\n" for x in lines)


A = {"day": DAY, "time": "09:14", "chars": 80}
B = {"day": DAY, "time": "10:00", "chars": 450}
RECORD = (
    line("session", project="/p"),
    line("snapshot", entries=[A, B]),
    line("search", query="queue", hits=[A], top=0.7),
    line("search", query="queue again", hits=[A], top=0.7),
    line("used", entry=A, via="search", evidence="quoted", term="redis"),
    line("injection", entries=[B]),
    line("capture", entries=[A]),
)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "pimem"


def run(run_pimem: RunPimem, home: Path, *args: str, **env: str):  # type: ignore[no-untyped-def]
    return run_pimem(
        "usage", *args, plugins=PLUGINS, env={"PIMEM_HOME": str(home), "PIMEM_NOW": NOW, **env}
    )


def test_the_json_report_of_a_project(
    run_pimem: RunPimem, pimem_project: TempProject, home: Path
) -> None:
    make_store(pimem_project.scope)
    make_record(home, pimem_project.scope, [*RECORD, '{"v": 1, "kind": "sear'])
    answer = run(run_pimem, home, "--json", "--cwd", str(pimem_project.directory))
    assert answer.exit_code == 0, answer.stderr
    data = answer.json
    assert data["collection"] == pimem_project.scope.collection
    assert (data["since"], data["until"], data["record_since"]) == ("2026-07-15", "2026-08-13", DAY)
    counts = data["counts"]
    assert (counts["sessions"], counts["recalls"], counts["recalls_used"]) == (1, 2, 1)
    assert (counts["injections"], counts["injections_used"], counts["captures"]) == (1, 0, 1)
    assert counts["skipped_lines"] == 1
    assert data["shares"] == {"recalls_used": 0.5, "injections_used": 0.0}
    assert data["top_recalled"][0] | {"chars": 0} == {
        "day": DAY, "time": "09:14", "chars": 0, "recalls": 2, "used": 1,
    }  # fmt: skip
    assert data["store"]["entries"] == 2
    never = data["never_recalled"]
    assert (never["count"], never["days"]) == (0, 30)  # B was injected
    assert {"day": DAY, "recalls": 2, "uses": 1} in data["per_day"]


def test_the_text_shows_the_counts_the_chart_and_the_entries(
    run_pimem: RunPimem, pimem_project: TempProject, home: Path
) -> None:
    make_store(pimem_project.scope)
    # Only the snapshot showed B: nothing recalled it.
    make_record(home, pimem_project.scope, [x for x in RECORD if '"injection"' not in x])
    answer = run(run_pimem, home, "--since", "7d", "--cwd", str(pimem_project.directory))
    assert answer.exit_code == 0, answer.stderr
    text = answer.stdout
    assert f"{pimem_project.scope.collection}, 2026-08-07 to 2026-08-13" in text
    assert "  recalls         2   50% used (1)\n" in text
    assert "recalls and uses per day" in text
    assert "\n08-12  ####" in text
    assert "  ======" in text
    assert "recalled most\n  2026-08-12 09:14     2 recalls    1 used" in text
    b_size = len(DAY_FILE.split("\n\n")[2].rstrip("\n"))
    assert f"never recalled in 30 days: 1 of 2 entries, {b_size:,} of" in text
    assert "in the span's 1 snapshots they took 9% of the snapshot's budget" in text  # 450 of 5000
    assert f"  2026-08-12 10:00  {b_size:,} chars" in text


def test_a_bad_since_is_a_usage_error(run_pimem: RunPimem, home: Path) -> None:
    answer = run(run_pimem, home, "--since", "last week")
    assert answer.exit_code == 2
    assert "--since must be a day (YYYY-MM-DD) or a number of days (7d)" in answer.stderr


def test_all_reports_every_project_under_the_scan_roots(
    run_pimem: RunPimem, tmp_path: Path, home: Path
) -> None:
    root = tmp_path / "code"
    scopes = [Scope.for_project(root / name) for name in ("one", "two")]
    (root / "not-a-project").mkdir(parents=True)
    for scope in scopes:
        make_store(scope)
    make_record(home, scopes[0], RECORD)
    answer = run(run_pimem, home, "--all", "--json", PI_MEMSEARCH_SCAN_ROOTS=str(root))
    assert answer.exit_code == 0, answer.stderr
    projects = answer.json["projects"]
    assert [p["collection"] for p in projects] == [s.collection for s in scopes]
    assert [p["counts"]["recalls"] for p in projects] == [2, 0]
    text = run(run_pimem, home, "--all", PI_MEMSEARCH_SCAN_ROOTS=str(root)).stdout
    assert "usage (30 days): 1 sessions, 2 recalls (50% used)" in text
    assert "usage: nothing recorded yet" in text
    unset = run(run_pimem, home, "--all")
    assert unset.exit_code == 1
    assert "PI_MEMSEARCH_SCAN_ROOTS" in unset.stderr


def test_a_month_of_records_reads_in_well_under_a_second(
    run_pimem: RunPimem, pimem_project: TempProject, home: Path
) -> None:
    scope = pimem_project.scope
    scope.memory_dir.mkdir(parents=True)
    today = date(2026, 8, 13)
    for back in range(30):
        day = (today - timedelta(days=back)).isoformat()
        entries = [{"day": day, "time": f"{h:02d}:{m:02d}", "chars": 300} for h in range(10, 20)
                   for m in (0, 30)]  # fmt: skip
        body = "".join(f"### {e['time']}\n<!-- session:s turn:t transcript:/t -->\n- "
                       f"{'a fact ' * 40}\n\n" for e in entries)  # fmt: skip
        (scope.memory_dir / f"{day}.md").write_text(body)
        lines = []
        for n in range(300):  # 9,000 lines in all: a busy month
            session = f"{n % 7:012x}"
            lines.append(line("search", session, query="q", hits=entries[n % 20 : n % 20 + 5]))
            if n % 3 == 0:
                lines.append(line("used", session, entry=entries[n % 20], via="search"))
        make_record(home, scope, lines, day=day)
    started = time.perf_counter()
    answer = run(run_pimem, home, "--cwd", str(pimem_project.directory))
    elapsed = time.perf_counter() - started
    assert answer.exit_code == 0, answer.stderr
    assert "  recalls      9000   33% used (3000)\n" in answer.stdout
    assert elapsed < 1.0, f"pimem usage took {elapsed:.2f} s"


def test_compact_never_recalled_without_the_usage_plugin_says_what_is_missing(
    repo: Path,
) -> None:
    memory = repo / ".memsearch" / "memory"
    memory.mkdir(parents=True)
    day = memory / "2026-07-01.md"
    day.write_text("### 09:00\n<!-- session:o turn:t transcript:/o -->\n- a note\n")
    done = run_cli(
        "compact",
        "--never-recalled",
        "7",
        "--cwd",
        str(repo),
        env={"PIMEM_DISABLE_PLUGINS": "usage"},
    )
    assert done.code == 1
    assert "no plugin keeps one: the bundled usage plugin is off" in done.stderr
    assert day.read_text().count("###") == 1
    bad = run_cli("compact", "--never-recalled", "0", "--cwd", str(repo))
    assert bad.code == 2
    assert "--never-recalled: must be a whole number of at least 1, got '0'" in bad.stderr
