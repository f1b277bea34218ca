"""pi session files (JSONL, version 3) for the generated sessions: exchanges, branches, forks.

Each exchange is what pi writes for one prompt: the user message, an assistant message with a
tool call, the tool result and the assistant's final answer. pimem anchors the entry it
captures to that final answer (the last message of the exchange), so that is the gold turn.

Two ways a conversation leaves a branch behind, both as pi does them:

* **in-file branch** (``/tree``): the user goes back to an earlier entry and continues from
  there; the abandoned entries stay in the file, before the live ones, and a
  ``branch_summary`` entry starts the new branch. pi's leaf is the last line of the file.
* **fork** (``/fork``): a new file whose header names the old one as ``parentSession``, holding
  the old branch's path up to the fork point (same ids) and then the new entries.

Which bodies are live is computed the way pi reads a file (from the last entry back to the
root along ``parentId``), not from what the writer meant to do.
"""

from __future__ import annotations

import calendar
import json
import random
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pimem_plugins.pi_transcript import tool_call_line

TOOLS = ("bash", "read", "edit", "grep")


@dataclass(frozen=True)
class SessionFile:
    """A written pi session file and what L3 may and may not show from it."""

    path: Path
    session: str
    lines: tuple[str, ...]
    #: Bodies of the turns on the live branch (what the transcript reader renders).
    live: frozenset[str]
    #: Bodies of turns on branches the conversation left: in this file, or (for a fork) the
    #: parent's turns after the fork point.
    abandoned: frozenset[str]
    parent: Path | None = None
    branched: bool = False

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def _millis(at: datetime) -> int:
    return calendar.timegm(at.timetuple()) * 1000 + at.microsecond // 1000


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


def transcript_path(sessions_dir: Path, started: datetime, session: str) -> Path:
    """pi's file name: the start time (``:`` and ``.`` as ``-``) and the session id."""
    stamp = started.strftime("%Y-%m-%dT%H-%M-%S-") + f"{started.microsecond // 1000:03d}Z"
    return sessions_dir / f"{stamp}_{session}.jsonl"


