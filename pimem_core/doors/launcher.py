"""The ``pimem`` command's entry point, light on purpose.

An agent host spawns ``pimem serve`` at the start of every session and waits for its ready
line. Importing pimem and discovering its plugins takes a few hundred milliseconds on a small
machine, so the ready line goes out first, before any of pimem is imported
(:mod:`pimem_core.doors.protocol` holds the method names and imports nothing of pimem); the host's
first requests wait in the pipe meanwhile and are answered once the server is up. Every command
then goes to :mod:`pimem_core.doors.cli`, told whether the ready line is out already.
"""

from __future__ import annotations

import sys
from typing import TextIO

from pimem_core.doors.protocol import ready_line


def announce_ready(out: TextIO) -> None:
    """Write ``pimem serve``'s ready line."""
    out.write(ready_line() + "\n")
    out.flush()


def main() -> int:
    serving = sys.argv[1:] == ["serve"]
    if serving:
        announce_ready(sys.stdout)
    from pimem_core.doors.cli import main as cli_main

    return cli_main(ready_written=serving)
