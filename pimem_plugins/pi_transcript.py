"""pi session files: the default transcript reader (L3 recall and the branch capture reads).

A pi session file (format version 3) is JSON lines: a ``session`` header, then one entry per
line, each with an ``id`` and the ``parentId`` of the entry it follows. The entries form a tree:
going back to an earlier point and continuing there starts a new branch in the same file, so
line order interleaves abandoned branches. The conversation an entry belongs to is the path
from a tip back to the root, and that is what the reader here reads.

``pimem_open_transcript`` is a ``trylast`` default: a plugin that reads another agent's
transcripts answers for its files first.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path

import attrs

from pimem_core.plugin import (
    BranchEntry,
    PimemError,
    Transcript,
    TranscriptNotHere,
    TranscriptReader,
    TranscriptRequest,
    TranscriptTurn,
    hookimpl,
)
from pimem_plugins.shared.matches import one_match

#: A rendered turn longer than this is cut, and the cut is marked.
BODY_LIMIT = 2000
BODY_CUT = "\n[... the rest of this turn was left out ...]"
#: A tool call shows this many arguments; more are marked with a trailing ``…``.
TOOL_ARGUMENTS = 3
#: An argument value longer than this is clipped to one character less, plus ``…``.
ARGUMENT_LIMIT = 60
UNKNOWN_TIME = "--:--"

_WHITESPACE = re.compile(r"\s+")

JsonObject = Mapping[str, object]


# -- the session file ---------------------------------------------------------------------------


@attrs.frozen
class _Entry:
    """One entry line of a session file: its place in the tree and its raw fields."""

    id: str
    parent_id: str | None
    type: str
    fields: JsonObject = attrs.field(eq=False)


def _read_lines(path: Path) -> list[str]:
    """The lines of the transcript; a missing or unreadable file is the user's to fix."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise TranscriptNotHere(f"the transcript {path} is not on this machine") from None
    except OSError as error:
        raise PimemError(
            f"could not read the transcript {path}: {error.strerror or error}"
        ) from None
    return text.splitlines()


def _json_object(line: str) -> JsonObject | None:
    """The line as a JSON object, or ``None`` for anything else (junk, a partial write, nesting
    too deep for the parser)."""
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _is_session_header(line: str) -> bool:
    header = _json_object(line)
    return header is not None and header.get("type") == "session"


def _entry(fields: JsonObject) -> _Entry | None:
    """An entry line as an entry; ``None`` for the session header and lines that are not entries."""
    kind, entry_id, parent_id = fields.get("type"), fields.get("id"), fields.get("parentId")
    if not isinstance(kind, str) or kind == "session":
        return None
    if not isinstance(entry_id, str) or not entry_id:
        return None
    return _Entry(
        id=entry_id,
        parent_id=parent_id if isinstance(parent_id, str) else None,
        type=kind,
        fields=fields,
    )


def _parse_entries(lines: Sequence[str]) -> list[_Entry]:
    entries = []
    for line in lines:
        fields = _json_object(line)
        entry = None if fields is None else _entry(fields)
        if entry is not None:
            entries.append(entry)
    return entries


@attrs.frozen
class _SessionTree:
    """The entries of one session file, in file order, and the tree their ``parentId`` makes."""

    entries: tuple[_Entry, ...]
    by_id: Mapping[str, _Entry]

    @classmethod
    def parse(cls, lines: Sequence[str]) -> _SessionTree:
        entries = tuple(_parse_entries(lines))
        return cls(entries=entries, by_id={entry.id: entry for entry in entries})

    def matching(self, prefix: str) -> list[str]:
        """The distinct entry ids starting with *prefix*, in file order."""
        return list(dict.fromkeys(e.id for e in self.entries if e.id.startswith(prefix)))

    def branch(self, tip: _Entry) -> list[_Entry]:
        """The path from the root to *tip*, root first (a broken or cyclic chain stops early)."""
        path: list[_Entry] = []
        seen: set[str] = set()
        entry: _Entry | None = tip
        while entry is not None and entry.id not in seen:
            seen.add(entry.id)
            path.append(entry)
            entry = None if entry.parent_id is None else self.by_id.get(entry.parent_id)
        path.reverse()
        return path

    def live_branch(self, leaf: str | None = None) -> list[_Entry]:
        """The branch ending at entry *leaf*; without one (or when the file does not hold it
        yet), the current branch: pi's leaf is the last entry in the file."""
        tip = self.by_id.get(leaf) if leaf is not None else None
        if tip is None and self.entries:
            tip = self.entries[-1]
        return [] if tip is None else self.branch(tip)

    def branch_through(self, target: _Entry) -> list[_Entry]:
        """The branch that runs through *target*, as far as it was taken.

        Its tip is the last entry in file order that descends from *target* (the live leaf
        when it does; else the latest leaf of the target's subtree), or *target* itself.
        Children are always written after their parent, so that entry is a leaf.
        """
        subtree = self._descendants(target)
        tip = next((e for e in reversed(self.entries) if e.id in subtree), target)
        return self.branch(tip)

    def _descendants(self, target: _Entry) -> set[str]:
        children: dict[str, list[str]] = {}
        for entry in self.entries:
            if entry.parent_id is not None:
                children.setdefault(entry.parent_id, []).append(entry.id)
        found = {target.id}
        pending = [target.id]
        while pending:
            for child in children.get(pending.pop(), ()):
                if child not in found:
                    found.add(child)
                    pending.append(child)
        return found


