"""``pimem hello NAME``: a greeting, and how many memory entries today's daily file holds.

A plugin adds commands to pimem's one command table through ``pimem_collect_commands``: the
command line shows and runs it, and its ``method`` is served by ``pimem serve`` (so an agent's
bridge and the memory service answer ``hello.greet`` too).
"""

from __future__ import annotations

from collections.abc import Iterable

from pimem_core.plugin import (
    Args,
    Command,
    DayText,
    Door,
    Outcome,
    Param,
    hookimpl,
)


def greet(door: Door, args: Args) -> Outcome:
    name = args["name"]
    scope = door.scope()
    today = door.pimem.settings.now().date()
    day = scope.memory_dir / f"{today.isoformat()}.md"
    entries = len(DayText(day.read_text(encoding="utf-8")).entries()) if day.is_file() else 0
    return Outcome(
        text=f"hello, {name}: {entries} memory entries today in {scope.memory_dir}",
        data={"greeted": name, "entries_today": entries},
    )


@hookimpl
def pimem_collect_commands() -> Iterable[Command]:
    return (
        Command(
            path=("hello",),
            help="greet someone, and count today's memory entries",
            handler=greet,
            params=(Param(name="name", required=True, metavar="NAME", help="who to greet"),),
            method="hello.greet",
        ),
    )
