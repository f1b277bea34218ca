"""The ``pi-setup`` plugin: ``pimem setup pi``, pimem for a pi user in one command (ADR 0023).

Every pimem process loads this module with the plugins (the memory service, ``pimem serve``,
each command line), so it holds the command's table entry only; the steps
(:mod:`pimem_plugins.pi.steps`) are imported when the command runs.
"""

from __future__ import annotations

from collections.abc import Iterable

from pimem_core.plugin import Args, Command, Door, Flag, Outcome, Param, UsageError, hookimpl


def _choose(door: Door, a: Args) -> Outcome:
    from pimem_plugins.pi import steps

    if a["check"]:
        return steps.check(door)
    if a["remove"]:
        return steps.remove(door)
    return steps.setup(door)


def _one_mode(a: Args) -> None:
    if a["check"] and a["remove"]:
        raise UsageError("--check and --remove do not go together: --check only reports")


COMMANDS = (
    Command(
        path=("setup", "pi"),
        help="set pimem up for pi: the offline model, pi's package, which pimem it runs",
        description="Install the offline embedding model when it is missing, write memsearch's "
        "configuration when there is none, register the pi package this pimem carries with pi "
        "(`pi install`, or pi's settings file when pi is not on PATH), record this pimem for its "
        "extension (no PIMEM_BIN needed), and check that a bridge answers. Running it again "
        "changes nothing.",
        handler=_choose,
        check=_one_mode,
        project=False,
        params=(
            Param(
                name="check",
                kind=Flag(),
                flags=("--check",),
                help="only report: pi, the package, which pimem the adapter runs, the model",
            ),
            Param(
                name="remove",
                kind=Flag(),
                flags=("--remove",),
                help="unregister pimem's pi package from pi (the model and configuration stay)",
            ),
        ),
        group_help="set pimem up for a coding agent",
    ),
)


@hookimpl
def pimem_collect_commands() -> Iterable[Command]:
    return COMMANDS
