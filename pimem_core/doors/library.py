"""The library surface: pimem in an agent's own process (docs/library.md).

:meth:`Memory.open` gives the memory of one directory: search, expand, write, forget and
status, as the ``pimem`` command and the pi adapter's tools answer them. :meth:`Memory.session`
starts a :class:`MemorySession` for one conversation of the agent: its snapshot for the system
prompt, the exchanges it settles (captured in the background, distilled with the agent's own
model when it lends one) and its end, which writes what capture still holds.

Everything here is a thin front over the facade (:class:`~pimem_core.api.Pimem`) and the
session lifecycle (:class:`~pimem_core.runtime.session.Session`): an embedded agent gets what
``pimem serve`` gives pi, with typed answers instead of JSON lines.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import date
from pathlib import Path
from types import TracebackType
from typing import Literal

import attrs

from pimem_core.api import Pimem
from pimem_core.errors import NoMemoryYet, PimemError
from pimem_core.render import (
    render_hits,
    render_redacted,
    render_section,
    render_status,
    status_to_json,
)
from pimem_core.runtime.indexer import SHUTDOWN_CAP_SECONDS
from pimem_core.runtime.session import (
    PromptAdditions,
    Session,
    SessionInfo,
    ShutdownReport,
    serving,
)
from pimem_core.runtime.status import status_sections
from pimem_core.service_values import Redaction
from pimem_core.types import (
    Anchor,
    BranchEntry,
    DayAddress,
    Entry,
    HostModel,
    Scope,
    SearchHit,
    SearchQuery,
    Section,
    StatusSection,
)

#: The agent's model as capture calls it: ``complete(system, prompt, timeout_seconds)`` returns
#: the model's text, or raises.
Complete = Callable[[str, str, float], str]


@attrs.frozen(kw_only=True)
class Message:
    """One message of a settled exchange, in words.

    ``tool_calls`` are the assistant's calls as one-liners (``memory_search(query=redis)``):
    capture's gates read the tool names (an exchange whose only work was reading memory is not
    captured). ``id`` names the message in its entry's anchor (no spaces); the session gives
    one to each message without.
    """

    role: Literal["user", "assistant", "tool"]
    text: str = ""
    tool_calls: tuple[str, ...] = ()
    #: The assistant's run was stopped before it finished: the exchange is not captured.
    aborted: bool = False
    id: str | None = None


@attrs.frozen(kw_only=True)
class Found:
    """What a search found: the hits, best first, and ``text``, the hits as the pi agent's
    ``memory_search`` tool shows them (each with the chunk hash :meth:`Memory.expand` takes)."""

    query: str
    hits: tuple[SearchHit, ...]
    text: str


@attrs.frozen(kw_only=True)
class Expanded:
    """The whole section behind a chunk hash, and ``text``, as ``memory_expand`` shows it."""

    section: Section
    text: str


@attrs.frozen(kw_only=True)
class Written:
    """Where a write went, and what it says (``text``): the secrets taken out, by kind."""

    file: Path
    entry: Entry
    #: ``(kind, count)`` of the secrets replaced by ``[REDACTED:<kind>]``.
    redacted: tuple[tuple[str, int], ...]
    #: What observers did beside the write (a line added to ``.gitattributes``).
    notices: tuple[str, ...]
    text: str


@attrs.frozen(kw_only=True)
class MemoryStatus:
    """The status report of a directory's memory, as ``pimem status`` shows it."""

    scope: Scope
    sections: tuple[StatusSection, ...]
    text: str

    def to_json(self) -> dict[str, object]:
        """The report as ``pimem status --json`` gives it."""
        return status_to_json(self.scope, self.sections)


def _host_model(model: Complete | HostModel | None) -> HostModel | None:
    if model is None or isinstance(model, HostModel):
        return model
    return HostModel(name="agent", complete=model)


