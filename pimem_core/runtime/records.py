"""Session records: what happened to a session that status should name, and the exchanges it
hands over to the next session in its project.

One small JSON file per session, under pimem's state directory and its scope's collection
(``session-records/<collection>/<digest of the session id>.json``). The host writes most of
it: ``pimem serve`` gives its path at ``session.start``, and the host records each death of its
bridge there (``failures``), when memory turned off for the session (``memory_off_at``), and
the exchange that was in progress then (``kept``), so nothing is lost to a bridge that cannot
come back. pimem writes it at shutdown when capture had not finished within the time the host
gave it (``left``). Either way ``handover`` says that the session is done with its capture
journal: the next session that starts in the scope claims the record and captures what it
kept and what the journal holds, with the session's own anchor. ``pimem status`` names the
recent records.

Every failure to read or write a record is logged and ignored: a record only reports.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

from pimem_core.private_files import open_private, private_dir, write_private
from pimem_core.runtime.journal import CaptureJournal, Pending
from pimem_core.types import Scope, StatusSection

log = logging.getLogger(__name__)

RECORDS = "session-records"
JOURNALS = "capture-journal"
#: Records status names: the newest few, of the last week.
SHOWN = 3
SHOWN_DAYS = 7


def record_path(state_dir: Path, scope: Scope, session_id: str) -> Path:
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return state_dir / RECORDS / scope.collection / f"{digest}.json"


def journal_of(state_dir: Path, session_id: str) -> CaptureJournal:
    """The capture journal of *session_id* (the one its own capture keeps)."""
    return CaptureJournal(state_dir / JOURNALS, session_id)


@attrs.frozen(kw_only=True)
class Failure:
    at: str
    reason: str


@attrs.frozen(kw_only=True)
class SessionRecord:
    path: Path
    session_id: str
    transcript: str | None
    failures: tuple[Failure, ...] = ()
    memory_off_at: str | None = None
    #: Exchanges the host kept when memory turned off, for the next session to capture.
    kept: tuple[Pending, ...] = ()
    #: The session is done with its journal: the next session in the scope captures it.
    handover: bool = False
    #: The session that claimed the hand-over.
    handed_to: str | None = None
    #: Exchanges capture had not written when the session shut down.
    left: int = 0
    modified: float = 0.0


def read_record(path: Path) -> SessionRecord | None:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        modified = path.stat().st_mtime
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as error:
        log.warning("ignoring the unreadable session record %s: %s", path, error)
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("session_id"), str):
        return None
    transcript = raw.get("transcript")
    return SessionRecord(
        path=path,
        session_id=raw["session_id"],
        transcript=transcript if isinstance(transcript, str) and transcript else None,
        failures=tuple(
            Failure(at=str(item.get("at", "")), reason=str(item.get("reason", "")))
            for item in _list(raw.get("failures"))
        ),
        memory_off_at=_text(raw.get("memory_off_at")),
        kept=tuple(
            Pending(turn=item["turn"], after=_text(item.get("after")))
            for item in _list(raw.get("kept"))
            if isinstance(item.get("turn"), str)
        ),
        handover=raw.get("handover") is True,
        handed_to=_text(raw.get("handed_to")),
        left=raw["left"] if isinstance(raw.get("left"), int) else 0,
        modified=modified,
    )


def _list(value: object) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def records(state_dir: Path, scope: Scope) -> list[SessionRecord]:
    """*scope*'s session records, newest first."""
    directory = state_dir / RECORDS / scope.collection
    try:
        paths = [path for path in directory.iterdir() if path.suffix == ".json"]
    except OSError:
        return []
    found = [record for path in paths if (record := read_record(path)) is not None]
    return sorted(found, key=lambda record: -record.modified)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """pimem's processes change a record one at a time (the host replaces it whole)."""
    fd = open_private(path.with_name(path.name + ".lock"), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def update_record(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Apply *change* to the record's JSON (a new one when there is none), whole."""
    try:
        private_dir(path.parent)
        with _locked(path):
            try:
                raw = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                raw = {}
            raw = raw if isinstance(raw, dict) else {}
            before = json.dumps(raw)
            change(raw)
            if json.dumps(raw) != before:
                write_private(path, json.dumps(raw))
    except OSError as error:
        log.warning("cannot keep the session record %s: %s", path, error)


def hand_over(state_dir: Path, scope: Scope, session_id: str, transcript: Path, left: int) -> None:
    """This session shuts down with *left* exchanges not captured: its journal goes to the
    next session in the scope."""

    def change(raw: dict[str, Any]) -> None:
        raw.setdefault("session_id", session_id)
        raw.setdefault("transcript", str(transcript))
        raw["handover"] = True
        raw["left"] = left
        raw.pop("handed_to", None)

    update_record(record_path(state_dir, scope, session_id), change)


def claim(record: SessionRecord, by: str) -> SessionRecord | None:
    """Take *record*'s hand-over for session *by*: the record as it was, or ``None`` when
    another session took it first. Its kept exchanges then live in the claimer's hands."""
    claimed: list[SessionRecord] = []

    def change(raw: dict[str, Any]) -> None:
        current = read_record(record.path)
        if current is None or not current.handover:
            return
        claimed.append(current)
        raw.update(handover=False, handed_to=by, kept=[])

    update_record(record.path, change)
    return claimed[0] if claimed else None


def release(record: SessionRecord) -> None:
    """Give a claimed hand-over back (the claimer shut down before capturing it all)."""
    update_record(record.path, lambda raw: raw.update(handover=True, handed_to=None))


def take_own_kept(state_dir: Path, scope: Scope, session_id: str) -> None:
    """A session started again (a resumed pi session) captures what it kept itself: the kept
    exchanges go back into its journal, before its capture reads it."""
    path = record_path(state_dir, scope, session_id)
    record = read_record(path)
    if record is None or not record.kept:
        return
    claimed = claim(record, session_id)
    if claimed is not None:
        journal = journal_of(state_dir, session_id)
        for item in claimed.kept:
            journal.add(item)


# -- status ------------------------------------------------------------------------------------


def records_status(state_dir: Path, scope: Scope, *, now: float | None = None) -> StatusSection:
    """The recent records of *scope*: first in status, since they say what went wrong."""
    recent = [
        record
        for record in records(state_dir, scope)
        if (now or time.time()) - record.modified < SHOWN_DAYS * 86_400
        and (record.failures or record.handover or record.left)
    ][:SHOWN]
    lines: list[str] = []
    for record in recent:
        lines += _describe(state_dir, record)
    return StatusSection(
        name="failures",
        rank=5,
        lines=tuple(lines),
        data={
            "sessions": [
                {
                    "session_id": record.session_id,
                    "failures": [attrs.asdict(failure) for failure in record.failures],
                    "memory_off_at": record.memory_off_at,
                    "waiting": _waiting(state_dir, record),
                    "handover": record.handover,
                    "handed_to": record.handed_to,
                }
                for record in recent
            ]
        },
    )


def _waiting(state_dir: Path, record: SessionRecord) -> int:
    """The exchanges of *record*'s session waiting for the next session to capture them."""
    if not record.handover:
        return 0
    turns = {item.turn for item in record.kept}
    turns |= {item.turn for item in journal_of(state_dir, record.session_id).pending()}
    return len(turns)


def _describe(state_dir: Path, record: SessionRecord) -> list[str]:
    who = f"session {record.session_id}"
    lines = []
    if record.failures:
        last = record.failures[-1]
        times = "once" if len(record.failures) == 1 else f"{len(record.failures)} times"
        lines.append(
            f"failures: the memory bridge of {who} stopped {times}; the last time "
            f"{_when(last.at)}: {last.reason}"
        )
        if record.memory_off_at:
            lines.append(
                f"  memory was off for the rest of that session from {_when(record.memory_off_at)}"
            )
    else:
        lines.append(f"capture: {who} shut down before capture had written everything")
    waiting = _waiting(state_dir, record)
    if waiting:
        lines.append(
            f"  {waiting} exchange{'' if waiting == 1 else 's'} of it kept for capture: the next "
            "session in this project captures "
            f"{'it' if waiting == 1 else 'them'}"
        )
    elif record.handed_to:
        lines.append(f"  what it kept was handed to session {record.handed_to} for capture")
    return lines


def _when(stamp: str) -> str:
    """An ISO time (the host's, in UTC) as the local ``YYYY-MM-DD HH:MM``."""
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return stamp
    return moment.astimezone().strftime("%Y-%m-%d %H:%M")
