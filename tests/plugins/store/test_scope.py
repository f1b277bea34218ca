"""Scope resolution without a store command: git root, MEMSEARCH_DIR and scanned projects."""

from __future__ import annotations

import json
from pathlib import Path

from pimem_core.scope import Scope
from pimem_plugins.memsearch.config import child_environment

from conftest import make_pimem


def write_state(path: Path, **fields: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schema_version": 1, "status": "ok", **fields}))


# -- TC-04 -----------------------------------------------------------------------------------


def test_scope_from_a_subdirectory_is_the_git_root(repo: Path) -> None:
    scope = make_pimem().resolve_scope(repo / "packages" / "core")
    assert scope.repository_dir == repo
    assert scope.scope_dir == repo
    assert scope.memory_dir == repo / ".memsearch" / "memory"
    assert scope.collection == Scope.derive_collection(repo)
    assert scope.index_state_path == repo / ".memsearch" / ".index-state.json"
    assert scope.store_command is None
    assert scope.state_dir is None


def test_scope_of_a_worktree_style_git_file(tmp_path: Path) -> None:
    worktree = tmp_path / "wt"
    (worktree / "src").mkdir(parents=True)
    (worktree / ".git").write_text("gitdir: /elsewhere/.git/worktrees/wt\n")
    scope = make_pimem().resolve_scope(worktree / "src")
    assert scope.scope_dir == worktree
    assert scope.memory_dir == worktree / ".memsearch" / "memory"


def test_scope_without_git_is_the_directory_itself(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    scope = make_pimem().resolve_scope(plain)
    assert scope.repository_dir == plain
    assert scope.scope_dir == plain
    assert scope.memory_dir == plain / ".memsearch" / "memory"
    assert scope.collection == Scope.derive_collection(plain)


# -- TC-05 -----------------------------------------------------------------------------------


def test_absolute_memsearch_dir_moves_store_collection_and_state(
    repo: Path, tmp_path: Path
) -> None:
    shared = tmp_path / "shared" / "memsearch"
    scope = make_pimem({"MEMSEARCH_DIR": str(shared)}).resolve_scope(repo / "packages" / "core")
    assert scope.scope_dir == shared
    assert scope.memory_dir == shared / "memory"
    assert scope.collection == Scope.derive_collection(shared)
    assert scope.collection.startswith("ms_memsearch_")
    assert scope.repository_dir == repo
    assert scope.index_state_path == shared / ".index-state.json"


def test_memsearch_dir_does_not_touch_the_child_environment(repo: Path, tmp_path: Path) -> None:
    scope = make_pimem({"MEMSEARCH_DIR": str(tmp_path / "d")}).resolve_scope(repo)
    env = child_environment(scope, {"MEMSEARCH_DIR": "inherited"})
    assert env["MEMSEARCH_DIR"] == "inherited"


# -- TC-06 -----------------------------------------------------------------------------------


def test_relative_memsearch_dir_resolves_at_the_repository_not_the_cwd(repo: Path) -> None:
    scope = make_pimem({"MEMSEARCH_DIR": "store"}).resolve_scope(repo / "packages" / "core")
    assert scope.scope_dir == repo / "store"
    assert scope.memory_dir == repo / "store" / "memory"
    assert scope.collection == Scope.derive_collection(repo / "store")
    assert scope.index_state_path == repo / "store" / ".index-state.json"


def test_relative_memsearch_dir_may_leave_the_repository(repo: Path, tmp_path: Path) -> None:
    scope = make_pimem({"MEMSEARCH_DIR": "../shared"}).resolve_scope(repo / "packages")
    assert scope.scope_dir == tmp_path / "shared"
    assert scope.memory_dir == tmp_path / "shared" / "memory"


def test_relative_memsearch_dir_without_git_resolves_at_the_cwd(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    scope = make_pimem({"MEMSEARCH_DIR": "mem"}).resolve_scope(plain)
    assert scope.scope_dir == plain / "mem"


# -- symlinks and memoization -------------------------------------------------------------------


def test_symlinked_cwd_resolves_to_the_real_repository(repo: Path, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(repo / "packages" / "core")
    scope = make_pimem().resolve_scope(link)
    assert scope.repository_dir == repo
    assert scope.scope_dir == repo
    assert scope.collection == Scope.derive_collection(repo)


def test_symlinked_repository_derives_the_target_collection(repo: Path, tmp_path: Path) -> None:
    link = tmp_path / "repo-link"
    link.symlink_to(repo)
    assert make_pimem().resolve_scope(link).collection == Scope.derive_collection(repo)


def test_a_git_root_made_above_moves_the_scope_at_once(repo: Path) -> None:
    # One plugin manager answers as a new one would: the memory service lives for hours.
    pimem = make_pimem()
    core = repo / "packages" / "core"
    assert pimem.resolve_scope(core).scope_dir == repo
    (core / ".git").mkdir()
    assert pimem.resolve_scope(core).scope_dir == core
    (core / ".git").rmdir()
    assert pimem.resolve_scope(core) == make_pimem().resolve_scope(core)
    assert pimem.resolve_scope(core).scope_dir == repo


# -- resolve_project ---------------------------------------------------------------------------


def test_project_with_a_memsearch_tree(tmp_path: Path) -> None:
    project = tmp_path / "alpha"
    (project / ".memsearch" / "memory").mkdir(parents=True)
    scope = make_pimem().resolve_project(project)
    assert scope.scope_dir == project
    assert scope.repository_dir == project
    assert scope.memory_dir == project / ".memsearch" / "memory"
    assert scope.index_state_path == project / ".memsearch" / ".index-state.json"
    assert scope.collection == Scope.derive_collection(project)


def test_project_with_a_bare_memory_dir(tmp_path: Path) -> None:
    project = tmp_path / "store"
    (project / "memory").mkdir(parents=True)
    scope = make_pimem().resolve_project(project)
    assert scope.memory_dir == project / "memory"
    assert scope.index_state_path == project / ".index-state.json"
    assert scope.collection == Scope.derive_collection(project)


def test_project_collection_comes_from_the_state_file(tmp_path: Path) -> None:
    project = tmp_path / "alpha"
    (project / ".memsearch" / "memory").mkdir(parents=True)
    write_state(project / ".memsearch" / ".index-state.json", collection="ms_recorded_12345678")
    assert make_pimem().resolve_project(project).collection == "ms_recorded_12345678"


def test_bare_store_collection_comes_from_the_state_file_beside_it(tmp_path: Path) -> None:
    project = tmp_path / "store"
    (project / "memory").mkdir(parents=True)
    write_state(project / ".index-state.json", collection="ms_central_87654321")
    assert make_pimem().resolve_project(project).collection == "ms_central_87654321"


def test_invalid_recorded_collection_falls_back_to_derivation(tmp_path: Path) -> None:
    project = tmp_path / "alpha"
    (project / ".memsearch" / "memory").mkdir(parents=True)
    write_state(project / ".memsearch" / ".index-state.json", collection="not a name!")
    assert make_pimem().resolve_project(project).collection == Scope.derive_collection(project)


def test_drifted_state_file_falls_back_to_derivation(tmp_path: Path) -> None:
    project = tmp_path / "alpha"
    (project / ".memsearch" / "memory").mkdir(parents=True)
    (project / ".memsearch" / ".index-state.json").write_text("{not json")
    assert make_pimem().resolve_project(project).collection == Scope.derive_collection(project)


def test_state_file_without_collection_falls_back_to_derivation(tmp_path: Path) -> None:
    project = tmp_path / "alpha"
    (project / ".memsearch" / "memory").mkdir(parents=True)
    write_state(project / ".memsearch" / ".index-state.json")
    assert make_pimem().resolve_project(project).collection == Scope.derive_collection(project)


def test_project_ignores_the_sessions_memsearch_dir(tmp_path: Path) -> None:
    project = tmp_path / "alpha"
    (project / ".memsearch" / "memory").mkdir(parents=True)
    scope = make_pimem({"MEMSEARCH_DIR": str(tmp_path / "shared")}).resolve_project(project)
    assert scope.scope_dir == project
    assert scope.memory_dir == project / ".memsearch" / "memory"
    assert scope.collection == Scope.derive_collection(project)
    assert scope.index_state_path == project / ".memsearch" / ".index-state.json"


def test_project_does_not_walk_up_to_a_git_root(repo: Path) -> None:
    project = repo / "packages" / "core"
    (project / "memory").mkdir()
    scope = make_pimem().resolve_project(project)
    assert scope.repository_dir == project
    assert scope.scope_dir == project
    assert scope.collection == Scope.derive_collection(project)


def test_a_project_store_made_later_is_found(tmp_path: Path) -> None:
    project = tmp_path / "alpha"
    (project / "memory").mkdir(parents=True)
    pimem = make_pimem()
    assert pimem.resolve_project(project).memory_dir == project / "memory"
    (project / ".memsearch" / "memory").mkdir(parents=True)
    assert pimem.resolve_project(project).memory_dir == project / ".memsearch" / "memory"
