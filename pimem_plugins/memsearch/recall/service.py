"""pimem's recall for one collection: the read model kept in step with the store, and searched.

Where the read model's chunks come from (ADR 0013):

* **the collection**, once, when no cache has them: memsearch's rows with the vectors it
  stored (nothing is embedded again), one vector per chunk until the chunk's facts are
  embedded in the background;
* **the store's files**, for every change after that: a daily file whose stat changed is cut
  into chunks by memsearch's own chunker, and its chunk hashes computed as memsearch computes
  them, so the read model holds what the collection will hold once memsearch indexed the file.
  New chunks are embedded here, a fact at a time. That is what makes a session's own write
  searchable at once, a forgotten entry unsearchable at once, and another agent's write
  searchable before its indexer ran.

A search never waits for an index run. A day file the read model has not seen (a clone, a pull,
another agent's store met for the first time) is taken in at once *by its words*: its chunks
join the lexical leg with no vector, and the background worker embeds their facts, then has
memsearch index the file into the collection (for the other agents of the mesh), a step at a
time (ADR 0026).

Nothing is written to the collection: it stays memsearch's, the same for every agent.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from attrs import evolve

from pimem_core.plugin import Scope, SearchHit
from pimem_plugins.memsearch.recall import cache
from pimem_plugins.memsearch.recall.backfill import Backfill
from pimem_plugins.memsearch.recall.encoding import embed_facts
from pimem_plugins.memsearch.recall.generation import ChunkRecord
from pimem_plugins.memsearch.recall.intake import changes, embed_leaders, of_rows, take_in
from pimem_plugins.memsearch.recall.ranking import DEPTH, rank, weights_for
from pimem_plugins.memsearch.recall.read_model import ReadModel
from pimem_plugins.memsearch.recall.store_files import StoreFiles
from pimem_plugins.memsearch.recall.text import facts, tokens
from pimem_plugins.memsearch.recall.worker import Worker
from pimem_plugins.memsearch.recall.written import OutstandingWrites

log = logging.getLogger(__name__)

#: Chunks a search embeds itself when it finds a changed file; more go to the background.
INLINE_CHUNKS = 16
#: Times a search embeds the hits it would show that have no vector yet, and ranks again.
LEADER_ROUNDS = 2
#: Facts a load from the collection embeds before it returns; more are left to the background.
INLINE_FACTS = 256
#: Chunks up to which a store met for the first time is folded on the search's path.
FOLD_INLINE = 20_000
#: Seconds between saves of the overlay while the background backfill goes on.
SAVE_EVERY_SECONDS = 30.0


class Collection(Protocol):
    """What the read model needs of the collection it caches, looked up only when needed."""

    def encode(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Unit vectors of *texts* by the collection's embedding model."""
        ...

    def encode_behind(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """:meth:`encode` for work behind the requests: it steps aside for searches between
        its batches."""
        ...

    def searching(self) -> AbstractContextManager[None]:
        """A search runs in this block: background embedding waits for it."""
        ...

    def rows(self) -> list[dict[str, Any]]:
        """Every chunk of the collection with memsearch's fields and its stored vector."""
        ...

    def chunking(self) -> tuple[int, int]:
        """memsearch's ``max_chunk_size`` and ``overlap_lines``."""
        ...

    def model_name(self) -> str:
        """The embedding model's name as memsearch puts it into chunk hashes."""
        ...

    def cache_dir(self) -> Path | None:
        """Where the read model is saved (``None``: nowhere)."""
        ...

    def index_behind(self) -> bool:
        """Index one day file the collection is behind on (memsearch's index, which the other
        agents read); ``False`` when it holds every file as it is."""
        ...

    def rest(self) -> None:
        """The embedding work is done for now: give back what the encoder keeps for it."""
        ...


class Recall:
    """The read model of *scope*'s collection and the operations on it."""

    def __init__(self, scope: Scope, collection: Collection) -> None:
        self.scope = scope
        self._collection = collection
        self.model = ReadModel()
        self.files = StoreFiles(scope, collection)
        self._loaded = False
        self._load_lock = threading.Lock()
        self._refresh_lock = threading.Lock()
        self._worker = Worker()
        self._dirty_since: float | None = None
        #: The saved base the overlay file belongs to (``None``: nothing saved yet).
        self._base: str | None = None
        self._overlay_saved = 0.0
        #: Facts embedded since the overlay was last saved; batches run since the last rest.
        self._overlay_behind = self._rest_due = False
        self._backfill = Backfill(self.model, lambda texts: self._collection.encode_behind(texts))
        #: Where the read model came from, for ``pimem status``.
        self.origin = "not loaded"
        #: What index runs took in before the read model loaded (see :meth:`adopt`).
        self._adopted: list[tuple[list[str], list[dict[str, Any]]]] = []
        self._written = OutstandingWrites()
        self._dimension = 0

    # -- loading ---------------------------------------------------------------------------

    def load(self, *, cache_only: bool = False, from_files: bool = False) -> bool:
        """Load the read model: from its cache, else from the collection (seconds at 20k), or
        with *from_files* from the day files by their words (milliseconds, no database, no
        queue); ``False`` when *cache_only* found no cache."""
        with self._load_lock:
            if self._loaded:
                return True
            saved = cache.load(directory) if (directory := self._collection.cache_dir()) else None
            if saved is None and cache_only:
                return False
            if saved is not None:
                self.model.replace(saved.generation)
                self.model.apply(saved.added, saved.removed)
                self.files.take_saved(saved.stamps)
                # An older format counts as nothing saved: the worker saves it whole again.
                self._base = None if saved.outdated else saved.base
                self.origin = "cache"
                if saved.outdated:
                    self._dirty_since = time.monotonic()
                for sources, rows in self._adopted:
                    self._take_in(sources, rows)
            elif from_files:
                # Every day file is new to it: the refresh below takes them in by their words,
                # and the worker embeds them.
                self.origin = "day files"
                self._dirty_since = time.monotonic()
                for sources, rows in self._adopted:
                    self._take_in(sources, rows)
            else:
                generation, self.files.stamps = of_rows(self._collection.rows(), self.files)
                self.model.replace(generation)
                self.origin = "collection"
                self._dirty_since = time.monotonic()
                # A small store gets its facts now, a large one in the background.
                while (
                    0 < sum(len(facts(r.content)) for r in self._backfill.waiting()) <= INLINE_FACTS
                ):
                    self._backfill.some()
            self._adopted.clear()  # the collection's rows hold them already
            self._loaded = True
        self.refresh(inline=INLINE_CHUNKS)
        if self._base is None:
            # Saved at once, so that the next process loads the cache even if this one is a
            # `pimem search` that exits before the background work is done.
            self.save()
        self._worker.wake(self._step)
        return True

    @property
    def loaded(self) -> bool:
        return self._loaded

    # -- keeping in step -------------------------------------------------------------------

    def note_written(self, sources: Sequence[str]) -> None:
        """This process wrote *sources*: taken in by the worker, waited for by the next search
        (:mod:`~pimem_plugins.memsearch.recall.written`)."""
        self._written.note(sources)
        self._worker.wake(self._step)

    def refresh(self, sources: Sequence[str] | None = None, *, inline: int | None = None) -> bool:
        """Bring the read model to the files' chunks and the writes noted. Over *inline* new
        chunks, they are taken in by their words and left to the worker to embed; ``False``
        when another thread refreshes with no write outstanding (served as it is)."""
        if not self._refresh_lock.acquire(blocking=inline is None or bool(self._written)):
            return False
        try:
            return self._refresh(sources, inline)
        finally:
            self._refresh_lock.release()

    def _refresh(self, sources: Sequence[str] | None, inline: int | None) -> bool:
        todo = self.files.changed() if sources is None else list(sources)
        written = self._written.now()
        todo += [source for source in sorted(written) if source not in todo]
        if not todo:
            return True
        planned = changes(self.files, self.model.records(), todo)
        to_embed = sum(len(new) for _, _, new, _ in planned)
        # Too many to embed on a search's path: searchable by their words now, by their
        # meaning once the worker embedded them.
        by_words = inline is not None and to_embed > inline
        self._rest_due = self._rest_due or (to_embed > INLINE_CHUNKS and not by_words)
        # A search's refresh embeds a few chunks before it answers; the worker's and an index
        # run's are behind the requests.
        encode = self._collection.encode if inline is not None else self._collection.encode_behind
        for source, stamp, new, gone in planned:
            if by_words:
                unembedded = [evolve(record, facts_ready=False) for record in new]
                self.model.apply(((record, self._no_vectors()) for record in unembedded), gone)
            else:
                vectors = embed_facts(encode, new)
                self.model.apply(zip(new, vectors, strict=True), gone)
            if stamp is None:
                self.files.stamps.pop(source, None)
            else:
                self.files.stamps[source] = stamp
        self._written.taken_in(written)
        self._dirty_since = self._dirty_since or time.monotonic()
        if by_words and self.model.needs_folding() and len(self.model) <= FOLD_INLINE:
            # A store met for the first time: its words are scored against the statistics of
            # the whole store, not of an empty generation (milliseconds at this size).
            self.model.fold()
        self._save_overlay()
        if by_words or self.model.needs_folding() or self._base is None:
            self._worker.wake(self._step)
        return True

    def _no_vectors(self) -> npt.NDArray[np.float32]:
        """The vectors of a chunk taken in by its words: none, of the collection's dimension."""
        if not self._dimension:
            known = self.model.generation().dense.dimension
            self._dimension = known or int(self._collection.encode(["dimension"]).shape[1])
        return np.zeros((0, self._dimension), np.float32)

    def adopt(self, sources: Sequence[str], rows: list[dict[str, Any]]) -> None:
        """Take in *sources* as the collection holds them right after an index run of them
        (*rows*: their chunks, with memsearch's vectors): the next search finds them with
        nothing embedded first, however many they are (a pull brings whole days), ranked by
        their chunk vector until the background embeds their facts. Before the read model
        loads, they wait for its load from the cache."""
        with self._load_lock:
            if not self._loaded:
                self._adopted.append((list(sources), rows))
                return
        with self._refresh_lock:
            self._take_in(sources, rows)
            self._save_overlay()
        self._worker.wake(self._step)

    def _take_in(self, sources: Sequence[str], rows: list[dict[str, Any]]) -> None:
        take_in(self.model, self.files.stamps, sources, rows)
        self._dirty_since = self._dirty_since or time.monotonic()

    def complete(self, sources: Sequence[str] | None = None) -> None:
        """Bring the read model to the store's files with the facts of every chunk embedded
        (of *sources*' chunks only, when given). An index run ends with this, in the process
        that ran it: the first search after ``pimem index``, a pull or a clone ranks as the
        searches after it do. A search's catch-up names what it indexed, and leaves older
        chunks still waiting for their facts to the background. The changes are saved as the
        overlay (milliseconds); the whole read model only when nothing of it was saved yet."""
        # From the files when there is no cache: the facts are embedded here anyway, and the
        # collection's vectors would cost a read of every row.
        self.load(from_files=True)
        self.refresh()
        wanted = None if sources is None else set(sources)
        try:
            embedded = self._backfill.finish(wanted)
        finally:
            self._worker.wake(self._step)
        if not embedded:
            return
        self._dirty_since = self._dirty_since or time.monotonic()
        if self._base is None:
            self.save()
            return
        with self._refresh_lock:
            self._save_overlay()
        self._worker.wake(self._step)

    def _save_overlay(self) -> None:
        self._overlay_saved = time.monotonic()
        self._overlay_behind = False
        directory = self._collection.cache_dir()
        if directory is None or self._base is None:
            return
        added, removed = self.model.overlay()
        try:
            cache.save_overlay(directory, self._base, added, removed, dict(self.files.stamps))
        except OSError:
            log.warning("the read model's changes could not be saved in %s", directory)

    # -- the background worker -------------------------------------------------------------

    def _step(self) -> bool:
        """One step: changed files too big to embed inline, else one batch of facts for
        chunks read from the collection, else folding and saving; whether more is left."""
        try:
            with self._refresh_lock:  # the stamps change under this lock only
                changed = self.files.changed()
            if changed or self._written:
                # Taken in by their words (milliseconds, under the lock a search takes too);
                # their facts are embedded by the next steps, outside it.
                self.refresh(changed, inline=0)
                return True
            if self._backfill.finishing:
                return False  # the run wakes the worker when it is done
            if self._backfill.some():
                self._embedded_some()
                return True
            # The ranker's own vectors first, then memsearch's index of the day files the
            # collection is behind on (the other agents' search), a file a step.
            if self._collection.index_behind():
                return True
            # Every change is in the saved overlay but the last facts embedded: the whole read
            # model is saved only when nothing of it was (or in an older format), or when its
            # overlay outgrew it; after a write, a fold and a rewrite of every chunk would be
            # work for nothing.
            if self._base is None or self.model.needs_folding():
                self.save()
            elif self._overlay_behind:
                with self._refresh_lock:
                    self._save_overlay()
            if self._rest_due:  # the arena grows with batches, not with an entry or two
                self._rest_due = False
                self._collection.rest()
        except Exception:
            log.exception("the read model of %s could not be updated", self.scope.collection)
        return False

    def _embedded_some(self) -> None:
        """A batch of facts was embedded by the worker: folded and saved in time."""
        if self.model.needs_folding():
            self.model.fold()
        self._dirty_since = self._dirty_since or time.monotonic()
        self._overlay_behind = self._rest_due = True
        if self._base is not None and time.monotonic() - self._overlay_saved > SAVE_EVERY_SECONDS:
            with self._refresh_lock:
                self._save_overlay()

    def pending_facts(self) -> int:
        return self.model.without_facts()

    def save(self) -> None:
        directory = self._collection.cache_dir()
        if directory is None or self._dirty_since is None:
            return
        self._dirty_since = None
        self.model.fold()
        with self._refresh_lock:  # the stamps must be those of the generation saved
            self.model.fold()
            self._base = cache.save(directory, self.model.generation(), dict(self.files.stamps))
            self._save_overlay()

    def idle(self, timeout: float = 30.0) -> bool:
        """Wait until no background work is left (tests, benchmarks); ``True`` when none is."""
        return self._worker.idle(timeout)

    # -- searching -------------------------------------------------------------------------

    def search(self, text: str, top_k: int) -> tuple[SearchHit, ...]:
        """The *top_k* best hits for *text*, changed files taken in first (by their words)."""
        self.load(from_files=True)
        with self._collection.searching():
            self.refresh(inline=INLINE_CHUNKS)
            query = self._collection.encode([text])[0]
            query_tokens = tokens(text)
            candidates, context_share = self.model.candidates(query, query_tokens, DEPTH)
            weights = weights_for(context_share)
            hits = rank(candidates, query_tokens, top_k, self.model.idf, weights=weights)
            # Hits with no vector yet are embedded and the candidates ranked again, twice: what
            # is shown has its true relevance, and is ranked by its meaning among the others.
            for _ in range(LEADER_ROUNDS):
                if not embed_leaders(self.model, self._collection.encode, candidates, hits):
                    break
                self._overlay_behind = True
                candidates, context_share = self.model.candidates(query, query_tokens, DEPTH)
                weights = weights_for(context_share)
                hits = rank(candidates, query_tokens, top_k, self.model.idf, weights=weights)
        return hits

    def meaning(self) -> tuple[int, int]:
        """How many chunks are ranked by their meaning (have a vector), and how many in all."""
        return len(self.model) - self.model.without_vectors(), len(self.model)

    def similar(self, text: str, top_k: int) -> tuple[tuple[SearchHit, float], ...]:
        """The best hits with their relevance (auto-context filters on it)."""
        return tuple((hit, hit.score) for hit in self.search(text, top_k))

    def record(self, chunk_hash: str) -> ChunkRecord | None:
        self.load()
        return self.model.records().get(chunk_hash)
