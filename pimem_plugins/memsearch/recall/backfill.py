"""The backfill: chunks of the read model that wait for their facts' vectors, embedded a batch
at a time behind the requests, by the background worker or by an index run finishing, each
chunk once."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from attrs import evolve

from pimem_plugins.memsearch.recall.encoding import embed_facts
from pimem_plugins.memsearch.recall.generation import ChunkRecord
from pimem_plugins.memsearch.recall.read_model import ReadModel
from pimem_plugins.memsearch.recall.text import facts

#: Facts embedded per batch (sorted by length: little padding).
BATCH_FACTS = 32
#: Characters of chunks per batch: a search that comes in meanwhile waits for the batch in
#: hand (about a tenth of a second on two cores).
BATCH_CHARS = 3_000


class Backfill:
    """*model*'s chunks without fact vectors, embedded through *encode* (which steps aside for
    searches), shortest first: a batch pads to its longest fact."""

    def __init__(
        self, model: ReadModel, encode: Callable[[list[str]], npt.NDArray[np.float32]]
    ) -> None:
        self._model = model
        self._encode = encode
        #: Longest first (batches are popped from the end); rebuilt when it runs dry.
        self._queue: list[ChunkRecord] = []
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        #: Batches being embedded now.
        self._embedding = 0
        #: Index runs finishing now: the worker leaves the batches to them (two embedding side
        #: by side are slower than one after the other).
        self.finishing = 0

    def waiting(self) -> list[ChunkRecord]:
        return [r for r in self._model.records().values() if not r.facts_ready]

    def some(self, sources: set[str] | None = None) -> bool:
        """Embed one batch (of *sources*' chunks only, when given); ``False`` when none is
        left."""
        with self._lock:
            batch = self._take(sources)
            if not batch:  # chunks taken in since the queue was made, or only some files'
                self._queue = sorted(self.waiting(), key=lambda r: -len(r.content))
                batch = self._take(sources)
            if not batch:
                return False
            self._embedding += 1
        try:
            ready = [evolve(record, facts_ready=True) for record in batch]
            vectors = embed_facts(self._encode, ready)
            # A chunk forgotten meanwhile stays forgotten.
            self._model.apply(
                pair
                for pair in zip(ready, vectors, strict=True)
                if pair[0].chunk_hash in self._model
            )
        finally:
            with self._lock:
                self._embedding -= 1
                self._done.notify_all()
        return True

    def finish(self, sources: set[str] | None) -> bool:
        """Embed every waiting chunk (of *sources*, when given) before returning, the worker's
        batch in hand included; whether this embedded any."""
        embedded = False
        self.finishing += 1
        try:
            while self.some(sources):
                embedded = True
            with self._done:
                self._done.wait_for(lambda: not self._embedding)
        finally:
            self.finishing -= 1
        return embedded

    def _take(self, sources: set[str] | None) -> list[ChunkRecord]:
        """The next batch off the queue; under the lock."""
        batch: list[ChunkRecord] = []
        count = size = 0
        kept: list[ChunkRecord] = []
        while self._queue and count < BATCH_FACTS and size < BATCH_CHARS:
            record = self._queue.pop()
            if sources is not None and record.source not in sources:
                kept.append(record)
            elif self._model.waits_for_facts(record.chunk_hash):  # else a search or a run did
                batch.append(record)
                count += len(facts(record.content))
                size += len(record.content)
        self._queue.extend(reversed(kept))
        return batch
