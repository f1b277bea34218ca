"""The stable snapshot: both layouts, cutting within the budgets, checkpoints and the off switch."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

import attrs
import pytest

from pimem_core import Pimem
from pimem_core.day_file import list_entries
from pimem_core.errors import SettingsError
from pimem_core.runtime.snapshot_cache import StableSnapshot, prepare_snapshot
from pimem_core.types import Anchor, Entry
from pimem_plugins.snapshot import (
    ENTRY_CUT,
    INSTRUCTIONS,
    TAIL_INSTRUCTIONS,
    TODAY_BUDGET,
    TRUNCATED,
    YESTERDAY_BUDGET,
    tail,
)

from conftest import make_pimem, run_cli

NOW = datetime(2026, 8, 14, 10, 0)


@pytest.fixture
def pimem() -> Pimem:
    """Overrides conftest's ``pimem``: the clock of TC-22, 2026-08-14 10:00."""
    return make_pimem({"PIMEM_NOW": "2026-08-14T10:00"})


@pytest.fixture
def seed_pimem() -> Pimem:
    """The seed's layout (``PIMEM_SNAPSHOT_LAYOUT=tail``) at the clock of TC-22."""
    return make_pimem({"PIMEM_NOW": "2026-08-14T10:00", "PIMEM_SNAPSHOT_LAYOUT": "tail"})


@pytest.fixture
def memory(repo: Path) -> Path:
    path = repo / ".memsearch" / "memory"
    path.mkdir(parents=True)
    return path


# -- TC-22 -------------------------------------------------------------------------------------


def test_no_files_gives_the_instructions_only(pimem: Pimem, repo: Path) -> None:
    snapshot = pimem.build_snapshot(pimem.resolve_scope(repo))
    assert snapshot == INSTRUCTIONS
    assert len(snapshot) <= 1100
    assert "memory_write" in snapshot
    assert "### Today" not in snapshot
    assert "### Yesterday" not in snapshot


def test_today_and_yesterday_sections(pimem: Pimem, repo: Path, memory: Path) -> None:
    (memory / "2026-08-14.md").write_text("- decided today\n")
    (memory / "2026-08-13.md").write_text("- decided yesterday\n")
    snapshot = pimem.build_snapshot(pimem.resolve_scope(repo))
    assert snapshot == (
        f"{INSTRUCTIONS}\n\n"
        "### Today (2026-08-14)\n\n- decided today\n\n"
        "### Yesterday (2026-08-13)\n\n- decided yesterday"
    )


def test_whitespace_only_today_file_has_no_section(pimem: Pimem, repo: Path, memory: Path) -> None:
    (memory / "2026-08-14.md").write_text("\n\n")
    (memory / "2026-08-13.md").write_text("- decided yesterday\n")
    snapshot = pimem.build_snapshot(pimem.resolve_scope(repo))
    assert snapshot is not None
    assert "### Today" not in snapshot
    assert snapshot.endswith("### Yesterday (2026-08-13)\n\n- decided yesterday")


def test_only_yesterday_and_today_are_read_when_they_have_entries(
    pimem: Pimem, repo: Path, memory: Path
) -> None:
    (memory / "2026-08-12.md").write_text("- two days ago\n")
    (memory / "2026-08-13.md").write_text("- decided yesterday\n")
    (memory / "2026-08-15.md").write_text("- tomorrow\n")
    assert pimem.build_snapshot(pimem.resolve_scope(repo)) == (
        f"{INSTRUCTIONS}\n\n### Yesterday (2026-08-13)\n\n- decided yesterday"
    )


def test_a_day_after_today_is_never_shown(seed_pimem: Pimem, repo: Path, memory: Path) -> None:
    (memory / "2026-08-15.md").write_text("- tomorrow\n")
    assert seed_pimem.build_snapshot(seed_pimem.resolve_scope(repo)) == TAIL_INSTRUCTIONS
    pimem = make_pimem({"PIMEM_NOW": "2026-08-14T10:00"})
    assert pimem.build_snapshot(pimem.resolve_scope(repo)) == INSTRUCTIONS


