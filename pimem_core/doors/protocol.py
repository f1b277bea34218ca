"""The host protocol's method names and ready line, light on purpose.

``pimem serve`` writes its ready line before importing the rest of pimem
(:mod:`pimem_core.doors.launcher`), so the names live here, with nothing imported but
:mod:`json` and the command table's light copy. The server serves exactly these: the memory
methods are the served commands of the command table, read from its light copy
(:mod:`pimem_core.doors.routes`, which a test keeps equal to the table); the session methods
are the server's own.
"""

from __future__ import annotations

import json

from pimem_core.doors.routes import MEMORY_METHODS

__all__ = ["MEMORY_METHODS", "SERVED_METHODS", "SESSION_METHODS", "ready_line"]

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
