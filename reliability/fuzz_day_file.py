"""Fuzzing day-file surgery: forget on random daily memory files, through the real store.

Whatever the file holds, a forget either refuses and leaves every byte as it was, or removes
exactly the addressed entry (or compact block): every other entry keeps its bytes, and the
only other lines that may go are blank lines and the ``##`` heading the removed entry was the
last of. The expectations are checked with this module's own reading of the format, not with
the parser under test.
"""

from __future__ import annotations

import re
import tempfile
from datetime import date
from pathlib import Path
from typing import Any

import attrs
from hypothesis import strategies as st

from pimem_core.errors import StoreError
from pimem_core.types import Anchor, ChunkAddress, DayAddress, Scope, Section
from pimem_plugins.markdown_store import MarkdownMemoryStore
from reliability.fuzzing import run_property
from reliability.outcome import Outcome
from reliability.strategies import TEXT

DAY = date(2026, 8, 13)
TIMES = ["09:00", "09:30", "12:15", "18:00", "22:41", "23:59"]
_TIME_HEADING = re.compile(r"^###\s+(\d{2}:\d{2})\s*$")
_GROUP = re.compile(r"^#{1,2}\s")
_SECTION = re.compile(r"^##\s")
_DATE_TITLE = re.compile(r"^#\s+\d{4}-\d{2}-\d{2}\s*$")


@st.composite
def entry(draw: st.DrawFn) -> list[str]:
    time = draw(st.sampled_from(TIMES))
    heading = draw(st.sampled_from([f"### {time}", f"###  {time}  ", f"### {time}\r"]))
    session, turn = draw(st.sampled_from(["s1", "s2"])), draw(st.sampled_from(["t1", "t2", "t3"]))
    lines = [heading, f"<!-- session:{session} turn:{turn} transcript:/t/{session}.jsonl -->"]
    lines += draw(
        st.lists(st.one_of(st.sampled_from(["- a fact", "#### detail", ""]), TEXT), max_size=4)
    )
    return lines


BLOCKS = st.one_of(
    entry(),
    entry(),
    st.sampled_from(TIMES).map(lambda time: ["", f"## Session {time}", ""]),
    st.lists(st.sampled_from(["### Decisions", "- summed up", "### 22:41", ""]), max_size=4).map(
        lambda body: ["## Memory Compact" + " 22:41", "", *body]
    ),
    st.sampled_from(["# 2026-08-13", "# TODO", "free text", "", "####", "###", "## "]).map(
        lambda line: [line]
    ),
    TEXT.map(lambda text: text.split("\n")),
)


@attrs.frozen
class Case:
    text: str
    time: str
    section: Section | None


@st.composite
def cases(draw: st.DrawFn) -> Case:
    lines = [line for block in draw(st.lists(BLOCKS, max_size=14)) for line in block]
    text = "\n".join(lines) + draw(st.sampled_from(["", "\n", "\n\n"]))
    present = [m.group(1) for line in lines if (m := _TIME_HEADING.match(line))]
    # Mostly a time the file has (an entry to remove), sometimes any (a refusal to check).
    from_file = bool(present) and draw(st.integers(0, 3)) > 0
    time = draw(st.sampled_from(present if from_file else TIMES))
    section = None
    if draw(st.booleans()):
        count = max(1, len(lines))
        headings = [i + 1 for i, line in enumerate(lines) if line.startswith("##")]
        near_heading: bool = draw(st.booleans())
        if headings and near_heading:  # a window around a real heading, as indexed
            first = max(1, draw(st.sampled_from(headings)) - draw(st.integers(0, 2)))
        else:
            first = draw(st.integers(1, count))
        anchor = draw(
            st.one_of(
                st.none(),
                st.builds(
                    Anchor,
                    session=st.sampled_from(["s1", "s2"]),
                    turn=st.sampled_from(["t1", "t2", "t3"]),
                    transcript=st.just("/t"),
                ),
            )
        )
        section = Section(
            chunk_hash="0123456789abcdef",
            source=draw(st.sampled_from(["DAYFILE", ".memsearch/memory/2026-08-13.md"])),
            heading=draw(st.sampled_from([*present, *TIMES, "Memory Compact 22:41", "Decisions"])),
            start_line=first,
            end_line=draw(st.integers(first, count + 1)),
            content="",
            anchor=anchor,
        )
    return Case(text=text, time=time, section=section)


