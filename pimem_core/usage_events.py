"""What a host session's memory did, as ``pimem_observe_usage`` hears it: the usage record's
events (docs/usage.md).

An event names the entries memory showed the agent (:class:`ShownEntry`: the day file and the
heading's time address one), and, when an exchange settles, what memory gave it
(:class:`Given`) beside what the agent said and did, so a plugin can tell whether the agent
used it. The texts are for that judgement only: the bundled record keeps addresses, never text.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import attrs

UsageKind = Literal[
    "session", "snapshot", "search", "expand", "injection", "capture", "write", "settled"
]
#: How memory gave an entry to the agent.
GivenVia = Literal["snapshot", "search", "expand", "injection"]


@attrs.frozen(kw_only=True)
class ShownEntry:
    """One entry memory showed: its day (``YYYY-MM-DD``, ``""`` when not a day file's) and its
    heading's time (``HH:MM``, ``""`` when it has none), and its text as shown."""

    day: str
    time: str = ""
    text: str = attrs.field(default="", repr=False)

    @property
    def address(self) -> tuple[str, str]:
        return (self.day, self.time)


@attrs.frozen(kw_only=True)
class Given:
    """An entry memory gave the agent in one exchange, and how."""

    via: GivenVia
    entry: ShownEntry


@attrs.frozen(kw_only=True)
class UsageEvent:
    """One thing a host session's memory did (``kind``), with what of it the kind carries.

    ``session``: a session started (``project``); ``snapshot``: the snapshot the agent was
    given changed (``entries``); ``search`` (``query``, ``entries`` the hits best first,
    ``top`` the first hit's relevance); ``expand`` and ``write`` (``entries``: the one entry);
    ``injection`` (``entries`` a per-prompt context message showed); ``capture`` (``entries``
    written, or ``skipped`` the gate that stopped the exchange); ``settled``: an exchange ended
    (``given`` what memory gave it, ``prompt`` the user's words, ``answer`` the agent's words
    and its tool calls, ``turn`` its last message's id in the host's transcript), the moment to
    judge whether memory was used.
    """

    kind: UsageKind
    #: The host's session id (a record may keep a digest of it, never the id).
    session: str
    #: Local time, with its offset.
    at: datetime
    entries: tuple[ShownEntry, ...] = ()
    project: str | None = None
    query: str | None = None
    top: float | None = None
    skipped: str | None = None
    given: tuple[Given, ...] = ()
    #: A ``settled`` exchange's last message in the host's transcript (capture's anchor turn).
    turn: str | None = None
    prompt: str = attrs.field(default="", repr=False)
    answer: str = attrs.field(default="", repr=False)
