"""The usage record's writer: one JSON line per event, appended to the day's file of the scope's
collection, ``<state dir>/usage/<collection>/<YYYY-MM-DD>.jsonl`` (docs/usage.md).

Each line is one ``write`` on a file opened ``O_APPEND``, under 4 KB, so lines of concurrent
sessions never interleave and a crash tears at most the last; a torn line is closed with a
line break before the next one is appended, and :func:`read_records` skips it. A day's file
stops at :data:`DAY_LIMIT` bytes but for one ``truncated`` line. Directories are 0700, files
0600: the record is its user's alone.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from pimem_core.plugin import private_dir

VERSION = 1
#: A day file's size past which nothing but one ``truncated`` line is written that day.
DAY_LIMIT = 256 * 1024
#: A line's size at most (bytes, its line break included).
LINE_LIMIT = 4000
QUERY_CHARS = 200
TERM_CHARS = 40
_TRUNCATED = b'"kind": "truncated"'


class Shown(Protocol):
    """An entry memory showed, as the event names it."""

    @property
    def day(self) -> str: ...
    @property
    def time(self) -> str: ...
    @property
    def text(self) -> str: ...


def usage_dir(state_dir: Path, collection: str) -> Path:
    return state_dir / "usage" / collection


def session_digest(session_id: str) -> str:
    """How the record names a session: the first 12 hex digits of its id's SHA-256."""
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def entry_json(entry: Shown) -> dict[str, object]:
    named: dict[str, object] = {"day": entry.day, "time": entry.time}
    if entry.text:
        named["chars"] = len(entry.text)
    return named


def line_of(at: datetime, session: str, kind: str, /, **fields: object) -> dict[str, object]:
    return {"v": VERSION, "at": at.isoformat(timespec="seconds"), "session": session,
            "kind": kind, **fields}  # fmt: skip


def encoded(record: Mapping[str, Any]) -> bytes:
    """*record* as one line under :data:`LINE_LIMIT`: long entry lists lose their tail."""
    data = dict(record)
    while True:
        line = (json.dumps(data, ensure_ascii=False) + "\n").encode("utf-8", "replace")
        if len(line) <= LINE_LIMIT:
            return line
        key = next(
            (k for k in ("entries", "hits") if isinstance(data.get(k), list) and data[k]), None
        )
        if key is None:
            return (
                json.dumps({**data, "query": ""}, ensure_ascii=False)[: LINE_LIMIT - 2] + "\n"
            ).encode()
        data[key] = data[key][: len(data[key]) // 2]


def append(path: Path, records: Iterable[Mapping[str, Any]]) -> int:
    """Append *records* to the day file *path*, one write each; returns the bytes written."""
    private_dir(path.parent)
    written = 0
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        for record in records:
            line = encoded(record)
            size = os.fstat(fd).st_size
            tail = os.pread(fd, 64, max(0, size - 64)) if size else b""
            if tail and not tail.endswith(b"\n"):  # a torn line: closed, so this one stands
                line = b"\n" + line
            if size + len(line) > DAY_LIMIT:
                if _TRUNCATED in tail:
                    continue
                line = encoded(_only_head(record))
            written += os.write(fd, line)
    finally:
        os.close(fd)
    return written


def _only_head(record: Mapping[str, Any]) -> dict[str, object]:
    return {key: record[key] for key in ("v", "at", "session") if key in record} | {
        "kind": "truncated"
    }


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """The record's lines in *path*, oldest first; a line that is not a record (a torn one,
    a foreign one) is skipped."""
    try:
        data = path.read_bytes()
    except OSError:
        return
    for raw in data.split(b"\n"):
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("v") == VERSION and "kind" in record:
            yield record


def status_line(directory: Path, day: str) -> str:
    """One line for status: what the record holds for *day* (``YYYY-MM-DD``)."""
    counts: dict[str, int] = {}
    sessions: set[str] = set()
    for record in read_records(directory / f"{day}.jsonl"):
        kind = str(record["kind"])
        counts[kind] = counts.get(kind, 0) + 1
        sessions.add(str(record.get("session")))
    if not counts:
        return "usage today: nothing recorded yet"
    shown = ("search", "expand", "injection", "capture", "used")
    parts = ", ".join(f"{counts.get(kind, 0)} {kind}" for kind in shown)
    return f"usage today: {len(sessions)} sessions, {parts}"
