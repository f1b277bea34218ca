"""A small bar chart for the terminal: recalls and uses per day, plain text, no dependency.

One line a day, two bars side by side on one scale, each followed by its count::

    day    recalls          used
    08-11  ####          5  ==            2
    08-12                0                0
    08-13  #########    12  =====         7

The days before the first one with anything to show are left out; the days between are kept
(a gap is information). The width bounds every line.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

#: The width of the chart, when the caller gives none.
WIDTH = 72
_LABEL = 7  # "08-11  "
_COUNT = 6  # " 12345"


def day_chart(rows: Sequence[tuple[date, int, int]], width: int = WIDTH) -> str:
    """The chart of *rows*, ``(day, recalls, uses)`` oldest first; ``""`` when every count is
    zero. No line is longer than *width* (at least 32)."""
    width = max(width, 32)
    first = next((n for n, (_, recalls, uses) in enumerate(rows) if recalls or uses), None)
    if first is None:
        return ""
    shown = rows[first:]
    bar = (width - _LABEL - 2 * _COUNT - 2) // 2  # two bars, two counts, a gap between halves
    most = max(max(recalls, uses) for _, recalls, uses in shown)
    years = {day.year for day, _, _ in shown}
    lines = [f"{'day':<{_LABEL}}{'recalls':<{bar + _COUNT}}  {'used'}".rstrip()]
    for day, recalls, uses in shown:
        label = day.strftime("%m-%d") if len(years) == 1 else day.strftime("%y%m%d")
        left = _bar(recalls, most, bar, "#") + f"{recalls:>{_COUNT}}"
        right = _bar(uses, most, bar, "=") + f"{uses:>{_COUNT}}"
        lines.append(f"{label:<{_LABEL}}{left}  {right}".rstrip())
    return "\n".join(lines)


def _bar(count: int, most: int, room: int, mark: str) -> str:
    """*count* as marks on a scale where *most* fills *room*; any count above zero shows one."""
    length = 0 if not count else max(1, round(count * room / most))
    return (mark * length).ljust(room)
