"""Fuzzing the pi transcript reader: junk lines, partial writes, deep chains, ``parentId`` cycles.

Both readers (the branch capture follows, and the L3 window ``memory_transcript`` renders) must
answer or raise a ``PimemError``; a branch never repeats an entry, whatever the tree's shape.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Any

import attrs
from hypothesis import strategies as st

from pimem_core.errors import PimemError
from pimem_core.service_values import TranscriptRequest
from pimem_plugins.pi_transcript import read_pi_branch, read_pi_transcript
from reliability.fuzzing import run_property
from reliability.outcome import Outcome
from reliability.strategies import DEEP, JSON_VALUES, TEXT, TRICKY, damaged, dumps

IDS = st.one_of(st.sampled_from(["r", "a", "b", "c", "d", "e"]), TEXT, JSON_VALUES)
HEADER = dumps({"type": "session", "version": 3, "id": "s", "cwd": "/p"})
TIMESTAMPS = st.one_of(
    st.datetimes().map(lambda moment: moment.isoformat()),
    st.sampled_from(["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "2026-08-13"]),
    TEXT,
    JSON_VALUES,
)
MILLIS = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    JSON_VALUES,
)
BLOCK = st.fixed_dictionaries(
    {},
    optional={
        "type": st.one_of(st.sampled_from(["text", "toolCall", "thinking", "image"]), TEXT),
        "text": st.one_of(TEXT, JSON_VALUES),
        "name": st.one_of(TEXT, JSON_VALUES),
        "arguments": st.one_of(
            st.dictionaries(TEXT, JSON_VALUES, max_size=6),
            JSON_VALUES.map(dumps),
            DEEP,
            JSON_VALUES,
        ),
    },
)
CONTENT = st.one_of(TEXT, st.lists(st.one_of(BLOCK, JSON_VALUES), max_size=5), JSON_VALUES)
MESSAGE = st.fixed_dictionaries(
    {},
    optional={
        "role": st.one_of(st.sampled_from(["user", "assistant", "toolResult", "bash"]), TEXT),
        "content": CONTENT,
        "stopReason": st.one_of(st.sampled_from(["aborted", "stop", "error"]), JSON_VALUES),
        "timestamp": MILLIS,
    },
)
ENTRY = st.fixed_dictionaries(
    {},
    optional={
        "type": st.one_of(
            st.sampled_from(["message", "custom_message", "session", "compaction"]), JSON_VALUES
        ),
        "id": IDS,
        "parentId": IDS,
        "timestamp": TIMESTAMPS,
        "message": st.one_of(MESSAGE, JSON_VALUES),
        "content": CONTENT,
    },
)


@st.composite
def entry_line(draw: st.DrawFn) -> str:
    return draw(damaged(dumps(draw(ENTRY))))


def chain(length: int, cyclic: bool) -> list[str]:
    """A straight line of *length* messages, each the child of the one before; *cyclic* makes
    the first the child of the last."""
    lines = []
    for number in range(length):
        parent = f"m{number - 1}" if number else (f"m{length - 1}" if cyclic else None)
        role = "user" if number % 2 == 0 else "assistant"
        lines.append(
            dumps(
                {
                    "type": "message",
                    "id": f"m{number}",
                    "parentId": parent,
                    "message": {"role": role, "content": [{"type": "text", "text": f"t{number}"}]},
                }
            )
        )
    return lines


@attrs.frozen
class Case:
    text: str
    leaf: str | None
    turn: str | None
    context: int
    limit: int


@st.composite
def cases(draw: st.DrawFn) -> Case:
    lines: list[str] = []
    if draw(st.booleans()):
        lines.append(HEADER)
    if draw(st.integers(0, 9)) == 0:
        lines += chain(draw(st.sampled_from([2, 50, 3000])), draw(st.booleans()))
    lines += draw(st.lists(st.one_of(entry_line(), TEXT, TRICKY, DEEP), max_size=12))
    if draw(st.booleans()):
        lines = draw(st.permutations(lines))
    newline = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    return Case(
        text=newline.join(lines),
        leaf=draw(st.one_of(st.none(), IDS.filter(lambda i: isinstance(i, str)))),
        turn=draw(
            st.one_of(st.none(), st.sampled_from(["r", "a", "m1", "m"]), st.text(max_size=4))
        ),
        context=draw(st.integers(0, 5)),
        limit=draw(st.integers(1, 30)),
    )


def run(outcome: Outcome, examples: int, seed_value: int) -> None:
    with tempfile.TemporaryDirectory(prefix="pimem-fuzz-transcript-") as scratch:
        path = Path(scratch) / "session.jsonl"

        def check(case: Any) -> None:
            path.write_text(case.text, encoding="utf-8", errors="surrogatepass")
            try:
                branch = read_pi_branch(path, case.leaf)
            except PimemError:
                branch = None
            if branch is not None:
                ids = [entry.id for entry in branch]
                assert len(ids) == len(set(ids)), f"a branch repeats an entry: {ids[:20]}"
            with contextlib.suppress(PimemError):
                read_pi_transcript(
                    TranscriptRequest(
                        path=path, turn=case.turn, context=case.context, limit=case.limit
                    )
                )

        run_property(
            outcome, cases(), check, examples=examples, seed_value=seed_value, label="transcript"
        )
