"""git's conflict markers in a daily memory file: found, and kept out of memory.

A merge git could not finish leaves each disputed region of a file as ``<<<<<<< ours``, our
lines, (with ``merge.conflictStyle=diff3``: ``||||||| base`` and the common ancestor's lines),
``=======``, their lines and ``>>>>>>> theirs``. Day files are append-only blocks, so the lines
of both sides are memory and the markers and the ancestor's part are not: every reader sees a
conflicted file as a union resolution would leave it (``git merge-file --union``).

A file is conflicted when it holds a ``<<<<<<<`` or ``>>>>>>>`` line (seven characters, then a
space or the end of the line, as git writes them); only then does a lone ``=======`` or
``|||||||`` line count as a marker, so a day file that merely contains one is left alone.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import ClassVar

# A line of a file with CRLF ends keeps its "\r" here: git writes markers with the file's ends.
_OPEN = re.compile(r"^<{7}(?: |\r?$)")
_CLOSE = re.compile(r"^>{7}(?: |\r?$)")
_BASE = re.compile(r"^\|{7}(?: |\r?$)")
_SPLIT = re.compile(r"^={7}\r?$")
# A byte-level prefilter: a file without either line cannot be conflicted.
_PREFILTER = re.compile(rb"(?:^|\n)(?:<{7}|>{7})(?:[ \r\n]|$)")

#: What to do about a conflicted day file, said once wherever pimem finds one.
HOW_TO_RESOLVE = (
    "`pimem git resolve` merges both sides block by block (a forget stays forgotten) and keeps "
    "the entries written since; by hand, keep both sides: delete the <<<<<<<, ======= and "
    ">>>>>>> lines (with diff3 also the ||||||| line and the lines after it up to =======), "
    "then `git add` the file. Not `git checkout --ours/--theirs` nor `git merge --abort`: each "
    "side holds entries the other lacks, and entries written since sit below the markers"
)


def is_conflicted(text: str) -> bool:
    """Whether *text* holds a region git left unresolved."""
    return any(_OPEN.match(line) or _CLOSE.match(line) for line in text.split("\n"))


def _dropped(lines: Sequence[str]) -> list[bool]:
    """For each line: a marker, or a line of diff3's ancestor part (neither side's)."""
    dropped = [False] * len(lines)
    if not any(_OPEN.match(line) or _CLOSE.match(line) for line in lines):
        return dropped
    part = None  # None outside a region, else "ours", "base" or "theirs"
    for number, line in enumerate(lines):
        if _OPEN.match(line):
            part, dropped[number] = "ours", True
        elif _BASE.match(line):
            part, dropped[number] = ("base" if part == "ours" else part), True
        elif _SPLIT.match(line):
            part, dropped[number] = ("theirs" if part in ("ours", "base") else part), True
        elif _CLOSE.match(line):
            part, dropped[number] = None, True
        else:
            dropped[number] = part == "base"
    return dropped


def marker_lines(text: str) -> list[int]:
    """The 0-based numbers of the lines of *text* that are not memory: markers, ancestor lines."""
    return [number for number, gone in enumerate(_dropped(text.split("\n"))) if gone]


def blank_conflicts(text: str) -> str:
    """*text* with its markers and ancestor lines made blank: what the index chunks, so every
    other line keeps its number (search, expand and forget address the file by line)."""
    lines = text.split("\n")
    dropped = _dropped(lines)
    if not any(dropped):
        return text
    return "\n".join("" if gone else line for line, gone in zip(lines, dropped, strict=True))


def without_conflicts(text: str) -> str:
    """*text* as a union resolution leaves it: both sides' lines, no marker, no ancestor part."""
    lines = text.split("\n")
    dropped = _dropped(lines)
    if not any(dropped):
        return text
    return "\n".join(line for line, gone in zip(lines, dropped, strict=True) if not gone)


def after_conflicts(text: str) -> str:
    """What follows the last marker of *text* (all of it when it has none): where entries
    appended since the merge went."""
    markers = marker_lines(text)
    if not markers:
        return text
    return "\n".join(text.split("\n")[markers[-1] + 1 :])


def without_marker_lines(fragment: str) -> str:
    """A chunk's text without marker lines. A chunk is part of a file, so its region cannot be
    told: every line shaped like a marker goes (another agent may have indexed the file as it
    was, markers and all)."""
    lines = fragment.split("\n")
    kept = [
        line
        for line in lines
        if not (_OPEN.match(line) or _CLOSE.match(line) or _BASE.match(line) or _SPLIT.match(line))
    ]
    return fragment if len(kept) == len(lines) else "\n".join(kept)


def conflicted_files(directory: Path) -> list[Path]:
    """The markdown files directly in *directory* (its daily memory files) that are
    conflicted, by name; an unreadable file is left to whoever reads it next."""
    return ConflictScans().conflicted_files(directory)


def file_is_conflicted(file: Path) -> bool:
    """Whether *file* is conflicted (``OSError`` when it cannot be read)."""
    data = file.read_bytes()
    # Without a run of seven of either, no line can open or close a region; a substring
    # search runs at memory speed, the line-anchored pattern twenty times slower.
    if b"<<<<<<<" not in data and b">>>>>>>" not in data:
        return False
    if _PREFILTER.search(data) is None:
        return False
    return is_conflicted(data.decode("utf-8", errors="replace"))


def describe_conflicted(files: Iterable[Path]) -> str:
    """One sentence naming *files* and how to resolve them."""
    names = ", ".join(str(file) for file in files)
    return f"unresolved git conflict markers in {names}; resolve: {HOW_TO_RESOLVE}"


#: A file as its stat shows it: inode, size, modification time.
_Stamp = tuple[int, int, int]


class ConflictScans:
    """:func:`conflicted_files` for a process that asks again and again (the memory service
    answers ``pimem status`` all day): a file whose stat is as at the last scan keeps its
    answer, and is not read again (a thousand day files take a fifth of a second to read)."""

    #: What to do about a conflicted day file, said once wherever pimem finds one.
    HOW_TO_RESOLVE: ClassVar[str] = HOW_TO_RESOLVE

    def __init__(self) -> None:
        self._known: dict[str, dict[str, tuple[_Stamp, bool]]] = {}

    def conflicted_files(self, directory: Path) -> list[Path]:
        """As :func:`conflicted_files`."""
        before = self._known.get(str(directory), {})
        now: dict[str, tuple[_Stamp, bool]] = {}
        with contextlib.suppress(OSError), os.scandir(directory) as entries:
            for entry in entries:
                if entry.name.startswith(".") or not entry.name.endswith(".md"):
                    continue
                with contextlib.suppress(OSError):
                    if not entry.is_file():
                        continue
                    status = entry.stat()
                    stamp = (status.st_ino, status.st_size, status.st_mtime_ns)
                    known = before.get(entry.name)
                    if known is not None and known[0] == stamp:
                        now[entry.name] = known
                    else:
                        now[entry.name] = (stamp, file_is_conflicted(Path(entry.path)))
        self._known[str(directory)] = now
        return sorted(directory / name for name, (_, conflicted) in now.items() if conflicted)

    @staticmethod
    def file_is_conflicted(file: Path) -> bool:
        """Whether *file* is conflicted, read now (``OSError`` when it cannot be read)."""
        return file_is_conflicted(file)

    @staticmethod
    def describe(files: Iterable[Path]) -> str:
        """One sentence naming *files* and how to resolve them."""
        return describe_conflicted(files)
