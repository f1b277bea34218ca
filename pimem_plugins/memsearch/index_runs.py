"""Index runs: memsearch's index of a whole store or of a few changed files, recorded in
memsearch's index state and in pimem's index ledger."""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from pimem_core.plugin import FailedFile, IndexReport, PimemPaths, Scope
from pimem_plugins.memsearch.compat import index_with_progress
from pimem_plugins.memsearch.database import OnDatabase
from pimem_plugins.memsearch.ledger import DayFile, IndexLedger
from pimem_plugins.shared.index_state import IndexStateError, read_index_state


@attrs.define(eq=False)
class IndexRuns(OnDatabase):
    """The engine's index runs and the ledger of each collection they write."""

    _ledgers: dict[tuple[str, str], IndexLedger] = attrs.field(factory=dict, init=False)

    def ledger(self, scope: Scope) -> IndexLedger:
        """*scope*'s index ledger for the collection as memsearch's configuration names it
        now (database and embedding model): what this machine last indexed of each day file."""
        config = self._configurations.config(scope)
        embedding = config.embedding
        key = "\0".join(
            (
                str(config.milvus.uri),
                scope.collection,
                str(embedding.provider),
                str(embedding.model or ""),
                str(scope.memory_dir),
            )
        )
        file = (
            PimemPaths.from_env().state_dir
            / "index-ledger"
            / f"{scope.collection}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.json"
        )
        slot = (str(scope.memory_dir), scope.collection)
        ledger = self._ledgers.get(slot)
        if ledger is None or ledger.file != file:
            ledger = self._ledgers[slot] = IndexLedger(file, scope.memory_dir)
        return ledger

    def ledger_if_open(self, scope: Scope) -> IndexLedger | None:
        """*scope*'s ledger when this engine has used it: a write need not load memsearch."""
        return self._ledgers.get((str(scope.memory_dir), scope.collection))

    def index(
        self,
        scope: Scope,
        files: tuple[Path, ...],
        progress: Callable[[int, int], None] | None,
        *,
        budget: float | None = None,
    ) -> IndexReport:
        """memsearch's index of the store, or of just *files* (a partial update, as
        ``memsearch index <file>`` does: nothing else is pruned). With a *budget* (seconds),
        *files* are taken in order until it is spent, at least one: the report's
        ``total_files`` says how many. The ledger records what the run took in."""
        config = self._configurations.config(scope)
        ledger = self.ledger(scope)
        taken = ledger.fingerprint(files or None)
        from memsearch.index_report import IndexFailure
        from memsearch.index_state import (
            record_index_error,
            record_index_report,
            record_index_started,
        )

        paths = tuple(str(file) for file in files) or (str(scope.memory_dir),)
        state = {
            "operation": "index",
            "paths": paths,
            "collection": scope.collection,
            "milvus_uri": config.milvus.uri,
        }
        state_path = scope.index_state_path
        if state_path is not None:
            _drop_unreadable_state(state_path)
            record_index_started(state_path, **state)
        database = self._database
        try:
            if files:
                # A few changed files go through the leased client: reopening the database
                # afterwards would cost more than the update (at 20,000 chunks, a second).
                deadline = None if budget is None else time.monotonic() + budget
                with database.use(scope, config, create=True) as memsearch:
                    report = self._embedders.event_loop().run_until_complete(
                        _index_files(memsearch, files, deadline)
                    )
            else:
                # Searching through the client that ran a full index is slow: use a client
                # of its own, and close it.
                database.release()
                database.turns.take(str(config.milvus.uri))
                memsearch, served = database.open(scope, config, paths=paths, create=True)
                database.opened(str(config.milvus.uri))
                try:
                    report = self._embedders.event_loop().run_until_complete(
                        index_with_progress(memsearch, progress)
                        if progress
                        else memsearch.index_with_report()
                    )
                finally:
                    database.close(memsearch, served, str(config.milvus.uri))
        except Exception as error:
            if state_path is not None:
                record_index_error(state_path, error, **state)
            self._embedders.rest()
            raise
        if report.indexed_chunks:
            self._embedders.rest()
        if state_path is not None:
            record_index_report(state_path, report, **state)
        failures: tuple[IndexFailure, ...] = report.failed_files
        ledger.record(_taken_in(taken, files[: report.total_files] if files else None, failures))
        return IndexReport(
            indexed_chunks=report.indexed_chunks,
            total_files=report.total_files,
            failed_files=tuple(FailedFile(path=f.path, error=f.error) for f in failures),
        )


def _drop_unreadable_state(path: Path) -> None:
    """Remove a state file that cannot be parsed: it only records index health, and memsearch
    reads it again before writing (JSON nested too deep would fail that index run)."""
    try:
        read_index_state(path)
    except IndexStateError:
        with contextlib.suppress(OSError):
            path.unlink()


def _taken_in(
    taken: list[DayFile], attempted: tuple[Path, ...] | None, failures: tuple[Any, ...]
) -> list[DayFile]:
    """The fingerprinted day files a run took in: those it reached (all of them when
    *attempted* is ``None``, a whole-store run) and did not fail on."""
    failed = {os.path.realpath(failure.path) for failure in failures}
    reached = None if attempted is None else {os.path.realpath(file) for file in attempted}
    return [
        day
        for day in taken
        if (reached is None or os.path.realpath(day.path) in reached)
        and os.path.realpath(day.path) not in failed
    ]


async def _index_files(
    memsearch: Any, files: tuple[Path, ...], deadline: float | None = None
) -> Any:
    """Re-index changed files one by one; a file that is gone loses its chunks. Past the
    *deadline* (monotonic seconds) the files left are not reached; the first always is."""
    from memsearch.index_report import IndexFailure, IndexReport, format_error

    indexed, failed = 0, []
    reached = 0
    for file in files:
        if reached and deadline is not None and time.monotonic() >= deadline:
            break
        reached += 1
        try:
            if file.exists():
                indexed += int(await memsearch.index_file(file))
            else:
                memsearch.store.delete_by_source(str(file.resolve()))
        except Exception as error:  # noqa: BLE001 - recorded per file, as memsearch does
            failed.append(IndexFailure(path=str(file), error=format_error(error)))
    return IndexReport(
        indexed_chunks=indexed,
        total_files=reached,
        indexed_files=reached - len(failed),
        failed_files=tuple(failed),
    )
