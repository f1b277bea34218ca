"""What changes memory through the store: an entry written (scrubbed of secrets) or forgotten,
a day file read or merged, and every change announced to the plugins that observe changes."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import date
from pathlib import Path

import attrs

from pimem_core.facade.opened import OpenedServices
from pimem_core.service_values import Redaction
from pimem_core.types import ChunkAddress, DayAddress, Entry, Scope, StoreChange

log = logging.getLogger(__name__)


class Writing(OpenedServices):
    """The store's writes and reads, and ``pimem_observe_change``, ``pimem_merge_day_file``."""

    __slots__ = ()

    def append_entry(
        self, scope: Scope, entry: Entry, *, on_notice: Callable[[str], None] | None = None
    ) -> Path:
        """Scrub *entry* of secrets, write it and announce the change (indexers re-index).
        *on_notice* hears what an observer did beside the write that its writer should know
        (a line added to ``.gitattributes``)."""
        self.check_writable()
        entry = attrs.evolve(entry, content=self.scrubber.scrub(entry.content))
        with self._service("MemoryStore.append_entry"):
            file = self.store(scope).append_entry(entry)
        self.observe_change(scope, StoreChange(kind="append", file=file), on_notice=on_notice)
        return file

    def forget_entry(self, scope: Scope, address: DayAddress | ChunkAddress) -> Redaction:
        """Remove exactly one entry and announce the change."""
        self.check_writable()
        with self._service("MemoryStore.forget_entry"):
            redaction = self.store(scope).forget_entry(address)
        self.observe_change(scope, StoreChange(kind="forget", file=redaction.file))
        return redaction

    def read_day(self, scope: Scope, day: date) -> str | None:
        """The daily memory file's text, or ``None`` when there is none."""
        with self._service("MemoryStore.read_day"):
            return self.store(scope).read_day(day)

    def merge_day_file(self, base: str, ours: str, theirs: str) -> str:
        """Two sides' versions of one daily memory file merged (git's merge driver)."""
        answer = self.pm.caller("pimem_merge_day_file")(base=base, ours=ours, theirs=theirs)
        return self._require("pimem_merge_day_file", answer, str)

    def observe_change(
        self,
        scope: Scope,
        change: StoreChange,
        *,
        on_notice: Callable[[str], None] | None = None,
    ) -> None:
        """Announce *change*. The change is already on disk, so an observer's failure is logged
        rather than raised: it must not make a successful write look failed. The lines
        observers answer go to *on_notice* (else to the log)."""
        try:
            said = self.pm.caller("pimem_observe_change")(
                scope=scope, change=change, settings=self.settings
            )
        except Exception:
            log.exception("a plugin failed while observing a %s of %s", change.kind, change.file)
            return
        for line in said or ():
            if isinstance(line, str) and line:
                (on_notice or log.info)(line)
