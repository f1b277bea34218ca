"""The session's usage notes: what its memory showed the agent and what the agent made of it,
told to ``pimem_observe_usage`` one event at a time, off the agent's path.

The host's events (a prompt's snapshot and injections, a served search, expand or write, a
settle) only queue a note here: a dictionary or a string, no parsing, no file. The usage
worker turns notes into :class:`~pimem_core.usage_events.UsageEvent`\\ s in order, keeping
what memory gave the exchange in flight; capture's worker hands it the settled exchange's
window once it has read it from the transcript, and the worker then tells plugins what memory
gave that exchange beside what the agent said and did (docs/usage.md).
"""

from __future__ import annotations

import logging
import queue
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from pimem_core.api import Pimem
from pimem_core.day_file import without_anchors
from pimem_core.runtime.capture import Capture
from pimem_core.runtime.scheduler import Scheduler
from pimem_core.types import Anchor, BranchEntry, Injection, Scope
from pimem_core.usage_events import Given, GivenVia, ShownEntry, UsageEvent, UsageKind

log = logging.getLogger(__name__)

#: Settles whose window capture has not handed over yet, kept at most (the oldest go first).
MAX_WAITING_SETTLES = 16
#: How long the worker lets a burst of notes gather before it turns them into events
#: (seconds). A settle, its window and its capture come together, and capture is on the way to
#: the host's model: the record is written after that, not beside it for the interpreter lock.
BATCH_DELAY_S = 0.02
_DAY_FILE = re.compile(r"(\d{4}-\d{2}-\d{2})\.md$")
_TIME = re.compile(r"\d{2}:\d{2}")
#: A snapshot's section heading (``### Today (2026-12-06)``) and an entry's (``### 09:12``).
_SECTION = re.compile(r"^#{2,3}\s+.*\((\d{4}-\d{2}-\d{2})\)\s*$")
_HEADING = re.compile(r"^###\s+(\d{2}:\d{2})\s*$")
_ANY_HEADING = re.compile(r"^#{1,3}\s")
#: A search block's first line, as auto-context shows hits: ``1. 2026-12-06 09:12 | ...``.
_HIT_LINE = re.compile(r"^\d+\.\s+(\d{4}-\d{2}-\d{2})(?:\s+(\d{2}:\d{2}))?\s*(?:\||$)")
#: Memory's own tools: calling them is asking memory, not using what it gave.
_MEMORY_CALL = re.compile(r"^\s*memory[_.]")

Note = Callable[[], None]


