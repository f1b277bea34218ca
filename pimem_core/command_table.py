"""The command table's contract: what a command is, for pimem's own and for a plugin's.

Each :class:`Command` says its words, its parameters (:class:`Param`: how each is read from a
command-line word and from a JSON value, and what is wrong with a bad one), its handler and
what it returns: an :class:`Outcome`, a text for a person or an agent and the JSON beside it.
A handler sees the front door that runs it only through :class:`Door`: where the scope comes
from, where waiting and notes go, and pimem as :class:`MemoryAccess`. The front doors
(:mod:`pimem_core.doors`) build the command line and the served methods from these; plugins add
commands through ``pimem_collect_commands`` and name these types through
:mod:`pimem_core.plugin`.
"""

from __future__ import annotations

import abc
import argparse
from collections.abc import Callable, Mapping
from datetime import date
from pathlib import Path
from typing import Any, Literal, Protocol

import attrs

from pimem_core.errors import PimemError
from pimem_core.services import MemoryIndex, MemoryStore
from pimem_core.settings import Settings
from pimem_core.types import Scope

#: A command's parameters, read and checked, by name.
Args = Mapping[str, Any]


class UsageError(PimemError):
    """A command or request pimem cannot act on: a missing or wrong parameter. The CLI exits 2
    with it; ``pimem serve`` answers it as a ``request`` error."""


# -- parameter kinds ---------------------------------------------------------------------------


class Kind:
    """How a parameter's value is read: from a command-line word, or from a JSON value. Both
    raise :class:`ValueError` with what is wrong, without the parameter's name."""

    def from_word(self, word: str) -> object:
        return word

    def from_json(self, value: object) -> object:
        if not isinstance(value, str):
            raise ValueError("must be a non-empty string")
        return self.from_word(value)


class Text(Kind):
    pass


@attrs.frozen
class Count(Kind):
    minimum: int

    def from_word(self, word: str) -> object:
        if not word.isdigit() or int(word) < self.minimum:
            raise ValueError(f"must be a whole number of at least {self.minimum}, got {word!r}")
        return int(word)

    def from_json(self, value: object) -> object:
        if isinstance(value, bool) or not isinstance(value, int) or value < self.minimum:
            raise ValueError(f"must be a whole number of at least {self.minimum}")
        return value


@attrs.frozen
class Choice(Kind):
    values: tuple[str, ...]

    def from_word(self, word: str) -> object:
        if word not in self.values:
            wanted = " or ".join(f'"{value}"' for value in self.values)
            raise ValueError(f"must be {wanted}, got {word!r}")
        return word


class Flag(Kind):
    """On or off: a command-line flag, a JSON boolean."""

    def from_json(self, value: object) -> object:
        if not isinstance(value, bool):
            raise ValueError("must be true or false")
        return value


class Content(Kind):
    """Text to keep: ``-`` stands for stdin (what :meth:`Door.content` reads); given on the
    command line, the text is readable by other local users while the command runs, and the
    command line says so."""


class FilePath(Kind):
    def from_word(self, word: str) -> object:
        # The operating system refuses a NUL in a path with a ValueError: a wrong request.
        if "\x00" in word:
            raise ValueError("must be a path, without NUL characters")
        return Path(word)


def _option_word(name: str) -> str:
    return "--" + name.replace("_", "-")


@attrs.frozen(kw_only=True)
class Param:
    """One parameter. Its name is the JSON name and the handler's key."""

    name: str
    kind: Kind = attrs.field(factory=Text)
    #: The option strings on the command line; none: a positional argument.
    flags: tuple[str, ...] = ()
    metavar: str | None = None
    help: str | None = None
    required: bool = False
    default: object = None
    #: Also a served parameter; if not, the server takes it from the session (``from_session``).
    served: bool = True
    #: The ``SessionInfo`` field the server fills it from when it is not served.
    from_session: str | None = None
    #: A command-line flag that stores this value (``--all`` for ``scope="all"``).
    const: object = None
    #: What the server says when a required parameter is missing.
    missing: str | None = None

    @classmethod
    def argument(cls, name: str, metavar: str, help: str | None = None, **more: Any) -> Param:
        """A required positional argument; *more* are the other fields (``kind``, ...)."""
        return cls(name=name, required=True, metavar=metavar, help=help, **more)

    @classmethod
    def option(cls, name: str, metavar: str, help: str | None = None, **more: Any) -> Param:
        """An option that takes a value, named as the parameter (``--hf-home`` for ``hf_home``);
        *more* are the other fields (``kind``, ``default``, ...)."""
        return cls(name=name, flags=(_option_word(name),), metavar=metavar, help=help, **more)

    @classmethod
    def flag(cls, name: str, help: str) -> Param:
        """An on-or-off option, named as the parameter (``--check``); off unless given."""
        return cls(name=name, kind=Flag(), flags=(_option_word(name),), default=False, help=help)

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        def read(word: str) -> object:
            try:
                return self.kind.from_word(word)
            except ValueError as error:
                raise argparse.ArgumentTypeError(str(error)) from None

        if not self.flags:
            parser.add_argument(self.name, type=read, metavar=self.metavar, help=self.help)
        elif self.const is not None:
            parser.add_argument(
                *self.flags,
                dest=self.name,
                action="store_const",
                const=self.const,
                default=self.default,
                help=self.help,
            )
        elif isinstance(self.kind, Flag):
            parser.add_argument(*self.flags, dest=self.name, action="store_true", help=self.help)
        else:
            parser.add_argument(
                *self.flags,
                dest=self.name,
                type=read,
                required=self.required,
                default=self.default,
                metavar=self.metavar,
                help=self.help,
            )

    def from_request(self, raw: Mapping[str, object], session: object | None) -> object:
        """The served value, from a request's params or from the session (the service's
        ``SessionInfo``: :attr:`from_session` names its field)."""
        if not self.served:
            value: object = None if session is None else getattr(session, self.from_session or "")
            if value is None:
                raise UsageError(self.missing or f'"{self.name}" needs a started session')
            return str(value)
        value = raw.get(self.name)
        if value is None or value == "":
            if self.required:
                raise UsageError(self.missing or f'"{self.name}" must be a non-empty string')
            return self.default
        try:
            return self.kind.from_json(value)
        except ValueError as error:
            raise UsageError(f'"{self.name}" {error}') from None


