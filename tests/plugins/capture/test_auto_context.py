"""The auto-context plugin's choices, counters and crash rules, with a scripted recall."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from pimem_core.errors import PimemError
from pimem_core.service_values import CompactResult, IndexReport
from pimem_core.settings import Settings
from pimem_core.types import (
    BackendCall,
    PromptContext,
    Scope,
    SearchHit,
    SearchQuery,
    Section,
    StatusSection,
)
from pimem_plugins.auto_context import (
    CHAR_BUDGET,
    PREAMBLE,
    AutoContext,
    PromptRecall,
    build_message,
    select_chunks,
)
from pimem_plugins.shared.index_state import IndexHealth

ON = Settings.from_env({"PI_MEMSEARCH_AUTO_CONTEXT": "on"})
OFF = Settings.from_env({})


def hit(number: int, content: str = "", score: float = 0.9) -> SearchHit:
    return SearchHit(
        chunk_hash=f"{number:016x}",
        content=content or f"- fact number {number}",
        source="/repo/.memsearch/memory/2026-08-13.md",
        heading="22:41",
        heading_level=3,
        start_line=number,
        end_line=number + 2,
        score=score,
        score_kind="similarity",  # as the engine's recall answers
    )


@pytest.fixture
def scope(tmp_path: Path) -> Scope:
    return Scope(
        repository_dir=tmp_path,
        scope_dir=tmp_path,
        memory_dir=tmp_path / ".memsearch" / "memory",
        collection="ms_repo_0123abcd",
        index_state_path=None,
    )


def context(scope: Scope, prompt: str = "why Redis?", snapshot: str | None = None) -> PromptContext:
    return PromptContext(scope=scope, prompt=prompt, snapshot=snapshot, settings=ON)


Recall = Callable[[Scope, str, int], Sequence[tuple[SearchHit, float]]]


class ScriptedIndex:
    """A :class:`~pimem_core.services.MemoryIndex` whose similarity search is a script; the
    rest of it is never reached by auto-context."""

    def __init__(
        self, scope: Scope, recall: Recall, warm: Callable[[Scope], None] = lambda scope: None
    ) -> None:
        self.scope = scope
        self._recall = recall
        self._warm = warm
        self.pending = 0

    def similar(self, text: str, top_k: int) -> Sequence[tuple[SearchHit, float]]:
        return self._recall(self.scope, text, top_k)

    def warm(self) -> None:
        self._warm(self.scope)

    def pending_operations(self) -> int:
        return self.pending

    def index(self, reason: str, files: tuple[Path, ...], call: BackendCall) -> IndexReport:
        raise PimemError("not scripted")

    def search(self, query: SearchQuery, call: BackendCall) -> tuple[SearchHit, ...]:
        raise PimemError("not scripted")

    def expand(self, chunk_hash: str, call: BackendCall) -> Section:
        raise PimemError("not scripted")

    def compact(self, call: BackendCall) -> CompactResult:
        raise PimemError("not scripted")

    def health(self) -> IndexHealth:
        return IndexHealth(state_path=None)

    def status(self) -> tuple[StatusSection, ...]:
        return ()


def warm_plugin(scope: Scope, recall: Recall) -> tuple[PromptRecall, ScriptedIndex]:
    plugin = PromptRecall(budget=0.2)
    index = ScriptedIndex(scope, recall)
    plugin.start(settings=ON, index=index)
    wait_for(lambda: plugin.state == "warm")
    return plugin, index


def settled(plugin: PromptRecall, index: ScriptedIndex) -> bool:
    """No search of the plugin's running or queued, and no other memory work."""
    late = plugin._in_flight
    return not plugin._busy(index) and (late is None or late.done())


def wait_for(condition: Callable[[], bool]) -> None:
    """Poll a background state change (a deadline to fail on, not a timing assertion)."""
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "the state never changed"
        time.sleep(0.01)


# -- what gets injected --------------------------------------------------------------------------


def test_only_chunks_similar_enough_and_not_in_the_snapshot_are_chosen() -> None:
    hits = [(hit(1), 0.8), (hit(2), 0.3), (hit(3, "- already shown"), 0.9), (hit(4), 0.5)]
    chosen = select_chunks(hits, min_similarity=0.5, snapshot="## Memory\n- already shown\n")
    assert [c.chunk_hash for c in chosen] == [hit(1).chunk_hash, hit(4).chunk_hash]


