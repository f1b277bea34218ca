"""The ``pimem`` command's entry point, light on purpose.

An agent host spawns ``pimem serve`` at the start of every session and waits for its ready
line. Importing pimem and discovering its plugins takes a few hundred milliseconds on a small
machine, so the ready line goes out first, before any of pimem is imported; the host's first
requests wait in the pipe meanwhile and are answered once the server is up. Every other command
goes straight to :mod:`pimem_core.cli`.
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

#: The host-protocol methods ``pimem serve`` answers; the server serves exactly these.
SERVE_METHODS = (
    "memory.compact",
    "memory.expand",
    "memory.forget",
    "memory.search",
    "memory.skills",
    "memory.status",
    "memory.transcript",
    "memory.write",
    "ping",
    "session.before_prompt",
    "session.compacted",
    "session.settled",
    "session.shutdown",
    "session.start",
)

_announced = False


def ready_line() -> str:
    return json.dumps({"event": "ready", "methods": sorted(SERVE_METHODS)})


def announce_ready(out: TextIO) -> None:
    """Write the ready line once; the server then does not write it again."""
    global _announced
    out.write(ready_line() + "\n")
    out.flush()
    _announced = True


def announced() -> bool:
    return _announced


def main() -> int:
    if sys.argv[1:] == ["serve"]:
        announce_ready(sys.stdout)
    from pimem_core.cli import main as cli_main

    return cli_main()
