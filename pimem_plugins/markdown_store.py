"""The default memory store: daily markdown files, appended to by every agent in the mesh.

Appends are one ``O_APPEND`` write per entry, so concurrent writers (other sessions, worktrees,
other agents' plugins) never interleave or lose entries. Whether an entry opens with a
``## Session`` heading is decided from this session's own record, seeded by one read of the
file at the session's first write to it: the worst a race can cost is a duplicate heading.

The plugin also answers for its files in git (ADR 0016): it merges two versions of a day file
block by block (git's merge driver) and names the day files a merge left conflicted in status.
An entry written into a conflicted file goes below the markers, like any append; a compaction
summary is refused there.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import tempfile
from collections.abc import Callable, Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Literal, TypeVar

import attrs

from pimem_core.plugin import (
    ChunkAddress,
    ConflictScans,
    DayAddress,
    DayText,
    Entry,
    MemoryStore,
    Redaction,
    Scope,
    Section,
    StatusSection,
    StoreError,
    hookimpl,
)
from pimem_plugins.shared.day_merge import merge_day_file
from pimem_plugins.shared.entry_format import day_file_name, format_entry
from pimem_plugins.shared.hollow import HollowCount, count_hollow
from pimem_plugins.shared.matches import one_match

T = TypeVar("T")
RedactionKind = Literal["entry", "compact block"]
_REWRITE_ATTEMPTS = 5


class MarkdownStore:
    """The ``markdown-store`` plugin: opens a :class:`MarkdownMemoryStore` per scope."""

    def __init__(self) -> None:
        # (file, session id) pairs: this session has a ``## Session`` heading in that file.
        self._headed: set[tuple[str, str]] = set()
        self._conflicts = ConflictScans()
        self._hollow = HollowScans()

    @hookimpl(trylast=True)
    def pimem_open_store(self, scope: Scope) -> MemoryStore:
        return MarkdownMemoryStore(scope, headed=self._headed)

    @staticmethod
    @hookimpl(trylast=True)
    def pimem_merge_day_file(base: str, ours: str, theirs: str) -> str:
        for side, text in (("base", base), ("ours", ours), ("theirs", theirs)):
            if DayText(text).is_conflicted():
                # Blocks cannot be told apart across markers: git's own merge says what it can.
                raise StoreError(f"the {side} version already holds git conflict markers")
        return merge_day_file(base, ours, theirs)

    @hookimpl
    def pimem_collect_status(self, scope: Scope) -> Iterator[StatusSection]:
        files = self._conflicts.conflicted_files(scope.memory_dir)
        lines = (
            ()
            if not files
            else (
                "conflicts: unresolved git conflict markers in "
                + ", ".join(file.name for file in files)
                + "; search and the snapshot read both sides, new entries go below the markers",
                f"  resolve: {ConflictScans.HOW_TO_RESOLVE}",
            )
        )
        yield StatusSection(
            name="conflicts",
            rank=12,
            lines=lines,
            data={"files": [str(file) for file in files]},
        )
        yield hollow_section(self._hollow.count(scope.memory_dir))


def hollow_section(count: HollowCount) -> StatusSection:
    """The ``hollow`` status section: the store's entries that hold nothing to recall."""
    lines: tuple[str, ...] = ()
    if count.hollow:
        lines = (
            f"hollow entries: {count.hollow} of {count.entries} in the store hold nothing to "
            f"recall ({count.failure_markers} failure "
            f"{'marker' if count.failure_markers == 1 else 'markers'}, {count.blank} blank); "
            "the snapshot leaves them out and search ranks them last",
        )
    return StatusSection(name="hollow", rank=22, lines=lines, data=attrs.asdict(count))


