"""Capture: turning each settled exchange into one memory entry, in the background.

The exchange is cut from the session's current branch, passes hard gates only (a user message,
assistant text, not aborted, and the plugins' gates of ``pimem_gate_exchange``: not about
memory itself, not small talk), is scrubbed of secrets, distilled and appended. Nothing here
runs on the agent's path: ``Capture.submit`` only queues. Exchanges are handled one at a time,
so entries never interleave, and an exchange that reached distillation always leaves an entry
(the bullets, or a diagnostic marker carrying the same anchor) unless its distiller answered
that it holds nothing to keep (ADR 0021).
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

import attrs

from pimem_core.api import Pimem
from pimem_core.errors import PimemError
from pimem_core.render import render_captured_redaction
from pimem_core.runtime.budget import DistillBudget
from pimem_core.runtime.exchange_window import (
    exchange_window,
    passes_gates,
    scrubbed_messages,
)
from pimem_core.runtime.journal import CaptureJournal, Pending
from pimem_core.runtime.repeats import recent_facts, repeats
from pimem_core.runtime.scheduler import Scheduler
from pimem_core.settings import DISTILL_HOOK, DISTILLER_NAMES
from pimem_core.types import (
    Anchor,
    BranchEntry,
    DistillRequest,
    Entry,
    Exchange,
    HostModel,
    Scope,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

ABORTED_AT_SHUTDOWN = "aborted by the shutdown cap"
#: Entries held while the store refuses appends; beyond this the oldest is dropped.
MAX_UNWRITTEN = 100


#: The reasons counted for an exchange the hard gates stop, and for an entry memory holds.
INCOMPLETE = "incomplete"
DUPLICATE = "duplicate"
#: The distiller answered that the exchange holds nothing worth recalling.
NOTHING_TO_KEEP = "nothing to keep"

#: How a marker entry's content begins.
MARKER_PREFIX = "- [pimem] this exchange could not be distilled"


def marker(reason: str) -> str:
    """The diagnostic entry written when distillation fails: the anchor above it stays intact."""
    one_line = " ".join(reason.split()) or "unknown error"
    return f"{MARKER_PREFIX}: {one_line}"


@attrs.define
class CaptureCounters:
    """What capture did in this session (this process), for status; what the store holds today,
    from every session, is :mod:`pimem_core.runtime.store_today`'s line."""

    captured: int = 0
    distilled: int = 0
    extractive: int = 0
    failed: int = 0
    #: Exchanges not captured, by the reason of the gate that stopped them.
    skipped: dict[str, int] = attrs.field(factory=dict)
    #: Entries distilled but not written yet (the store refused the append): retried first
    #: at the next capture and at shutdown.
    unwritten: int = 0


@attrs.frozen(kw_only=True)
class _Settled:
    leaf: str | None
    branch: tuple[BranchEntry, ...] | None
    #: Set for an exchange a previous process left unfinished in the journal.
    recovered: Pending | None = None
    #: In the journal under *leaf* since it was queued: a process killed before capturing it
    #: hands it to the next one.
    journaled: bool = False


