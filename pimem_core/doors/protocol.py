"""The host protocol's method names and ready line, light on purpose.

``pimem serve`` writes its ready line before importing the rest of pimem
(:mod:`pimem_core.doors.launcher`), so the names live here, with nothing imported but
:mod:`json`. The server serves exactly these: the memory methods are the served commands of
the command table (:mod:`pimem_core.doors.table`), the session methods are the server's own,
and a test keeps the table and this list equal.
"""

from __future__ import annotations

import json

#: One per served command of the command table (a test keeps them equal).
MEMORY_METHODS = (
    "memory.compact",
    "memory.expand",
    "memory.forget",
    "memory.search",
    "memory.skills",
    "memory.status",
    "memory.transcript",
    "memory.write",
)

#: The session's lifecycle, served by :class:`pimem_core.doors.serve.Server` itself.
SESSION_METHODS = (
    "session.before_prompt",
    "session.compacted",
    "session.settled",
    "session.shutdown",
    "session.start",
)

#: Every method ``pimem serve`` answers.
SERVED_METHODS = tuple(sorted((*MEMORY_METHODS, *SESSION_METHODS, "ping")))


def ready_line() -> str:
    """The first line ``pimem serve`` writes."""
    return json.dumps({"event": "ready", "methods": list(SERVED_METHODS)})