def test_day_file_text_is_trimmed(seed_pimem: Pimem, repo: Path, memory: Path) -> None:
    (memory / "2026-08-14.md").write_text("\n## Session 09:00\n\n### 09:00\n- x\n\n")
    snapshot = seed_pimem.build_snapshot(seed_pimem.resolve_scope(repo))
    assert (
        snapshot
        == f"{TAIL_INSTRUCTIONS}\n\n### Today (2026-08-14)\n\n## Session 09:00\n\n### 09:00\n- x"
    )


def test_yesterday_across_a_month_boundary(repo: Path, memory: Path) -> None:
    (memory / "2026-08-31.md").write_text("- end of august\n")
    pimem = make_pimem({"PIMEM_NOW": "2026-09-01T08:00"})
    snapshot = pimem.build_snapshot(pimem.resolve_scope(repo))
    assert snapshot is not None
    assert snapshot.endswith("### Yesterday (2026-08-31)\n\n- end of august")


# -- TC-23 -------------------------------------------------------------------------------------


def test_tail_keeps_text_at_the_exact_budget() -> None:
    assert tail("a" * 10, 10) == ("a" * 10, False)


def test_tail_keeps_short_text() -> None:
    assert tail("abc\ndef", 100) == ("abc\ndef", False)


def test_tail_cuts_at_a_line_start() -> None:
    assert tail("one\ntwo\nthree", 8) == ("three", True)
    assert tail("one\ntwo\nthree", 10) == ("two\nthree", True)


def test_tail_drops_the_first_line_even_when_the_cut_lands_on_a_line_start() -> None:
    assert tail("one\ntwo\nthree", 9) == ("three", True)


def test_tail_one_over_the_budget_drops_the_partial_first_line() -> None:
    assert tail("x\nabc", 4) == ("abc", True)


def test_tail_without_a_newline_is_a_hard_cut() -> None:
    assert tail("abcdefghij", 4) == ("ghij", True)


def test_tail_with_only_a_trailing_newline_keeps_the_hard_cut() -> None:
    assert tail("abcdefgh\n", 4) == ("fgh\n", True)


def test_tail_newline_at_the_cut_start() -> None:
    assert tail("abc\ndefg", 5) == ("defg", True)


def long_day(lines: int, width: int = 49) -> str:
    return "\n".join(f"- {i:04d} " + "x" * (width - 7) for i in range(lines))


def test_today_section_is_truncated_within_its_budget(
    seed_pimem: Pimem, repo: Path, memory: Path
) -> None:
    body = long_day(200)
    (memory / "2026-08-14.md").write_text(body + "\n")
    snapshot = seed_pimem.build_snapshot(seed_pimem.resolve_scope(repo))
    assert snapshot is not None
    header = f"\n\n### Today (2026-08-14)\n\n{TRUNCATED}\n"
    assert header in snapshot
    kept = snapshot.split(header, 1)[1]
    assert kept == tail(body, TODAY_BUDGET)[0]
    assert len(kept) <= TODAY_BUDGET
    assert kept.endswith("- 0199 " + "x" * 42)
    assert kept.startswith("- ")


def test_yesterday_section_has_its_own_budget(seed_pimem: Pimem, repo: Path, memory: Path) -> None:
    body = long_day(200)
    (memory / "2026-08-13.md").write_text(body)
    snapshot = seed_pimem.build_snapshot(seed_pimem.resolve_scope(repo))
    assert snapshot is not None
    header = f"### Yesterday (2026-08-13)\n\n{TRUNCATED}\n"
    kept = snapshot.split(header, 1)[1]
    assert kept == tail(body, YESTERDAY_BUDGET)[0]
    assert len(kept) <= YESTERDAY_BUDGET
    assert len(kept) > YESTERDAY_BUDGET - 50


def test_budgets_are_three_and_two_thousand() -> None:
    assert (TODAY_BUDGET, YESTERDAY_BUDGET) == (3000, 2000)


def test_text_at_the_budget_has_no_marker(pimem: Pimem, repo: Path, memory: Path) -> None:
    (memory / "2026-08-14.md").write_text("y" * TODAY_BUDGET)
    snapshot = pimem.build_snapshot(pimem.resolve_scope(repo))
    assert snapshot is not None
    assert TRUNCATED not in snapshot
    assert snapshot.endswith("\n\n" + "y" * TODAY_BUDGET)


