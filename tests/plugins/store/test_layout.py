"""Layout rules: collection names, repository directories, MEMSEARCH_DIR and discovered stores."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pimem_core.scope import Scope
from pimem_plugins.shared.layout import discovered_store, resolve_memsearch_dir

# A prefix that does not exist, so realpath leaves the rest of the path alone.
ABSENT = "/nonexistent-pimem-prefix"
KELVIN = "\u212a"  # KELVIN SIGN: str.lower() maps it to 'k', tr '[:upper:]' '[:lower:]' does not


def shell_derive(path: str) -> str:
    """derive-collection.sh, step by step, as a reimplementation independent of the code."""
    real = os.path.realpath(path)  # realpath -m: symlinks resolved, the leaf need not exist
    base = os.path.basename(real)
    if not base:  # basename / is "/"
        base = "/"
    lowered = "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in base)  # tr, ASCII only
    replaced = "".join(c if c in "abcdefghijklmnopqrstuvwxyz0123456789" else "_" for c in lowered)
    collapsed = replaced
    while "__" in collapsed:  # sed 's/__*/_/g'
        collapsed = collapsed.replace("__", "_")
    if collapsed.startswith("_"):  # sed 's/^_//'
        collapsed = collapsed[1:]
    if collapsed.endswith("_"):  # sed 's/_$//'
        collapsed = collapsed[:-1]
    name = collapsed[:40]  # cut -c1-40
    digest = hashlib.sha256(real.encode("utf-8")).hexdigest()[:8]
    return f"ms_{name}_{digest}"


# -- TC-01 -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/home/user/my-app", "ms_my_app_62c1f414"),
        ("/srv/UPPER_case-Dir", "ms_upper_case_dir_ac785078"),
        ("/home/user/code/pi-memsearch.3", "ms_pi_memsearch_3_a1b79a60"),
        ("/srv/My App.2024", "ms_my_app_2024_8d12e591"),
        ("/shared/memsearch", "ms_memsearch_3b617678"),
    ],
)
def test_derive_collection_matches_reference_vectors(path: str, expected: str) -> None:
    assert Scope.derive_collection(path) == expected


def test_derive_collection_accepts_a_path_object() -> None:
    assert Scope.derive_collection(Path("/home/user/my-app")) == "ms_my_app_62c1f414"


# -- TC-02 -----------------------------------------------------------------------------------


def test_spaces_and_dots_become_single_underscores() -> None:
    assert Scope.derive_collection(f"{ABSENT}/a  b..c").startswith("ms_a_b_c_")


def test_non_ascii_letters_become_underscores() -> None:
    assert Scope.derive_collection(f"{ABSENT}/Ünïcödé-Dir").startswith("ms_n_c_d_dir_")


def test_kelvin_sign_is_not_lowercased_to_k() -> None:
    name = Scope.derive_collection(f"{ABSENT}/{KELVIN}elvin")
    assert name.startswith("ms_elvin_")
    assert name == shell_derive(f"{ABSENT}/{KELVIN}elvin")


def test_leading_and_trailing_separators_are_stripped() -> None:
    assert Scope.derive_collection(f"{ABSENT}/--my-app--").startswith("ms_my_app_")


def test_double_underscores_around_a_name_are_stripped() -> None:
    assert Scope.derive_collection(f"{ABSENT}/__x__").startswith("ms_x_")


def test_long_name_is_cut_to_forty_characters() -> None:
    name = Scope.derive_collection(f"{ABSENT}/{'a' * 50}")
    assert name == f"ms_{'a' * 40}_{name[-8:]}"


def test_cut_can_leave_a_trailing_underscore() -> None:
    # 39 letters, a separator, more letters: the cut at 40 ends on the underscore.
    name = Scope.derive_collection(f"{ABSENT}/{'a' * 39}-bcdef")
    assert name.startswith(f"ms_{'a' * 39}__")
    assert len(name) == len("ms_") + 40 + 1 + 8


def test_trailing_slash_does_not_change_the_name() -> None:
    assert Scope.derive_collection(f"{ABSENT}/my-app/") == Scope.derive_collection(
        f"{ABSENT}/my-app"
    )


def test_non_existent_directory_uses_its_absolute_path() -> None:
    path = f"{ABSENT}/deeper/my-app"
    digest = hashlib.sha256(path.encode()).hexdigest()[:8]
    assert Scope.derive_collection(path) == f"ms_my_app_{digest}"


def test_root_directory_has_an_empty_name() -> None:
    assert Scope.derive_collection("/") == f"ms__{hashlib.sha256(b'/').hexdigest()[:8]}"


def test_relative_path_resolves_against_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "proj").mkdir()
    monkeypatch.chdir(tmp_path)
    assert Scope.derive_collection("proj") == Scope.derive_collection(tmp_path / "proj")


# -- TC-03 -----------------------------------------------------------------------------------


def test_symlink_derives_the_same_collection_as_its_target(tmp_path: Path) -> None:
    target = tmp_path / "Target-Dir"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    assert Scope.derive_collection(link) == Scope.derive_collection(target)
    assert Scope.derive_collection(link).startswith("ms_target_dir_")


def test_symlinked_ancestor_of_a_missing_leaf_is_resolved(tmp_path: Path) -> None:
    target = tmp_path / "real"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    assert Scope.derive_collection(tmp_path / "link" / "missing") == Scope.derive_collection(
        target / "missing"
    )


# -- property: the code equals the shell algorithm ---------------------------------------------

# Lone surrogates cannot be encoded as UTF-8, so no generated text contains them.
NO_SURROGATES: tuple[Literal["Cs"]] = ("Cs",)

segment = st.text(
    alphabet=st.characters(blacklist_categories=NO_SURROGATES, blacklist_characters="/\x00"),
    min_size=1,
    max_size=50,
).filter(lambda s: s not in (".", ".."))


@given(st.lists(segment, min_size=1, max_size=4))
def test_derive_collection_equals_the_shell_algorithm_for_absent_paths(parts: list[str]) -> None:
    path = "/".join([ABSENT, *parts])
    assert Scope.derive_collection(path) == shell_derive(path)


@settings(max_examples=50, deadline=None)
@given(name=segment.filter(lambda s: len(s.encode()) <= 200))
def test_derive_collection_equals_the_shell_algorithm_for_existing_dirs(
    tmp_path_factory: pytest.TempPathFactory, name: str
) -> None:
    base = tmp_path_factory.mktemp("derive")
    target = base / "targets" / name
    target.mkdir(parents=True)
    link = base / "link"
    link.symlink_to(target)
    assert Scope.derive_collection(target) == shell_derive(str(target))
    assert Scope.derive_collection(link) == shell_derive(str(target))


# -- the real shell pipeline -------------------------------------------------------------------

PIPELINE = r"""
set -euo pipefail
dir="$(realpath -m "$1")"
name=$(basename "$dir" | tr '[:upper:]' '[:lower:]' | sed 's/[^a-z0-9]/_/g' \
  | sed 's/__*/_/g' | sed 's/^_//;s/_$//' | cut -c1-40)
