"""The command table as the thin client and ``pimem serve``'s ready line read it, before any
of pimem is imported: generated from :data:`pimem_core.doors.table.CORE` and the command line's
parser by ``python -m pimem_core.doors.command_line``, and kept equal to them by a test. Do not
edit it by hand.
"""

from __future__ import annotations

#: The first word of every command of pimem's own: a plugin's commands start with a word of their
#: own.
CORE_WORDS = (
    "compact",
    "expand",
    "forget",
    "git",
    "index",
    "maintenance",
    "plugins",
    "scope",
    "search",
    "serve",
    "service",
    "skills",
    "snapshot",
    "status",
    "transcript",
    "write",
)

#: The commands the thin client hands to the memory service (``route="service"``).
ROUTED = (
    "expand",
    "forget",
    "index",
    "search",
    "status",
    "write",
)

#: Of those, the ones that change the store (``changes=True``): once handed over, never run again
#: in process.
CHANGES = (
    "forget",
    "write",
)

#: Of those, the ones whose content ``-`` reads from stdin (a ``Content`` parameter): the client
#: reads it and sends it along.
FROM_STDIN = ("write",)

#: The options before the command that take a value: the command word is found without the parser.
VALUED = ("--cwd",)

#: The options of the routed commands whose value is a path, made absolute for the service.
PATHS = (
    "--cwd",
    "--project",
)

#: The options a command takes (``--cwd``, ``--json``): the only ones the service takes before the
#: command.
COMMAND_OPTIONS = (
    "--cwd",
    "--json",
)

#: The options that are this process's own (help, the version, ``--in-process``, the log): a
#: command line with one is answered here.
LOCAL = (
    "--help",
    "--in-process",
    "--verbose",
    "--version",
    "-h",
    "-v",
)