def test_one_long_line_is_hard_cut_with_a_marker(
    seed_pimem: Pimem, repo: Path, memory: Path
) -> None:
    (memory / "2026-08-14.md").write_text("z" * (TODAY_BUDGET + 1))
    snapshot = seed_pimem.build_snapshot(seed_pimem.resolve_scope(repo))
    assert snapshot is not None
    assert snapshot.endswith(f"### Today (2026-08-14)\n\n{TRUNCATED}\n" + "z" * TODAY_BUDGET)


# -- TC-24 -------------------------------------------------------------------------------------


def stable(pimem: Pimem, repo: Path) -> StableSnapshot:
    return StableSnapshot(pimem, pimem.resolve_scope(repo))


def test_appending_to_today_keeps_the_snapshot(pimem: Pimem, repo: Path, memory: Path) -> None:
    (memory / "2026-08-14.md").write_text("- first\n")
    snapshot = stable(pimem, repo)
    built = snapshot.refresh(NOW)
    with (memory / "2026-08-14.md").open("a") as file:
        file.write("- appended by another agent\n")
    assert snapshot.current(NOW) == built
    assert built is not None
    assert "another agent" not in built


def test_writing_an_entry_keeps_the_snapshot(pimem: Pimem, repo: Path) -> None:
    snapshot = stable(pimem, repo)
    built = snapshot.refresh(NOW)
    pimem.append_entry(
        pimem.resolve_scope(repo),
        Entry(
            anchor=Anchor(session="s1", turn="t1", transcript="/t.jsonl"),
            content="- written mid-session",
            written_at=datetime(2026, 8, 14, 10, 5),
        ),
    )
    later = datetime(2026, 8, 14, 10, 6)
    assert snapshot.current(later) == built
    refreshed = snapshot.refresh(later)
    assert refreshed is not None
    assert "- written mid-session" in refreshed


def test_refresh_picks_up_the_new_line(pimem: Pimem, repo: Path, memory: Path) -> None:
    snapshot = stable(pimem, repo)
    snapshot.refresh(NOW)
    (memory / "2026-08-14.md").write_text("- appended later\n")
    assert snapshot.current(NOW) == INSTRUCTIONS
    refreshed = snapshot.refresh(NOW)
    assert refreshed is not None
    assert "### Today (2026-08-14)\n\n- appended later" in refreshed
    assert snapshot.current(NOW) == refreshed


def test_a_new_day_rebuilds_the_snapshot(pimem: Pimem, repo: Path, memory: Path) -> None:
    (memory / "2026-08-14.md").write_text("- decided today\n")
    snapshot = stable(pimem, repo)
    snapshot.refresh(NOW)
    next_day = snapshot.current(datetime(2026, 8, 15, 0, 1))
    assert next_day is not None
    assert "### Today" not in next_day
    assert next_day.endswith("### Yesterday (2026-08-14)\n\n- decided today")


def test_first_current_builds_the_snapshot(pimem: Pimem, repo: Path, memory: Path) -> None:
    (memory / "2026-08-14.md").write_text("- decided today\n")
    snapshot = stable(pimem, repo)
    assert snapshot.current() == pimem.build_snapshot(pimem.resolve_scope(repo))


def test_current_defaults_to_the_settings_clock(pimem: Pimem, repo: Path, memory: Path) -> None:
    (memory / "2026-08-14.md").write_text("- decided today\n")
    built = stable(pimem, repo).current()
    assert built is not None
    assert "### Today (2026-08-14)" in built


def test_start_takes_the_snapshot_prepared_as_the_host_attached(
    pimem: Pimem, repo: Path, memory: Path
) -> None:
    (memory / "2026-08-14.md").write_text("- decided before the session\n")
    prepared = prepare_snapshot(pimem, repo)
    assert prepared is not None
    (memory / "2026-08-14.md").write_text("- decided before\n- and a moment after attaching\n")
    snapshot = stable(pimem, repo)
    started = snapshot.start(NOW, prepared=prepared)
    assert started == prepared.text
    assert started is not None
    assert "- decided before the session" in started
    assert snapshot.current(NOW) == started


