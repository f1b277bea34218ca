"""Keeping the stable snapshot byte-identical between checkpoints.

Provider prefix caches key on the exact bytes of the system prompt, so the snapshot is rebuilt
only at checkpoints: session start, a new local day, the agent's context compaction and a
forgotten entry. Mid-session writes, including other agents' appends, leave it untouched.

The bytes are also kept in a file of the session's own, so a bridge that is started again
after a crash, for the same session and day, sends the same system prompt instead of a new
snapshot; the file goes when the session shuts down.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from datetime import date, datetime
from pathlib import Path

import attrs

from pimem_core.api import Pimem
from pimem_core.private_files import write_private
from pimem_core.types import Scope

log = logging.getLogger(__name__)

#: Kept snapshots of sessions that never shut down (a killed host) go after this long.
STALE_SECONDS = 3 * 86_400


def kept_snapshot_path(state_dir: Path, session_id: str) -> Path:
    """Where the snapshot of the session *session_id* is kept."""
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return state_dir / "snapshots" / f"{digest}.json"


@attrs.frozen
class PreparedSnapshot:
    """A snapshot built before its session started: the memory service builds it when a host
    attaches, while the host is still starting up, and ``session.start`` in the same scope on
    the same day takes it instead of building another (both are the memory as the session
    opened it, moments apart)."""

    cwd: Path
    scope: Scope
    day: date
    text: str | None


def prepare_snapshot(pimem: Pimem, cwd: Path) -> PreparedSnapshot | None:
    """The snapshot of a session about to start in *cwd*, built now; ``None`` when it cannot
    be (``session.start`` builds it again, and says what failed)."""
    try:
        moment = pimem.settings.now()
        scope = pimem.resolve_scope(cwd)
        text = pimem.build_snapshot(scope, moment)
    except Exception:
        log.debug("the snapshot could not be prepared", exc_info=True)
        return None
    return PreparedSnapshot(cwd=cwd.resolve(), scope=scope, day=moment.date(), text=text)


def session_scope(pimem: Pimem, cwd: Path, prepared: PreparedSnapshot | None) -> Scope:
    """The scope of a session starting in *cwd*: *prepared*'s when it was made there."""
    if prepared is not None and prepared.cwd == cwd.resolve():
        return prepared.scope
    return pimem.resolve_scope(cwd)


@attrs.define
class StableSnapshot:
    """The snapshot of one session's scope, rebuilt only when asked or when the day changes."""

    pimem: Pimem
    scope: Scope
    #: Where the session's snapshot is kept for a bridge started again (``None``: nowhere).
    kept: Path | None = None
    _text: str | None = None
    _day: date | None = None

    def start(
        self, now: datetime | None = None, prepared: PreparedSnapshot | None = None
    ) -> str | None:
        """The session's first snapshot: the kept one when this session already had one
        today (a bridge started again), else the *prepared* one of its scope and day, else a
        fresh one."""
        moment = now or self.pimem.settings.now()
        saved = self._read_kept() or {}
        if (
            saved.get("collection") == self.scope.collection
            and saved.get("day") == moment.date().isoformat()
        ):
            text = saved.get("text")
            self._text = text if isinstance(text, str) else None
            self._day = moment.date()
            return self._text
        if (
            prepared is not None
            and prepared.scope.collection == self.scope.collection
            and prepared.day == moment.date()
        ):
            self._text, self._day = prepared.text, prepared.day
            self._keep()
            return self._text
        return self.refresh(moment)

    def refresh(self, now: datetime | None = None) -> str | None:
        """A checkpoint: rebuild from the memory files as they are now."""
        moment = now or self.pimem.settings.now()
        self._text = self.pimem.build_snapshot(self.scope, moment)
        self._day = moment.date()
        self._keep()
        return self._text

    def current(self, now: datetime | None = None) -> str | None:
        """The snapshot for this prompt: the cached bytes, unless none exist or the day rolled over."""
        moment = now or self.pimem.settings.now()
        if self._day != moment.date():
            return self.refresh(moment)
        return self._text

    def discard(self) -> None:
        """The session ended: no bridge will need its snapshot again."""
        if self.kept is not None:
            with contextlib.suppress(OSError):
                self.kept.unlink()

    def _read_kept(self) -> dict[str, object] | None:
        if self.kept is None:
            return None
        try:
            saved = json.loads(self.kept.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return saved if isinstance(saved, dict) else None

    def _keep(self) -> None:
        if self.kept is None or self._day is None:
            return
        record = {"collection": self.scope.collection, "day": self._day.isoformat()}
        try:
            write_private(self.kept, json.dumps(record | {"text": self._text}))
            _prune(self.kept.parent)
        except OSError:
            pass  # the snapshot still serves this bridge; only a restarted one rebuilds it


def _prune(directory: Path) -> None:
    cutoff = time.time() - STALE_SECONDS
    with contextlib.suppress(OSError):
        for path in directory.iterdir():
            with contextlib.suppress(OSError):
                if path.stat().st_mtime < cutoff:
                    path.unlink()