class UsageLog:
    """The usage notes of one session on *scope*: see the module's documentation."""

    def __init__(
        self, pimem: Pimem, scope: Scope, session_id: str, scheduler: Scheduler | None
    ) -> None:
        self._pimem = pimem
        self._scope = scope
        self._session = session_id
        self._notes: queue.SimpleQueue[Note | None] = queue.SimpleQueue()
        # The worker's own state: touched by the worker thread alone.
        self._snapshot: str | None = None
        self._shown: tuple[ShownEntry, ...] = ()
        self._given: list[Given] = []
        self._settles: dict[str | None, tuple[Given, ...]] = {}
        self._worker = None if scheduler is None else scheduler.run("usage", self._work)
        self._note(lambda at: self._emit("session", at, project=str(scope.scope_dir)))

    @property
    def pimem(self) -> Pimem:
        return self._pimem

    @property
    def session(self) -> str:
        """The host's session id the notes are recorded under."""
        return self._session

    @property
    def recording(self) -> bool:
        """Whether notes reach the record (a worker takes them)."""
        return self._worker is not None

    # -- notes, from the host's events (cheap: queued, nothing else) ----------------------

    def prompted(self, snapshot: str | None, hidden: Sequence[Injection]) -> None:
        texts = tuple(injection.text for injection in hidden)
        self._note(lambda at: self._prompted(at, snapshot, texts))

    def served(self, path: Sequence[str], args: Mapping[str, object], data: object) -> None:
        """A command the agent ran through the session (``memory.search``, ...)."""
        word = path[0] if path else ""
        # Queued whatever it was: the worker keeps what it records (a search, an expand, a write).
        self._note(lambda at: self._served(at, word, args, data))

    def settled(self, leaf: str | None) -> None:
        self._note(lambda at: self._settled(leaf))

    def window(self, window: Sequence[BranchEntry]) -> None:
        """From capture's worker: a settled exchange, as read from the transcript."""
        self._note(lambda at: self._judge(at, tuple(window)))

    def captured(self, content: str, session: str | None = None) -> None:
        """Capture wrote *content*, for this session or, handed over, for *session*."""

        def note(at: datetime) -> None:
            shown = ShownEntry(day=at.date().isoformat(), time=f"{at:%H:%M}", text=content)
            self._emit("capture", at, entries=(shown,), session=session)

        self._note(note)

    def skipped(self, reason: str, session: str | None = None) -> None:
        self._note(lambda at: self._emit("capture", at, skipped=reason, session=session))

    def close(self, timeout: float = 1.0) -> None:
        """Write what is queued (within *timeout* seconds) and stop."""
        if self._worker is None:
            return
        self._notes.put(None)
        try:
            self._worker.result(timeout=max(0.0, timeout))
        except Exception:  # noqa: BLE001 - late or failed: the record is never worth a wait
            log.debug("the usage worker did not finish in time")

    # -- the worker -----------------------------------------------------------------------

    def _note(self, make: Callable[[datetime], None]) -> None:
        if self._worker is None:
            return
        at = self._pimem.settings.now().astimezone()
        self._notes.put(lambda: make(at))

    def _work(self) -> None:
        while (note := self._notes.get()) is not None:
            time.sleep(BATCH_DELAY_S)  # the rest of the burst is queued meanwhile
            while note is not None:
                try:
                    note()
                except Exception:  # one bad note must not stop the record
                    log.exception("a usage note failed")
                try:
                    note = self._notes.get_nowait()
                except queue.Empty:
                    break  # the burst is written: wait for the next
            else:
                return  # the end (close) came within the burst

    def _emit(
        self, kind: UsageKind, at: datetime, session: str | None = None, **fields: Any
    ) -> None:
        event = UsageEvent(kind=kind, session=session or self._session, at=at, **fields)
        self._pimem.observe_usage(self._scope, event)

    def _give(self, via: GivenVia, entries: Sequence[ShownEntry]) -> None:
        self._given.extend(Given(via=via, entry=entry) for entry in entries)

    def _prompted(self, at: datetime, snapshot: str | None, hidden: tuple[str, ...]) -> None:
        if snapshot != self._snapshot:
            self._snapshot = snapshot
            self._shown = tuple(text_entries(snapshot or ""))
            if self._shown:
                self._emit("snapshot", at, entries=self._shown)
        for text in hidden:
            entries = tuple(text_entries(text))
            if entries:
                self._give("injection", entries)
                self._emit("injection", at, entries=entries)

    def _served(self, at: datetime, word: str, args: Mapping[str, object], data: object) -> None:
        if word == "search" and isinstance(data, Mapping):
            hits = data.get("hits")
            entries = tuple(json_entry(hit) for hit in hits) if isinstance(hits, list) else ()
            first = hits[0] if isinstance(hits, list) and hits else None
            score = first.get("score") if isinstance(first, Mapping) else None
            self._give("search", entries)
            top = float(score) if isinstance(score, int | float) else None
            self._emit("search", at, query=str(args.get("query") or ""), entries=entries, top=top)
        elif word == "expand" and isinstance(data, Mapping):
            entry = json_entry(data.get("section"))
            self._give("expand", (entry,))
            self._emit("expand", at, entries=(entry,))
        elif word == "write" and isinstance(data, Mapping):
            found = _DAY_FILE.search(str(data.get("file") or ""))
            content = args.get("content")
            text = content if isinstance(content, str) else ""
            entry = ShownEntry(day=found.group(1) if found else "", time=f"{at:%H:%M}", text=text)
            self._emit("write", at, entries=(entry,))

    def _settled(self, leaf: str | None) -> None:
        self._settles[leaf] = (
            *(Given(via="snapshot", entry=entry) for entry in self._shown),
            *self._given,
        )
        self._given = []
        while len(self._settles) > MAX_WAITING_SETTLES:
            del self._settles[next(iter(self._settles))]

    def _judge(self, at: datetime, window: tuple[BranchEntry, ...]) -> None:
        """The settle *window* ends (its last message's id is the leaf settled, else it is the
        oldest settle waiting) and what memory gave it."""
        last = next((e.id for e in reversed(window) if e.kind == "message"), None)
        key = last if last in self._settles else next(iter(self._settles), last)
        given = self._settles.pop(key, None)
        if not given:
            return
        prompt = "\n".join(e.text for e in window if e.role == "user")
        answer = "\n".join(
            part
            for e in window
            if e.role == "assistant"
            for part in (e.text, *(c for c in e.tool_calls if not _MEMORY_CALL.match(c)))
        )
        self._emit("settled", at, given=given, prompt=prompt, answer=answer, turn=last)