@attrs.frozen(eq=False)  # a handle on open services: equal only to itself
class Memory:
    """The memory of one directory: its project's store and index, as the installed plugins
    resolve them. Open it once per directory and keep it: the services it opens (the index's
    database) stay open with it."""

    pimem: Pimem
    #: The directory the memory was opened for.
    cwd: Path
    scope: Scope

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str] = ".",
        *,
        environ: Mapping[str, str] | None = None,
    ) -> Memory:
        """The memory of *directory* (a project, or any directory in one), with pimem's
        settings read from *environ* (default: this process's environment).

        :raises PimemError: a setting pimem cannot use, or a plugin that failed to load while
            ``PIMEM_STRICT_PLUGINS`` is set, or no store for *directory*.
        """
        pimem = Pimem.from_env(environ)
        cwd = Path(directory).absolute()
        return cls(pimem, cwd, pimem.resolve_scope(cwd))

    def search(self, query: str, *, top_k: int = 5) -> Found:
        """The best *top_k* chunks of memory for *query*, best first (L1 recall); none in a
        store nothing was written to yet.

        :raises QueryError: *query* holds no word.
        """
        try:
            hits = self.pimem.search_memory(self.scope, SearchQuery(text=query, top_k=top_k))
        except NoMemoryYet as empty:
            return Found(query=query, hits=(), text=str(empty))
        return Found(query=query, hits=hits, text=render_hits(query, hits))

    def expand(self, chunk_hash: str) -> Expanded:
        """The whole section (entry) behind a hit's chunk hash, with its anchor (L2 recall).

        :raises PimemError: no chunk has that hash.
        """
        section = self.pimem.expand_chunk(self.scope, chunk_hash)
        here = section.anchor is None or os.path.exists(section.anchor.transcript)
        text = render_section(section, transcript_here=here, project=self.scope.repository_dir)
        return Expanded(section=section, text=text)

    def write(
        self, content: str, *, session: str, turn: str, transcript: str | os.PathLike[str]
    ) -> Written:
        """Append *content* (markdown bullets) to today's daily memory file as one entry,
        anchored to *session*, *turn* and *transcript*; secrets are taken out first. A
        session's :meth:`MemorySession.write` fills the anchor in.

        :raises StoreError: empty content, a ``#``-``###`` heading in it, or a bad anchor.
        """
        scrubbed = self.pimem.scrubber.scrubbed(content)
        entry = Entry(
            anchor=Anchor(session=session, turn=turn, transcript=os.fspath(transcript)),
            content=scrubbed.text,
            written_at=self.pimem.settings.now(),
        )
        notices: list[str] = []
        file = self.pimem.append_entry(self.scope, entry, on_notice=notices.append)
        lines = [f"Saved the memory entry to {file}"]
        if scrubbed.found:
            lines.append(render_redacted(scrubbed.found))
        return Written(
            file=file,
            entry=entry,
            redacted=tuple(scrubbed.found),
            notices=tuple(notices),
            text="\n".join([*lines, *notices]),
        )

    def forget(
        self,
        chunk_hash: str | None = None,
        *,
        day: date | str | None = None,
        time: str | None = None,
    ) -> Redaction:
        """Remove exactly one entry: the one behind *chunk_hash*, or the one written on *day*
        (``YYYY-MM-DD``) at *time* (``HH:MM``), and take it out of the index at once. The
        :class:`~pimem_core.types.Redaction` holds the removed text, its only copy.

        :raises StoreError: no such entry, or a day without a time.
        :raises ValueError: both addresses, or neither.
        """
        if (chunk_hash is None) == (day is None and time is None):
            raise ValueError("forget takes a chunk hash, or a day and a time; not both")
        if chunk_hash is not None:
            redaction = self.pimem.forget_chunk(self.scope, chunk_hash)
        else:
            shown = day.isoformat() if isinstance(day, date) else day
            address = DayAddress.parse(shown or "", time or "")
            redaction = self.pimem.forget_entry(self.scope, address)
        self.pimem.index_memory(self.scope, "forget", files=(redaction.file,))
        return redaction

    def status(self) -> MemoryStatus:
        """The store, the collection, the index's health and every plugin's report."""
        return self._status(status_sections(self.pimem, self.scope))

    def session(
        self,
        *,
        model: Complete | HostModel | None = None,
        transcript: str | os.PathLike[str] | None = None,
        session_id: str | None = None,
    ) -> MemorySession:
        """Start a session: one conversation of the agent in this directory.

        :param model: the agent's own model, which distils each settled exchange into memory
            bullets: ``complete(system, prompt, timeout_seconds) -> text``. Without one, the
            distiller the settings choose writes them (``PIMEM_DISTILLER``).
        :param transcript: where the agent keeps the conversation: each entry's anchor names
            it. Without one, nothing is captured (:meth:`MemorySession.settle` answers
            ``False``), as for a host session that is not persisted.
        :param session_id: the conversation's id (no spaces); a fresh one by default. A
            session started again under its id takes over what it left to capture.
        """
        return MemorySession._start(
            self,
            host_model=_host_model(model),
            transcript=None if transcript is None else Path(transcript),
            session_id=session_id or uuid.uuid4().hex,
        )

    def _status(self, sections: tuple[StatusSection, ...]) -> MemoryStatus:
        return MemoryStatus(
            scope=self.scope, sections=sections, text=render_status(self.scope, sections)
        )


