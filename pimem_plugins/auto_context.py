"""The ``auto-context`` plugin: memory relevant to each prompt, as a hidden message, on a deadline.

On with ``PI_MEMSEARCH_AUTO_CONTEXT=on``. For every prompt (its first 500 characters) the
chunks most similar to it are looked up in the session's opened index
(:meth:`~pimem_core.services.MemoryIndex.similar`), whichever plugin provides it. Hits are injected
only when they are *about* the prompt: with pimem's ranker the filter is the hit's relevance
(``PIMEM_AUTO_CONTEXT_MIN_RELEVANCE``, docs/recall.md); an index that scores by rank fusion
gets the cosine similarity between the prompt and the chunk instead
(``PIMEM_AUTO_CONTEXT_MIN_SIMILARITY``; see ADR 0008). Chunks
already verbatim in the snapshot are dropped; at most 3 chunks and 2,000 characters go in.

The host waits on this, so it never takes longer than its budget: a search that misses it
injects nothing. Three misses in a row count as a crash; the embedder is warmed again, and
after the second restart auto-context is off for the rest of the session.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Literal

import attrs

from pimem_core.plugin import (
    DayText,
    Injection,
    MemoryIndex,
    PendingWork,
    PromptContext,
    Scope,
    SearchHit,
    Settings,
    SettingSpec,
    SimilaritySearch,
    StatusSection,
    Warming,
    hookimpl,
    render_hit_blocks,
)

TOP_K = 3
CHAR_BUDGET = 2_000
QUERY_LIMIT = 500
#: The host waits 300 ms for the whole prompt answer; the search gets this much of it.
BUDGET_SECONDS = 0.25
MISSES_FOR_A_CRASH = 3
MAX_RESTARTS = 2
SOURCE = "auto-context"

log = logging.getLogger(__name__)

#: Calibrated for the offline all-MiniLM-L6-v2 model (docs/benchmarks.md, auto-context).
DEFAULT_MIN_SIMILARITY = 0.5
#: Above pimem's search threshold (0.3, docs/recall.md): an injection nobody asked for costs
#: more than a search hit left out. The lowest floor that injected at most 1 in 50 prompts
#: with no memory about them, on the benchmark's 2,000-chunk store, where every floor from
#: 0.02 to 0.8 served the same answerable prompts (docs/benchmarks.md).
DEFAULT_MIN_RELEVANCE = 0.8
ENABLED = SettingSpec.switch(
    plugin=SOURCE,
    name="enabled",
    env="PI_MEMSEARCH_AUTO_CONTEXT",
    default=False,
    help="inject memory relevant to each prompt",
    per_session=True,
)


def _floor(name: str, env: str, default: float, help: str) -> SettingSpec[float]:
    """A floor (0 to 1) a chunk's score must reach to be injected, set per session."""
    return SettingSpec.fraction(
        plugin=SOURCE,
        name=name,
        env=env,
        default=default,
        help=help,
        per_session=True,
    )


MIN_RELEVANCE = _floor(
    "min_relevance",
    "PIMEM_AUTO_CONTEXT_MIN_RELEVANCE",
    DEFAULT_MIN_RELEVANCE,
    "how relevant (pimem's relevance, 0 to 1) a chunk must be to the prompt to be injected",
)
MIN_SIMILARITY = _floor(
    "min_similarity",
    "PIMEM_AUTO_CONTEXT_MIN_SIMILARITY",
    DEFAULT_MIN_SIMILARITY,
    "how close (cosine similarity, 0 to 1) a chunk must be to the prompt to be injected",
)

PREAMBLE = (
    "Memory recalled for this prompt (auto-context): chunks of the shared project memory that "
    "are close to what was just asked. They may be out of date; the conversation and the code "
    "win. memory_expand with a chunk hash shows the whole section."
)

#: ``idle`` until a session starts in this process (``pimem status`` in a terminal stays idle:
#: auto-context runs in an agent session's bridge).
State = Literal["idle", "warming", "warm", "restarting", "gave-up"]


@attrs.define
class Counters:
    seen: int = 0
    injected: int = 0
    skipped_budget: int = 0
    skipped_empty: int = 0
    skipped_error: int = 0
    last_injection_ms: float | None = None


def select_chunks(
    hits: Sequence[tuple[SearchHit, float]],
    *,
    min_similarity: float,
    snapshot: str | None,
    min_relevance: float = DEFAULT_MIN_RELEVANCE,
) -> list[SearchHit]:
    """The hits worth injecting: relevant (or similar) enough, not already in the snapshot,
    at most 3. A hit scored by relevance is held to the relevance floor; one scored by cosine
    similarity (an index without pimem's ranker) to the similarity floor."""
    chosen = [
        hit
        for hit, score in hits
        if score >= (min_relevance if hit.score_kind == "relevance" else min_similarity)
        and not (snapshot and _shown_in(hit.content, snapshot))
    ]
    return chosen[:TOP_K]