class SessionWriter:
    """Builds one session file entry by entry, keeping track of the tree."""

    def __init__(
        self,
        rng: random.Random,
        path: Path,
        session: str,
        cwd: str,
        started: datetime,
        *,
        parent: SessionWriter | None = None,
        fork_at: str | None = None,
    ) -> None:
        self._rng = rng
        self.path = path
        self.session = session
        self._entries: list[dict[str, Any]] = []
        self._bodies: dict[str, str] = {}
        self._ids: set[str] = set()
        self._branched = False
        header: dict[str, Any] = {
            "type": "session",
            "version": 3,
            "id": session,
            "timestamp": _stamp(started),
            "cwd": cwd,
        }
        self._parent = parent
        if parent is not None and fork_at is not None:
            # /fork: the parent's path up to the fork point, same ids, then new entries.
            header["parentSession"] = str(parent.path)
            for entry in parent.path_to(fork_at):
                self._entries.append(entry)
                self._ids.add(entry["id"])
                if entry["id"] in parent._bodies:
                    self._bodies[entry["id"]] = parent._bodies[entry["id"]]
            self.leaf: str | None = fork_at
        else:
            self.leaf = None
            self._append("model_change", started, provider="anthropic", modelId="claude-sonnet")
        self._header = header

    # -- the tree ----------------------------------------------------------------------------

    def _new_id(self) -> str:
        while True:
            candidate = f"{self._rng.getrandbits(32):08x}"
            if candidate not in self._ids:
                self._ids.add(candidate)
                return candidate

    def _append(self, kind: str, at: datetime, **fields: Any) -> str:
        entry_id = self._new_id()
        self._entries.append(
            {"type": kind, "id": entry_id, "parentId": self.leaf, "timestamp": _stamp(at), **fields}
        )
        self.leaf = entry_id
        return entry_id

    def _message(self, at: datetime, body: str, message: dict[str, Any]) -> str:
        entry_id = self._append("message", at, message={**message, "timestamp": _millis(at)})
        self._bodies[entry_id] = body
        return entry_id

    def _user(self, at: datetime, text: str) -> str:
        return self._message(at, text, {"role": "user", "content": _text(text)})

    def _assistant(self, at: datetime, content: list[dict[str, Any]], stop: str) -> str:
        parts = [
            tool_call_line(block) if block["type"] == "toolCall" else block["text"]
            for block in content
        ]
        return self._message(
            at,
            "\n".join(parts),
            {
                "role": "assistant",
                "content": content,
                "api": "anthropic-messages",
                "provider": "anthropic",
                "model": "claude-sonnet",
                "stopReason": stop,
            },
        )

    def path_to(self, entry_id: str) -> list[dict[str, Any]]:
        """The entries from the root to *entry_id*, root first."""
        by_id = {entry["id"]: entry for entry in self._entries}
        path = []
        current: str | None = entry_id
        while current is not None:
            entry = by_id[current]
            path.append(entry)
            current = entry["parentId"]
        return path[::-1]

    # -- what a session does -----------------------------------------------------------------

    def exchange(self, at: datetime, prompt: str, report: str, target: str) -> tuple[str, str]:
        """One prompt and its answer, ending at *at*; the id and body of the final answer."""
        call = {
            "type": "toolCall",
            "id": f"toolu_{self._rng.getrandbits(48):012x}",
            "name": self._rng.choice(TOOLS),
            "arguments": {"path": target} if self._rng.random() < 0.5 else {"command": target},
        }
        self._user(at - timedelta(minutes=1, seconds=30), prompt)
        self._assistant(at - timedelta(minutes=1), [*_text("Let me look."), call], "toolUse")
        self._append(
            "message",
            at - timedelta(seconds=40),
            message={
                "role": "toolResult",
                "toolCallId": call["id"],
                "toolName": call["name"],
                "content": _text("ok"),
                "isError": False,
                "timestamp": _millis(at - timedelta(seconds=40)),
            },
        )
        final = self._assistant(at, _text(report), "stop")
        return final, self._bodies[final]

    def abandon(self, at: datetime, attempt: str) -> None:
        """An attempt the user walked away from with ``/tree``: two turns on a side branch,
        then a branch summary back at the branch point. Call it only before another exchange:
        the last line of a file is pi's live leaf."""
        point = self.leaf
        commit = f"{self._rng.getrandbits(28):07x}"
        self._user(at - timedelta(minutes=3), f"Before that, try {attempt} instead.")
        self._assistant(
            at - timedelta(minutes=2),
            _text(f"I tried {attempt} (commit {commit}), but it broke the build; reverted."),
            "stop",
        )
        side = self.leaf
        self.leaf = point
        self._append(
            "branch_summary",
            at - timedelta(minutes=2),
            fromId=side,
            summary=f"Tried {attempt}; it broke the build and was reverted.",
        )
        self._branched = True

    def finish(self, extra_abandoned: frozenset[str] = frozenset()) -> SessionFile:
        live_ids = {entry["id"] for entry in self.path_to(self._entries[-1]["id"])}
        live = frozenset(body for key, body in self._bodies.items() if key in live_ids)
        abandoned = frozenset(body for key, body in self._bodies.items() if key not in live_ids)
        lines = [json.dumps(self._header), *(json.dumps(entry) for entry in self._entries)]
        return SessionFile(
            path=self.path,
            session=self.session,
            lines=tuple(lines),
            live=live,
            abandoned=(abandoned | extra_abandoned) - live,
            parent=None if self._parent is None else self._parent.path,
            branched=self._branched,
        )

    def fork(
        self, rng: random.Random, path: Path, session: str, cwd: str, started: datetime, at: str
    ) -> SessionWriter:
        """A ``/fork`` of this session at entry *at* into a new file."""
        return SessionWriter(rng, path, session, cwd, started, parent=self, fork_at=at)

    def bodies_after(self, entry_id: str) -> frozenset[str]:
        """Bodies of this session's live turns that come after *entry_id*: what a fork at
        that entry leaves behind."""
        live = self.path_to(self._entries[-1]["id"])
        ids = [entry["id"] for entry in live]
        after = ids[ids.index(entry_id) + 1 :] if entry_id in ids else ids
        return frozenset(self._bodies[key] for key in after if key in self._bodies)


def new_session_id(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))