class MemorySession:
    """One conversation of an embedded agent, from :meth:`Memory.session` to :meth:`end`.

    Starting it catches the index up and builds the snapshot in the background; capture,
    indexing and maintenance run in the background too, so no call here waits for a model.
    Use it as a context manager, or call :meth:`end`.
    """

    def __init__(self, memory: Memory, session: Session, session_id: str) -> None:
        self.memory = memory
        self.session_id = session_id
        self._session = session
        self._ended: ShutdownReport | None = None

    @classmethod
    def _start(
        cls,
        memory: Memory,
        *,
        host_model: HostModel | None,
        transcript: Path | None,
        session_id: str,
    ) -> MemorySession:
        session = Session(memory.pimem, host_model=host_model)
        info = SessionInfo(session_id=session_id, cwd=memory.cwd, transcript=transcript)
        try:
            session.start(info)
        except BaseException:
            session.close()
            raise
        return cls(memory, session, session_id)

    @property
    def transcript(self) -> Path | None:
        info = self._session.info
        return None if info is None else info.transcript

    def snapshot(self) -> str | None:
        """The text to append to the system prompt: what memory holds that every prompt of
        the session should see (recent entries, by default). Byte-identical from one call to
        the next until the day changes or an entry is forgotten, so a provider's prompt cache
        keeps it. ``None`` when the snapshot is off (``PI_MEMSEARCH_SNAPSHOT=off``)."""
        snapshot = self._session.snapshot
        return None if snapshot is None else snapshot.current()

    def before_prompt(self, prompt: str) -> PromptAdditions:
        """The snapshot, and the hidden context plugins add for *prompt* (auto-context:
        entries close to it), to put after the cached prefix."""
        return self._session.before_prompt(prompt)

    def settle(self, messages: Sequence[Message]) -> bool:
        """The exchange ending with *messages* settled (the agent answered and waits for the
        user): queue it for capture and return at once. *messages* runs from the user's
        message to the agent's answer; capture gates it, distils it and appends one entry in
        the background. ``True`` if it was queued (``False``: capture is off, or the session
        has no transcript)."""
        if self._ended is not None:
            raise PimemError("the session has ended: start another to settle exchanges")
        branch = tuple(
            BranchEntry(
                id=message.id or self._next_id(),
                kind="message",
                role=message.role,
                text=message.text,
                tool_calls=message.tool_calls,
                aborted=message.aborted,
            )
            for message in messages
        )
        return self._session.settled(branch=branch)

    def search(self, query: str, *, top_k: int = 5) -> Found:
        """:meth:`Memory.search`."""
        return self.memory.search(query, top_k=top_k)

    def expand(self, chunk_hash: str) -> Expanded:
        """:meth:`Memory.expand`."""
        return self.memory.expand(chunk_hash)

    def write(self, content: str, *, turn: str | None = None) -> Written:
        """:meth:`Memory.write`, anchored to this session (and *turn*, by default
        a fresh id). Needs the session's transcript, which the anchor names.

        :raises StoreError: the session has no transcript.
        """
        if self.transcript is None:
            raise PimemError("writing memory needs a persisted session: open it with a transcript")
        return self.memory.write(
            content,
            session=self.session_id,
            turn=turn or self._next_id(),
            transcript=self.transcript,
        )

    def status(self) -> MemoryStatus:
        """:meth:`Memory.status`, with this session's capture counters while it runs."""
        token = serving.set(self._session)
        try:
            return self.memory._status(self._session.status())
        finally:
            serving.reset(token)

    def end(self, timeout: float = SHUTDOWN_CAP_SECONDS) -> ShutdownReport:
        """Write what capture still holds and index it, within *timeout* seconds: an
        exchange not distilled by then is written as a marker entry. Ending again returns
        the first report."""
        if self._ended is None:
            try:
                self._ended = self._session.shutdown(timeout)
            finally:
                self._session.close()
        return self._ended

    def __enter__(self) -> MemorySession:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.end()

    def _next_id(self) -> str:
        return uuid.uuid4().hex[:12]