def _explained(old: list[str], new: list[str] | None, removed: list[str], kind: str) -> bool:
    """Whether *new* (``None``: file deleted) is *old* minus one run equal to *removed* with the
    blank lines after it, and at most one ``##`` heading left with nothing under it."""
    for start in range(len(old) - len(removed) + 1):
        if old[start : start + len(removed)] != removed:
            continue
        end = start + len(removed)
        while end < len(old) and not old[end].strip():
            end += 1
        rest = old[:start] + old[end:]
        candidates = [rest]
        if kind == "entry":
            for group, line in enumerate(rest):
                if not _SECTION.match(line):
                    continue
                after = group + 1
                while after < len(rest) and not rest[after].strip():
                    after += 1
                if after == len(rest) or _GROUP.match(rest[after]):
                    candidates.append(rest[:group] + rest[after:])
        for lines in candidates:
            if new is None:
                keeps_file = (
                    (lambda line: bool(line.strip()))
                    if kind == "entry"
                    else (lambda line: bool(line.strip()) and not _DATE_TITLE.match(line))
                )
                if not any(map(keeps_file, lines)):
                    return True
            elif new in (lines, [*lines, ""]):
                return True
    return False


def run(outcome: Outcome, examples: int, seed_value: int) -> None:
    with tempfile.TemporaryDirectory(prefix="pimem-fuzz-day-") as scratch:
        root = Path(scratch)
        memory = root / ".memsearch" / "memory"
        memory.mkdir(parents=True)
        scope = Scope(
            repository_dir=root,
            scope_dir=root,
            memory_dir=memory,
            collection="ms_fuzz_00000000",
            index_state_path=None,
        )
        store = MarkdownMemoryStore(scope)
        file = memory / f"{DAY.isoformat()}.md"
        tally = outcome.details.setdefault(
            "forgets", {"refused": 0, "entry": 0, "compact block": 0}
        )

        def check(case: Any) -> None:
            data = case.text.encode("utf-8", "surrogatepass")
            file.write_bytes(data)
            address: DayAddress | ChunkAddress = DayAddress(day=DAY, time=case.time)
            if case.section is not None:
                source = str(file) if case.section.source == "DAYFILE" else case.section.source
                address = ChunkAddress(section=attrs.evolve(case.section, source=source))
            try:
                redaction = store.forget_entry(address)
            except StoreError:
                assert file.read_bytes() == data, "a refused forget changed the file"
                tally["refused"] += 1
                return
            tally[redaction.kind] += 1
            after = file.read_bytes().decode("utf-8", "surrogatepass") if file.exists() else None
            assert redaction.deleted == (after is None)
            removed = redaction.removed.split("\n")
            if isinstance(address, DayAddress):
                match = _TIME_HEADING.match(removed[0])
                assert match, "what was removed is not an entry"
                assert match.group(1) == case.time, "another time's entry was removed"
                assert (
                    sum(
                        1
                        for line in case.text.split("\n")
                        if (m := _TIME_HEADING.match(line)) and m.group(1) == case.time
                    )
                    == 1
                ), "an ambiguous address was not refused"
            assert _explained(
                case.text.split("\n"),
                None if after is None else after.split("\n"),
                removed,
                redaction.kind,
            ), f"the forget changed more than the {redaction.kind} it removed: {after!r}"

        run_property(
            outcome, cases(), check, examples=examples, seed_value=seed_value, label="day-file"
        )