def test_a_snapshot_prepared_for_another_day_or_scope_is_built_again(
    pimem: Pimem, repo: Path, memory: Path, tmp_path: Path
) -> None:
    (memory / "2026-08-14.md").write_text("- decided today\n")
    today = prepare_snapshot(pimem, repo)
    assert today is not None
    yesterdays = attrs.evolve(today, day=date(2026, 8, 13), text="old")
    assert stable(pimem, repo).start(NOW, prepared=yesterdays) == pimem.build_snapshot(
        pimem.resolve_scope(repo), NOW
    )
    other = tmp_path / "elsewhere"
    other.mkdir()
    elsewhere = prepare_snapshot(pimem, other)
    assert elsewhere is not None
    assert stable(pimem, repo).start(NOW, prepared=elsewhere) != elsewhere.text


def test_a_snapshot_that_cannot_be_prepared_is_left_to_session_start(
    pimem: Pimem, repo: Path, memory: Path
) -> None:
    (memory / "2026-08-14.md").mkdir()  # unreadable as a day file
    assert prepare_snapshot(pimem, repo) is None


# -- the off switch and the CLI ------------------------------------------------------------------


def test_snapshot_off_builds_nothing(repo: Path, memory: Path) -> None:
    (memory / "2026-08-13.md").write_text("- decided\n")
    pimem = make_pimem({"PI_MEMSEARCH_SNAPSHOT": "off"})
    assert pimem.build_snapshot(pimem.resolve_scope(repo)) is None
    assert StableSnapshot(pimem, pimem.resolve_scope(repo)).current() is None


def test_snapshot_off_marks_the_plugin_inactive() -> None:
    records = {r.name: r for r in make_pimem({"PI_MEMSEARCH_SNAPSHOT": "off"}).pm.records}
    assert records["stable-snapshot"].status == "inactive-by-setting"
    assert {r.name: r for r in make_pimem().pm.records}["stable-snapshot"].status == "active"


def test_cli_snapshot_off_prints_nothing_on_stdout(repo: Path, memory: Path) -> None:
    (memory / "2026-08-13.md").write_text("- decided\n")
    result = run_cli("snapshot", "--cwd", str(repo), env={"PI_MEMSEARCH_SNAPSHOT": "off"})
    assert result.code == 0
    assert result.stdout == ""
    assert "PI_MEMSEARCH_SNAPSHOT" in result.stderr


def test_cli_snapshot_equals_build_snapshot(repo: Path, memory: Path) -> None:
    (memory / "2026-08-13.md").write_text("- decided today ✓\n")
    (memory / "2026-08-12.md").write_text("- decided yesterday\n")
    result = run_cli("snapshot", "--cwd", str(repo / "packages" / "core"))
    pimem = make_pimem()
    assert result.code == 0, result.stderr
    snapshot = pimem.build_snapshot(pimem.resolve_scope(repo))
    assert snapshot is not None
    # The block exactly, and the newline a terminal needs after it.
    assert result.stdout == snapshot + ("" if snapshot.endswith("\n") else "\n")
    assert "### Today (2026-08-13)\n\n- decided today ✓" in result.stdout


# -- the entries layout (ADR 0022) -----------------------------------------------------------------

TRANSCRIPT = "/home/you/.pi/agent/sessions/--home-you-src-shop--/2026-08-14T08-00-00-000Z_s1.jsonl"


def anchored(time: str, *bullets: str, turn: str = "ab12cd34") -> str:
    """One entry as the day file holds it: heading, session anchor, bullets."""
    anchor = Anchor(session="3f2c9b1e-0000", turn=turn, transcript=TRANSCRIPT).comment()
    return f"### {time}\n{anchor}\n" + "\n".join(bullets) + "\n\n"


def today_section(snapshot: str | None) -> str:
    assert snapshot is not None
    return snapshot.split("### Today (2026-08-14)\n\n", 1)[1].split("\n\n### Yesterday (", 1)[0]


