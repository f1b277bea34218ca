"""Reads of a collection through memsearch: search, expand, recall, its rows and its count,
and the chunks a compaction sums up."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

import attrs

from pimem_core.plugin import (
    ConflictScans,
    DayAddress,
    NoMemoryYet,
    PimemError,
    Scope,
    SearchHit,
    Section,
)
from pimem_plugins.memsearch.chunks import CHUNK_HASH, ScoreKind, search_hit, section_of
from pimem_plugins.memsearch.compat import (
    CollectionState,
    dense_search,
    milvus_lite_collection_state,
)
from pimem_plugins.memsearch.database import OnDatabase, quiet_pymilvus
from pimem_plugins.memsearch.database_uri import is_server, keep_database_private
from pimem_plugins.memsearch.errors import collection_missing


@attrs.define(eq=False)
class Reads(OnDatabase):
    """What the engine reads of a collection; each call on the leased database."""

    #: Each local collection's chunk count as last counted, with the collection's files as
    #: they were then (by database and collection).
    _counts: dict[tuple[str, str], tuple[CollectionState, int]] = attrs.field(
        factory=dict, init=False
    )

    def search(
        self, scope: Scope, text: str, top_k: int, *, bootstrap: bool = True
    ) -> tuple[SearchHit, ...]:
        config = self._configurations.config(scope, bootstrap=bootstrap)
        from memsearch.store import CollectionNotFoundError

        try:
            with self._database.use(scope, config) as memsearch:
                results = self._embedders.event_loop().run_until_complete(
                    memsearch.search(text, top_k=top_k)
                )
        except CollectionNotFoundError:
            raise collection_missing(scope) from None
        kind: ScoreKind = "reranker" if config.reranker.model else "rank_fusion"
        return tuple(search_hit(result, kind) for result in results)

    def expand(self, scope: Scope, chunk_hash: str, *, bootstrap: bool = True) -> Section:
        if not CHUNK_HASH.fullmatch(chunk_hash):
            raise PimemError(f"chunk hash must be 16 lowercase hex digits, got {chunk_hash!r}")
        config = self._configurations.config(scope, bootstrap=bootstrap)
        from memsearch.store import CollectionNotFoundError

        try:
            with self._database.use(scope, config) as memsearch:
                chunks = memsearch.store.query(filter_expr=f'chunk_hash == "{chunk_hash}"')
        except CollectionNotFoundError:
            raise collection_missing(scope) from None
        if not chunks:
            raise PimemError(
                f"chunk {chunk_hash} is not in collection {scope.collection}; "
                "it may have been re-indexed under a new hash: search again"
            )
        return section_of(chunk_hash, chunks[0])

    def compact(
        self,
        scope: Scope,
        scrub: Callable[[str], str],
        only: Collection[DayAddress] | None = None,
    ) -> str:
        """memsearch's compaction summary of the collection's chunks (of the entries *only*
        names: their day file and ``### HH:MM`` heading), with secrets kept out of it: the
        chunks are scrubbed before the LLM reads them and the summary before it is returned (the store writes it).
        The database is closed during the LLM call, which can take minutes: other agents may
        use it meanwhile."""
        conflicted = ConflictScans().conflicted_files(scope.memory_dir)
        if conflicted:
            # A store in the middle of a merge is not settled enough to be summed up.
            raise PimemError(f"memory compaction refused: {ConflictScans.describe(conflicted)}")
        config = self._configurations.config(scope)
        from memsearch.compact import compact_chunks
        from memsearch.store import CollectionNotFoundError

        llm, legacy = config.llm, config.compact
        prompt = None
        if config.prompts.compact:
            prompt = Path(config.prompts.compact).expanduser().read_text(encoding="utf-8")
        elif legacy.prompt_file:
            prompt = Path(legacy.prompt_file).read_text(encoding="utf-8")
        try:
            with self._database.use(scope, config) as memsearch:
                chunks = memsearch.store.query()
        except CollectionNotFoundError:
            return ""  # never indexed: there is nothing to compact
        finally:
            self._database.release()
        if only is not None:
            wanted = {(entry.day.isoformat(), entry.time) for entry in only}
            chunks = [chunk for chunk in chunks if _address(chunk) in wanted]
        if not chunks:
            return ""
        return scrub(
            self._embedders.event_loop().run_until_complete(
                compact_chunks(
                    [{**chunk, "content": scrub(str(chunk["content"]))} for chunk in chunks],
                    llm_provider=llm.provider or legacy.llm_provider,
                    model=llm.model or legacy.llm_model or None,
                    prompt_template=prompt,
                    base_url=llm.base_url or legacy.base_url or None,
                    api_key=llm.api_key or legacy.api_key or None,
                )
            )
        )

    def recall(self, scope: Scope, text: str, top_k: int) -> tuple[tuple[SearchHit, float], ...]:
        """The chunks most similar to *text* (dense search, cosine), each with its similarity.

        Auto-context filters on similarity, so it ranks by it too. memsearch's hybrid search
        would add BM25 matches that the filter then drops, and in Milvus Lite its BM25 half
        costs as much as the dense one again, and a few hundred MB to keep loaded at 20,000
        chunks. The hits' ``score`` is the similarity. A store with no memory yet has no hits.
        """
        config = self._configurations.config(scope)
        from memsearch.store import CollectionNotFoundError

        vector = self._embedders.event_loop().run_until_complete(
            self._embedders.get(config).embed([text])
        )[0]
        try:
            with self._database.use(scope, config) as memsearch:
                found = dense_search(memsearch, vector, top_k)
        except CollectionNotFoundError:
            missing = collection_missing(scope)
            if isinstance(missing, NoMemoryYet):
                return ()  # nothing to recall, and nothing wrong
            raise missing from None
        return tuple(
            (search_hit({**hit, "score": hit["distance"]}, "similarity"), float(hit["distance"]))
            for hit in found
        )

    def rows(self, scope: Scope, filter_expr: str = "") -> list[dict[str, Any]]:
        """*scope*'s chunks as the collection holds them, vectors included, for the read
        model. Read in batches: a collection is read whole once, when no cache has it."""
        config = self._configurations.config(scope)
        from memsearch.store import CollectionNotFoundError

        fields = [
            "chunk_hash",
            "embedding",
            "content",
            "source",
            "heading",
            "heading_level",
            "start_line",
            "end_line",
        ]
        try:
            with self._database.use(scope, config) as memsearch:
                store = memsearch.store
                store._require_collection()
                client = store._connected_client()
                batches = client.query_iterator(
                    store._collection, batch_size=2_000, filter=filter_expr, output_fields=fields
                )
                rows: list[dict[str, Any]] = []
                try:
                    while batch := batches.next():
                        rows.extend(dict(row) for row in batch)
                finally:
                    batches.close()
        except CollectionNotFoundError:
            raise collection_missing(scope) from None
        return rows

    def count(self, scope: Scope) -> int | None:
        """Chunks in *scope*'s collection; ``None`` when it was never created.

        Counting needs no embedder, so none is loaded: status stays fast, and answers even
        when the embedding model is missing. An open lease is used as it is. Else a local
        collection whose files are as they were at the last count has that count still
        (:func:`milvus_lite_collection_state`): opening the database read-only loads the
        whole collection (a third of a second at 20,000 chunks), which a status need not pay
        again while nothing changed."""
        config = self._configurations.config(scope)
        from memsearch.store import CollectionNotFoundError, MilvusStore

        uri = str(config.milvus.uri)
        key = (uri, scope.collection)
        database = self._database
        quiet_pymilvus()
        try:
            if database.lease is not None and database.lease.key[:2] == key:
                with database.use(scope, config) as memsearch:
                    return int(memsearch.store.count())
            remembered = self._counts.get(key)
            if (
                remembered is not None
                and not is_server(uri)
                and milvus_lite_collection_state(uri, scope.collection) == remembered[0]
            ):
                return remembered[1]
            database.release()
            keep_database_private(uri, scope, create=False)
            served = database.serve(uri, create=False)
            try:
                # No dimension: memsearch's read-only mode, which never creates anything.
                store = MilvusStore(
                    uri if served is None else served.uri,
                    token=config.milvus.token or None,
                    collection=scope.collection,
                    dimension=None,
                )
            except BaseException:
                if served is not None:
                    served.close()
                raise
            database.opened(uri)
            try:
                counted = int(store.count())
                # Read while the database is this process's: no other writes meanwhile.
                state = None if is_server(uri) else milvus_lite_collection_state(uri, key[1])
            finally:
                database.close(store, served, uri)
            if state is not None and state == milvus_lite_collection_state(uri, key[1]):
                self._counts[key] = (state, counted)
            return counted
        except CollectionNotFoundError:
            return None


def _address(chunk: Mapping[str, Any]) -> tuple[str, str]:
    """A chunk's entry as ``(YYYY-MM-DD, HH:MM)``: its day file's name and its heading."""
    return Path(str(chunk["source"])).stem, str(chunk.get("heading", "")).strip()