def _shown_in(content: str, snapshot: str) -> bool:
    """Whether *snapshot* already shows *content*: verbatim, or as the default snapshot shows
    an entry, without its session anchor (ADR 0022)."""
    if content in snapshot:
        return True
    shown = DayText(content).without_anchors().strip("\n")
    return bool(shown.strip()) and shown in snapshot


def build_message(hits: Sequence[SearchHit]) -> str | None:
    """The hidden message: search blocks within the character budget (the first always fits,
    cut if it must be)."""
    blocks: list[str] = []
    used = 0
    for block in render_hit_blocks(hits):
        if blocks and used + len(block) > CHAR_BUDGET:
            break
        blocks.append(block[:CHAR_BUDGET])
        used += len(blocks[-1])
    return PREAMBLE + "\n\n" + "\n\n".join(blocks) if blocks else None


class AutoContext:
    """The ``auto-context`` plugin: a :class:`PromptRecall` of its own for each scope, so that
    sessions sharing one process (the memory service) keep their own state and counters."""

    def __init__(self, budget: float = BUDGET_SECONDS) -> None:
        self._budget = budget
        self._lock = threading.Lock()
        self._recalls: dict[Scope, PromptRecall] = {}

    def recall_for(self, scope: Scope) -> PromptRecall:
        with self._lock:
            recall = self._recalls.get(scope)
            if recall is None:
                recall = self._recalls[scope] = PromptRecall(self._budget)
            return recall

    @staticmethod
    @hookimpl
    def pimem_declare_settings() -> tuple[
        SettingSpec[bool], SettingSpec[float], SettingSpec[float]
    ]:
        return (ENABLED, MIN_RELEVANCE, MIN_SIMILARITY)

    @hookimpl
    def pimem_start_session(
        self, scope: Scope, settings: Settings, index: MemoryIndex | None
    ) -> None:
        self.recall_for(scope).start(settings, index)

    @hookimpl
    def pimem_collect_injections(
        self, context: PromptContext, index: MemoryIndex | None
    ) -> Iterator[Injection]:
        return self.recall_for(context.scope).inject(context, index)

    @hookimpl
    def pimem_collect_status(
        self, scope: Scope, settings: Settings, index: MemoryIndex | None
    ) -> Iterator[StatusSection]:
        recall = self.recall_for(scope)
        recall.see(index)
        return recall.status(settings)


