"""The index ledger: what each daily memory file held when this machine last indexed it.

A teammate's day files arrive with a ``git pull``, and other agents append to the store, with no
index run on this machine. memsearch keeps nothing per file that says so short of reading the
collection, so pimem keeps this: for each daily memory file, the hash of the bytes an index run
took in, and the file's stat beside it. A search then finds the files the collection is behind
on with one directory read: an unchanged stat rules a file out, and only a file whose stat
moved is read and hashed (a pull rewrites the files it brings, so their stat always moves; the
hash says whether their bytes did).

The ledger is per machine, in pimem's state directory, one file per database, collection and
embedding model; never in the store, where git would carry one machine's word to another. Two
processes recording at once may lose one's update: that only makes a file look changed, and
indexing it again embeds nothing (memsearch keeps the chunks it already has).
"""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import attrs

from pimem_core.plugin import write_private

log = logging.getLogger(__name__)

#: A day file's stat: mtime and ctime in ns, size, inode. Any of them moving means "read it".
Stamp = tuple[int, int, int, int]

FORMAT = 1
#: Seconds between checks of every file of the store; in between, a search checks the
#: directory (a file made, renamed or removed: what a pull does) and the files written lately
#: (where other agents append). A stat of a thousand files costs milliseconds.
FULL_CHECK_SECONDS = 1.0
#: A file written this long before the newest one is checked on every search until the next
#: full check.
RECENT_NS = 3_600 * 1_000_000_000
#: ... and at most this many of them, the newest: a clone or checkout writes every file at once,
#: and a search would stat them all.
RECENT_FILES = 8
#: A stat this close to the moment it was read is not trusted later: the file system's clock is
#: coarse, so a rewrite of the same size within it could leave the stat as it was.
SETTLE_NS = 2 * 1_000_000_000


@attrs.frozen
class DayFile:
    """A daily memory file as an index run takes it in, or as a search finds it."""

    path: str
    #: The sha256 of its bytes; ``None``: the file is gone (its chunks go too).
    digest: str | None
    #: Its stat when it was hashed, or ``None`` when that stat cannot vouch for the bytes later.
    stamp: Stamp | None = None


def _stat(path: str) -> Stamp | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_mtime_ns, found.st_ctime_ns, found.st_size, found.st_ino)


def _digest(path: str) -> str | None:
    try:
        with open(path, "rb") as file:
            return hashlib.file_digest(file, "sha256").hexdigest()
    except OSError:
        return None


def recent_files(mtimes: Mapping[str, int]) -> list[str]:
    """The files to check on every search: written within ``RECENT_NS`` of the newest, at most
    ``RECENT_FILES`` of them (at equal times the later name, which is the later day)."""
    newest = max(mtimes.values(), default=0)
    recent = (path for path, mtime in mtimes.items() if mtime > newest - RECENT_NS)
    return heapq.nlargest(RECENT_FILES, recent, key=lambda path: (mtimes[path], path))


def day_files(directory: str) -> dict[str, Stamp]:
    """The store's daily memory files and their stats, in one directory read: the markdown files
    directly in *directory*, hidden ones left out (memsearch skips them too)."""
    found: dict[str, Stamp] = {}
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            if entry.name.startswith(".") or not entry.name.endswith((".md", ".markdown")):
                continue
            with contextlib.suppress(OSError):
                if entry.is_file():
                    status = entry.stat()
                    found[entry.path] = (
                        status.st_mtime_ns,
                        status.st_ctime_ns,
                        status.st_size,
                        status.st_ino,
                    )
    return found