def test_an_entry_the_snapshot_shows_without_its_anchor_is_not_injected_again() -> None:
    """The default snapshot shows entries without their session anchors (ADR 0022)."""
    anchor = "<!-- session:s1 turn:t1 transcript:/home/you/.pi/s1.jsonl -->"
    shown = hit(1, f"### 22:41\n{anchor}\n- the team chose Redis")
    other = hit(2, f"### 22:45\n{anchor}\n- the team chose Kafka")
    only_anchor = hit(3, anchor)
    snapshot = "## Project memory\n\n### Today (2026-08-13)\n\n### 22:41\n- the team chose Redis"
    chosen = select_chunks(
        [(shown, 0.9), (other, 0.9), (only_anchor, 0.9)], min_similarity=0.5, snapshot=snapshot
    )
    assert chosen == [other, only_anchor]


def test_at_most_three_chunks_in_rank_order() -> None:
    hits = [(hit(n), 0.9) for n in range(1, 6)]
    assert [c.start_line for c in select_chunks(hits, min_similarity=0, snapshot=None)] == [1, 2, 3]


def test_the_message_is_search_blocks_after_a_preamble() -> None:
    message = build_message([hit(1), hit(2, score=0.85)])
    assert message is not None
    assert message == (
        f"{PREAMBLE}\n\n"
        "1. 2026-08-13 22:41 | similarity 0.90 | chunk 0000000000000001\n- fact number 1\n\n"
        "2. 2026-08-13 22:41 | similarity 0.85 | chunk 0000000000000002\n- fact number 2"
    )


def test_injected_hits_tied_on_their_score_say_so_as_a_search_does() -> None:
    message = build_message([hit(1, score=0.904), hit(2, score=0.901)])
    assert message is not None
    assert "2. 2026-08-13 22:41 | similarity 0.90 (tied with 1) | chunk 0000000000000002" in message


def test_blocks_stop_at_the_character_budget_and_a_long_first_one_is_cut() -> None:
    long = hit(1, "x" * (CHAR_BUDGET + 500))
    message = build_message([long, hit(2)])
    assert message is not None
    assert len(message) == len(PREAMBLE) + 2 + CHAR_BUDGET
    assert "chunk 0000000000000002" not in message
    assert build_message([]) is None


# -- per prompt ----------------------------------------------------------------------------------


def test_off_by_default_it_never_searches(scope: Scope) -> None:
    calls: list[str] = []

    def recall(scope: Scope, text: str, top_k: int) -> list[tuple[SearchHit, float]]:
        calls.append(text)
        return []

    plugin, index = PromptRecall(), ScriptedIndex(scope, recall)
    plugin.start(settings=OFF, index=index)
    off = PromptContext(scope=scope, prompt="why Redis?", snapshot=None, settings=OFF)
    assert list(plugin.inject(context=off, index=index)) == []
    assert calls == []
    (status,) = plugin.status(OFF)
    assert status.lines == ("auto-context: off (set PI_MEMSEARCH_AUTO_CONTEXT=on to enable)",)


def test_a_relevant_hit_becomes_a_hidden_message(scope: Scope) -> None:
    queries: list[str] = []

    def recall(scope: Scope, text: str, top_k: int) -> list[tuple[SearchHit, float]]:
        queries.append(text)
        return [(hit(1, "- chose Redis for the hot cache"), 0.71)]

    plugin, index = warm_plugin(scope, recall)
    (injection,) = plugin.inject(context=context(scope, "x" * 600), index=index)
    assert injection.placement == "hidden-message"
    assert "- chose Redis for the hot cache" in injection.text
    assert queries == ["x" * 500]  # the prompt's first 500 characters
    assert plugin.counters.injected == 1
    assert plugin.counters.last_injection_ms is not None


def test_nothing_relevant_counts_as_empty(scope: Scope) -> None:
    plugin, index = warm_plugin(scope, lambda s, q, k: [(hit(1), 0.2)])
    assert list(plugin.inject(context=context(scope), index=index)) == []
    assert plugin.counters.skipped_empty == 1


def test_a_failing_search_counts_as_an_error_and_the_prompt_goes_on(scope: Scope) -> None:
    def recall(scope: Scope, text: str, top_k: int) -> list[tuple[SearchHit, float]]:
        raise RuntimeError("database locked")

    plugin, index = warm_plugin(scope, recall)
    assert list(plugin.inject(context=context(scope), index=index)) == []
    assert plugin.counters.skipped_error == 1


def test_prompts_while_warming_are_skipped_for_the_deadline(scope: Scope) -> None:
    release = threading.Event()

    def warm(scope: Scope) -> None:
        release.wait(10)

    plugin, index = PromptRecall(), ScriptedIndex(scope, lambda s, q, k: [], warm)
    plugin.start(settings=ON, index=index)
    assert list(plugin.inject(context=context(scope), index=index)) == []
    assert plugin.counters.skipped_budget == 1
    release.set()
    wait_for(lambda: plugin.state == "warm")