class Capture:
    """The capture queue of one session. *on_notice* hears what the user should be told (a
    secret redacted, a line added to ``.gitattributes``) with the notice's kind; *after_host*:
    the host has gone, and an exchange only its model would distil is left in the journal,
    with every one after it."""

    def __init__(
        self,
        pimem: Pimem,
        scope: Scope,
        *,
        session_id: str,
        transcript: Path,
        host_model: HostModel | None,
        budget: DistillBudget,
        journal: CaptureJournal | None = None,
        scheduler: Scheduler | None = None,
        on_notice: Callable[[str, str | None], None] | None = None,
        after_host: bool = False,
    ) -> None:
        self._pimem = pimem
        self._notice = functools.partial(_notify, on_notice)
        self._after_host = after_host
        self._scope = scope
        self._session_id = session_id
        self._transcript = transcript
        self._host_model = host_model
        self._budget = budget
        self._jobs: queue.SimpleQueue[_Settled | None] = queue.SimpleQueue()
        self._pending = 0
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._abort = threading.Event()
        #: Set by :meth:`leave`: what is left stays in the journal, untouched.
        self._leaving = False
        self._last_captured: str | None = None
        self._unwritten: list[Entry] = []
        #: Why the last append failed, while entries wait to be written.
        self.last_write_error: str | None = None
        self.counters = CaptureCounters()
        self._journal = journal
        #: The leaf queued last: where the window of the next queued exchange begins.
        self._last_queued: str | None = None
        self._scheduler = scheduler or Scheduler("pimem-capture")
        self._worker = self._scheduler.run("capture", self._work)
        for item in journal.pending() if journal is not None else ():
            # A process before this one stopped while capturing these: capture them first.
            with self._lock:
                self._pending += 1
                self._last_queued = item.turn
            self._jobs.put(_Settled(leaf=item.turn, branch=None, recovered=item, journaled=True))

    def submit(self, leaf: str | None, branch: Sequence[BranchEntry] | None) -> None:
        """Queue the settled exchange ending at *leaf* (or the given *branch*). Returns at once."""
        with self._lock:
            self._pending += 1
            after, self._last_queued = self._last_queued, leaf or self._last_queued
        # Journaled before it waits in the queue: a bridge killed while earlier exchanges are
        # distilled would otherwise lose this one with its queue.
        journaled = False
        if self._journal is not None and leaf is not None:
            self._journal.add(Pending(turn=leaf, after=after))
            journaled = True
        self._jobs.put(
            _Settled(
                leaf=leaf, branch=None if branch is None else tuple(branch), journaled=journaled
            )
        )

    def drain(self, deadline: float) -> bool:
        """Wait until every queued exchange is written, or *deadline* (monotonic) passes; at the
        deadline, the rest is written as markers right away. ``True`` if all drained in time."""
        if not self.waiting_until(deadline):
            return True
        self._abort.set()
        with self._idle:
            self._idle.wait_for(lambda: self._pending == 0, timeout=5)
        return False

    def close(self) -> None:
        self._jobs.put(None)

    def finish(self, deadline: float) -> int:
        """Wait until every queued exchange is written or *deadline* (monotonic) passes, then
        close; what is not written then is left (:meth:`leave`), not written as markers.
        Returns how many exchanges were left."""
        left = self.waiting_until(deadline)
        (self.leave if left else self.close)()
        return left

    def waiting_until(self, deadline: float) -> int:
        """The exchanges not captured yet once all are or *deadline* (monotonic) passed."""
        with self._idle:
            while self._pending and time.monotonic() < deadline:
                self._idle.wait(max(0.0, min(0.05, deadline - time.monotonic())))
            return self._pending

    def stopped(self, timeout: float) -> None:  # the worker ended, after `leave`, or timed out
        concurrent.futures.wait([self._worker], max(0.0, timeout))

    def leave(self) -> None:
        """Stop at once, write nothing more, and leave what is not written in the journal for
        a later process, as a killed bridge would (the host went away, or stopped waiting)."""
        self._leaving = True
        self._abort.set()
        self._jobs.put(None)

    # -- the worker ---------------------------------------------------------------------

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                if not self._leaving:
                    self._capture(job)
            except _Left:
                pass  # in the journal still, for the next process
            except _NeedsHost:  # this one and the rest wait for a session with a host
                self._leaving = True
            except Exception:  # one bad exchange must not stop capture
                log.exception("capture failed for the exchange ending at %s", job.leaf)
            finally:
                held = {entry.anchor.turn for entry in self._unwritten}
                leaf = job.leaf if job.journaled and not self._leaving else None
                if leaf is not None and leaf not in held:
                    self._forget_pending(leaf)  # done with, whichever way it went
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()
        self._flush()  # a last try at close

    def _capture(self, job: _Settled) -> None:
        if job.recovered is not None:
            if self._written(job.recovered.turn):  # killed after the append: nothing to redo
                self._forget_pending(job.recovered.turn)
                return
            self._last_captured = job.recovered.after
        branch = job.branch
        if branch is None:
            try:
                branch = self._pimem.read_branch(self._transcript, leaf=job.leaf)
            except PimemError as error:
                if job.leaf is not None:  # keep a trace that something settled here
                    anchor = self._anchor(job.leaf)
                    self.counters.failed += 1
                    self._write(anchor, marker(f"the transcript could not be read: {error}"))
                return
        window = exchange_window(branch, self._last_captured)
        if window.last_id is None:
            return
        # Remember before gating: an exchange that fails the gates is never offered again.
        before, self._last_captured = self._last_captured, window.last_id
        reason: str | None = INCOMPLETE
        if window.entries and passes_gates(window.entries):
            reason = self._gate(window.with_injected)
        if reason is not None:
            self._skip(reason)
            if job.recovered is not None:
                self._forget_pending(job.recovered.turn)
            return
        anchor = self._anchor(window.entries[-1].id)
        if self._journal is not None:
            self._journal.add(Pending(turn=anchor.turn, after=before))
        content = self._distil(anchor, window.entries)
        if self._leaving:  # left while distilling: the journal hands it on, nothing is written
            raise _Left
        if content is None:
            self._skip(NOTHING_TO_KEEP)
            self._forget_pending(anchor.turn)
            return
        known = () if content.startswith(MARKER_PREFIX) else recent_days(self._pimem, self._scope)
        if known and repeats(content, recent_facts(known, self._session_id)):
            self._skip(DUPLICATE)
            self._forget_pending(anchor.turn)
            return
        self._write(anchor, content)

    def _skip(self, reason: str) -> None:
        self.counters.skipped[reason] = self.counters.skipped.get(reason, 0) + 1

    def _gate(self, window: Sequence[BranchEntry]) -> str | None:
        try:
            return self._pimem.gate_exchange(window)
        except Exception:  # a broken gate must not stop capture: the exchange is kept
            log.exception("a capture gate failed; the exchange is captured")
            return None

    def _written(self, turn: str) -> bool:
        """Whether today's or yesterday's daily memory file already holds *turn*'s entry."""
        needle = f"session:{self._session_id} turn:{turn} "
        return any(needle in text for text in recent_days(self._pimem, self._scope))

    def _forget_pending(self, turn: str) -> None:
        if self._journal is not None:
            self._journal.remove(turn)

    def _anchor(self, turn: str) -> Anchor:
        return Anchor(session=self._session_id, turn=turn, transcript=str(self._transcript))

    def _distil(self, anchor: Anchor, window: Sequence[BranchEntry]) -> str | None:
        """The entry's content: the bullets or a marker; ``None`` when the distiller answered
        that the exchange holds nothing to keep."""
        if self._leaving:
            raise _Left
        if self._abort.is_set():
            self.counters.failed += 1
            return marker(ABORTED_AT_SHUTDOWN)
        messages, found = scrubbed_messages(self._pimem.scrubber, window)
        if found:
            self._notice(render_captured_redaction(found), "redacted")
        settings = self._pimem.settings
        request = DistillRequest(
            exchange=Exchange(anchor=anchor, messages=messages),
            settings=settings,
            host_model=self._host_model,
            # The extractive distiller chosen by name: no model may be used.
            models_allowed=settings.chosen(DISTILL_HOOK) != DISTILLER_NAMES["extractive"]
            and self._budget.available(),
        )
        timeout = settings.distill_timeout_ms / 1000
        try:
            distillation = _call_with_deadline(
                self._scheduler, lambda: self._pimem.distill_exchange(request), timeout, self._abort
            )
        except Exception as error:  # noqa: BLE001 - any distiller failure becomes a marker
            if self._leaving:  # the host is gone: its failing model is no news for the file
                raise _Left from None
            if self._after_host:  # a session with a host may do better than a marker
                raise _NeedsHost from None
            self.counters.failed += 1
            return _failure_marker(error, settings.distill_timeout_ms)
        if self._after_host and request.models_allowed and not distillation.used_model:
            raise _NeedsHost  # the extractive fallback, where a model was wanted: the host's
        if distillation.used_model:
            self._budget.spend()  # a model's "nothing to keep" cost as much as bullets
        if distillation.nothing_to_keep:
            return None
        if distillation.used_model:
            self.counters.distilled += 1
        else:
            self.counters.extractive += 1
        if not distillation.text.strip():
            self.counters.failed += 1
            return marker("distillation returned no text")
        return distillation.text.strip()

    def _write(self, anchor: Anchor, content: str) -> None:
        now = self._pimem.settings.now()
        try:
            entry = Entry(anchor=anchor, content=content, written_at=now)
        except PimemError as error:  # a heading slipped through: a marker says so instead
            entry = Entry(anchor=anchor, content=marker(str(error)), written_at=now)
        self._flush()
        if self._unwritten:  # the store still refuses: wait in line, in order
            self._keep(entry, PimemError(self.last_write_error or "the store refused"))
            return
        try:
            file = self._pimem.append_entry(self._scope, entry, on_notice=self._notice)
        except PimemError as error:
            # The store refused the bullets: keep a marker; if it takes nothing at all (a full
            # disk, a read-only store), hold the entry and write it late rather than lose it.
            try:
                file = self._pimem.append_entry(
                    self._scope, attrs.evolve(entry, content=marker(str(error)))
                )
            except PimemError as failure:
                self._keep(entry, failure)
                return
        self.counters.captured += 1
        self._forget_pending(anchor.turn)
        log.debug("captured an exchange into %s", file)

    def _keep(self, entry: Entry, error: PimemError) -> None:
        """Hold *entry* until the store takes appends again (a full disk, a read-only store):
        the exchange is then written late rather than lost."""
        if len(self._unwritten) >= MAX_UNWRITTEN:
            dropped = self._unwritten.pop(0)
            self.counters.failed += 1
            log.error("capture dropped the entry for %s: too many unwritten", dropped.anchor.turn)
        self._unwritten.append(entry)
        self.counters.unwritten = len(self._unwritten)
        self.last_write_error = str(error)
        log.warning(
            "capture could not write the exchange ending at %s (kept, retried with the next "
            "capture): %s",
            entry.anchor.turn,
            error,
        )

    def _flush(self) -> None:
        """Write the entries the store refused before, oldest first; stop at a new refusal."""
        while self._unwritten:
            try:
                self._pimem.append_entry(self._scope, self._unwritten[0])
            except PimemError as error:
                self.last_write_error = str(error)
                return
            self._forget_pending(self._unwritten.pop(0).anchor.turn)
            self.counters.captured += 1
            self.counters.unwritten = len(self._unwritten)
        self.last_write_error = None