class IndexLedger:
    """The ledger of one store's files in one collection (kept in *file*; ``None``: memory only)."""

    def __init__(
        self,
        file: Path | None,
        memory_dir: Path,
        *,
        clock: Callable[[], int] = time.time_ns,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.file = file
        self._memory_dir = memory_dir
        self._directory: str | None = None
        self._clock = clock
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._entries: dict[str, DayFile] = {}
        self._loaded: Stamp | None = None
        #: What was last hashed of each file, so a file that stays changed is read once.
        self._seen: dict[str, DayFile] = {}
        #: This process's own writes, by their stat after the write: a session indexes them.
        self._held: dict[str, Stamp] = {}
        self._checked_at = -FULL_CHECK_SECONDS
        self._directory_stamp: Stamp | None = None
        self._recent: list[str] = []

    @property
    def directory(self) -> str:
        if self._directory is None:
            self._directory = str(self._memory_dir.resolve())
        return self._directory

    # -- what changed ----------------------------------------------------------------------

    def changed(self) -> list[DayFile]:
        """The day files whose bytes are not what this machine last indexed (new, changed, or
        gone), newest first (day files are named by their date); this process's own writes are
        left to its index runs. Every file is checked at most ``FULL_CHECK_SECONDS`` apart, or
        at once when the directory changed; the recent ones on every call."""
        with self._lock:
            self._reload()
            stats, whole = self._stats()
            found: list[DayFile] = []
            vouched = False
            for path, stamp in stats.items():
                if self._held.get(path) == stamp:
                    continue
                entry = self._entries.get(path)
                if entry is not None and entry.stamp is not None and entry.stamp == stamp:
                    continue
                current = self._hashed(path, stamp)
                if current.digest is None:
                    continue  # gone or unreadable since the directory was read: next time
                if entry is not None and entry.digest == current.digest:
                    # The same bytes under a new stat (a checkout that rewrote them): the stat
                    # vouches for them from now on, here and in the next process.
                    self._entries[path] = current
                    vouched = vouched or current.stamp is not None
                    continue
                found.append(current)
            if whole:
                found += [
                    DayFile(path=path, digest=None) for path in self._entries if path not in stats
                ]
            if vouched:
                self._save()
            return sorted(found, key=lambda day: day.path, reverse=True)

    def _stats(self) -> tuple[dict[str, Stamp], bool]:
        """The stats to compare: every file's, or only the recent ones' (``False``)."""
        directory = _stat(self.directory)
        now = self._monotonic()
        if directory == self._directory_stamp and now - self._checked_at < FULL_CHECK_SECONDS:
            recent = {path: _stat(path) for path in self._recent}
            return {path: stamp for path, stamp in recent.items() if stamp is not None}, False
        files = day_files(self.directory)
        self._checked_at, self._directory_stamp = now, directory
        self._recent = recent_files({path: stamp[0] for path, stamp in files.items()})
        return files, True

    def _hashed(self, path: str, stamp: Stamp | None) -> DayFile:
        for known in (self._seen.get(path), self._entries.get(path)):
            if known is not None and known.stamp is not None and known.stamp == stamp:
                return known  # the stat vouches for the bytes last hashed
        digest = _digest(path)
        settled = stamp is not None and self._clock() - stamp[0] > SETTLE_NS
        day = DayFile(path=path, digest=digest, stamp=stamp if settled else None)
        self._seen[path] = day
        return day

    # -- what an index run took in ---------------------------------------------------------

    def fingerprint(self, files: Iterable[Path] | None = None) -> list[DayFile]:
        """The day files an index run is about to take in, as they are now (before memsearch
        reads them, so a change during the run makes them differ next time): *files* that
        are day files of this store, or every day file and the recorded ones that are gone."""
        with self._lock:
            if files is None:
                stats = day_files(self.directory)
                gone = [path for path in self._entries if path not in stats]
            else:
                # The ledger knows the store's day files only; anything else is not its business.
                paths = {
                    os.path.join(self.directory, Path(file).name)
                    for file in files
                    if os.path.realpath(Path(file).parent) == self.directory
                }
                stats = {path: stamp for path in paths if (stamp := _stat(path)) is not None}
                gone = [path for path in paths if path not in stats]
            return [self._hashed(path, stamp) for path, stamp in stats.items()] + [
                DayFile(path=path, digest=None) for path in gone
            ]

    def outstanding(self, files: Iterable[DayFile]) -> list[DayFile]:
        """Of *files* (found changed), those the ledger still does not vouch for: another index
        run may have taken them in since."""
        with self._lock:
            self._reload()
            return [day for day in files if self._outstanding(day)]

    def _outstanding(self, day: DayFile) -> bool:
        entry = self._entries.get(day.path)
        if day.digest is None:
            return entry is not None
        return entry is None or entry.digest != day.digest

    def record(self, files: Iterable[DayFile]) -> None:
        """*files* are in the collection as fingerprinted (gone ones: out of it)."""
        with self._lock:
            self._reload()
            for day in files:
                self._held.pop(day.path, None)
                if day.digest is None:
                    self._entries.pop(day.path, None)
                else:
                    self._entries[day.path] = day
            self._save()

    def hold(self, file: Path) -> None:
        """This process wrote *file*; its own index run takes it in (a search need not)."""
        if os.path.realpath(file.parent) != self.directory:
            return
        with self._lock:
            path = os.path.join(self.directory, file.name)
            stamp = _stat(path)
            if stamp is not None:
                self._held[path] = stamp

    def clear(self) -> None:
        """The collection holds none of the files (its database was moved aside or reset)."""
        with self._lock:
            self._entries.clear()
            self._save()

    # -- on disk ---------------------------------------------------------------------------

    def _reload(self) -> None:
        """Take in what other processes recorded since the ledger was last read or written."""
        if self.file is None:
            return
        stamp = _stat(str(self.file))
        if stamp == self._loaded:
            return
        self._loaded = stamp
        self._entries = _parse(self.file) if stamp is not None else {}

    def _save(self) -> None:
        if self.file is None:
            return
        data = {
            "format": FORMAT,
            "files": {
                path: [day.digest, None if day.stamp is None else list(day.stamp)]
                for path, day in sorted(self._entries.items())
            },
        }
        try:
            write_private(self.file, json.dumps(data))
        except OSError as error:
            # Without the ledger every file looks changed: searches index them again, for nothing.
            log.warning("the index ledger %s could not be written: %s", self.file, error)
            return
        self._loaded = _stat(str(self.file))


def _parse(file: Path) -> dict[str, DayFile]:
    """The ledger in *file*; anything unreadable is an empty ledger (every file gets indexed
    again, which embeds nothing that is already in the collection)."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        if data.get("format") != FORMAT:
            return {}
        entries = {}
        for path, (digest, stamp) in data["files"].items():
            if not isinstance(path, str) or not isinstance(digest, str):
                continue
            valid = isinstance(stamp, list) and len(stamp) == 4
            entries[path] = DayFile(
                path=path,
                digest=digest,
                stamp=(int(stamp[0]), int(stamp[1]), int(stamp[2]), int(stamp[3]))
                if valid
                else None,
            )
        return entries
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        log.warning("the index ledger %s is unreadable; every day file counts as changed", file)
        return {}
