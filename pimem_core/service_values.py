"""The values the services answer besides a search: what a forget removed, an index run's
report, a compaction's summary, an L3 transcript and a skill candidate.
Frozen, as every value that crosses a hook boundary (:mod:`pimem_core.types`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import attrs


@attrs.frozen(kw_only=True)
class Redaction:
    """What a forget removed. ``removed`` is the only copy of the text that survives."""

    file: Path
    removed: str
    #: The daily memory file held nothing else and was deleted.
    deleted: bool
    #: What was removed: one entry, or a memsearch ``## Memory Compact`` block.
    kind: Literal["entry", "compact block"] = "entry"


@attrs.frozen(kw_only=True)
class FailedFile:
    """A file an index run could not take in, and the error that stopped it."""

    path: str
    error: str

    @property
    def text(self) -> str:
        """The file and its error, as the index run's reports name them: ``<path> (<error>)``."""
        return f"{self.path} ({self.error})"

    def to_json(self) -> dict[str, str]:
        return attrs.asdict(self)


@attrs.frozen(kw_only=True)
class IndexReport:
    """What an index run did: chunks newly embedded, and files that could not be indexed."""

    indexed_chunks: int
    total_files: int = 0
    failed_files: tuple[FailedFile, ...] = ()


@attrs.frozen(kw_only=True)
class CompactResult:
    """A memory compaction's summary; ``None`` when the collection had nothing to compact."""

    summary: str | None
    #: The daily memory file the summary was appended to (set by the facade once written).
    file: Path | None = None


@attrs.frozen(kw_only=True)
class TranscriptRequest:
    """An L3 request: the turns around ``turn`` (an entry id or unique prefix) in a transcript."""

    path: Path
    turn: str | None = None
    context: int = attrs.field(default=3, validator=attrs.validators.ge(0))
    limit: int = attrs.field(default=20, validator=attrs.validators.ge(1))


@attrs.frozen(kw_only=True)
class TranscriptTurn:
    role: Literal["user", "assistant"]
    time: str
    body: str
    target: bool = False


@attrs.frozen(kw_only=True)
class Transcript:
    path: Path
    turns: tuple[TranscriptTurn, ...]


@attrs.frozen(kw_only=True)
class SkillCandidate:
    """A skill drafted from memory, waiting in the candidate store until someone installs it."""

    name: str
    description: str
    #: The candidate's ``SKILL.md``.
    path: Path
    #: ``candidate`` or ``installed`` (an installed one keeps evolving in the store).
    status: str
    #: ``new`` or ``updated`` when the store holds a version not installed yet, else ``None``.
    pending: str | None = None
    occurrences: int | None = None
    sources: tuple[str, ...] = ()
    installed_paths: tuple[str, ...] = ()
    updated_at: str | None = None
    #: The ``SKILL.md`` text (filled in when one candidate is read, empty in a listing).
    text: str = ""