# -- outcomes and doors ------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Outcome:
    """What a command returns: the text a person or an agent reads (``None``: nothing on
    stdout) and its JSON (``pimem CMD --json``)."""

    text: str | None
    data: object = None
    #: The served result holds the JSON under this key; without one, the JSON's fields.
    key: str | None = None

    def served(self) -> dict[str, object]:
        """The served result: ``text`` and the JSON."""
        if self.key is not None:
            return {"text": self.text, self.key: self.data}
        assert isinstance(self.data, dict), "a result without a key must be a JSON object"
        return {"text": self.text, **self.data}


class MemoryAccess(Protocol):
    """What a command's handler may ask of pimem through ``door.pimem``: the settings, a
    scope's opened store and index, a day's file, and the command table's plugin commands.
    pimem's facade is one; a handler asks nothing else of it."""

    @property
    def settings(self) -> Settings: ...

    def store(self, scope: Scope) -> MemoryStore: ...

    def index(self, scope: Scope) -> MemoryIndex: ...

    def read_day(self, scope: Scope, day: date) -> str | None: ...

    def collect_commands(self) -> tuple[tuple[str, object], ...]: ...


class Door(abc.ABC):
    """What a handler knows of the front door that runs it: where the scope comes from, where
    waiting and notes go, and pimem itself (:attr:`pimem`). The front doors (the command line,
    ``pimem serve``, the memory service) are its subclasses."""

    #: ``pimem serve``'s ready line is out already (the launcher wrote it).
    ready_written = False
    #: Told how many files an index run has done (the CLI's progress bar on a terminal).
    progress: Callable[[int, int], None] | None = None
    #: pimem, as a handler may use it.
    pimem: MemoryAccess

    @abc.abstractmethod
    def scope(self) -> Scope:
        """The scope the command works on."""

    @abc.abstractmethod
    def base_dir(self) -> Path:
        """Where a relative directory the user names is taken from."""

    @abc.abstractmethod
    def on_wait(self, holder: str) -> None:
        """The command waits in the backend queue behind *holder*."""

    @abc.abstractmethod
    def note(self, line: str) -> None:
        """A line for the person beside the result (the CLI's stderr, the server's log)."""

    def notice(self, line: str) -> None:
        """A line the person or agent reading the result should see with it: what the command
        did first (a search that indexed changed day files). The CLI prints it on stderr,
        ``pimem serve`` puts it at the top of the result's text."""
        self.note(line)

    def service_line(self) -> str | None:
        """The memory service's state for ``pimem status``; ``None`` when it is off."""
        return None

    def content(self, value: str) -> str:
        """A write's content as given (the CLI reads ``-`` from stdin)."""
        return value


#: A command's handler: what it does, given its door and its parameters.
Handler = Callable[[Door, Args], Outcome]

#: Where a command runs: ``"process"``, in the process that reads its command line;
#: ``"service"``, handed by the thin client to this user's memory service when one is on
#: (the command line runs it in process otherwise).
Route = Literal["process", "service"]


@attrs.frozen(kw_only=True)
class Command:
    """One operation, as both doors offer it."""

    #: The CLI's words: ``("search",)``, ``("skills", "list")``.
    path: tuple[str, ...]
    help: str
    handler: Handler = attrs.field(eq=False)
    description: str | None = None
    epilog: str | None = None
    params: tuple[Param, ...] = ()
    #: Served as this host-protocol method (several commands may share one, by ``action``).
    method: str | None = None
    #: Under a shared method, the value of its ``action`` parameter (the first is the default).
    action: str | None = None
    #: Takes ``--cwd`` (it works on a project) and ``--json``.
    project: bool = True
    json_output: bool = True
    #: Checks the parameters together, before the handler runs.
    check: Callable[[Args], None] | None = attrs.field(default=None, eq=False)
    #: Shows a progress bar on a terminal.
    progress: bool = False
    #: The help of the group a two-word command starts (``pimem model``), and its description,
    #: said by the group's first command.
    group_help: str | None = None
    group_description: str | None = None
    #: Where it runs (:data:`Route`); a plugin's command always runs in process.
    route: Route = "process"
    #: It changes the store: a client that lost the memory service after handing it over
    #: cannot know whether it was applied, so it does not run it again in process.
    changes: bool = False
    #: Its answer shows the plugins that failed to load, or it runs for long: the command line
    #: adds no warning line about them after it.
    quiet_about_plugins: bool = False

    @property
    def name(self) -> str:
        return " ".join(self.path)

    def run(self, door: Door, args: Args) -> Outcome:
        if self.check is not None:
            self.check(args)
        return self.handler(door, args)