class HollowScans:
    """The hollow entries of a memory directory's day files, for a process that asks again and
    again (the memory service answers status all day): a file whose stat is unchanged keeps
    its count and is not read again."""

    def __init__(self) -> None:
        self._known: dict[str, dict[str, tuple[tuple[int, int, int], HollowCount]]] = {}

    def count(self, directory: Path) -> HollowCount:
        before = self._known.get(str(directory), {})
        now: dict[str, tuple[tuple[int, int, int], HollowCount]] = {}
        with contextlib.suppress(OSError), os.scandir(directory) as entries:
            for entry in entries:
                if entry.name.startswith(".") or not entry.name.endswith(".md"):
                    continue
                with contextlib.suppress(OSError):
                    status = entry.stat()
                    stamp = (status.st_ino, status.st_size, status.st_mtime_ns)
                    known = before.get(entry.name)
                    if known is None or known[0] != stamp:
                        text = Path(entry.path).read_text(encoding="utf-8", errors="replace")
                        known = (stamp, count_hollow(text))
                    now[entry.name] = known
        self._known[str(directory)] = now
        return sum((count for _, count in now.values()), HollowCount())


class MarkdownMemoryStore:
    """Daily memory files under one scope's memory directory."""

    def __init__(self, scope: Scope, *, headed: set[tuple[str, str]] | None = None) -> None:
        self.scope = scope
        self._headed = set() if headed is None else headed
        self._seeded: set[tuple[str, str]] = set()

    def append_entry(self, entry: Entry) -> Path:
        file = _day_file(self.scope, day_file_name(entry))
        key = (str(file), entry.anchor.session)
        if key not in self._seeded:
            if f"session:{entry.anchor.session} " in _read_if_exists(file):
                self._headed.add(key)
            self._seeded.add(key)
        data = format_entry(entry, session_heading=key not in self._headed).encode("utf-8")
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            _append(file, data)
        except OSError as error:
            raise StoreError(
                f"cannot write to the daily memory file {file}: {error.strerror or error}; "
                "check that the memory store is a writable directory"
            ) from None
        # Only after the append succeeded: a failed write must still open with the heading.
        self._headed.add(key)
        return file

    def append_compaction(self, summary: str, now: datetime) -> Path:
        name = f"{now.date().isoformat()}.md"
        file = self.scope.memory_dir / name
        with contextlib.suppress(OSError):  # no file yet: nothing to refuse
            if ConflictScans.file_is_conflicted(file):
                raise StoreError(f"memory compaction refused: {ConflictScans.describe([file])}")
        new = not (file.is_file() and file.stat().st_size)
        title = f"# {now.date().isoformat()}\n" if new else ""
        block = f"{title}\n\n## Memory Compact {now:%H:%M}\n\n{summary}\n"
        return append_block(self.scope, name, block)

    def read_day(self, day: date) -> str | None:
        text = _read_if_exists(self.scope.memory_dir / f"{day.isoformat()}.md")
        return text or None

    def forget_entry(self, address: DayAddress | ChunkAddress) -> Redaction:
        scope = self.scope
        if isinstance(address, ChunkAddress):
            return _forget_chunk(scope, address.section)
        file = _day_file(scope, f"{address.day.isoformat()}.md")
        if not _is_file(file):
            raise StoreError(f"no daily memory file for {address.day.isoformat()} at {file}")

        def forget(text: str) -> tuple[str, tuple[str, RedactionKind]]:
            found = [entry for entry in DayText(text).entries() if entry.time == address.time]
            entry = one_match(
                found,
                missing=StoreError(f"no memory entry at {address.time} in {file}"),
                ambiguous=StoreError(
                    f"{len(found)} entries at {address.time} in {file}: ambiguous; forget "
                    "the one you mean by its chunk_hash instead (each search hit shows it: "
                    f"`pimem search` or memory_search), or edit the file by hand"
                ),
            )
            return entry.removed_from(text), (entry.text, "entry")

        try:
            return _redact(file, forget)
        except FileNotFoundError:
            raise StoreError(
                f"no daily memory file for {address.day.isoformat()} at {file}"
            ) from None


