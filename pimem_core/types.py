"""Value objects that cross hook boundaries. All frozen: one plugin cannot change what the next sees."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Literal

import attrs

from pimem_core.errors import QueryError, StoreError
from pimem_core.scope import COLLECTION_NAME as COLLECTION_NAME
from pimem_core.scope import Scope as Scope
from pimem_core.settings import Settings

_ANCHOR_ID = re.compile(r"[^\s]+")
# A session anchor as Anchor.comment writes it (other agents may space it their own way).
_ANCHOR_COMMENT = re.compile(r"<!--\s*session:(\S+)\s+turn:(\S+)\s+transcript:(\S+)\s*-->")
# Lines that would end an entry in a daily memory file (``#``, ``##`` or ``###`` headings).
_ENTRY_BOUNDARY = re.compile(r"^#{1,3}\s", re.MULTILINE)


def _no_comment_end(_: object, attribute: attrs.Attribute[str], value: str) -> None:
    if "-->" in value or "\n" in value or "\r" in value:
        raise StoreError(
            f"the session anchor's {attribute.name} must not contain '-->' or a line break, got {value!r}"
        )


def _anchor_id(_: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not _ANCHOR_ID.fullmatch(value):
        raise StoreError(
            f"the session anchor's {attribute.name} must be a non-empty id without spaces, got {value!r}"
        )


@attrs.frozen(kw_only=True)
class Anchor:
    """The session anchor: which session, entry and transcript an entry came from (L3 recall)."""

    session: str = attrs.field(validator=[_anchor_id, _no_comment_end])
    turn: str = attrs.field(validator=[_anchor_id, _no_comment_end])
    transcript: str = attrs.field(validator=_no_comment_end)

    @transcript.validator
    def _transcript_given(self, _: attrs.Attribute[str], value: str) -> None:
        if not value.strip():
            raise StoreError("the session anchor needs a transcript path")

    def comment(self) -> str:
        """The anchor as it appears in a daily memory file (memsearch's three-field form)."""
        return f"<!-- session:{self.session} turn:{self.turn} transcript:{self.transcript} -->"

    @classmethod
    def parse(cls, text: str) -> Anchor | None:
        """The first anchor in *text*, as :meth:`comment` writes it; ``None`` when it has none."""
        found = _ANCHOR_COMMENT.search(text)
        return None if found is None else cls(session=found[1], turn=found[2], transcript=found[3])


def _strip_end(value: str) -> str:
    return value.rstrip()


def _entry_content(_: object, __: attrs.Attribute[str], value: str) -> None:
    if not value.strip():
        raise StoreError("a memory entry needs content: write at least one bullet")
    heading = _ENTRY_BOUNDARY.search(value)
    if heading is not None:
        line = value[heading.start() :].split("\n", 1)[0]
        raise StoreError(
            f"memory content must not contain a #, ## or ### heading ({line!r}): it would split "
            "the entry in the daily memory file; use bullets or a #### heading instead"
        )


@attrs.frozen(kw_only=True)
class Entry:
    """One memory entry: anchored content written at a local time."""

    anchor: Anchor
    #: Markdown bullets. Trailing white space is dropped so every entry ends the same way.
    content: str = attrs.field(converter=_strip_end, validator=_entry_content)
    written_at: datetime


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIME = re.compile(r"\d{2}:\d{2}")


@attrs.frozen(kw_only=True)
class DayAddress:
    """An entry addressed by its daily memory file's date and its ``### HH:MM`` heading."""

    day: date
    time: str

    @classmethod
    def parse(cls, day: str, time: str) -> DayAddress:
        """Validate user input; raise :class:`StoreError` naming the bad part."""
        if not _DATE.fullmatch(day):
            raise StoreError(f"date must be YYYY-MM-DD, got {day!r}")
        try:
            parsed = date.fromisoformat(day)
        except ValueError:
            raise StoreError(f"date {day!r} is not a calendar date") from None
        if not _TIME.fullmatch(time) or int(time[:2]) > 23 or int(time[3:]) > 59:
            raise StoreError(f"time must be HH:MM (24-hour), got {time!r}")
        return cls(day=parsed, time=time)


@attrs.frozen(kw_only=True)
class ChunkAddress:
    """An entry (or a ``## Memory Compact`` block) addressed through an indexed chunk.

    ``section`` is what expanding the chunk returned: its source file, heading, the line
    window around it and its session anchor, which together pick out exactly one entry.
    """

    section: Section


@attrs.frozen(kw_only=True)
class StoreChange:
    """A change to a memory store, announced so indexers and snapshots can follow."""

    kind: Literal["append", "forget", "compact"]
    file: Path


@attrs.frozen(kw_only=True)
class BranchEntry:
    """One entry of a session's current branch (root first), as capture and recall see it.

    Transcript readers translate their agent's format into these; ``text`` is what the entry
    says in words (a user prompt, an assistant's text blocks joined), ``tool_calls`` the
    assistant's tool calls as one-liners such as ``edit(path=src/app.py, …)``.
    """

    id: str
    kind: Literal["message", "custom_message", "other"]
    role: Literal["user", "assistant", "tool", "other"] = "other"
    text: str = ""
    tool_calls: tuple[str, ...] = ()
    #: The assistant's run was aborted (pi: ``stopReason == "aborted"``).
    aborted: bool = False
    #: The entry's local time as ``HH:MM``, when known.
    time: str | None = None


@attrs.frozen(kw_only=True)
class ExchangeMessage:
    role: Literal["user", "assistant"]
    text: str


@attrs.frozen(kw_only=True)
class Exchange:
    """One settled exchange to distil: the messages and the anchor its entry will carry.

    The messages are already scrubbed of secrets; ``transcript`` is how a model reads them.
    """

    anchor: Anchor
    messages: tuple[ExchangeMessage, ...]

    @property
    def transcript(self) -> str:
        """The exchange as ``[User]: ...`` / ``[Assistant]: ...`` paragraphs, capped in the
        middle so a huge exchange keeps its start and its end."""
        text = "\n\n".join(
            f"[{message.role.capitalize()}]: {message.text}" for message in self.messages
        )
        if len(text) <= TRANSCRIPT_HEAD + TRANSCRIPT_TAIL:
            return text
        return f"{text[:TRANSCRIPT_HEAD]}{TRANSCRIPT_CUT}{text[-TRANSCRIPT_TAIL:]}"


TRANSCRIPT_HEAD = 10_000
TRANSCRIPT_TAIL = 70_000
TRANSCRIPT_CUT = "\n\n[... the middle of this exchange was left out ...]\n\n"


@attrs.frozen(kw_only=True)
class HostModel:
    """A model the host lends pimem for distillation (pi: the cheapest model of the session).

    ``complete(system, prompt, timeout_seconds)`` returns the model's text or raises.
    """

    name: str
    complete: Callable[[str, str, float], str] = attrs.field(eq=False)


@attrs.frozen(kw_only=True)
class DistillRequest:
    """What a distiller gets: the exchange, the settings, and which models it may use."""

    exchange: Exchange
    settings: Settings
    #: The host's model, when the host lends one.
    host_model: HostModel | None = None
    #: False when the daily budget is spent or the setting asks for the extractive distiller:
    #: model-based distillers must pass then.
    models_allowed: bool = True


@attrs.frozen(kw_only=True)
class Distillation:
    """Third-person bullets distilled from an exchange, and who wrote them; or the distiller's
    answer that the exchange holds nothing to keep (ADR 0021)."""

    text: str
    distiller: str
    #: Whether a model wrote them (counts against the daily budget).
    used_model: bool = False
    #: The distiller found nothing worth recalling (small talk, a question answered from
    #: memory): no entry is written, and the exchange is counted as skipped. ``text`` is not read.
    nothing_to_keep: bool = False


@attrs.frozen(kw_only=True)
class SecretPattern:
    """One shape of secret: ``name`` goes into the placeholder ``[REDACTED:<name>]``.

    The replaced text is the pattern's ``secret`` group when it has one (so ``API_KEY=`` can
    stay and only the value goes), else the whole match.
    """

    name: str
    pattern: re.Pattern[str]


def _query_text(instance: object, attribute: object, value: str) -> None:
    if not value.strip():
        raise QueryError("the search query is empty: give at least one word to look for")


@attrs.frozen(kw_only=True)
class SearchQuery:
    """What L1 recall looks for: *text* (not empty, not only whitespace), at most *top_k* hits."""

    text: str = attrs.field(validator=_query_text)
    top_k: int = attrs.field(default=5, validator=attrs.validators.ge(1))


#: What a hit's ``score`` is. ``rank_fusion``: memsearch's reciprocal rank fusion (k = 60) of
#: the dense and the BM25 ranking, divided by its maximum, so 1.0 means first in both lists and
#: more than 0.5 means in both lists' top k; it depends only on ranks, and says how a chunk
#: ranked against the others, not how relevant it is. ``reranker``: the score of memsearch's
#: reranker, when one is configured (``reranker.model``). ``similarity``: the cosine similarity
#: of the query's and the chunk's embeddings (auto-context). ``relevance``: pimem's ranker's
#: estimate in [0, 1] that the chunk answers the query, from the best fact's similarity and
#: the share of the query's rare words the chunk holds; comparable across queries and
#: collections, low for unrelated text (:data:`RELEVANCE_THRESHOLD`).
ScoreKind = Literal["rank_fusion", "reranker", "similarity", "relevance"]

#: The relevance below which a hit is probably not about the query (docs/recall.md): a list
#: of hits none of which reaches it says so first.
RELEVANCE_THRESHOLD = 0.30


@attrs.frozen(kw_only=True)
class LegScore:
    """How one retriever (``dense``, ``lexical``, ``fused``, a reranker) placed a hit:
    its rank among that retriever's candidates (1 is best; ``None``: not among them) and
    its raw score there. ``pimem search --explain`` shows them."""

    name: str
    rank: int | None
    score: float | None


@attrs.frozen(kw_only=True)
class SearchHit:
    """One L1 hit, as memsearch returns it. ``project`` labels hits of a cross-repo search.

    ``start_line`` and ``end_line`` are the first and last line of the chunk's text in
    ``source`` (1-based, inclusive), blank lines after it left out.
    """

    chunk_hash: str
    content: str
    source: str
    heading: str
    heading_level: int
    start_line: int
    end_line: int
    score: float
    score_kind: ScoreKind = "rank_fusion"
    project: Path | None = None
    #: Each retriever's rank and score for this hit, when the ranker reports them.
    legs: tuple[LegScore, ...] = ()


@attrs.frozen(kw_only=True)
class CrossRepoResult:
    """What cross-repo recall found, and where it looked.

    Every list holds project labels: absolute project directories, the form ``project`` of
    ``memory_expand`` takes back. The session's own project is labelled with its scope
    directory.
    """

    #: The best hits over every project searched, best first, each with its ``project``.
    hits: tuple[SearchHit, ...]
    #: Projects searched, in the order they were searched (the session's own first).
    searched: tuple[Path, ...]
    #: Projects whose collection was never indexed on this machine.
    skipped: tuple[Path, ...] = ()
    #: Projects not searched because an earlier project has the same collection.
    collapsed: tuple[Path, ...] = ()


@attrs.frozen(kw_only=True)
class Section:
    """The L2 answer: the whole section behind a chunk hash, with its anchor when it has one.

    ``start_line`` and ``end_line`` are the section's first and last line (1-based, inclusive,
    blank lines after it left out): for a chunk that is a whole section, the lines its hit names.
    """

    chunk_hash: str
    source: str
    heading: str
    start_line: int
    end_line: int
    content: str
    anchor: Anchor | None = None


@attrs.frozen(kw_only=True)
class BackendCall:
    """How the caller wants one backend operation run."""

    #: Timeouts and the clock come from here.
    settings: Settings
    #: Told once what the call is queued behind (``search``, ``index``...), if it has to wait.
    on_wait: Callable[[str], None] | None = attrs.field(default=None, eq=False)
    #: Told ``(done, total)`` as an index run works through the store's files (or a cross-repo
    #: search through the projects).
    progress: Callable[[int, int], None] | None = attrs.field(default=None, eq=False)
    #: Set when the store belongs to another project (cross-repo recall, expanding its hits):
    #: the operation must write nothing at all, not even memsearch's zero-config bootstrap.
    read_only: bool = False
    #: Takes secrets out of text the operation sends to a model or writes (compaction).
    scrub: Callable[[str], str] = attrs.field(default=str, eq=False)
    #: Told one line for the person when the operation did more than it was asked and they
    #: should know (a search that indexed changed day files first).
    on_notice: Callable[[str], None] | None = attrs.field(default=None, eq=False)


def _text_lines(lines: Iterable[str]) -> tuple[str, ...]:
    return tuple(lines)


#: Status sections ranked below this say how memory is doing (failures, capture, the index,
#: auto-context) and come first; the scope lines follow, then the sections ranked from here on,
#: which say how it is set up.
CONFIGURATION_RANK = 50


@attrs.frozen(kw_only=True)
class StatusSection:
    """One part of ``pimem status``, contributed by a plugin.

    Sections are shown in ``rank`` order, health below :data:`CONFIGURATION_RANK` and
    configuration from there on; ``data`` is the section's part of ``--json``.
    """

    name: str
    rank: int
    lines: tuple[str, ...] = attrs.field(converter=_text_lines)
    data: Mapping[str, object] = attrs.field(factory=dict, eq=False)


@attrs.frozen(kw_only=True)
class PromptContext:
    """What per-prompt injection plugins see: the store, the prompt, the current snapshot and
    the settings."""

    scope: Scope
    prompt: str
    snapshot: str | None = None
    settings: Settings = attrs.field(factory=Settings)


@attrs.frozen(kw_only=True)
class Injection:
    """Text for the agent's context, and where it goes.

    ``system-prompt`` text is appended to the system prompt and must stay byte-stable between
    checkpoints (provider prefix caches depend on it); a ``hidden-message`` goes after the cached
    prefix, so it may change on every prompt.
    """

    text: str
    placement: Literal["system-prompt", "hidden-message"]
    source: str


# -- maintenance -------------------------------------------------------------------------------

_MAINTENANCE_NAME = re.compile(r"[a-z][a-z0-9_]*")


@attrs.frozen(kw_only=True)
class MaintenanceRun:
    """What a maintenance task gets when it runs.

    ``complete(system, prompt)`` asks the model and returns its text; every call is charged to
    the daily distillation budget and raises once the budget is spent.
    """

    complete: Callable[[str, str], str] = attrs.field(eq=False)
    #: memsearch's digest of the task's input (``sha256:...``), as it was when found due.
    input_digest: str


@attrs.frozen(kw_only=True)
class MaintenanceOutcome:
    """What one run of a task did: ``action`` as memsearch records it (``replace``, ``none``,
    ``distilled``), the model's reason, and the files it wrote."""

    action: str
    reason: str = ""
    written: tuple[Path, ...] = ()


@attrs.frozen(kw_only=True)
class MaintenanceTask:
    """One background maintenance task of a project: what it reads, what it writes, how often,
    and how it runs. The runner decides when (due, locked, budgeted); ``run`` only does it."""

    #: memsearch's task name (``project_review``...): the key of its state and its setting.
    name: str = attrs.field(validator=attrs.validators.matches_re(_MAINTENANCE_NAME))
    enabled: bool
    #: The least time between two runs, however often the input changes.
    min_interval: timedelta
    #: The directory of day files whose change makes the task due.
    input_dir: Path
    #: The file (or directory, for skill candidates) the task writes.
    output: Path
    run: Callable[[MaintenanceRun], MaintenanceOutcome] = attrs.field(eq=False)
    #: The task's state, kept by its plugin: its input's digest now (one its entry does not
    #: hold makes it due), its entry (empty before a first run) and merging the runner's record
    #: of a run (``last_success_at``, ``last_input_digest``, ``last_error``...) into that entry.
    input_digest: Callable[[], str] = attrs.field(eq=False)
    read_state: Callable[[], Mapping[str, object]] = attrs.field(eq=False)
    update_state: Callable[[Mapping[str, object]], None] = attrs.field(eq=False)
    #: Where the task's section goes in ``pimem status``: pimem shows one for every task (off,
    #: or its last run, when it is due next and its last error).
    status_rank: int = 85
    #: The plugin's own lines and JSON fields for that section, asked each time status is
    #: shown (it must not raise); ``None``: the task's state alone.
    status: Callable[[], tuple[tuple[str, ...], Mapping[str, object]]] | None = attrs.field(
        default=None, eq=False
    )
