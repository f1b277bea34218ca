"""The ``pimem`` command's entry point, light on purpose.

An agent host spawns ``pimem serve`` at the start of every session and waits for its ready
line. Importing pimem and discovering its plugins takes a few hundred milliseconds on a small
machine, so the ready line goes out first, before any of pimem is imported
(:mod:`pimem_core.doors.protocol` holds the method names and imports nothing of pimem); the host's
first requests wait in the pipe meanwhile and are answered once the server is up. Every command
then goes to :mod:`pimem_core.doors.cli`, told whether the ready line is out already, unless the
user's memory service takes it (on unless ``PIMEM_SERVICE=off``:
:mod:`pimem_core.doors.service_client`, and for ``pimem serve`` :mod:`pimem_core.doors.service_relay`).
"""

from __future__ import annotations

import sys

from pimem_core.doors.protocol import ready_line

TYPE_CHECKING = False  # as in pimem_core: typing is not imported before the ready line
if TYPE_CHECKING:
    from typing import TextIO


def announce_ready(out: TextIO) -> None:
    """Write ``pimem serve``'s ready line."""
    out.write(ready_line() + "\n")
    out.flush()


def main() -> int:
    serving = sys.argv[1:] == ["serve"]
    if serving:
        announce_ready(sys.stdout)
    # The thin client decides before pimem is imported: a warm service answers a search in
    # less time than importing pimem takes here.
    from pimem_core.doors import service_client

    if serving and service_client.enabled():
        from pimem_core.doors import service_relay

        if service_relay.relay_session():
            return 0
    elif not serving and service_client.routed(sys.argv[1:]):
        code = service_client.run_through_service(sys.argv[1:])
        if code is not None:
            return code
    from pimem_core.doors.cli import main as cli_main

    return cli_main(ready_written=serving)
