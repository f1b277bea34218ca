"""A collection as pimem's read model sees it, through the ``memsearch-index`` plugin's
engine: its embedding model (for searches, and behind them), its rows, how its files are
chunked, where the read model is cached, and the index runs that bring it up to the day files
behind the requests."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from pimem_core.plugin import PimemPaths, Scope
from pimem_plugins.memsearch.engine import MemsearchEngine
from pimem_plugins.memsearch.errors import is_contention
from pimem_plugins.memsearch.ledger import DayFile

log = logging.getLogger(__name__)


class EngineCollection:
    """*scope*'s collection as the read model sees it, through the plugin's engine."""

    def __init__(self, scope: Scope, engine: MemsearchEngine, *, index_behind: bool) -> None:
        self.scope = scope
        self.engine = engine
        self._encoder: Callable[[list[str]], Any] | None = None
        self._encoder_behind: Callable[[list[str]], Any] | None = None
        self._indexes_behind = index_behind
        #: Day files the collection was found behind on, newest first, left to index.
        self._behind: list[DayFile] = []
        #: Day files (as their bytes were) an index run failed on: not retried.
        self._failed: set[DayFile] = set()

    def encode(self, texts: list[str]) -> Any:
        if self._encoder is None:
            from pimem_plugins.memsearch.recall.encoding import encoder_for

            self._encoder = encoder_for(self.engine.embedder(self.scope), self.engine.event_loop)
        return self._encoder(texts)

    def encode_behind(self, texts: list[str]) -> Any:
        if self._encoder_behind is None:
            from pimem_plugins.memsearch.recall.encoding import encoder_for

            self._encoder_behind = encoder_for(
                self.engine.embedder(self.scope),
                self.engine.event_loop,
                self.engine.embedders.precedence.step_aside,
            )
        return self._encoder_behind(texts)

    def searching(self) -> AbstractContextManager[None]:
        return self.engine.embedders.precedence.search()

    def rows(self) -> list[dict[str, Any]]:
        return self.engine.reads.rows(self.scope)

    def rest(self) -> None:
        self.engine.rest()

    def chunking(self) -> tuple[int, int]:
        return self.engine.chunking(self.scope)

    def model_name(self) -> str:
        return str(self.engine.embedder(self.scope).model_name)

    def cache_dir(self) -> Path | None:
        from pimem_plugins.memsearch.recall.cache import cache_dir

        uri = str(self.engine.config(self.scope, bootstrap=False).milvus.uri)
        root = PimemPaths.from_env().cache_dir
        return cache_dir(root, uri, self.scope.collection, self.model_name())

    def index_behind(self) -> bool:
        if not self._indexes_behind:
            return False
        if not self._behind:
            failed = self._failed
            self._behind = [
                day
                for day in self.engine.index_runs.ledger(self.scope).changed()
                if day not in failed
            ]
            if not self._behind:
                return False
        day = self._behind.pop(0)

        def index() -> None:
            ledger = self.engine.index_runs.ledger(self.scope)
            if ledger.outstanding((day,)):  # a session's catch-up may have taken it meanwhile
                report = self.engine.index_runs.index(self.scope, (Path(day.path),), None)
                if report.failed_files:
                    self._failed.add(day)

        try:
            self.engine.queue.run("index", index, is_contention=is_contention)
        except Exception as error:
            if is_contention(error):
                # Another process holds the database through every retry: the next search or
                # write wakes the worker, and the file is tried again then.
                self._behind.insert(0, day)
                return False
            # Not retried until its bytes change; a search goes on reading the file itself.
            self._failed.add(day)
            log.warning("%s could not be indexed in the background", day.path, exc_info=True)
        return True
