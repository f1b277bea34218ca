"""Builders for pi session files (JSONL, version 3), shared by the transcript and capture tests."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path

HEADER = {
    "type": "session",
    "version": 3,
    "id": "01a228ca-79fe-7043-9e86-bde5ca10d32c",
    "timestamp": "2026-11-29T08:59:00.000Z",
    "cwd": "/home/u/proj",
}


def stamp(minute: int, hour: int = 9) -> str:
    """An entry timestamp as pi writes it (UTC, ms, ``Z``) for a local wall-clock time."""
    local = datetime(2026, 11, 29, hour, minute, 7).astimezone()
    return local.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def millis(minute: int, hour: int = 9) -> int:
    return int(datetime(2026, 11, 29, hour, minute, 7).astimezone().timestamp() * 1000)


def entry(
    entry_id: str, parent: str | None, minute: int, kind: str = "message", **fields: object
) -> dict[str, object]:
    return {
        "type": kind,
        "id": entry_id,
        "parentId": parent,
        "timestamp": stamp(minute),
        **fields,
    }


def user(entry_id: str, parent: str | None, minute: int, content: object) -> dict[str, object]:
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    return entry(
        entry_id,
        parent,
        minute,
        message={"role": "user", "content": content, "timestamp": millis(minute)},
    )


def assistant(
    entry_id: str,
    parent: str | None,
    minute: int,
    content: object,
    stop_reason: str = "stop",
) -> dict[str, object]:
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    return entry(
        entry_id,
        parent,
        minute,
        message={
            "role": "assistant",
            "content": content,
            "api": "openai-completions",
            "provider": "fake",
            "model": "fake-model",
            "stopReason": stop_reason,
            "timestamp": millis(minute),
        },
    )


def tool_result(entry_id: str, parent: str, minute: int, text: str) -> dict[str, object]:
    return entry(
        entry_id,
        parent,
        minute,
        message={
            "role": "toolResult",
            "toolCallId": "call_1",
            "toolName": "read",
            "content": [{"type": "text", "text": text}],
            "isError": False,
            "timestamp": millis(minute),
        },
    )


def session_file(
    path: Path, entries: Iterable[Mapping[str, object] | str], header: bool = True
) -> Path:
    """Write a session file: the header, then each entry (a string is written as a raw line)."""
    lines = [json.dumps(HEADER)] if header else []
    lines += [e if isinstance(e, str) else json.dumps(e) for e in entries]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