# -- messages ------------------------------------------------------------------------------------


def _message(entry: _Entry) -> JsonObject:
    """The ``message`` of a ``message`` entry (an empty mapping when it has none)."""
    message = entry.fields.get("message")
    return message if isinstance(message, dict) else {}


def _blocks(content: object) -> Iterator[JsonObject]:
    if isinstance(content, list):
        yield from (block for block in content if isinstance(block, dict))


def _texts(content: object) -> list[str]:
    """Non-blank text: a bare string, or the text blocks (images, thinking, calls dropped)."""
    if isinstance(content, str):
        return [content.strip()] if content.strip() else []
    texts = []
    for block in _blocks(content):
        text = block.get("text")
        if block.get("type") == "text" and isinstance(text, str) and text.strip():
            texts.append(text.strip())
    return texts


def _one_line(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return _WHITESPACE.sub(" ", text).strip()


def _clip(text: str) -> str:
    return text if len(text) <= ARGUMENT_LIMIT else text[: ARGUMENT_LIMIT - 1] + "…"


def _arguments(raw: object) -> Mapping[str, object]:
    """A tool call's arguments: an object, or (from some providers) an object as a JSON string."""
    if isinstance(raw, str):
        parsed = _json_object(raw)
        return parsed if parsed is not None else {}
    return raw if isinstance(raw, dict) else {}


def tool_call_line(block: JsonObject) -> str:
    """A tool call as ``name(a=v, b=v, c=v, …)``: the first three arguments, each on one line
    and clipped, and ``…`` when there were more."""
    name = block.get("name")
    arguments = _arguments(block.get("arguments"))
    shown = [
        f"{key}={_clip(_one_line(value))}"
        for key, value in list(arguments.items())[:TOOL_ARGUMENTS]
    ]
    if len(arguments) > TOOL_ARGUMENTS:
        shown.append("…")
    return f"{name if isinstance(name, str) and name else 'tool'}({', '.join(shown)})"


def _tool_calls(content: object) -> list[str]:
    return [tool_call_line(block) for block in _blocks(content) if block.get("type") == "toolCall"]


def _assistant_parts(content: object) -> list[str]:
    """An assistant message's text blocks and tool calls, in the order it wrote them."""
    parts = []
    for block in _blocks(content):
        if block.get("type") == "toolCall":
            parts.append(tool_call_line(block))
        else:
            parts.extend(_texts([block]))
    return parts


def _local_time(entry: _Entry) -> str | None:
    """The entry's local time as ``HH:MM``: its ISO timestamp, else the message's Unix ms."""
    stamp = entry.fields.get("timestamp")
    if isinstance(stamp, str):
        try:
            return datetime.fromisoformat(stamp).astimezone().strftime("%H:%M")
        except (ValueError, OverflowError):  # not a date, or out of range once made local
            pass
    millis = _message(entry).get("timestamp")
    if isinstance(millis, int | float) and not isinstance(millis, bool):
        try:
            return datetime.fromtimestamp(millis / 1000).strftime("%H:%M")
        except (ValueError, OverflowError, OSError):
            return None
    return None


# -- L3: the turns around an anchored entry ------------------------------------------------------


@attrs.frozen
class _Turn:
    entry_id: str
    role: str
    time: str
    body: str


def _cap(body: str) -> str:
    return body if len(body) <= BODY_LIMIT else body[:BODY_LIMIT] + BODY_CUT


def _turn(entry: _Entry) -> _Turn | None:
    """A ``message`` entry as a user or assistant turn; ``None`` when it shows nothing."""
    if entry.type != "message":
        return None
    message = _message(entry)
    role = message.get("role")
    if role == "user":
        parts = _texts(message.get("content"))
    elif role == "assistant":
        parts = _assistant_parts(message.get("content"))
    else:
        return None  # tool results, bash executions, system prompts
    if not parts:
        return None
    return _Turn(
        entry_id=entry.id,
        role=role,
        time=_local_time(entry) or UNKNOWN_TIME,
        body=_cap("\n".join(parts)),
    )


def _find_target(tree: _SessionTree, path: Path, turn: str) -> _Entry:
    prefix = turn.strip()
    if not prefix:
        raise PimemError("the turn must be a non-empty entry id or prefix of one")
    ids = tree.matching(prefix)
    entry_id = one_match(
        ids,
        missing=PimemError(f'no entry id in {path} starts with turn "{prefix}"'),
        ambiguous=PimemError(
            f'{len(ids)} entries in {path} start with turn "{prefix}": ambiguous, '
            "give more of the entry id"
        ),
    )
    return tree.by_id[entry_id]


def _window(
    turns: Sequence[_Turn], branch: Sequence[_Entry], target: _Entry, context: int
) -> tuple[list[_Turn], int]:
    """The turns within *context* of the target's turn, and that turn's place among them.

    The target's turn is the last one at or before the target on the branch (the target may be
    a tool result or an injected message); before any turn, it is the first turn.
    """
    shown_before = {entry.id for entry in branch[: branch.index(target) + 1]}
    anchor = 0
    for number, turn in enumerate(turns):
        if turn.entry_id in shown_before:
            anchor = number
    first = max(0, anchor - context)
    return list(turns[first : anchor + context + 1]), anchor - first


def read_pi_transcript(request: TranscriptRequest) -> Transcript:
    """Render the L3 window of a pi session file (see the module docstring for the tree)."""
    tree = _SessionTree.parse(_read_lines(request.path))
    if request.turn is None:
        branch, target = tree.live_branch(), None
    else:
        target = _find_target(tree, request.path, request.turn)
        branch = tree.branch_through(target)
    turns = [turn for turn in map(_turn, branch) if turn is not None]
    if not turns:
        raise PimemError(f"the transcript {request.path} has no user or assistant turns to show")
    if target is None:
        shown, marked = turns[-request.limit :], -1
    else:
        shown, marked = _window(turns, branch, target, request.context)
    return Transcript(
        path=request.path,
        turns=tuple(
            TranscriptTurn(
                role="user" if turn.role == "user" else "assistant",
                time=turn.time,
                body=turn.body,
                target=number == marked,
            )
            for number, turn in enumerate(shown)
        ),
    )


# -- capture: the current branch ------------------------------------------------------------------


def _branch_entry(entry: _Entry) -> BranchEntry:
    time = _local_time(entry)
    if entry.type == "custom_message":
        text = "\n\n".join(_texts(entry.fields.get("content")))
        return BranchEntry(id=entry.id, kind="custom_message", text=text, time=time)
    if entry.type != "message":
        return BranchEntry(id=entry.id, kind="other", time=time)
    message = _message(entry)
    role, content = message.get("role"), message.get("content")
    text = "\n\n".join(_texts(content))
    if role == "user":
        return BranchEntry(id=entry.id, kind="message", role="user", text=text, time=time)
    if role == "assistant":
        return BranchEntry(
            id=entry.id,
            kind="message",
            role="assistant",
            text=text,
            tool_calls=tuple(_tool_calls(content)),
            aborted=message.get("stopReason") == "aborted",
            time=time,
        )
    if role == "toolResult":
        return BranchEntry(id=entry.id, kind="message", role="tool", text=text, time=time)
    return BranchEntry(id=entry.id, kind="message", role="other", time=time)


def read_pi_branch(path: Path, leaf: str | None = None) -> tuple[BranchEntry, ...] | None:
    """The branch of a pi session file ending at *leaf* (default: the current leaf), root
    first; ``None`` when *path* is not a pi session file."""
    lines = _read_lines(path)
    if not lines or not _is_session_header(lines[0]):
        return None
    tree = _SessionTree.parse(lines)
    return tuple(_branch_entry(entry) for entry in tree.live_branch(leaf))


# -- the reader -----------------------------------------------------------------------------------


@attrs.frozen
class PiTranscript:
    """One pi session file, as a :class:`~pimem_core.services.TranscriptReader`."""

    path: Path

    def read_branch(self, leaf: str | None) -> tuple[BranchEntry, ...]:
        branch = read_pi_branch(self.path, leaf)
        if branch is None:
            raise PimemError(f"{self.path} is not a pi session file (no session header)")
        return branch

    def read_transcript(self, request: TranscriptRequest) -> Transcript:
        return read_pi_transcript(request)


@hookimpl(trylast=True)
def pimem_open_transcript(path: Path) -> TranscriptReader:
    return PiTranscript(path)
