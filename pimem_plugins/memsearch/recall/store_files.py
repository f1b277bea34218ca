"""The store's daily files as the read model takes them in: which changed since it last looked
(the recently written ones at every search, all of them now and then), and memsearch's chunks
of one, with memsearch's chunk hashes."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Protocol

from pimem_core.plugin import (
    DayText,
    Scope,
    StoreError,
)
from pimem_plugins.memsearch.ledger import FULL_CHECK_SECONDS, recent_files
from pimem_plugins.memsearch.recall.cache import Stamp
from pimem_plugins.memsearch.recall.generation import ChunkRecord


class Chunking(Protocol):
    """How the collection's files are chunked, looked up only when a file is."""

    def chunking(self) -> tuple[int, int]:
        """memsearch's ``max_chunk_size`` and ``overlap_lines``."""
        ...

    def model_name(self) -> str:
        """The embedding model's name as memsearch puts it into chunk hashes."""
        ...


class StoreFiles:
    """*scope*'s daily files, and the stat of each as the read model holds it (the stamps,
    guarded by the recall's refresh lock)."""

    def __init__(self, scope: Scope, collection: Chunking) -> None:
        self.scope = scope
        self._collection = collection
        self.stamps: dict[str, Stamp] = {}
        self._resolved_dir: str | None = None
        # What the last full check saw: when, the directory's stat, the recently written files.
        self._checked_at = -FULL_CHECK_SECONDS
        self._directory_stamp: Stamp | None = None
        self._recent: list[str] = []

    def found(self) -> dict[str, Stamp]:
        """The store's daily files and their stats: one directory read, no path objects (a
        search pays for it)."""
        found: dict[str, Stamp] = {}
        try:
            listing = os.scandir(self.directory())
        except FileNotFoundError:
            return found
        except OSError as error:
            # Not "no memory": a store this user may not read is refused, as a snapshot is.
            raise StoreError(
                f"cannot read the memory directory {self.directory()}: {error.strerror or error}"
            ) from None
        with listing as entries:
            for entry in entries:
                if entry.name.endswith(".md"):
                    with contextlib.suppress(OSError):
                        stat = entry.stat()
                        found[entry.path] = (stat.st_mtime_ns, stat.st_size)
        return found

    def directory(self) -> str:
        if self._resolved_dir is None:
            self._resolved_dir = str(self.scope.memory_dir.resolve())
        return self._resolved_dir

    def take_saved(self, stamps: dict[str, Stamp]) -> None:
        """Take the stamps a saved read model had, but compare the files written last with its
        chunks once more rather than trust their stat: processes save the cache while others
        write, so a cache can claim a file's stat without all of its chunks (a read, and nothing
        embedded when they agree)."""
        self.stamps = dict(stamps)
        for path in recent_files({path: mtime for path, (mtime, _) in stamps.items()}):
            self.stamps[path] = (-1, -1)

    def changed(self) -> list[str]:
        """Store files whose stat differs from what the read model saw (gone ones included);
        under the refresh lock, which guards the stamps. Every file is checked at most
        ``FULL_CHECK_SECONDS`` apart, or when the directory changed; the recent ones always."""
        directory = _stamp(self.directory())
        now = time.monotonic()
        if directory == self._directory_stamp and now - self._checked_at < FULL_CHECK_SECONDS:
            return [path for path in self._recent if _stamp(path) != self.stamps.get(path)]
        files = self.found()
        self._checked_at, self._directory_stamp = now, directory
        self._recent = recent_files({path: mtime for path, (mtime, _) in files.items()})
        if files == self.stamps:
            return []
        return sorted(
            source
            for source in set(files) | set(self.stamps)
            if files.get(source) != self.stamps.get(source)
        )

    def chunks(self, path: Path) -> tuple[Stamp | None, list[ChunkRecord] | None]:
        """memsearch's chunks of *path* with memsearch's chunk hashes: none when it is gone,
        ``None`` when it cannot be read."""
        from memsearch.chunker import chunk_markdown, compute_chunk_id

        try:
            stat = path.stat()
        except OSError:
            return None, []  # gone: its chunks go
        try:
            text = path.read_bytes().decode("utf-8", errors="replace")
        except OSError:
            # Unreadable: its chunks stay as they were, and the file is not retried until its
            # stat changes.
            return (stat.st_mtime_ns, stat.st_size), None
        size, overlap = self._collection.chunking()
        model = self._collection.model_name()
        # As pimem's index runs chunk it: conflict markers blank (ADR 0016).
        text = DayText(text).blank_conflicts()
        chunks = chunk_markdown(text, source=str(path), max_chunk_size=size, overlap_lines=overlap)
        return (stat.st_mtime_ns, stat.st_size), [
            ChunkRecord(
                chunk_hash=compute_chunk_id(
                    chunk.source, chunk.start_line, chunk.end_line, chunk.content_hash, model
                ),
                content=chunk.content,
                source=chunk.source,
                heading=chunk.heading,
                heading_level=chunk.heading_level,
                start_line=chunk.start_line,
                end_line=chunk.end_line,
                facts_ready=True,
            )
            for chunk in chunks
        ]


def _stamp(path: str) -> Stamp | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size)