def test_three_misses_in_a_row_restart_it_and_the_third_crash_turns_it_off(scope: Scope) -> None:
    hang = threading.Event()

    def slow(scope: Scope, text: str, top_k: int) -> list[tuple[SearchHit, float]]:
        hang.wait(0.5)
        return []

    plugin, index = warm_plugin(scope, slow)
    for crash in range(3):
        for _ in range(3):
            wait_for(lambda: settled(plugin, index))
            assert plugin.state == "warm"
            assert list(plugin.inject(context=context(scope), index=index)) == []
        if crash < 2:
            wait_for(lambda: plugin.state == "warm")
    assert plugin.state == "gave-up"
    assert plugin.restarts == 2
    assert plugin.counters.skipped_budget == 9
    assert list(plugin.inject(context=context(scope), index=index)) == []
    assert plugin.counters.skipped_error == 1
    (status,) = plugin.status(ON)
    assert status.lines[0].startswith("auto-context: on (gave-up")
    assert "10 seen, 0 injected, 9 skipped for the deadline" in status.lines[1]


def test_a_served_prompt_resets_the_streak(scope: Scope) -> None:
    slow = threading.Event()

    def recall(scope: Scope, text: str, top_k: int) -> list[tuple[SearchHit, float]]:
        if text == "slow":
            slow.wait(0.5)
        return [(hit(1), 0.9)]

    plugin, index = warm_plugin(scope, recall)
    for prompt in ("slow", "slow", "fast", "slow", "slow"):
        wait_for(lambda: settled(plugin, index))
        list(plugin.inject(context=context(scope, prompt), index=index))
    assert plugin.restarts == 0
    assert plugin.misses_in_a_row == 2


def test_a_prompt_behind_a_late_search_waits_for_it_and_is_served(scope: Scope) -> None:
    first = threading.Event()
    searched: list[str] = []

    def recall(scope: Scope, text: str, top_k: int) -> list[tuple[SearchHit, float]]:
        searched.append(text)
        if text == "late":
            first.wait(10)
        return [(hit(len(searched)), 0.9)]

    plugin, index = warm_plugin(scope, recall)
    assert list(plugin.inject(context=context(scope, "late"), index=index)) == []
    assert plugin.counters.skipped_budget == 1
    # The late search ends while the next prompt waits (with a budget long enough for any
    # machine): that prompt is searched, not skipped.
    plugin._budget = 10.0
    threading.Timer(0.05, first.set).start()
    (injection,) = plugin.inject(context=context(scope, "next"), index=index)
    assert searched == ["late", "next"]
    assert "fact number 2" in injection.text
    assert plugin.counters.skipped_budget == 1
    assert plugin.misses_in_a_row == 0


def test_a_prompt_still_queued_at_its_deadline_is_dropped_not_run_later(scope: Scope) -> None:
    stuck = threading.Event()
    searched: list[str] = []

    def recall(scope: Scope, text: str, top_k: int) -> list[tuple[SearchHit, float]]:
        searched.append(text)
        stuck.wait(10)
        return []

    plugin, index = warm_plugin(scope, recall)
    for prompt in ("stuck", "queued"):
        assert list(plugin.inject(context=context(scope, prompt), index=index)) == []
    stuck.set()
    wait_for(lambda: settled(plugin, index))
    assert searched == ["stuck"]
    assert plugin.counters.skipped_budget == 2
    assert plugin.misses_in_a_row == 2


def test_each_scope_has_its_own_state_and_counters(scope: Scope, tmp_path: Path) -> None:
    """Two sessions in one process (the memory service) on different scopes do not share
    auto-context's warming, counters or status."""
    other = Scope(
        repository_dir=tmp_path / "other",
        scope_dir=tmp_path / "other",
        memory_dir=tmp_path / "other" / ".memsearch" / "memory",
        collection="ms_other_0123abcd",
        index_state_path=None,
    )
    plugin = AutoContext(budget=0.2)
    index = ScriptedIndex(scope, lambda s, q, k: [])
    plugin.pimem_start_session(scope=scope, settings=ON, index=index)
    wait_for(lambda: plugin.recall_for(scope).state == "warm")
    list(plugin.pimem_collect_injections(context=context(scope), index=index))
    assert plugin.recall_for(scope).counters.seen == 1
    assert plugin.recall_for(other).state == "idle"
    (status,) = plugin.pimem_collect_status(scope=other, settings=ON, index=None)
    assert status.data["seen"] == 0
    assert status.data["state"] == "idle"
