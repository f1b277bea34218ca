"""LoCoMo (snap-research/locomo) as memory stores: each conversation a project, each turn an entry.

The zip is the user's (``--locomo PATH``), never the repository's. Only the development
conversations are opened: the others are held out for an evaluation nobody here runs, and their
files are not read at all (each conversation is its own member of the zip).

A conversation becomes one store the way an agent would have written it: one daily memory file
per session, dated with the session's date, a ``## Session HH:MM`` heading, and one entry per
turn (``### HH:MM``, its session anchor naming the turn, ``- <speaker> said: <text>``).
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path

import attrs

from pimem_core.types import Anchor, Entry
from pimem_plugins.shared.entry_format import format_entry

#: The only conversations anything is chosen on.
DEVELOPMENT = ("conv-41", "conv-42", "conv-43", "conv-44", "conv-47", "conv-48", "conv-49")
#: LoCoMo's question categories with evidence turns (5, adversarial, has no answer to find).
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_MEMBER = re.compile(r"(?:^|/)(\d+)\.json$")


@attrs.frozen(kw_only=True)
class Turn:
    speaker: str
    #: LoCoMo's dialogue id (``D3:14``): session 3, turn 14. The evidence of questions.
    dia_id: str
    text: str


@attrs.frozen(kw_only=True)
class Session:
    number: int
    started: datetime
    turns: tuple[Turn, ...]


@attrs.frozen(kw_only=True)
class Question:
    conversation: str
    text: str
    category: int
    evidence: tuple[str, ...]


@attrs.frozen(kw_only=True)
class Conversation:
    name: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]

    @property
    def turns(self) -> int:
        return sum(len(session.turns) for session in self.sessions)


class DatasetError(Exception):
    """The zip is not LoCoMo as published, or a held-out conversation was asked for."""


def read(path: Path, names: Sequence[str] = DEVELOPMENT) -> list[Conversation]:
    """The conversations *names* from LoCoMo's zip at *path*."""
    refused = sorted(set(names) - set(DEVELOPMENT))
    if refused:
        raise DatasetError(
            f"only the development conversations are measured here ({', '.join(DEVELOPMENT)}); "
            f"not {', '.join(refused)}"
        )
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as error:
        raise DatasetError(
            f"{path}: not a readable zip ({error}); give data/locomo10.zip"
        ) from None
    with archive:
        members = {f"conv-{m.group(1)}": n for n in archive.namelist() if (m := _MEMBER.search(n))}
        missing = [name for name in names if name not in members]
        if missing:
            raise DatasetError(
                f"{path}: no {', '.join(missing)} in it; give LoCoMo's data/locomo10.zip"
            )
        return [_conversation(name, json.loads(archive.read(members[name]))) for name in names]


def _conversation(name: str, raw: dict[str, object]) -> Conversation:
    sessions = []
    number = 1
    while f"session_{number}" in raw:
        turns = raw[f"session_{number}"]
        assert isinstance(turns, list)
        sessions.append(
            Session(
                number=number,
                started=datetime.strptime(
                    str(raw[f"session_{number}_date_time"]), "%I:%M %p on %d %B, %Y"
                ),
                turns=tuple(
                    Turn(speaker=t["speaker"], dia_id=t["dia_id"], text=" ".join(t["text"].split()))
                    for t in turns
                    if t.get("text", "").strip()
                ),
            )
        )
        number += 1
    qa = raw["qa"]
    assert isinstance(qa, list)
    questions = tuple(
        Question(
            conversation=name,
            text=item["question"],
            category=int(item["category"]),
            evidence=tuple(str(e) for e in item.get("evidence", ())),
        )
        for item in qa
        if int(item.get("category", 0)) in CATEGORIES and item.get("evidence")
    )
    return Conversation(name=name, sessions=tuple(sessions), questions=questions)


def entries(conversation: Conversation) -> Iterator[tuple[Session, Entry]]:
    for session in conversation.sessions:
        for turn in session.turns:
            anchor = Anchor(
                session=f"{conversation.name}-s{session.number}",
                turn=turn.dia_id,
                transcript=f"locomo/{conversation.name}/session_{session.number}.jsonl",
            )
            yield (
                session,
                Entry(
                    anchor=anchor,
                    content=f"- {turn.speaker} said: {turn.text}",
                    written_at=session.started,
                ),
            )


def write_store(conversation: Conversation, memory_dir: Path) -> int:
    """Write *conversation* as daily memory files in *memory_dir*; the number of entries."""
    memory_dir.mkdir(parents=True, exist_ok=True)
    days: dict[str, list[str]] = {}
    opened: set[int] = set()
    written = 0
    for session, entry in entries(conversation):
        name = f"{session.started.date().isoformat()}.md"
        days.setdefault(name, []).append(
            format_entry(entry, session_heading=session.number not in opened)
        )
        opened.add(session.number)
        written += 1
    for name, parts in days.items():
        (memory_dir / name).write_text("".join(parts), encoding="utf-8")
    return written
