"""The one command table: a core command is one declaration (in ``doors/table.py``) and one
handler, and nothing else in pimem names it; the light copy the thin client reads is the
table's; and the rules that fit plugins' commands beside pimem's and each other's."""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Iterator

import pytest

from pimem_core.command_table import Args, Command, Door, Flag, Outcome, Param
from pimem_core.doors import protocol, routes
from pimem_core.doors.command_line import light_module
from pimem_core.doors.commands import plugin_commands
from pimem_core.doors.table import CORE, served
from pimem_core.errors import PluginError
from pimem_core.plugin import hookimpl

from conftest import REPO_ROOT

CORE_DIR = REPO_ROOT / "pimem_core"
TABLE = CORE_DIR / "doors" / "table.py"
LIGHT_COPY = CORE_DIR / "doors" / "routes.py"
FIRST_WORDS = {command.path[0] for command in CORE}

#: The one place a command's word is compared outside the table, and why: ``pimem serve``'s
#: ready line goes out before any of pimem (the table too) is imported.
NAMED_ELSEWHERE = {("doors/launcher.py", "serve")}


def test_the_light_copy_is_the_tables() -> None:
    assert LIGHT_COPY.read_text(encoding="utf-8") == light_module(), (
        "the command table changed: run `python -m pimem_core.doors.command_line`"
    )
    # The ready line's, which goes out before even the light copy is imported.
    assert tuple(sorted(served(CORE))) == protocol.MEMORY_METHODS


def _trees() -> Iterator[tuple[str, ast.AST]]:
    for path in sorted(CORE_DIR.rglob("*.py")):
        if path not in (TABLE, LIGHT_COPY):
            yield str(path.relative_to(CORE_DIR)), ast.parse(path.read_text(encoding="utf-8"))


def _words(node: ast.AST) -> list[str]:
    """The command words a constant, or a collection of constants, holds."""
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return [
        item.value for item in items if isinstance(item, ast.Constant) and item.value in FIRST_WORDS
    ]


def test_adding_a_core_command_is_one_declaration_and_one_handler() -> None:
    """Each core command is declared once, in the table, and names its handler; no other
    module of pimem keeps a list of command words (two or more together) or compares a word
    with a command's (the help's order, the routed commands, the commands quiet about failed
    plugins were such lists: they are fields of the command now)."""
    declared = Counter(command.path for command in CORE)
    assert max(declared.values()) == 1
    handlers = Counter(command.handler for command in CORE)
    assert max(handlers.values()) == 1, "each command its own handler"
    lists: list[tuple[str, int, object]] = []
    compared = set()
    for name, tree in _trees():
        # A type, Literal["forget", ...], is no list of commands.
        typed = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.Subscript)
            for inner in ast.walk(node.slice)
        }
        for node in ast.walk(tree):
            if id(node) in typed:
                continue
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Command":
                lists.append((name, node.lineno, "declares a command outside the table"))
            if isinstance(node, ast.Tuple | ast.List | ast.Set) and len(_words(node)) >= 2:
                lists.append((name, node.lineno, _words(node)))
            if isinstance(node, ast.Compare):
                sides = (node.left, *node.comparators)
                # A word compared with a command line or a command, not with an op or a kind.
                if any(
                    re.search(r"\.path\b|\.name\b|command_word|argv", ast.unparse(side))
                    for side in sides
                ):
                    compared |= {(name, word) for side in sides for word in _words(side)}
    assert lists == []
    assert compared == NAMED_ELSEWHERE


# -- plugins' commands --------------------------------------------------------------------------


def _hello(door: Door, args: Args) -> Outcome:
    return Outcome(text="hello")


def _command(*path: str, method: str | None = None) -> Command:
    return Command(path=path, help=" ".join(path), handler=_hello, method=method)


class _Plugins:
    """What plugin_commands asks of pimem: each plugin's commands, in the order asked."""

    def __init__(self, *given: tuple[str, object]) -> None:
        self._given = given

    def collect_commands(self) -> tuple[tuple[str, object], ...]:
        return self._given


