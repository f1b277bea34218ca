"""The capture journal: exchanges a session is capturing, on disk until their entry is written.

A bridge killed mid-capture (waiting for a model, say), or with settled exchanges still
queued behind one, loses its queue with it. The journal outlives it: an exchange is recorded
when it is queued, and the next process that starts the same session finds it there and
captures it from the transcript, or leaves a marker entry when that cannot be done. One
small JSON file per session under pimem's state directory; every failure to keep it is
logged and ignored, since it must never stop capture itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import threading
from pathlib import Path

import attrs

from pimem_core.private_files import write_private

log = logging.getLogger(__name__)


@attrs.frozen(kw_only=True)
class Pending:
    """An exchange being captured: the turn its entry is anchored to, and the last turn
    captured before it (``None`` at the start of the session), which bound its window."""

    turn: str
    after: str | None


class CaptureJournal:
    """The pending exchanges of one session."""

    def __init__(self, directory: Path, session_id: str) -> None:
        digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:24]
        self.path = directory / f"{digest}.json"
        # The host's thread queues exchanges while capture's worker finishes others: each
        # change reads and rewrites the file, so one at a time.
        self._lock = threading.Lock()

    def pending(self) -> list[Pending]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError, RecursionError) as error:
            log.warning("ignoring the unreadable capture journal %s: %s", self.path, error)
            return []
        items = raw if isinstance(raw, list) else []
        return [
            Pending(turn=item["turn"], after=item.get("after"))
            for item in items
            if isinstance(item, dict)
            and isinstance(item.get("turn"), str)
            and isinstance(item.get("after"), str | None)
        ]

    def add(self, item: Pending) -> None:
        """Record *item*; one already there for its turn is replaced where it stands, so the
        next process captures in the order the exchanges were queued."""
        with self._lock:
            items = self.pending()
            turns = [p.turn for p in items]
            if item.turn in turns:
                items[turns.index(item.turn)] = item
            else:
                items.append(item)
            self._save(items)

    def remove(self, turn: str) -> None:
        with self._lock:
            items = self.pending()
            if any(item.turn == turn for item in items):
                self._save([item for item in items if item.turn != turn])

    def _save(self, items: list[Pending]) -> None:
        try:
            if not items:
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()
                return
            # Whole or not at all, even if killed mid-save.
            write_private(self.path, json.dumps([attrs.asdict(item) for item in items]))
        except OSError as error:
            log.warning("cannot keep the capture journal %s: %s", self.path, error)
