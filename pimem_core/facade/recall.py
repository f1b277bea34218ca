"""What goes through the index: indexing, search (reranked when a plugin reranks), expansion,
cross-repo search, and the two changes made through it (a chunk forgotten, memory compacted)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path

import attrs

from pimem_core.errors import PimemError, PluginError
from pimem_core.facade.writing import Writing
from pimem_core.scores import never_rising
from pimem_core.service_values import CompactResult, IndexReport, Redaction
from pimem_core.services import CatchingUp, Compacting
from pimem_core.types import (
    ChunkAddress,
    CrossRepoResult,
    DayAddress,
    Scope,
    SearchHit,
    SearchQuery,
    Section,
    StoreChange,
)

#: How many candidates the index is asked for when a plugin reranks them (``top_k`` when that
#: is more): deep enough for a second stage to lift a hit the index placed low, shallow enough
#: for a cross-encoder to score them all within one search.
RERANK_DEPTH = 30


class Recall(Writing):
    """The index's methods, ``pimem_rerank_hits`` and ``pimem_search_projects``."""

    __slots__ = ()

    def index_memory(
        self,
        scope: Scope,
        reason: str,
        *,
        files: tuple[Path, ...] = (),
        on_wait: Callable[[str], None] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> IndexReport:
        """Index *scope*'s store: only *files* when given (after a write), else all of it."""
        with self._service("MemoryIndex.index"):
            return self.index(scope).index(reason, files, self._call(on_wait, progress))

    def catch_up_memory(self, scope: Scope, reason: str) -> IndexReport:
        """Bring *scope*'s index up to date with its store: only what changed since the index
        last took it in, when the index can tell (:class:`CatchingUp`), else all of it."""
        index = self.index(scope)
        call = self._call()
        with self._service("MemoryIndex.index"):
            if isinstance(index, CatchingUp):
                return index.catch_up(call)
            return index.index(reason, (), call)

    def search_memory(
        self,
        scope: Scope,
        query: SearchQuery,
        *,
        on_wait: Callable[[str], None] | None = None,
        read_only: bool = False,
        on_notice: Callable[[str], None] | None = None,
    ) -> tuple[SearchHit, ...]:
        """L1 recall in *scope*'s collection; *read_only* for another project's store.

        When a plugin reranks (``pimem_rerank_hits``), the index is asked for
        ``max(top_k, RERANK_DEPTH)`` candidates and the reranker's best ``top_k`` are kept;
        without one, the index is asked for ``top_k`` and its answer stands. Either way a
        relevance never rises down the answer (:func:`~pimem_core.scores.never_rising`).
        *on_notice* hears what the index did first that the person should know (indexing
        changed day files)."""
        reranking = bool(self.pm.implementing_plugins("pimem_rerank_hits"))
        asked = attrs.evolve(query, top_k=max(query.top_k, RERANK_DEPTH)) if reranking else query
        call = self._call(on_wait, read_only=read_only, on_notice=on_notice)
        with self._service("MemoryIndex.search"):
            hits = self.index(scope).search(asked, call)
        # Whoever ordered them, a relevance below never reads higher than one above.
        return never_rising(self.rerank_hits(query, hits) if reranking else hits)

    def rerank_hits(self, query: SearchQuery, hits: tuple[SearchHit, ...]) -> tuple[SearchHit, ...]:
        """The reranker's best ``query.top_k`` of *hits*, or the first of *hits* when no plugin
        has an opinion. A reranker's bug carries a note naming it (the manager's monitoring)."""
        if not hits:
            return hits  # nothing to reorder: a cross-encoder need not even load
        answer = self.pm.caller("pimem_rerank_hits")(query=query, hits=hits, settings=self.settings)
        if answer is None:
            return hits[: query.top_k]
        wrong = _wrong_reranking(answer, hits)
        if wrong is not None:
            names = [repr(name) for name in self.pm.implementing_plugins("pimem_rerank_hits")]
            who = f"The reranker {names[0]}" if len(names) == 1 else "One of " + ", ".join(names)
            raise PluginError(
                f"pimem_rerank_hits answered with {wrong}: a reranker reorders the hits it is "
                f"given. {who} is broken; block it with PIMEM_DISABLE_PLUGINS"
            )
        return tuple(answer[: query.top_k])

    def search_everywhere(
        self,
        scope: Scope,
        query: SearchQuery,
        *,
        on_wait: Callable[[str], None] | None = None,
        progress: Callable[[int, int], None] | None = None,
        on_notice: Callable[[str], None] | None = None,
    ) -> CrossRepoResult:
        """Cross-repo recall: *query* over the session's project (*scope*) and every project
        under the scan roots. Only the session's own leg may bootstrap or index; the others
        write nothing."""
        waited = False

        def wait_once(holder: str) -> None:
            # One note for the whole fan-out, not one per project.
            nonlocal waited
            if on_wait is not None and not waited:
                waited = True
                on_wait(holder)

        def search_project(target: Scope) -> tuple[SearchHit, ...]:
            own = target == scope
            return self.search_memory(
                target,
                query,
                on_wait=wait_once,
                read_only=not own,
                on_notice=on_notice if own else None,
            )

        answer = self.pm.caller("pimem_search_projects")(
            scope=scope,
            query=query,
            call=self._call(on_wait, progress),
            resolve_project=self.resolve_project,
            search_project=search_project,
        )
        return self._require("pimem_search_projects", answer, CrossRepoResult)

    def resolve_project(self, project_dir: Path) -> Scope:
        """The scope of the project at *project_dir* (``pimem_resolve_project``)."""
        scope = self.pm.caller("pimem_resolve_project")(
            project_dir=project_dir.absolute(), settings=self.settings
        )
        return self._require("pimem_resolve_project", scope, Scope)

    def expand_chunk(
        self,
        scope: Scope,
        chunk_hash: str,
        *,
        on_wait: Callable[[str], None] | None = None,
        read_only: bool = False,
        on_notice: Callable[[str], None] | None = None,
    ) -> Section:
        """L2 recall in *scope*'s collection; *read_only* for another project's store."""
        call = self._call(on_wait, read_only=read_only, on_notice=on_notice)
        with self._service("MemoryIndex.expand"):
            return self.index(scope).expand(chunk_hash, call)

    def forget_chunk(
        self, scope: Scope, chunk_hash: str, *, on_wait: Callable[[str], None] | None = None
    ) -> Redaction:
        """Forget the one entry (or compact block) an indexed chunk points at."""
        self.check_writable()
        section = self.expand_chunk(scope, chunk_hash, on_wait=on_wait)
        return self.forget_entry(scope, ChunkAddress(section=section))

    def compact_memory(
        self,
        scope: Scope,
        *,
        only: Collection[DayAddress] | None = None,
        on_wait: Callable[[str], None] | None = None,
    ) -> CompactResult:
        """Condense the store (or the entries *only* names) into a summary, append it through
        the store, announce the change (``kind="compact"``) and index the file, so the summary
        is searchable at once."""
        self.check_writable()
        index = self.index(scope)
        if not isinstance(index, Compacting):
            raise PimemError(
                f"the index ({type(index).__name__}, see `pimem plugins`) cannot compact memory: "
                "it offers no compact()"
            )
        with self._service("MemoryIndex.compact"):
            call = self._call(on_wait)
            # Asked with *only* alone: an index written before it compacts the whole store.
            result = index.compact(call) if only is None else index.compact(call, only=only)
        if result.summary is None:
            return result
        with self._service("MemoryStore.append_compaction"):
            file = self.store(scope).append_compaction(result.summary, self.settings.now())
        self.observe_change(scope, StoreChange(kind="compact", file=file))
        self.index_memory(scope, "compact", files=(file,), on_wait=on_wait)
        return attrs.evolve(result, file=file)


def _wrong_reranking(answer: object, hits: tuple[SearchHit, ...]) -> str | None:
    """What is wrong with a reranker's *answer* to *hits*, or ``None``: it must be some of the
    hits it was given, reordered."""
    if not isinstance(answer, tuple | list) or not all(
        isinstance(hit, SearchHit) for hit in answer
    ):
        return f"a {type(answer).__name__}, not a tuple of SearchHit"
    given = {hit.chunk_hash for hit in hits}
    if stray := [hit.chunk_hash for hit in answer if hit.chunk_hash not in given]:
        return f"chunk {stray[0]}, which was not among the hits it was given"
    return None
