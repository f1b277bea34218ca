"""The worktree resolver, installed from its directory: real git worktrees, the real CLI.

The fixtures ``make_pimem``, ``run_pimem`` and ``pimem_project`` come from pimem's test kit (the
pytest plugin ``pimem_core.testing``), loaded because pimem is installed: no conftest needed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import attrs
import pytest
from pimem_worktree_resolver import primary_checkout

from pimem_core.plugin import (
    Scope,
)
from pimem_core.testing import MakePimem, RunPimem, TempProject

GIT = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
}


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **GIT}, check=True, capture_output=True
    )


@attrs.frozen
class Repository:
    primary: Path
    worktrees: tuple[Path, Path]


@pytest.fixture
def repository(tmp_path: Path) -> Repository:
    """A repository with one commit and two linked worktrees beside its primary checkout."""
    if shutil.which("git") is None:
        pytest.fail("these tests need git on PATH")
    primary = tmp_path / "app"
    primary.mkdir()
    git(primary, "init", "--quiet")
    git(primary, "commit", "--quiet", "--allow-empty", "-m", "start")
    for name in ("app-feature", "app-fix"):
        git(primary, "worktree", "add", "--quiet", "-b", name, str(tmp_path / name))
    (tmp_path / "app-feature" / "src").mkdir()
    return Repository(primary, (tmp_path / "app-feature", tmp_path / "app-fix"))


def pimem_json(run_pimem: RunPimem, *args: str | Path, stdin: str | None = None) -> Any:
    """``pimem ARGS --json`` with the installed plugins (this one among them, through its entry
    point, as pip installed it), reading *stdin*; its answer."""
    result = run_pimem(*args, "--json", installed=True, stdin=stdin)
    assert result.exit_code == 0, result.stderr
    return result.json


def test_a_linked_worktree_names_its_primary_checkout(
    repository: Repository, pimem_project: TempProject
) -> None:
    for worktree in repository.worktrees:
        assert primary_checkout(worktree) == repository.primary.resolve()
    assert primary_checkout(repository.primary) is None  # .git is a directory
    assert primary_checkout(pimem_project.directory.parent) is None  # no git at all


def test_a_worktree_of_a_bare_repository_keeps_its_own_memory(tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    git(tmp_path, "init", "--quiet", "--bare", str(bare))
    seed = tmp_path / "seed"
    git(tmp_path, "clone", "--quiet", str(bare), str(seed))
    git(seed, "commit", "--quiet", "--allow-empty", "-m", "start")
    git(seed, "push", "--quiet", "origin", "HEAD:main")
    git(bare, "worktree", "add", "--quiet", str(tmp_path / "work"), "main")
    assert primary_checkout(tmp_path / "work") is None


def test_worktrees_share_the_primary_store_once_installed(
    make_pimem: MakePimem, repository: Repository
) -> None:
    pimem = make_pimem(installed=True)
    assert pimem.pm.answering_plugins()["pimem_resolve_scope"] == "worktree-resolver"
    shared = Scope.for_project(repository.primary)
    feature, fix = repository.worktrees
    assert pimem.resolve_scope(feature / "src") == shared
    assert pimem.resolve_scope(fix) == shared
    assert pimem.resolve_scope(repository.primary) == shared  # the default resolver's answer


def test_a_store_chosen_by_setting_wins(make_pimem: MakePimem, repository: Repository) -> None:
    pimem = make_pimem(installed=True, env={"MEMSEARCH_DIR": ".shared"})
    feature = repository.worktrees[0]
    assert pimem.resolve_scope(feature).scope_dir == feature.resolve() / ".shared"


def test_pimem_plugins_lists_the_installed_plugin(run_pimem: RunPimem) -> None:
    listing = pimem_json(run_pimem, "plugins")
    row = next(row for row in listing["plugins"] if row["name"] == "worktree-resolver")
    assert row["distribution"] == "pimem-worktree-resolver"
    assert row["status"] == "active"
    assert row["hooks"] == ["pimem_resolve_scope"]
    assert listing["single_answer_hooks"]["pimem_resolve_scope"] == "worktree-resolver"


def test_two_worktrees_resolve_to_one_store_and_collection(
    run_pimem: RunPimem, repository: Repository
) -> None:
    feature, fix = (
        pimem_json(run_pimem, "scope", "--cwd", worktree) for worktree in repository.worktrees
    )
    primary = pimem_json(run_pimem, "scope", "--cwd", repository.primary)
    assert feature["memory_dir"] == fix["memory_dir"] == primary["memory_dir"]
    assert feature["collection"] == fix["collection"] == primary["collection"]
    assert primary["memory_dir"] == str(repository.primary.resolve() / ".memsearch" / "memory")

    written = pimem_json(
        run_pimem,
        "write",
        "-",
        "--cwd",
        repository.worktrees[0],
        "--session",
        "s1",
        "--turn",
        "t1",
        "--transcript",
        "/t.jsonl",
        stdin="- written in the feature worktree",
    )
    assert Path(written["file"]).parent == Path(primary["memory_dir"])