def json_entry(data: object) -> ShownEntry:
    """The entry a hit or a section names (their JSON: ``source``, ``heading``, ``content``)."""
    if not isinstance(data, Mapping):
        return ShownEntry(day="")
    found = _DAY_FILE.search(str(data.get("source") or ""))
    heading = str(data.get("heading") or "").strip()
    content = data.get("content")
    return ShownEntry(
        day=found.group(1) if found else "",
        time=heading if _TIME.fullmatch(heading) else "",
        text=without_anchors(content).strip() if isinstance(content, str) else "",
    )


def text_entries(text: str) -> Iterator[ShownEntry]:
    """The entries a snapshot or a context message shows: ``### HH:MM`` entries under a
    heading that names their day, or numbered search blocks (``1. 2026-12-06 09:12 | ...``)."""
    day, time, lines = "", "", list[str]()
    started = False
    for line in text.splitlines():
        hit = _HIT_LINE.match(line)
        heading = _HEADING.match(line)
        if hit or heading or _ANY_HEADING.match(line):
            if started:
                yield ShownEntry(day=day, time=time, text="\n".join(lines).strip())
            started, lines = False, []
            if hit:
                day, time, started = hit.group(1), hit.group(2) or "", True
            elif heading:
                time, started = heading.group(1), True
            elif section := _SECTION.match(line):
                day = section.group(1)
            continue
        if started:
            lines.append(line)
    if started:
        yield ShownEntry(day=day, time=time, text="\n".join(lines).strip())


class Unrecorded(UsageLog):
    """The usage notes of a session no plugin records (none implements
    ``pimem_observe_usage``, as with ``PIMEM_DISABLE_PLUGINS=usage``), or of no session yet:
    no worker and no queue, so every note returns at once."""

    def __init__(self, pimem: Pimem, session_id: str = "") -> None:
        self._pimem = pimem
        self._session = session_id
        self._worker = None


def usage_log(pimem: Pimem, scope: Scope, session_id: str, scheduler: Scheduler | None) -> UsageLog:
    """The usage notes of a session on *scope*; unrecorded when no plugin would hear them:
    a worker that only drops events would still cost every prompt and memory call a note."""
    if not pimem.observes_usage():
        return Unrecorded(pimem, session_id)
    return UsageLog(pimem, scope, session_id, scheduler)


def recorded_capture(usage: UsageLog, *args: Any, **kwargs: Any) -> Capture:
    """Capture for a session with *usage*: recorded when *usage* records, plain otherwise."""
    if usage.recording:
        return RecordedCapture(usage, *args, **kwargs)
    return Capture(usage.pimem, *args, **kwargs)


class RecordedCapture(Capture):
    """Capture, with *usage*'s pimem, that tells *usage* what it saw and did: each exchange
    that passed the hard gates (to judge whether memory was used), each gate's skip, each
    entry written.

    A capture for another session than *usage*'s (what an earlier session handed over)
    records its captures and skips under that session and judges nothing: what memory gave
    those exchanges was noted by another process."""

    def __init__(self, usage: UsageLog, *args: Any, **kwargs: Any) -> None:
        self._usage = usage
        super().__init__(usage.pimem, *args, **kwargs)
        self._handed_over = self._session_id != usage.session

    def _gate(self, window: Sequence[BranchEntry]) -> str | None:
        if not self._handed_over:
            self._usage.window(window)
        return super()._gate(window)

    def _skip(self, reason: str) -> None:
        super()._skip(reason)
        self._usage.skipped(reason, self._recorded_as)

    def _write(self, anchor: Anchor, content: str) -> None:
        before = self.counters.captured
        super()._write(anchor, content)
        if self.counters.captured > before:
            self._usage.captured(content, self._recorded_as)

    @property
    def _recorded_as(self) -> str | None:
        return self._session_id if self._handed_over else None
