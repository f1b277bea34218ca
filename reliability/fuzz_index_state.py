"""Fuzzing the index-state parser: ``.index-state.json`` as memsearch writes it, drifted or junk.

``parse_index_state`` answers an ``IndexState`` or raises ``IndexStateError``; the status hook
built on it never raises at all (a broken state file is reported, not fatal), and its lines
render whatever the fields hold.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from pimem_core.types import Scope
from pimem_plugins.shared.index_state import (
    IndexState,
    IndexStateError,
    describe_index_health,
    parse_index_state,
    read_index_health,
)
from reliability.fuzzing import run_property
from reliability.outcome import Outcome
from reliability.strategies import DEEP, JSON_VALUES, TEXT, damaged, dumps

FAILED = st.one_of(
    st.fixed_dictionaries({"path": TEXT, "error": TEXT}),
    st.dictionaries(st.sampled_from(["path", "error", "x"]), JSON_VALUES, max_size=3),
    JSON_VALUES,
)
STATE = st.fixed_dictionaries(
    {},
    optional={
        "schema_version": st.one_of(
            st.just(1), st.sampled_from([0, 2, 1.0, True, "1"]), JSON_VALUES
        ),
        "status": st.one_of(st.sampled_from(["ok", "degraded", "error", "running"]), JSON_VALUES),
        "failed_files": st.one_of(st.lists(FAILED, max_size=4), JSON_VALUES),
        "last_completed_at": st.one_of(TEXT, JSON_VALUES),
        "last_error": st.one_of(TEXT, JSON_VALUES),
        "collection": st.one_of(st.sampled_from(["ms_a_12345678", "bad name"]), JSON_VALUES),
        "indexed_chunks": JSON_VALUES,
    },
)


@st.composite
def state_texts(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["state", "state", "state", "json", "text", "deep"]))
    if kind == "state":
        return draw(damaged(dumps(draw(STATE))))
    if kind == "json":
        return dumps(draw(JSON_VALUES))
    if kind == "deep":
        return draw(DEEP)
    return draw(TEXT)


def run(outcome: Outcome, examples: int, seed_value: int) -> None:
    with tempfile.TemporaryDirectory(prefix="pimem-fuzz-state-") as scratch:
        memory = Path(scratch) / ".memsearch" / "memory"
        state_file = memory.parent / ".index-state.json"
        memory.mkdir(parents=True)
        scope = Scope(
            repository_dir=Path(scratch),
            scope_dir=Path(scratch),
            memory_dir=memory,
            collection="ms_fuzz_00000000",
            index_state_path=state_file,
        )

        def check(text: Any) -> None:
            try:
                state = parse_index_state(text)
            except IndexStateError:
                pass
            else:
                assert isinstance(state, IndexState)
                assert isinstance(state.status, str)
            state_file.write_text(text, encoding="utf-8", errors="surrogatepass")
            health = read_index_health(scope)  # must never raise
            lines = describe_index_health(health)
            assert lines, health
            assert all(isinstance(line, str) for line in lines)

        run_property(
            outcome,
            state_texts(),
            check,
            examples=examples,
            seed_value=seed_value,
            label="index-state",
        )