def recent_days(pimem: Pimem, scope: Scope) -> list[str]:
    """Yesterday's and today's daily memory files of *scope*, as far as they exist."""
    today = pimem.settings.now().date()
    days = (pimem.read_day(scope, day) for day in (today - timedelta(days=1), today))
    return [text for text in days if text]


def _notify(
    on_notice: Callable[[str, str | None], None] | None, line: str, key: str | None = None
) -> None:
    try:  # telling the user must never cost the capture
        (on_notice or (lambda line, _: log.info("%s", line)))(line, key)
    except Exception:
        log.exception("could not pass on a notice: %s", line)


def _failure_marker(error: Exception, timeout_ms: int) -> str:
    """The marker entry for a distillation that failed with *error*."""
    if isinstance(error, _Aborted):
        return marker(ABORTED_AT_SHUTDOWN)
    if isinstance(error, TimeoutError):
        return marker(f"distillation timed out after {timeout_ms}ms")
    return marker(str(error) or type(error).__name__)


class _Left(Exception):
    """Capture left (:meth:`Capture.leave`) during an exchange: it is not written."""


class _Aborted(Exception):
    pass


class _NeedsHost(Exception):
    """After the host has gone, an exchange only the host's model would distil."""


def _call_with_deadline(
    scheduler: Scheduler, call: Callable[[], T], timeout: float, abort: threading.Event
) -> T:
    """Run *call* as a task of *scheduler*; give up at *timeout* or when *abort* is set.

    A distiller cannot be interrupted mid-request, so a late one finishes in the background
    and its answer is dropped.
    """
    future = scheduler.run("distill", call)
    deadline = time.monotonic() + timeout
    while True:
        try:
            return future.result(timeout=0.05)
        except concurrent.futures.TimeoutError:
            if abort.is_set():
                raise _Aborted from None
            if time.monotonic() >= deadline:
                raise TimeoutError from None
