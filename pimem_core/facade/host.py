"""What a host session asks of its plugins: that the session started, the stable snapshot,
the per-prompt injections, a settled exchange gated and distilled, the agent's transcript,
and a model for background work when the host lends none."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from pimem_core.facade.opened import OpenedServices
from pimem_core.service_values import Transcript, TranscriptRequest
from pimem_core.types import (
    BranchEntry,
    DayAddress,
    Distillation,
    DistillRequest,
    HostModel,
    Injection,
    PromptContext,
    Scope,
)
from pimem_core.usage_events import UsageEvent

log = logging.getLogger(__name__)


class HostSession(OpenedServices):
    """``pimem_start_session``, ``pimem_observe_usage``, ``pimem_collect_unrecalled_entries``,
    ``pimem_collect_used_entries``, ``pimem_build_snapshot``, ``pimem_collect_injections``,
    ``pimem_gate_exchange``, ``pimem_distill_exchange``, the transcript reader's methods and
    ``pimem_provide_model``."""

    __slots__ = ()

    def start_session(self, scope: Scope) -> None:
        """Tell plugins a host session started; like a change, a failure is logged, never
        raised: the session goes on without what that plugin would have started."""
        try:
            self.pm.caller("pimem_start_session")(
                scope=scope, settings=self.settings, index=self._index_if_any(scope)
            )
        except Exception:
            log.exception("a plugin failed to start with the session on %s", scope.scope_dir)

    def observe_usage(self, scope: Scope, event: UsageEvent) -> None:
        """Tell plugins what the session's memory did (``pimem_observe_usage``); a failure is
        logged, never raised: the record is no reason to stop a session."""
        try:
            self.pm.caller("pimem_observe_usage")(scope=scope, event=event)
        except Exception:
            log.exception("a plugin failed to observe the usage event %s", event.kind)

    def observes_usage(self) -> bool:
        """Whether any plugin hears ``pimem_observe_usage``: without one, a session keeps no
        usage notes at all."""
        return bool(self.pm.caller("pimem_observe_usage").get_hookimpls())

    def unrecalled_entries(self, scope: Scope, days: int) -> frozenset[DayAddress] | None:
        """The entries of *scope*'s store memory did not give the agent in the last *days*
        days; ``None`` when no plugin keeps a record that can tell."""
        answers = self.pm.caller("pimem_collect_unrecalled_entries")(
            scope=scope, settings=self.settings, store=self.store(scope), days=days
        )
        return _union(answers)

    def used_entries(self, scope: Scope, days: int) -> frozenset[DayAddress]:
        """The entries the agent used in the last *days* days, as far as any plugin knows."""
        answers = self.pm.caller("pimem_collect_used_entries")(
            scope=scope, settings=self.settings, days=days
        )
        return _union(answers) or frozenset()

    def build_snapshot(self, scope: Scope, now: datetime | None = None) -> str | None:
        """The stable snapshot for *now*, or ``None`` when the snapshot is off."""
        snapshot: str | None = self.pm.caller("pimem_build_snapshot")(
            scope=scope,
            settings=self.settings,
            now=now or self.settings.now(),
            store=self.store(scope),
            used_entries=lambda days: self.used_entries(scope, days),
        )
        return snapshot

    def collect_injections(self, context: PromptContext) -> tuple[Injection, ...]:
        contributions = self.pm.caller("pimem_collect_injections")(
            context=context, index=self._index_if_any(context.scope)
        )
        return tuple(
            injection
            for contribution in contributions
            if contribution
            for injection in contribution
        )

    def gate_exchange(self, window: Iterable[BranchEntry]) -> str | None:
        """The first reason a capture gate gives for not capturing *window*, or ``None``."""
        reasons = self.pm.caller("pimem_gate_exchange")(
            window=tuple(window), settings=self.settings
        )
        return next((str(reason) for reason in reasons if reason), None)

    def distill_exchange(self, request: DistillRequest) -> Distillation:
        answer = self.pm.caller("pimem_distill_exchange")(request=request)
        return self._require("pimem_distill_exchange", answer, Distillation)

    def distillers(self) -> tuple[str, ...]:
        """The plugins asked to distil an exchange (a choice by name applied), by name."""
        methods = self.pm.caller("pimem_distill_exchange").get_hookimpls()
        return tuple(method.plugin_name for method in methods)

    def read_branch(self, path: Path, *, leaf: str | None = None) -> tuple[BranchEntry, ...]:
        """The branch ending at *leaf* (default: the current leaf) of the session whose
        transcript is *path*, root first."""
        with self._service("TranscriptReader.read_branch"):
            return self.transcript(path).read_branch(leaf)

    def read_transcript(self, request: TranscriptRequest) -> Transcript:
        with self._service("TranscriptReader.read_transcript"):
            return self.transcript(request.path).read_transcript(request)

    def provide_model(self, scope: Scope) -> HostModel | None:
        """A model for background work when the host lends none, or ``None``."""
        model = self.pm.caller("pimem_provide_model")(scope=scope, settings=self.settings)
        return None if model is None else self._require("pimem_provide_model", model, HostModel)


def _union(answers: Iterable[Iterable[DayAddress] | None]) -> frozenset[DayAddress] | None:
    """Every plugin's entries together; ``None`` when none answered."""
    given = [answer for answer in answers if answer is not None]
    if not given:
        return None
    return frozenset(entry for answer in given for entry in answer)
