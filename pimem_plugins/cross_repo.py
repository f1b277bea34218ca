"""Cross-repo recall: one query over every project under the scan roots, merged by score.

Asked for explicitly (``scope: "all"``, ``pimem search --all``) and read-only. Every project
is found and named before the first search, so a bad scan root or a failing store command
fails the request before the database is touched; then each collection is searched once, one
after another, and nothing is ever written to a store, a collection or an index state.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import attrs

from pimem_core.plugin import (
    BackendCall,
    CollectionMissing,
    CrossRepoResult,
    NoMemoryYet,
    Scope,
    SearchHit,
    SearchQuery,
    SettingsError,
    SettingSpec,
    hookimpl,
)
from pimem_plugins.shared.layout import TREE, children_of


def _roots(raw: str) -> tuple[Path, ...]:
    return tuple(Path(part) for part in raw.split(os.pathsep) if part)


SCAN_ROOTS: SettingSpec[tuple[Path, ...]] = SettingSpec(
    plugin="cross-repo",
    name="scan_roots",
    env="PI_MEMSEARCH_SCAN_ROOTS",
    parse=_roots,
    default=(),
    help="directories whose immediate children cross-repo recall searches",
)


@hookimpl
def pimem_declare_settings() -> tuple[SettingSpec[tuple[Path, ...]]]:
    return (SCAN_ROOTS,)


VARIABLE = "PI_MEMSEARCH_SCAN_ROOTS"


@attrs.frozen
class Target:
    """One collection to search, and the project label its hits carry."""

    label: Path
    scope: Scope


@attrs.frozen
class Plan:
    targets: tuple[Target, ...]
    #: Projects left out because a target before them has the same collection.
    collapsed: tuple[Path, ...]


def is_project(directory: Path) -> bool:
    """Whether *directory* holds a memory store: ``.memsearch/memory/`` or ``memory/``."""
    # os.path.isdir, not Path.is_dir: one unreadable sibling must not fail the whole search.
    return os.path.isdir(directory / TREE / "memory") or os.path.isdir(directory / "memory")


def discover_projects(roots: tuple[Path, ...]) -> tuple[Path, ...]:
    """The projects among the immediate children of *roots*: absolute, each once, sorted.

    A root that cannot be listed raises :class:`SettingsError` naming it: a mistyped root
    must not quietly search fewer projects than asked for.
    """
    if not roots:
        raise SettingsError(
            f"cross-repo recall needs {VARIABLE}: one or more directories, separated by "
            f'"{os.pathsep}", whose immediate children hold memory stores (.memsearch/memory/ '
            "or memory/)"
        )
    found: dict[str, Path] = {}
    for child in children_of(roots, asked_by="cross-repo recall", setting=VARIABLE):
        if is_project(child):
            # Two roots (or a symlink) may reach one directory: the first path names it.
            found.setdefault(os.path.realpath(child), child)
    return tuple(sorted(found.values()))


def plan_search(
    scope: Scope, projects: tuple[Path, ...], resolve_project: Callable[[Path], Scope]
) -> Plan:
    """The session's own project first, in its own collection, then each discovered project.

    The session's project found again under a scan root is dropped silently; a different
    project whose collection is already planned is collapsed, since searching it again could
    only repeat the same hits under another label.
    """
    targets = [Target(label=scope.scope_dir, scope=scope)]
    planned = {scope.collection}
    collapsed = []
    here = os.path.realpath(scope.scope_dir)
    for project in projects:
        if os.path.realpath(project) == here:
            continue
        named = resolve_project(project)
        if named.collection in planned:
            collapsed.append(project)
            continue
        planned.add(named.collection)
        targets.append(Target(label=project, scope=named))
    return Plan(targets=tuple(targets), collapsed=tuple(collapsed))


def merge_hits(
    found: list[tuple[Path, tuple[SearchHit, ...]]], top_k: int
) -> tuple[SearchHit, ...]:
    """Every project's hits labelled with it, best first (ties keep the search order)."""
    hits = [attrs.evolve(hit, project=label) for label, some in found for hit in some]
    hits.sort(key=lambda hit: -hit.score)
    return tuple(hits[:top_k])


@hookimpl(trylast=True)
def pimem_search_projects(
    scope: Scope,
    query: SearchQuery,
    call: BackendCall,
    resolve_project: Callable[[Path], Scope],
    search_project: Callable[[Scope], tuple[SearchHit, ...]],
) -> CrossRepoResult:
    plan = plan_search(scope, discover_projects(SCAN_ROOTS.read(call.settings)), resolve_project)
    found: list[tuple[Path, tuple[SearchHit, ...]]] = []
    skipped: list[Path] = []
    for done, target in enumerate(plan.targets, 1):
        try:
            found.append((target.label, search_project(target.scope)))
        except NoMemoryYet:
            found.append((target.label, ()))  # searched: it holds nothing yet
        except CollectionMissing:
            skipped.append(target.label)
        if call.progress is not None:
            call.progress(done, len(plan.targets))
    return CrossRepoResult(
        hits=merge_hits(found, query.top_k),
        searched=tuple(label for label, _ in found),
        skipped=tuple(skipped),
        collapsed=plan.collapsed,
    )
