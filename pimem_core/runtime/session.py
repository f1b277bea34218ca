"""The session lifecycle: what pimem does on each of the host's events, in the seed's order.

    start          resolve the scope; catch up the index in the background; build the snapshot;
                   wake background maintenance
    before_prompt  the snapshot (rebuilt when the local day changed) and per-prompt context
    settled        queue the exchange for capture (gates, distillation and the append follow
                   in the background; each append wakes maintenance)
    compacted      rebuild the snapshot (the agent's context was compacted)
    shutdown       flush capture, settle the indexer, both within the shutdown cap; what
                   capture has not written within the host's wait is handed over to the next
                   session in the scope (:mod:`pimem_core.runtime.records`)

Nothing on the agent's path waits for a model or for indexing: every call here returns within
milliseconds, and a memory failure never reaches the agent as an exception from ``settled``.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import attrs

from pimem_core.api import Pimem
from pimem_core.hookspecs import hookimpl
from pimem_core.paths import PimemPaths
from pimem_core.runtime.after_host import AfterHost, capture_after_host, distils_without_host
from pimem_core.runtime.budget import DistillBudget
from pimem_core.runtime.capture import Capture
from pimem_core.runtime.indexer import SHUTDOWN_CAP_SECONDS, Indexer
from pimem_core.runtime.maintenance import MaintenanceRunner
from pimem_core.runtime.records import (
    SessionRecord,
    claim,
    hand_over,
    journal_of,
    record_path,
    records,
    release,
    take_own_kept,
)
from pimem_core.runtime.scheduler import Scheduler
from pimem_core.runtime.snapshot_cache import (
    PreparedSnapshot,
    StableSnapshot,
    kept_snapshot_path,
    session_scope,
)
from pimem_core.runtime.status import status_sections
from pimem_core.runtime.usage import Unrecorded, UsageLog, recorded_capture, usage_log
from pimem_core.types import (
    BranchEntry,
    HostModel,
    Injection,
    PromptContext,
    Scope,
    StatusSection,
    StoreChange,
)

log = logging.getLogger(__name__)

#: The session a request is being served for, where one process serves several (the memory
#: service): status then reports that session's capture, not its neighbours' in the same scope.
serving: contextvars.ContextVar[Session | None] = contextvars.ContextVar(
    "pimem_serving_session", default=None
)


@attrs.frozen(kw_only=True)
class SessionInfo:
    """Who the host's session is: its id, its transcript (if persisted) and its directory."""

    session_id: str
    cwd: Path
    transcript: Path | None = None


@attrs.frozen(kw_only=True)
class PromptAdditions:
    """What the host adds for one prompt."""

    #: Appended to the system prompt; byte-identical between checkpoints.
    snapshot: str | None
    #: Messages for after the cached prefix (auto-context and the like).
    hidden: tuple[Injection, ...] = ()


@attrs.frozen(kw_only=True)
class ShutdownReport:
    captured_in_time: bool
    indexed_in_time: bool
    seconds: float
    #: Exchanges not captured within the host's wait, left for the next session in the scope.
    handed_over: int = 0


class _SessionPlugin:
    """The session's own plugin: follows store changes and reports this session's capture in
    status (beside today's entries in the store from every session, which status adds)."""

    def __init__(self, session: Session) -> None:
        self._session = session

    @hookimpl
    def pimem_observe_change(self, scope: Scope, change: StoreChange) -> None:
        self._session._observe(scope, change)

    @hookimpl
    def pimem_collect_status(self, scope: Scope) -> Iterator[StatusSection]:
        session = self._session
        if scope == session.scope and serving.get() in (None, session):
            yield capture_status(session)


