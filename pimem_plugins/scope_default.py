"""Default scope resolution, in memsearch's own order: ``MEMSEARCH_DIR``, else git root, else cwd."""

from __future__ import annotations

from pathlib import Path

from pimem_core.plugin import (
    Scope,
    Settings,
    hookimpl,
)
from pimem_plugins.shared.index_state import IndexStateError, read_index_state
from pimem_plugins.shared.layout import (
    TREE,
    discovered_store,
    laid_out_scope,
    resolve_memsearch_dir,
)


def recorded_collection(state_path: Path) -> str | None:
    """The collection a store was last indexed as, per its state file; ``None`` if unknown.

    A missing, unreadable or drifted file records nothing: one bad foreign project must not
    break a search over all the others.
    """
    try:
        state = read_index_state(state_path)
    except IndexStateError:
        return None
    name = state.collection if state is not None else None
    return name if name is not None and Scope.is_collection_name(name) else None


class DefaultScope:
    """Resolves scopes from the filesystem and ``MEMSEARCH_DIR``, afresh on every call: a
    ``.git`` made or removed above a directory moves its store at once, in a session as in the
    memory service (a few ``stat`` calls; a session keeps the scope it started with)."""

    @staticmethod
    @hookimpl(trylast=True)
    def pimem_resolve_scope(cwd: Path, settings: Settings) -> Scope:
        repository_dir = Scope.find_repository_dir(cwd)
        if settings.memsearch_dir:
            scope_dir = resolve_memsearch_dir(repository_dir, settings.memsearch_dir)
            memory_dir = scope_dir / "memory"
        else:
            scope_dir = repository_dir
            memory_dir = repository_dir / TREE / "memory"
        return laid_out_scope(
            settings.memsearch_dir,
            repository_dir=repository_dir,
            scope_dir=scope_dir,
            memory_dir=memory_dir,
            # An explicit MEMSEARCH_DIR means a shared store: the collection moves with it.
            collection=Scope.derive_collection(scope_dir),
        )

    @staticmethod
    @hookimpl(trylast=True)
    def pimem_resolve_project(project_dir: Path) -> Scope:
        memory_dir, state_path = discovered_store(project_dir)
        return Scope(
            repository_dir=project_dir,
            scope_dir=project_dir,
            memory_dir=memory_dir,
            collection=recorded_collection(state_path) or Scope.derive_collection(project_dir),
            index_state_path=state_path,
        )