def test_entries_show_their_time_and_bullets_without_anchors_or_session_headings(
    pimem: Pimem, repo: Path, memory: Path
) -> None:
    (memory / "2026-08-14.md").write_text(
        "\n## Session 09:00\n\n"
        + anchored("09:00", "- the team chose PostgreSQL 16 for the ledger")
        + "\n## Session 09:30\n\n"
        + anchored("09:31", "- the user asked how the day was going", "- the agent said fine")
    )
    snapshot = pimem.build_snapshot(pimem.resolve_scope(repo))
    assert snapshot == (
        f"{INSTRUCTIONS}\n\n### Today (2026-08-14)\n\n"
        "### 09:00\n- the team chose PostgreSQL 16 for the ledger\n\n"
        "### 09:31\n- the user asked how the day was going\n- the agent said fine"
    )
    assert "<!--" not in snapshot
    assert "memory_expand" in INSTRUCTIONS


def many_entries(count: int) -> str:
    """*count* anchored entries of different lengths, a session heading every seventh."""
    parts = []
    for number in range(count):
        if number % 7 == 0:
            parts.append(f"\n## Session {number // 60:02d}:{number % 60:02d}\n\n")
        words = " ".join(["word"] * (3 + number * 5 % 23))
        parts.append(
            anchored(
                f"{number // 60:02d}:{number % 60:02d}",
                f"- fact {number:03d}: {words}",
                *(["- and a second bullet"] if number % 3 == 0 else []),
                turn=f"{number:08x}",
            )
        )
    return "".join(parts)


@pytest.mark.parametrize("count", [1, 5, 30, 80, 200])
def test_a_section_is_cut_only_between_entries(
    pimem: Pimem, repo: Path, memory: Path, count: int
) -> None:
    """Never a bullet without its heading: the section is the newest whole entries within the
    budget (the next older one would not fit), each exactly as the file has it, anchor aside."""
    text = many_entries(count)
    (memory / "2026-08-14.md").write_text(text)
    (memory / "2026-08-13.md").write_text(many_entries(count))
    snapshot = pimem.build_snapshot(pimem.resolve_scope(repo))
    assert snapshot is not None
    expected = [
        entry.text.replace(entry.text.split("\n")[1] + "\n", "", 1) for entry in list_entries(text)
    ]
    section = today_section(snapshot)
    marker, _, kept = section.partition("\n\n") if section.startswith("[") else ("", "", section)
    shown = kept.split("\n\n")
    assert all(block.startswith("### ") for block in shown)
    assert shown == expected[len(expected) - len(shown) :]
    assert len(kept) <= TODAY_BUDGET
    omitted = len(expected) - len(shown)
    if omitted:
        assert marker == f"[... {omitted} earlier entr{'y' if omitted == 1 else 'ies'} omitted]"
        assert len(kept) + 2 + len(expected[-len(shown) - 1]) > TODAY_BUDGET
    else:
        assert marker == ""
    yesterday = snapshot.split("### Yesterday (2026-08-13)\n\n", 1)[1]
    if yesterday.startswith("[... "):
        yesterday = yesterday.partition("\n\n")[2]
    assert all(block.startswith("### ") for block in yesterday.split("\n\n"))
    assert len(yesterday) <= YESTERDAY_BUDGET


def test_the_budget_holds_more_than_twice_the_entries_of_the_seed_layout(
    pimem: Pimem, seed_pimem: Pimem, repo: Path, memory: Path
) -> None:
    bullets = ("- the team decided to use PostgreSQL 16 for the billing queue",)
    (memory / "2026-08-14.md").write_text(
        "".join(anchored("10:00", *bullets, turn=f"{n:08x}") for n in range(100))
    )
    entries = today_section(pimem.build_snapshot(pimem.resolve_scope(repo))).count("### 10:00")
    seed = today_section(seed_pimem.build_snapshot(seed_pimem.resolve_scope(repo)))
    assert entries >= 2 * seed.count("### 10:00")


def test_a_compact_block_is_kept_whole(pimem: Pimem, repo: Path, memory: Path) -> None:
    compact = "## Memory Compact 11:00\n\nSummary.\n\n### Decisions\n- Redis for the cache"
    (memory / "2026-08-14.md").write_text(
        anchored("09:00", "- older") + compact + "\n\n" + anchored("11:05", "- newest")
    )
    section = today_section(pimem.build_snapshot(pimem.resolve_scope(repo)))
    assert section == f"### 09:00\n- older\n\n{compact}\n\n### 11:05\n- newest"