def append_block(scope: Scope, name: str, text: str) -> Path:
    """Append *text* to the daily memory file *name* of *scope* in one ``O_APPEND`` write, as
    entries are (memsearch's ``## Memory Compact`` blocks, which it writes in several)."""
    file = _day_file(scope, name)
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        _append(file, text.encode("utf-8"))
    except OSError as error:
        raise StoreError(
            f"cannot write to the daily memory file {file}: {error.strerror or error}"
        ) from None
    return file


def _day_file(scope: Scope, name: str) -> Path:
    """The daily memory file *name* of *scope*'s store, refused when it is a symbolic link that
    leads out of the store: a committed link must not turn an append into a write elsewhere
    (``~/.bashrc``), nor a forget into a copy of an outside file into memory."""
    file = scope.memory_dir / name
    try:
        linked = file.is_symlink()
    except OSError:  # the store cannot be read: the append or the read says so
        linked = False
    if linked and not _inside(file, scope.memory_dir):
        raise StoreError(
            f"the daily memory file {file} is a symbolic link to {os.path.realpath(file)}, "
            f"outside the memory store {scope.memory_dir}; pimem only writes inside the store: "
            "replace the link with a regular file"
        )
    return file


def _is_file(file: Path) -> bool:
    """Whether *file* is a regular file; a store pimem may not look into is an error."""
    try:
        return file.is_file()
    except OSError as error:
        raise StoreError(
            f"cannot read the daily memory file {file}: {error.strerror or error}"
        ) from None


def _forget_chunk(scope: Scope, section: Section) -> Redaction:
    """Remove the entry, or the ``## Memory Compact`` block, an expanded chunk points at.

    The chunk's heading and line window come from the index, which may lag behind the file: the
    window is padded into neighbouring entries, and other writers may have moved lines since.
    So the entry must carry the chunk's heading with its heading line inside the window, and
    its session anchor when the chunk has one; anything but exactly one match is refused.
    """
    chunk = section.chunk_hash
    if "\x00" in section.source:  # no file has such a name: the index entry is junk
        raise StoreError(f"chunk {chunk} names no file: its source is {section.source!r}")
    file = Path(os.path.normpath(os.path.join(scope.scope_dir, section.source)))
    if not _inside(file, scope.memory_dir):
        raise StoreError(
            f"chunk {chunk} lives in {section.source}, outside the memory store "
            f"{scope.memory_dir}; only daily memory files can be forgotten"
        )
    gone = StoreError(
        f"chunk {chunk} points at {file}, which no longer exists; "
        "the index has not caught up with it yet (a reindex is pending)"
    )
    if not _is_file(file):
        raise gone
    heading = section.heading.strip()
    first, last = section.start_line, section.end_line

    def forget(text: str) -> tuple[str, tuple[str, RedactionKind]]:
        entries = [
            entry
            for entry in DayText(text).entries()
            if entry.time == heading and first <= entry.start + 1 <= last
        ]
        if section.anchor is not None:
            marker = f"session:{section.anchor.session} turn:{section.anchor.turn} "
            entries = [entry for entry in entries if marker in entry.text]
        if len(entries) > 1:
            raise StoreError(
                f"chunk {chunk} matches {len(entries)} entries at {heading} in {file}: "
                "ambiguous; edit the daily memory file by hand to remove the one you mean"
            )
        if entries:
            return entries[0].removed_from(text), (entries[0].text, "entry")
        blocks = [
            block
            for block in DayText(text).compact_blocks()
            if block.start + 1 <= last and first <= block.last + 1 and heading in block.headings
        ]
        block = one_match(
            blocks,
            missing=StoreError(
                f"chunk {chunk} (heading {heading!r}, lines {first}-{last}) does not resolve "
                f"to a memory entry or compact block in {file}; the file may have changed "
                "since it was indexed"
            ),
            ambiguous=StoreError(
                f"chunk {chunk} spans {len(blocks)} compact blocks in {file}: ambiguous; "
                "edit the daily memory file by hand to remove the one you mean"
            ),
        )
        return block.removed_from(text), (block.text, "compact block")

    try:
        return _redact(file, forget)
    except FileNotFoundError:
        raise gone from None