hash=$(printf '%s' "$dir" | sha256sum | cut -c1-8)
echo "ms_${name}_${hash}"
"""

needs_shell = pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("bash", "realpath", "sha256sum")),
    reason="bash, realpath and sha256sum are needed to run derive-collection.sh's pipeline",
)


def run_pipeline(path: str) -> str:
    done = subprocess.run(
        ["bash", "-c", PIPELINE, "derive", path],
        capture_output=True,
        check=True,
        env={**os.environ, "LC_ALL": "C"},
    )
    return done.stdout.decode("utf-8").strip()


@needs_shell
@pytest.mark.parametrize(
    "name",
    ["My App.2024", f"{KELVIN}elvin", "__x__", "Ünïcödé-Dir", f"{'a' * 39}-bcdef", "日本語"],
)
def test_shell_pipeline_agrees_with_derive_collection(name: str) -> None:
    path = f"{ABSENT}/{name}"
    assert run_pipeline(path) == Scope.derive_collection(path)


@needs_shell
def test_shell_pipeline_agrees_for_a_name_that_is_not_utf8() -> None:
    path = os.fsdecode(f"{ABSENT}/".encode() + b"caf\xe9-Bar")
    expected = f"ms_caf_bar_{hashlib.sha256(os.fsencode(path)).hexdigest()[:8]}"
    assert Scope.derive_collection(path) == expected
    assert run_pipeline(path) == expected


@needs_shell
def test_shell_pipeline_agrees_for_a_symlink_and_a_trailing_slash(tmp_path: Path) -> None:
    target = tmp_path / "Some.Target"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    assert run_pipeline(f"{tmp_path}/link/") == Scope.derive_collection(f"{tmp_path}/link/")


@needs_shell
def test_dotdot_after_a_symlink_is_resolved_physically_like_realpath_m(tmp_path: Path) -> None:
    # `realpath -m` resolves the symlink before applying `..`: the parent is the target's.
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "a" / "b")
    path = f"{tmp_path}/link/.."
    assert run_pipeline(path) == Scope.derive_collection(tmp_path / "a")
    assert Scope.derive_collection(path) == run_pipeline(path)


# -- Scope.find_repository_dir (TC-04) --------------------------------------------------------------


def test_repository_dir_is_the_nearest_dir_with_a_git_directory(repo: Path) -> None:
    assert Scope.find_repository_dir(repo / "packages" / "core") == repo


def test_repository_dir_accepts_a_git_file_as_in_a_worktree(tmp_path: Path) -> None:
    worktree = tmp_path / "worktree"
    (worktree / "src").mkdir(parents=True)
    (worktree / ".git").write_text("gitdir: /elsewhere/.git/worktrees/wt\n")
    assert Scope.find_repository_dir(worktree / "src") == worktree


def test_repository_dir_without_git_is_the_directory_itself(tmp_path: Path) -> None:
    plain = tmp_path / "plain" / "deep"
    plain.mkdir(parents=True)
    assert Scope.find_repository_dir(plain) == plain


def test_repository_dir_stops_at_the_nearest_git_root(repo: Path) -> None:
    nested = repo / "vendor" / "lib"
    (nested / ".git").mkdir(parents=True)
    (nested / "src").mkdir()
    assert Scope.find_repository_dir(nested / "src") == nested


def test_repository_dir_resolves_symlinks(repo: Path, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(repo / "packages")
    assert Scope.find_repository_dir(link / "core") == repo


# -- resolve_memsearch_dir -------------------------------------------------------------------


def test_absolute_memsearch_dir_is_used_as_given(repo: Path) -> None:
    assert resolve_memsearch_dir(repo, "/shared/memsearch") == Path("/shared/memsearch")


def test_relative_memsearch_dir_resolves_at_the_repository(repo: Path) -> None:
    assert resolve_memsearch_dir(repo, "store") == repo / "store"
    assert resolve_memsearch_dir(repo, "../shared/./mem") == repo.parent / "shared" / "mem"


def test_memsearch_dir_is_normalised(repo: Path) -> None:
    assert resolve_memsearch_dir(repo, "/shared//memsearch/") == Path("/shared/memsearch")


# -- discovered_store ------------------------------------------------------------------------


def test_discovered_store_prefers_a_memsearch_tree(tmp_path: Path) -> None:
    (tmp_path / ".memsearch" / "memory").mkdir(parents=True)
    (tmp_path / "memory").mkdir()
    assert discovered_store(tmp_path) == (
        tmp_path / ".memsearch" / "memory",
        tmp_path / ".memsearch" / ".index-state.json",
    )


def test_discovered_store_falls_back_to_a_memory_dir_beside_the_state(tmp_path: Path) -> None:
    (tmp_path / "memory").mkdir()
    assert discovered_store(tmp_path) == (tmp_path / "memory", tmp_path / ".index-state.json")


def test_discovered_store_ignores_a_memsearch_tree_without_memory(tmp_path: Path) -> None:
    (tmp_path / ".memsearch").mkdir()
    assert discovered_store(tmp_path) == (tmp_path / "memory", tmp_path / ".index-state.json")