def test_a_compact_block_that_does_not_fit_goes_whole(
    pimem: Pimem, repo: Path, memory: Path
) -> None:
    summary = "\n".join(f"- summary line {n} " + "y" * 60 for n in range(60))
    (memory / "2026-08-14.md").write_text(
        anchored("09:00", "- older")
        + f"## Memory Compact 11:00\n\n### Decisions\n{summary}\n\n"
        + anchored("11:05", "- newest")
    )
    section = today_section(pimem.build_snapshot(pimem.resolve_scope(repo)))
    assert section == "[... 1 earlier entry omitted]\n\n### 11:05\n- newest"


def test_an_entry_longer_than_the_budget_shows_its_head(
    pimem: Pimem, repo: Path, memory: Path
) -> None:
    bullets = [f"- bullet {n:03d} " + "z" * 80 for n in range(60)]
    (memory / "2026-08-14.md").write_text(
        anchored("09:00", "- older") + anchored("10:00", *bullets)
    )
    section = today_section(pimem.build_snapshot(pimem.resolve_scope(repo)))
    marker, _, kept = section.partition("\n\n")
    assert marker == "[... 1 earlier entry omitted]"
    assert kept.startswith("### 10:00\n- bullet 000 ")
    assert kept.endswith(f"\n{ENTRY_CUT}")
    assert len(kept) <= TODAY_BUDGET
    assert all(line in bullets for line in kept.split("\n")[1:-1])  # whole bullets only


def test_text_outside_entries_is_shown_as_the_file_has_it(
    pimem: Pimem, repo: Path, memory: Path
) -> None:
    (memory / "2026-08-14.md").write_text(
        "# 2026-08-14\n\nnotes by hand\n\n" + anchored("09:00", "- x")
    )
    section = today_section(pimem.build_snapshot(pimem.resolve_scope(repo)))
    assert section == "# 2026-08-14\n\nnotes by hand\n\n### 09:00\n- x"


def test_a_file_of_session_headings_only_has_no_section(
    pimem: Pimem, repo: Path, memory: Path
) -> None:
    (memory / "2026-08-14.md").write_text("\n## Session 09:00\n\n")
    assert pimem.build_snapshot(pimem.resolve_scope(repo)) == INSTRUCTIONS


def test_the_entries_layout_is_byte_stable_between_checkpoints(
    pimem: Pimem, repo: Path, memory: Path
) -> None:
    (memory / "2026-08-14.md").write_text(many_entries(80))
    snapshot = stable(pimem, repo)
    built = snapshot.refresh(NOW)
    with (memory / "2026-08-14.md").open("a") as file:
        file.write(anchored("10:00", "- appended by another agent"))
    assert snapshot.current(datetime(2026, 8, 14, 12, 0)) == built
    assert pimem.build_snapshot(pimem.resolve_scope(repo), NOW) != built
    # The same files always give the same bytes.
    assert snapshot.refresh(NOW) == pimem.build_snapshot(pimem.resolve_scope(repo), NOW)


def test_the_tail_layout_is_the_seeds(seed_pimem: Pimem, repo: Path, memory: Path) -> None:
    text = many_entries(80)
    (memory / "2026-08-14.md").write_text(text)
    snapshot = seed_pimem.build_snapshot(seed_pimem.resolve_scope(repo))
    assert snapshot == (
        f"{TAIL_INSTRUCTIONS}\n\n### Today (2026-08-14)\n\n{TRUNCATED}\n"
        + tail(text.strip(), TODAY_BUDGET)[0]
    )
    assert "<!-- session:" in snapshot


def test_the_layout_setting_is_checked_and_listed(repo: Path) -> None:
    with pytest.raises(SettingsError, match='PIMEM_SNAPSHOT_LAYOUT must be "entries" or "tail"'):
        make_pimem({"PIMEM_SNAPSHOT_LAYOUT": "anchors"})
    upper = make_pimem({"PIMEM_SNAPSHOT_LAYOUT": "TAIL"})
    assert upper.build_snapshot(upper.resolve_scope(repo)) == TAIL_INSTRUCTIONS
    result = run_cli("plugins", "--json")
    assert result.code == 0, result.stderr
    assert "PIMEM_SNAPSHOT_LAYOUT" in result.stdout