class PromptRecall:
    """Per-prompt recall for one scope: warming, the deadline, restarts and counters."""

    def __init__(self, budget: float = BUDGET_SECONDS) -> None:
        self._budget = budget
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="pimem-auto-context")
        self._in_flight: Future[Sequence[tuple[SearchHit, float]]] | None = None
        self.state: State = "idle"
        self.counters = Counters()
        self.misses_in_a_row = 0
        self.restarts = 0
        self.last_error: str | None = None
        #: The settings of the session that turned it on: a command served beside that session
        #: (``pimem status`` through the memory service) reports the session's recall.
        self.session_settings: Settings | None = None
        #: The index's kind, when it offers no similarity search: auto-context is off for it.
        self.unsupported: str | None = None

    # -- lifecycle ----------------------------------------------------------------------

    def start(self, settings: Settings, index: MemoryIndex | None) -> None:
        if not ENABLED.read(settings):
            return
        self.session_settings = settings
        if index is not None and self.see(index) is not None and self.state == "idle":
            self._start_warming(index)

    def see(self, index: MemoryIndex | None) -> SimilaritySearch | None:
        """*index* as auto-context searches it, or ``None``; an index that offers no
        similarity search is remembered, for status to say why auto-context is off."""
        if index is None:
            return None
        if isinstance(index, SimilaritySearch):
            self.unsupported = None
            return index
        self.unsupported = type(index).__name__
        return None

    def _start_warming(self, index: MemoryIndex, state: State = "warming") -> None:
        self.state = state
        if not isinstance(index, Warming):
            self.state = "warm"  # nothing to load ahead: the first search does it
            return

        def warm() -> None:
            try:
                index.warm()
            except Exception as error:  # noqa: BLE001 - the prompts that follow report it
                self.last_error = str(error)
                log.warning("auto-context could not warm the embedder: %s", error)
            with self._lock:
                if self.state in ("warming", "restarting"):
                    self.state = "warm"

        threading.Thread(target=warm, name="pimem-auto-context-warm", daemon=True).start()

    # -- per prompt ---------------------------------------------------------------------

    def inject(self, context: PromptContext, index: MemoryIndex | None) -> Iterator[Injection]:
        settings = context.settings
        searchable = self.see(index)
        if not ENABLED.read(settings) or index is None or searchable is None:
            return  # off, or no index to search by similarity
        started = time.monotonic()
        self.counters.seen += 1
        if self.state == "idle":
            self._start_warming(index)
        if self.state == "gave-up":
            self.counters.skipped_error += 1
            return
        if self.state != "warm" or self._busy(index):
            # Still warming, or the backend is busy with other memory work: answering would
            # mean waiting in line, and the prompt does not wait.
            self.counters.skipped_budget += 1
            return
        query = context.prompt[:QUERY_LIMIT]
        if not query.strip():
            self.counters.skipped_empty += 1
            return
        # The pool has one thread: behind a previous prompt's late search, this one waits for
        # it within its own budget (it is usually about to finish) instead of giving up.
        previous = self._in_flight
        future = self._pool.submit(searchable.similar, query, TOP_K)
        self._in_flight = future
        try:
            hits = future.result(timeout=max(0.0, self._budget - (time.monotonic() - started)))
        except FutureTimeout:
            if future.cancel():
                self._in_flight = previous  # never started: the late one is still the one to watch
            self._missed(index)
            return
        except Exception as error:  # noqa: BLE001 - a locked or broken database: no memory now
            self.last_error = str(error)
            self.misses_in_a_row = 0
            self.counters.skipped_error += 1
            return
        self.misses_in_a_row = 0
        chunks = select_chunks(
            hits,
            min_similarity=MIN_SIMILARITY.read(settings),
            min_relevance=MIN_RELEVANCE.read(settings),
            snapshot=context.snapshot,
        )
        message = build_message(chunks)
        if message is None:
            self.counters.skipped_empty += 1
            return
        self.counters.injected += 1
        self.counters.last_injection_ms = (time.monotonic() - started) * 1000
        yield Injection(text=message, placement="hidden-message", source=SOURCE)

    def _busy(self, index: MemoryIndex) -> bool:
        """Whether other memory work (a capture, an index run) holds the index; a search of
        ours still running is not other work."""
        if not isinstance(index, PendingWork):
            return False  # it cannot tell: the deadline still bounds the wait
        own = self._in_flight is not None and not self._in_flight.done()
        return index.pending_operations() > int(own)

    def _missed(self, index: MemoryIndex) -> None:
        self.counters.skipped_budget += 1
        self.misses_in_a_row += 1
        if self.misses_in_a_row < MISSES_FOR_A_CRASH:
            return
        self.misses_in_a_row = 0
        if self.restarts >= MAX_RESTARTS:
            self.state = "gave-up"
            return
        self.restarts += 1
        self._start_warming(index, "restarting")

    # -- status -------------------------------------------------------------------------

    def status(self, settings: Settings) -> Iterator[StatusSection]:
        counters = self.counters
        where = ""
        if not ENABLED.read(settings) and self.session_settings is not None:
            settings, where = self.session_settings, " in an agent session"
        if not ENABLED.read(settings):
            yield StatusSection(
                name=SOURCE,
                rank=40,
                lines=("auto-context: off (set PI_MEMSEARCH_AUTO_CONTEXT=on to enable)",),
                data={"enabled": False},
            )
            return
        if self.unsupported is not None:
            yield StatusSection(
                name=SOURCE,
                rank=40,
                lines=(
                    f"auto-context: off: the index ({self.unsupported}) offers no similarity "
                    "search (SimilaritySearch.similar)",
                ),
                data={
                    "enabled": False,
                    "reason": "no similarity search",
                    "index": self.unsupported,
                },
            )
            return
        lines = [
            f"auto-context: on{where} ({self.state}, relevance floor {MIN_RELEVANCE.read(settings):g}, "
            f"similarity floor {MIN_SIMILARITY.read(settings):g})",
            f"auto-context prompts: {counters.seen} seen, {counters.injected} injected, "
            f"{counters.skipped_budget} skipped for the deadline, {counters.skipped_empty} "
            f"with nothing relevant, {counters.skipped_error} skipped on errors",
        ]
        if counters.last_injection_ms is not None:
            lines.append(f"auto-context last injection: {counters.last_injection_ms:.0f} ms")
        if self.last_error is not None:
            lines.append(f"auto-context last error: {self.last_error}")
        yield StatusSection(
            name=SOURCE,
            rank=40,
            lines=tuple(lines),
            data={
                "enabled": True,
                "in_session": bool(where),
                "state": self.state,
                "restarts": self.restarts,
                "last_error": self.last_error,
                "min_similarity": MIN_SIMILARITY.read(settings),
                **attrs.asdict(counters),
            },
        )
