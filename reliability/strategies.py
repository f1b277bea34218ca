"""Input generators shared by the fuzz targets: JSON of any shape, junk lines, hostile text."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

# Text that tends to break parsers: control characters, lone surrogates excluded (JSON text read
# from a file or a pipe is decoded first), markdown headings, comment ends, path tricks.
TRICKY = st.sampled_from(
    [
        "",
        " ",
        "\n",
        "\r\n",
        "\x00",
        "-->",
        "<!--",
        "### 22:41",
        "## Session 22:41",
        "## Memory Compact",
        "# 2026-08-13",
        "../..",
        "/etc/passwd",
        "\u2028",
        "\ufeff",
        "null",
        "NaN",
        "9" * 40,
        "é" * 3,
    ]
)
TEXT = st.one_of(st.text(max_size=40), TRICKY)

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    TEXT,
)
JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(TEXT, children, max_size=4),
    ),
    max_leaves=12,
)


def deep_nesting(depth: int, kind: str) -> str:
    """JSON nested *depth* levels deep: arrays, objects, or an unterminated run of them."""
    if kind == "array":
        return "[" * depth + "]" * depth
    if kind == "object":
        return '{"a":' * depth + "1" + "}" * depth
    return "[{" * depth


DEEP = st.builds(
    deep_nesting,
    st.sampled_from([10, 900, 1200, 5000, 50_000]),
    st.sampled_from(["array", "object", "open"]),
)


@st.composite
def damaged(draw: st.DrawFn, line: str) -> str:
    """*line* as written, cut short (a crash mid-write), or with a byte range replaced."""
    how = draw(st.sampled_from(["keep", "keep", "cut", "splice"]))
    if how == "keep" or not line:
        return line
    at = draw(st.integers(0, len(line)))
    if how == "cut":
        return line[:at]
    return line[:at] + draw(TEXT) + line[at + draw(st.integers(0, 5)) :]


def dumps(value: Any) -> str:
    """JSON text for *value*; NaN and infinities as Python's ``json`` writes them."""
    return json.dumps(value, ensure_ascii=False)