class Session:
    """pimem for one host session."""

    def __init__(
        self,
        pimem: Pimem,
        *,
        host_model: HostModel | None = None,
        debounce: float | None = None,
        paths: PimemPaths | None = None,
        on_notice: Callable[[str, str | None], None] | None = None,
    ) -> None:
        self.pimem = pimem
        self.host_model = host_model
        #: Where capture's notices for the user go (the host shows them), with their kind.
        self._on_notice = on_notice
        #: Capture after the host's wait at shutdown, by a distiller that needs no host.
        self._after_host: concurrent.futures.Future[None] | None = None
        self._debounce = {} if debounce is None else {"debounce": debounce}
        self.budget = DistillBudget.for_settings(pimem.settings, paths)
        self._state_dir = (paths or PimemPaths.from_env()).state_dir
        self.info: SessionInfo | None = None
        self.scope: Scope | None = None
        self.snapshot: StableSnapshot | None = None
        self.indexer: Indexer | None = None
        self.capture: Capture | None = None
        self.maintenance: MaintenanceRunner | None = None
        self.usage: UsageLog = Unrecorded(pimem)  # what memory gave the agent, for the usage record
        #: Other sessions' hand-overs this one claimed, each with the capture that takes it.
        self._adopted: list[tuple[SessionRecord, Capture]] = []
        self._adopting = threading.Lock()
        #: Set once shutdown took the adopted captures: nothing more is claimed.
        self._done_adopting = False
        #: Where the host records what happens to this session's bridges (``session.start``).
        self.record: Path | None = None
        self._starting: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._starting.set_result(None)
        #: Every background task of this session: capture, index runs, maintenance.
        self.scheduler = Scheduler("pimem-session")
        # Named for this session: the memory service keeps several on one plugin manager.
        self._plugin_name = f"session-{id(self):x}"
        pimem.pm.register(_SessionPlugin(self), self._plugin_name)

    # -- the host's events --------------------------------------------------------------

    def start(self, info: SessionInfo, prepared: PreparedSnapshot | None = None) -> None:
        """Begin (or re-arm after a session switch), with any snapshot *prepared* for it. A
        no-op for the same session again: some hosts fire their start event twice."""
        if self.info == info and self.capture is not None:
            return
        if self.info is not None:
            self.shutdown()  # write and index what the previous session left
        self.info = info
        scope = self.scope = session_scope(self.pimem, info.cwd, prepared)
        self.record = record_path(self._state_dir, scope, info.session_id)
        with self._adopting:
            self._done_adopting = False
        indexer = self.indexer = Indexer(self._index, scheduler=self.scheduler, **self._debounce)
        kept = kept_snapshot_path(self._state_dir, info.session_id)
        self.snapshot = StableSnapshot(self.pimem, scope, kept=kept)
        usage = self.usage = usage_log(self.pimem, scope, info.session_id, self.scheduler)
        self.snapshot.start(prepared=prepared)
        maintenance = self.maintenance = MaintenanceRunner(
            self.pimem,
            scope,
            budget=self.budget,
            host_model=self.host_model,
            scheduler=self.scheduler,
        )
        if info.transcript is not None:
            # A session started again captures the exchanges it kept when memory went off.
            take_own_kept(self._state_dir, scope, info.session_id)
            self.capture = recorded_capture(
                self.usage,
                self.scope,
                session_id=info.session_id,
                transcript=info.transcript,
                host_model=self.host_model,
                budget=self.budget,
                journal=journal_of(self._state_dir, info.session_id),
                scheduler=self.scheduler,
                on_notice=self._on_notice,
            )

        # What needs the index starts behind the host's answer, and last: a thread started
        # after it would wait for the interpreter lock while it works, and the answer with it.
        def start_in_background() -> None:
            self._adopt(info, scope, usage)
            indexer.catch_up()
            self.pimem.start_session(scope)
            maintenance.wake("session start")

        self._starting = self.scheduler.run("session-start", start_in_background)

    def before_prompt(self, prompt: str) -> PromptAdditions:
        """The snapshot for this prompt and any per-prompt context."""
        if self.snapshot is None or self.scope is None:
            raise RuntimeError("before_prompt before start")
        snapshot = self.snapshot.current()
        hidden = self.pimem.collect_injections(
            PromptContext(
                scope=self.scope, prompt=prompt, snapshot=snapshot, settings=self.pimem.settings
            )
        )
        self.usage.prompted(snapshot, hidden)
        return PromptAdditions(snapshot=snapshot, hidden=hidden)

    def settled(
        self, *, leaf: str | None = None, branch: Sequence[BranchEntry] | None = None
    ) -> bool:
        """The agent settled: queue its exchange for capture. ``True`` if it was queued."""
        if not self.pimem.settings.capture or self.capture is None:
            return False
        self.usage.settled(leaf)
        self.capture.submit(leaf, branch)
        return True

    def compacted(self) -> None:
        """The agent's context was compacted: a checkpoint for the snapshot."""
        if self.snapshot is not None:
            self.snapshot.refresh()

    def shutdown(
        self,
        cap: float = SHUTDOWN_CAP_SECONDS,
        *,
        wait_for_index: bool = True,
        capture_wait: float | None = None,
    ) -> ShutdownReport:
        """Flush capture, then index what was written, all within *cap* seconds.

        With *wait_for_index* false the last index run is started, not waited for: a host that
        leaves the process to finish it alone calls ``shutdown()`` again, which waits. With
        *capture_wait* (seconds), capture gets that long: what it has not written by then stays
        in the journal instead of being written as markers at the cap: captured by this process
        after the host has gone when a distiller needs no host (:meth:`_capture_after_host`),
        else handed over to the next session in the scope at once.
        """
        started = time.monotonic()
        deadline = started + cap
        if self._after_host is not None:  # the first shutdown's capture, still going
            concurrent.futures.wait([self._after_host], max(0.0, deadline - time.monotonic()))
        captured, left = True, 0
        capture_deadline = (
            deadline if capture_wait is None else min(deadline, started + capture_wait)
        )
        if self.capture is not None:
            if capture_wait is None:
                captured = self.capture.drain(deadline)
                self.capture.close()
            else:
                left = self.capture.finish(capture_deadline)
                captured = left == 0
                if left and self.info is not None and self.info.transcript is not None:
                    assert self.scope is not None
                    if distils_without_host(self.pimem):
                        self._after_host = self.scheduler.run(
                            "capture-after-host",
                            functools.partial(
                                capture_after_host,
                                AfterHost(
                                    pimem=self.pimem,
                                    scope=self.scope,
                                    session_id=self.info.session_id,
                                    transcript=self.info.transcript,
                                    budget=self.budget,
                                    state_dir=self._state_dir,
                                    scheduler=self.scheduler,
                                    on_notice=self._on_notice,
                                    left_by=self.capture,
                                ),
                                deadline,
                            ),
                        )
                    else:
                        hand_over(
                            self._state_dir,
                            self.scope,
                            self.info.session_id,
                            self.info.transcript,
                            left,
                        )
            self.capture = None
        for record, adopted in self._take_adopted():
            if adopted.finish(capture_deadline):
                release(record)  # the next session tries again
        indexed = True
        if self.indexer is not None:
            if wait_for_index:  # a catch-up not started yet would be missed
                concurrent.futures.wait([self._starting], max(0.0, deadline - time.monotonic()))
            wait = max(0.0, deadline - time.monotonic()) if wait_for_index else 0.0
            indexed = self.indexer.shutdown(wait)
        if self.snapshot is not None:
            self.snapshot.discard()
        if wait_for_index:  # else the call that waits closes it, with the host gone
            self.usage.close(max(0.0, deadline - time.monotonic()))
        return ShutdownReport(
            captured_in_time=captured,
            indexed_in_time=indexed,
            seconds=time.monotonic() - started,
            handed_over=left,
        )

    def leave(self) -> None:
        """The host went away without ending the session: as a killed bridge leaves it. What
        capture had not written stays in the journal (the next process to start the session
        captures it), the kept snapshot stays, and what was written is indexed."""
        if self.capture is not None:
            self.capture.leave()
            self.capture = None
        for record, adopted in self._take_adopted():
            adopted.leave()
            release(record)
        if self.indexer is not None:
            self.indexer.shutdown(0.0)
        self.usage.close()

    def close(self) -> None:
        """Leave the plugin manager, which outlives the session in a memory service."""
        if self.pimem.pm.has_plugin(self._plugin_name):
            self.pimem.pm.unregister(name=self._plugin_name)

    def status(self) -> tuple[StatusSection, ...]:
        """The status of this session's scope, as ``memory.status`` shows it."""
        if self.scope is None:
            raise RuntimeError("status before start")
        return status_sections(self.pimem, self.scope, self.budget, state_dir=self._state_dir)

    # -- inside -------------------------------------------------------------------------

    def _adopt(self, info: SessionInfo, scope: Scope, usage: UsageLog) -> None:
        """Claim what earlier sessions of the scope handed over (a session whose memory went
        off, one that shut down before capture was done) and capture it, each exchange with
        its own session's anchor and recorded in *usage* as that session's. A failure costs
        this, never the session."""
        try:
            for record in records(self._state_dir, scope):
                if (
                    record.session_id == info.session_id
                    or not record.handover
                    or record.transcript is None
                ):
                    continue
                with self._adopting:
                    if self._done_adopting:  # shut down meanwhile: left for the next session
                        return
                claimed = claim(record, info.session_id)
                if claimed is None or claimed.transcript is None:
                    continue
                journal = journal_of(self._state_dir, claimed.session_id)
                for item in claimed.kept:
                    journal.add(item)
                if not journal.pending():
                    continue
                log.info("capturing what session %s handed over", claimed.session_id)
                capture = recorded_capture(
                    usage,
                    scope,
                    session_id=claimed.session_id,
                    transcript=Path(claimed.transcript),
                    host_model=self.host_model,
                    budget=self.budget,
                    journal=journal,
                    scheduler=self.scheduler,
                    on_notice=self._on_notice,
                )
                with self._adopting:
                    late = self._done_adopting
                    if not late:
                        self._adopted.append((claimed, capture))
                if late:  # shut down while this was claimed: handed on again
                    capture.leave()
                    release(claimed)
                    return
        except Exception:
            log.exception("could not take over what earlier sessions handed over")

    def _take_adopted(self) -> list[tuple[SessionRecord, Capture]]:
        with self._adopting:
            taken, self._adopted = self._adopted, []
            self._done_adopting = True
        return taken

    def _index(self, reason: str, files: tuple[Path, ...]) -> None:
        if self.scope is None:
            return
        if files:
            self.pimem.index_memory(self.scope, reason, files=files)
        else:  # the session's start, or a change it cannot name: what changed, if anything
            self.pimem.catch_up_memory(self.scope, reason)

    def _observe(self, scope: Scope, change: StoreChange) -> None:
        if scope != self.scope:
            return
        if self.indexer is not None:
            self.indexer.note_write(change.file)
        if change.kind == "forget" and self.snapshot is not None:
            self.snapshot.refresh()  # a forgotten entry must leave the system prompt too
        if change.kind == "append" and self.maintenance is not None:
            self.maintenance.wake("append")


