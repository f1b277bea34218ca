"""The terminal chart of recalls and uses per day: one scale, bounded width, quiet days."""

from __future__ import annotations

from datetime import date

import pytest

from pimem_plugins.usage.chart import day_chart

ROWS = [
    (date(2026, 8, 9), 0, 0),
    (date(2026, 8, 10), 0, 0),
    (date(2026, 8, 11), 5, 2),
    (date(2026, 8, 12), 0, 0),
    (date(2026, 8, 13), 12, 7),
]


def test_the_chart_starts_at_the_first_day_with_something() -> None:
    assert day_chart(ROWS, width=40) == (
        "day    recalls          used\n"
        "08-11  ####          5  ==            2\n"
        "08-12                0                0\n"
        "08-13  #########    12  =====         7"
    )


@pytest.mark.parametrize("width", [32, 50, 72, 120])
def test_no_line_is_wider_than_asked_and_the_largest_count_fills_its_bar(width: int) -> None:
    chart = day_chart(ROWS, width=width)
    assert max(len(line) for line in chart.splitlines()) <= width
    longest = chart.splitlines()[-1]
    bar = (width - 7 - 12 - 2) // 2
    assert longest.count("#") == bar


def test_a_single_recall_still_shows_a_mark() -> None:
    chart = day_chart([(date(2026, 8, 12), 1000, 1)], width=40)
    assert chart.splitlines()[1].count("=") == 1


def test_nothing_to_chart_is_no_chart() -> None:
    assert day_chart([(date(2026, 8, 12), 0, 0)]) == ""
    assert day_chart([]) == ""


def test_days_across_a_year_carry_it() -> None:
    chart = day_chart([(date(2025, 12, 31), 1, 0), (date(2026, 1, 1), 2, 1)], width=40)
    assert [line.split()[0] for line in chart.splitlines()[1:]] == ["251231", "260101"]
