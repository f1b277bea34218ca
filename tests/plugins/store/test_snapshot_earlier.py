"""The snapshot of the memory that matters: the latest earlier days when today and yesterday
show nothing, and never a hollow entry (a failure marker, a bare heading, an empty bullet)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pimem_core import Pimem
from pimem_core.types import Anchor
from pimem_plugins.snapshot import EARLIER_BUDGET, ENTRY_CUT, INSTRUCTIONS, TAIL_INSTRUCTIONS

from conftest import make_pimem, run_cli

#: As memsearch's Claude Code plugin writes them.
TRANSCRIPT = "/home/dana/.claude/projects/-home-dana-src-rota/5b0e2c4a-91d3.jsonl"


@pytest.fixture
def pimem() -> Pimem:
    return make_pimem({"PIMEM_NOW": "2026-08-14T10:00"})


@pytest.fixture
def memory(repo: Path) -> Path:
    path = repo / ".memsearch" / "memory"
    path.mkdir(parents=True)
    return path


def entry(time: str, *body: str, turn: str = "e41f7a90") -> str:
    """One entry as the day file holds it, with its session heading when it opens a session."""
    anchor = Anchor(session="5b0e2c4a-91d3", turn=turn, transcript=TRANSCRIPT).comment()
    return f"### {time}\n{anchor}\n" + "\n".join(body) + "\n\n"


def session(time: str) -> str:
    return f"\n## Session {time}\n\n"


def snapshot(pimem: Pimem, repo: Path) -> str:
    built = pimem.build_snapshot(pimem.resolve_scope(repo))
    assert built is not None
    return built


def test_a_store_last_written_a_week_ago_shows_its_latest_entries_under_their_days(
    pimem: Pimem, repo: Path, memory: Path
) -> None:
    (memory / "2026-08-03.md").write_text(
        session("16:00") + entry("16:02", "- The rota service keeps PostgreSQL 16")
    )
    # A day of nothing but the other agent's failure markers has no section.
    (memory / "2026-08-05.md").write_text(
        session("11:00")
        + entry("11:04", "Prompt is too long")
        + entry("11:09", 'API Error: 529 {"type":"error","error":{"type":"overloaded_error"}}')
    )
    (memory / "2026-08-07.md").write_text(
        session("09:00")
        + entry(
            "09:03",
            "- User asked how to stop two shifts from overlapping",
            "- Claude added an exclusion constraint on (worker_id, tstzrange(starts, ends))",
        )
        + entry("09:20", "Prompt is too long")
        + entry("09:41", "- ", "- The export job now runs nightly at 02:00", "-")
        + session("13:00")
    )
    assert snapshot(pimem, repo) == (
        f"{INSTRUCTIONS}\n\n"
        "### 7 days ago (2026-08-07)\n\n"
        "### 09:03\n"
        "- User asked how to stop two shifts from overlapping\n"
        "- Claude added an exclusion constraint on (worker_id, tstzrange(starts, ends))\n\n"
        "### 09:41\n"
        "- The export job now runs nightly at 02:00\n\n"
        "### 11 days ago (2026-08-03)\n\n"
        "### 16:02\n"
        "- The rota service keeps PostgreSQL 16"
    )


def test_failure_markers_and_empty_bullets_never_appear_today(
    pimem: Pimem, repo: Path, memory: Path
) -> None:
    (memory / "2026-08-14.md").write_text(
        session("08:30")
        + entry("08:31", "Invalid API key · Please run /login")
        + entry("08:40", "- Shift swaps need a manager's approval", "- ")
        + entry("08:52", "Prompt is too long")
        + entry("08:58")
        + entry("09:10", "- [pimem] this exchange could not be distilled: model timed out")
    )
    (memory / "2026-08-13.md").write_text(entry("17:00", "Credit balance is too low"))
    (memory / "2026-08-10.md").write_text(entry("12:00", "- never shown: today has entries"))
    assert snapshot(pimem, repo) == (
        f"{INSTRUCTIONS}\n\n### Today (2026-08-14)\n\n"
        "### 08:40\n- Shift swaps need a manager's approval"
    )


def test_today_and_yesterday_of_only_failure_markers_show_the_days_before(
    pimem: Pimem, repo: Path, memory: Path
) -> None:
    (memory / "2026-08-14.md").write_text(entry("08:31", "Prompt is too long"))
    (memory / "2026-08-13.md").write_text(entry("17:00", "Request timed out."))
    (memory / "2026-08-11.md").write_text(entry("15:00", "- Payroll closes on the 25th"))
    assert snapshot(pimem, repo) == (
        f"{INSTRUCTIONS}\n\n### 3 days ago (2026-08-11)\n\n### 15:00\n- Payroll closes on the 25th"
    )


def test_today_and_yesterday_keep_their_layout_when_they_have_entries(
    pimem: Pimem, repo: Path, memory: Path
) -> None:
    (memory / "2026-08-14.md").write_text(session("09:00") + entry("09:00", "- decided today"))
    (memory / "2026-08-13.md").write_text(entry("16:00", "- decided yesterday"))
    (memory / "2026-08-07.md").write_text(entry("16:00", "- a week ago"))
    assert snapshot(pimem, repo) == (
        f"{INSTRUCTIONS}\n\n"
        "### Today (2026-08-14)\n\n### 09:00\n- decided today\n\n"
        "### Yesterday (2026-08-13)\n\n### 16:00\n- decided yesterday"
    )


def test_hidden_entries_are_not_counted_as_omitted(pimem: Pimem, repo: Path, memory: Path) -> None:
    markers = "".join(entry(f"08:{n:02d}", "Prompt is too long") for n in range(40))
    (memory / "2026-08-14.md").write_text(markers + entry("09:00", "- the only memory"))
    assert snapshot(pimem, repo).endswith("### Today (2026-08-14)\n\n### 09:00\n- the only memory")


def fact(day: int, number: int) -> str:
    return f"- day {day} fact {number:02d}: " + " ".join(["the export keeps an audit trail"] * 5)


def test_earlier_days_share_the_two_days_budget_newest_first(
    pimem: Pimem, repo: Path, memory: Path
) -> None:
    for day in (2, 4, 6, 8, 10):
        (memory / f"2026-08-{day:02d}.md").write_text(
            "".join(entry(f"1{n}:00", fact(day, n), turn=f"{day}{n}") for n in range(8))
        )
    built = snapshot(pimem, repo)
    shown = built.removeprefix(f"{INSTRUCTIONS}\n\n")
    assert len(shown) <= EARLIER_BUDGET + len("[... 8 earlier entries omitted]\n\n")
    headings = [line for line in shown.split("\n") if line.startswith("### ") and "ago" in line]
    assert headings[:2] == ["### 4 days ago (2026-08-10)", "### 6 days ago (2026-08-08)"]
    # Newest day whole, in file order; the last day shown is cut between entries, and no
    # older day follows it.
    first = shown.split("### 6 days ago", 1)[0]
    assert [line for line in first.split("\n") if line.startswith("- ")] == [
        fact(10, n) for n in range(8)
    ]
    last = shown.rsplit(headings[-1], 1)[1]
    assert last.startswith("\n\n[... ")
    assert "earlier entries omitted]" in last or "earlier entry omitted]" in last
    assert "2026-08-02" not in shown


def test_an_earlier_entry_longer_than_the_budget_shows_its_head(
    pimem: Pimem, repo: Path, memory: Path
) -> None:
    bullets = [f"- bullet {n:03d} " + "z" * 80 for n in range(80)]
    (memory / "2026-08-09.md").write_text(entry("10:00", *bullets))
    (memory / "2026-08-08.md").write_text(entry("10:00", "- older"))
    shown = snapshot(pimem, repo).removeprefix(f"{INSTRUCTIONS}\n\n")
    assert shown.startswith("### 5 days ago (2026-08-09)\n\n### 10:00\n- bullet 000 ")
    assert shown.endswith(ENTRY_CUT)
    assert len(shown) <= EARLIER_BUDGET
    assert "2026-08-08" not in shown


def test_the_tail_layout_stays_the_seeds(repo: Path, memory: Path) -> None:
    seed = make_pimem({"PIMEM_NOW": "2026-08-14T10:00", "PIMEM_SNAPSHOT_LAYOUT": "tail"})
    (memory / "2026-08-07.md").write_text(entry("09:00", "- a week ago"))
    assert snapshot(seed, repo) == TAIL_INSTRUCTIONS
    today = entry("09:00", "Prompt is too long")
    (memory / "2026-08-14.md").write_text(today)
    assert (
        snapshot(seed, repo) == f"{TAIL_INSTRUCTIONS}\n\n### Today (2026-08-14)\n\n{today}".strip()
    )


def test_a_store_of_only_failure_markers_gives_the_instructions_only(
    pimem: Pimem, repo: Path, memory: Path
) -> None:
    (memory / "2026-08-01.md").write_text(entry("09:00", "Prompt is too long") + session("10:00"))
    (memory / "2026-13-01.md").write_text(entry("09:00", "- not a day"))
    (memory / "notes.md").write_text("- not a day file\n")
    assert snapshot(pimem, repo) == INSTRUCTIONS


def test_the_cli_prints_the_earlier_days(repo: Path, memory: Path) -> None:
    (memory / "2026-08-06.md").write_text(entry("09:00", "- The rota service keeps PostgreSQL 16"))
    result = run_cli("snapshot", "--cwd", str(repo), env={"PIMEM_NOW": "2026-08-14T10:00"})
    assert result.code == 0, result.stderr
    assert result.stdout.endswith(
        "### 8 days ago (2026-08-06)\n\n### 09:00\n- The rota service keeps PostgreSQL 16\n"
    )