def capture_status(session: Session) -> StatusSection:
    """The session's capture section in status: what its capture did in this process, entries
    waiting to be written, and its last failed index run."""
    settings = session.pimem.settings
    counters = session.capture.counters if session.capture is not None else None
    if not settings.capture:
        lines = ["capture: off (PI_MEMSEARCH_CAPTURE=off)"]
    elif counters is None:
        lines = ["capture: on (no persisted transcript: nothing to anchor entries to)"]
    else:
        skipped = ", ".join(
            f"{count} {reason}" for reason, count in sorted(counters.skipped.items())
        )
        lines = [
            f"capture (this session): {counters.captured} captured ({counters.distilled} "
            f"distilled, {counters.extractive} extractive, {counters.failed} failed); "
            f"skipped: {skipped or 'none'}"
        ]
    waiting = session.capture.waiting_until(0.0) if session.capture is not None else 0
    if waiting:
        lines.append(
            f"capture (this session): {waiting} exchange{'' if waiting == 1 else 's'} waiting "
            "for distillation"
        )
    if session.capture is not None and session.capture.last_write_error is not None:
        lines.append(
            f"capture (this session): {session.capture.counters.unwritten} entr"
            f"{'y' if session.capture.counters.unwritten == 1 else 'ies'} waiting to be "
            f"written, retried with the next capture ({session.capture.last_write_error})"
        )
    if session.indexer is not None and session.indexer.last_failure is not None:
        lines.append(f"last index run: failed ({session.indexer.last_failure})")
    return StatusSection(
        name="capture",
        rank=20,
        lines=lines,
        data={
            "enabled": settings.capture,
            "counters_of": "this session",
            "counters": None if counters is None else attrs.asdict(counters),
            "last_index_failure": None if session.indexer is None else session.indexer.last_failure,
        },
    )