def _inside(file: Path, directory: Path) -> bool:
    """*file* lies below *directory*, once both are resolved through symbolic links."""
    real, root = os.path.realpath(file), os.path.realpath(directory)
    return real != root and os.path.commonpath([real, root]) == root


def _redact(file: Path, edit: Callable[[str], tuple[str, tuple[str, RedactionKind]]]) -> Redaction:
    """Rewrite *file* with *edit*, which also answers the removed text and what it was.

    Raises :class:`FileNotFoundError` when *file* disappears before it could be opened.
    """
    try:
        removed, kind = _rewrite(file, edit)
    except FileNotFoundError:
        raise
    except OSError as error:
        raise StoreError(
            f"cannot rewrite the daily memory file {file}: {error.strerror or error}"
        ) from None
    return Redaction(file=file, removed=removed, deleted=not file.exists(), kind=kind)


def _read_if_exists(file: Path) -> str:
    try:
        return file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as error:
        raise StoreError(f"cannot read the daily memory file {file}: {error}") from None


def _append(file: Path, data: bytes) -> None:
    fd = os.open(file, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        written = os.write(fd, data)
        if written != len(data):
            _take_back(fd, written)
            raise OSError(
                errno.ENOSPC,
                f"only {written} of {len(data)} bytes were written (is the disk full?)",
            )
    finally:
        os.close(fd)


def _take_back(fd: int, written: int) -> None:
    """Cut a short append (the disk filled up mid-write) back off the file, so no half entry
    stays to swallow the heading of the next one. Only while nobody appended after it: another
    writer's entry is never cut, a torn one stays then."""
    end = os.lseek(fd, 0, os.SEEK_CUR)  # with O_APPEND: the end of this write
    if os.fstat(fd).st_size == end:
        os.ftruncate(fd, end - written)


def _rewrite(file: Path, edit: Callable[[str], tuple[str, T]]) -> T:
    """Replace *file* with ``edit(text)[0]`` (deleting it when empty) without losing appends.

    Other agents append without locks, so the file is compared with what was read just before
    the swap, and the edit is redone if it changed; an append that still lands on the old file
    after the swap is carried over. pimem's own rewrites take an exclusive lock on the file, so
    two forgets never undo each other. *edit* may raise to refuse; nothing changes then.
    """
    for _ in range(_REWRITE_ATTEMPTS):
        with open(file, "rb") as old:
            fcntl.flock(old.fileno(), fcntl.LOCK_EX)
            original = old.read()
            try:
                text = original.decode("utf-8")
            except UnicodeDecodeError:
                raise StoreError(f"{file} is not UTF-8 text; edit it by hand") from None
            remaining, result = edit(text)
            staged = _stage(file, remaining.encode("utf-8"), os.fstat(old.fileno()).st_mode)
            try:
                if not _unchanged(file, old.fileno(), original):
                    continue
                if staged is None:
                    os.unlink(file)
                else:
                    os.replace(staged, file)
                    staged = None
            finally:
                if staged is not None:
                    os.unlink(staged)
            late = old.read()
        if late:
            _append(file, late)
        return result
    raise StoreError(f"{file} kept changing while it was being edited; try again")


def _unchanged(path: Path, fd: int, original: bytes) -> bool:
    """*path* is still the file open at *fd*, holding exactly *original*."""
    try:
        current = os.stat(path)
    except FileNotFoundError:
        return False
    opened = os.fstat(fd)
    if (current.st_dev, current.st_ino) != (opened.st_dev, opened.st_ino):
        return False
    return opened.st_size == len(original) and os.pread(fd, len(original) + 1, 0) == original


def _stage(file: Path, data: bytes, mode: int) -> str | None:
    if not data:
        return None
    fd, staged = tempfile.mkstemp(dir=file.parent, prefix=f".{file.name}.", suffix=".tmp")
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, mode & 0o7777)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(staged)
        raise
    os.close(fd)
    return staged
