"""pimem's own front doors (the command line, ``pimem serve``, the memory service) as a core
command's handler sees them: a :class:`~pimem_core.command_table.Door` whose ``pimem`` is the
whole facade."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import cast

from pimem_core.api import Pimem
from pimem_core.command_table import Args, Door, Handler, Outcome, UsageError
from pimem_core.doors.failures import error_log, keep_traceback
from pimem_core.runtime.budget import DistillBudget


class FrontDoor(Door):
    """A front door of pimem's own: a :class:`~pimem_core.command_table.Door` whose ``pimem``
    is the whole facade, for the core's handlers."""

    def __init__(self, pimem: Pimem) -> None:
        self.pimem: Pimem = pimem

    def budget(self) -> DistillBudget:
        """The distillation budget status shows."""
        return DistillBudget.for_settings(self.pimem.settings)

    def keep_traceback(self, error: BaseException) -> Path | None:
        """Keep the traceback of a bug *error* where the user can read it; the file, or
        ``None`` when it could not be kept."""
        return keep_traceback(error, error_log())

    def serve_host(self) -> None:
        """Serve the host protocol on this process's stdin and stdout (``pimem serve``)."""
        raise UsageError("only the command line serves the host protocol")

    def run_service(self) -> None:
        """Run this user's memory service in this process (``pimem service run``)."""
        raise UsageError("only the command line runs the memory service")


def in_front_door(handler: Callable[[FrontDoor, Args], Outcome]) -> Handler:
    """A core command's handler, as the table holds it: run by pimem's own doors only, each a
    :class:`FrontDoor` (the command line's, the memory service's, ``pimem serve``'s, each
    handing its handler the door it made). No frame of its own: the handler is called as it is."""
    return cast(Handler, handler)