@pytest.mark.parametrize(
    ("earlier", "command", "why"),
    [
        ((), _command("search"), "`pimem search` is pimem's own"),
        ((), _command("skills", "more"), "`pimem skills` is pimem's own"),
        ((), _command("a", "b", "c"), "a command is one or two words"),
        ((), _command("a", ""), "a command is one or two words"),
        ((), _command("hello", method="memory.search"), "the method memory.search is taken"),
        ((), _command("hello", method="ping"), "the method ping is taken"),
        ((), _command("hello", method="session.start"), "the method session.start is taken"),
        ((), _command("hello", method="session.new"), "the method session.new is taken"),
        ((_command("hello"),), _command("hello"), "another plugin has it"),
        ((_command("team", "sync"),), _command("team", "sync"), "another plugin has it"),
        ((_command("team", "sync"),), _command("team"), "`pimem team` is a group of commands"),
        ((_command("team"),), _command("team", "sync"), "`pimem team` is a command of its own"),
        (
            (_command("hello", method="hello.greet"),),
            _command("wave", method="hello.greet"),
            "the method hello.greet is taken",
        ),
    ],
)
def test_a_plugin_command_that_collides_is_left_out_with_why(
    earlier: tuple[Command, ...], command: Command, why: str
) -> None:
    found = plugin_commands(
        _Plugins(*(("first", given) for given in earlier), ("second", command))  # type: ignore[arg-type]
    )
    assert found.commands == earlier
    assert found.left_out == (("second", command.name, why),)


def test_plugin_commands_that_fit_are_added_in_order() -> None:
    given = (_command("hello", method="hello.greet"), _command("team", "sync"), _command("wave"))
    found = plugin_commands(_Plugins(*(("p", command) for command in given)))  # type: ignore[arg-type]
    assert found.commands == given
    assert found.added == tuple(("p", command) for command in given)
    assert found.left_out == ()


def test_a_plugin_giving_something_else_than_a_command_is_an_error() -> None:
    with pytest.raises(PluginError, match="gave a str, not a Command"):
        plugin_commands(_Plugins(("odd", "search")))  # type: ignore[arg-type]


def test_the_rules_read_the_tables_words_and_methods() -> None:
    assert set(routes.CORE_WORDS) == FIRST_WORDS
    assert {command.method for command in CORE} - {None} == set(protocol.MEMORY_METHODS)


class Colliding:
    """A plugin whose first command takes pimem's word, the second a method of pimem's, the
    third fits."""

    @hookimpl
    def pimem_collect_commands(self) -> list[Command]:
        return [
            _command("search"),
            _command("hello", method="memory.write"),
            _command("wave", method="wave.hand"),
        ]


def test_pimem_plugins_says_which_commands_are_left_out_and_why(run_pimem: object) -> None:
    run = run_pimem  # the test kit's fixture: runs pimem in this process
    shown = run("plugins", plugins=[Colliding()])  # type: ignore[operator]
    assert shown.exit_code == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert any(line.startswith("  pimem wave  (") for line in lines), shown.stdout
    left_out = [line.strip() for line in lines if "is left out" in line]
    assert len(left_out) == 2, shown.stdout
    assert left_out[0].startswith("warning: pimem search of ")
    assert left_out[0].endswith("is left out: `pimem search` is pimem's own")
    assert left_out[1].endswith("is left out: the method memory.write is taken")
    data = json.loads(run("plugins", "--json", plugins=[Colliding()]).stdout)  # type: ignore[operator]
    assert [item["why"] for item in data["commands_left_out"]] == [
        "`pimem search` is pimem's own",
        "the method memory.write is taken",
    ]
    assert [item["command"] for item in data["commands"]] == ["wave"]


def test_an_option_is_named_as_its_parameter() -> None:
    option = Param.option("hf_home", "DIR", "where", default="x")
    assert (option.flags, option.metavar, option.default, option.required) == (
        ("--hf-home",),
        "DIR",
        "x",
        False,
    )
    flag = Param.flag("explain", "why")
    assert (flag.flags, isinstance(flag.kind, Flag), flag.default) == (("--explain",), True, False)
    argument = Param.argument("query", "QUERY")
    assert (argument.flags, argument.required) == ((), True)
