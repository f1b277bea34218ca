"""Cross-repo recall: discovery, naming, collapse, accounting and errors, on a fake search.

The search plugin here is a fake that records which collection each leg searched and whether
it was read-only; the real one is exercised in ``test_cross_repo_integration.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pimem_core import Pimem, hookimpl
from pimem_core.errors import (
    CollectionMissing,
    NoMemoryYet,
    NoProviderError,
    PimemError,
    SettingsError,
)
from pimem_core.render import cross_repo_to_json, render_cross_repo
from pimem_core.services import MemoryIndex
from pimem_core.testing import InMemoryIndex, read_hits
from pimem_core.types import BackendCall, CrossRepoResult, Scope, SearchHit, SearchQuery
from pimem_plugins.cross_repo import discover_projects

from conftest import make_pimem, run_cli, write_script


class FakeSearch:
    """Scores per collection; collections listed in ``missing`` were never indexed."""

    def __init__(self) -> None:
        self.scores: dict[str, list[float]] = {}
        self.missing: set[str] = set()
        self.empty: set[str] = set()
        self.broken: set[str] = set()
        #: (collection, top_k, read_only) per search, in order.
        self.calls: list[tuple[str, int, bool]] = []

    @hookimpl(tryfirst=True)
    def pimem_open_index(self, scope: Scope) -> MemoryIndex:
        fake = self

        class Scripted(InMemoryIndex):
            def search(self, query: SearchQuery, call: BackendCall) -> tuple[SearchHit, ...]:
                return fake.search(self.scope, query, call)

        return Scripted(scope)

    def search(self, scope: Scope, query: SearchQuery, call: BackendCall) -> tuple[SearchHit, ...]:
        self.calls.append((scope.collection, query.top_k, call.read_only))
        if call.on_wait is not None:
            call.on_wait("an index run")
        if scope.collection in self.missing:
            raise CollectionMissing(f"collection {scope.collection} was never indexed")
        if scope.collection in self.empty:
            raise NoMemoryYet(f"no memory yet in {scope.memory_dir}")
        if scope.collection in self.broken:
            raise PimemError("the database is broken")
        scores = sorted(self.scores.get(scope.collection, []), reverse=True)
        return tuple(hit(scope, score) for score in scores[: query.top_k])

    @property
    def searched(self) -> list[str]:
        return [collection for collection, _, _ in self.calls]


def hit(scope: Scope, score: float) -> SearchHit:
    return SearchHit(
        chunk_hash=f"{abs(hash((scope.collection, score))):016x}"[:16],
        content=f"- a memory of {scope.scope_dir.name} scored {score}",
        source=str(scope.memory_dir / "2026-08-13.md"),
        heading="22:41",
        heading_level=3,
        start_line=3,
        end_line=5,
        score=score,
    )


def fanout(**env: str) -> tuple[Pimem, FakeSearch]:
    pimem = make_pimem({"PIMEM_DISABLE_PLUGINS": "memsearch-index", **env})
    fake = FakeSearch()
    pimem.pm.add_plugin(fake, "fake-search")
    return pimem, fake


def project(root: Path, name: str, *, bare: bool = False) -> Path:
    directory = root / name
    (directory / ("memory" if bare else ".memsearch/memory")).mkdir(parents=True)
    return directory


def record(state_file: Path, collection: str) -> None:
    state_file.parent.mkdir(parents=True, exist_ok=True)
    state_file.write_text(
        json.dumps({"schema_version": 1, "status": "ok", "collection": collection})
    )


def search_all(
    pimem: Pimem, cwd: Path, query: str = "which cache", top_k: int = 5
) -> CrossRepoResult:
    return pimem.search_everywhere(pimem.resolve_scope(cwd), SearchQuery(text=query, top_k=top_k))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Scan root R: alpha and beta hold stores, not-a-project does not."""
    scan_root = tmp_path / "R"
    project(scan_root, "alpha")
    project(scan_root, "beta")
    (scan_root / "not-a-project" / "src").mkdir(parents=True)
    (scan_root / "a-file").write_text("not a directory\n")
    return scan_root


# -- discovery -------------------------------------------------------------------------------


def test_discovery_takes_children_holding_a_store_sorted(tmp_path: Path, root: Path) -> None:
    bare = project(root, "aardvark", bare=True)
    (root / "nested" / "deeper" / ".memsearch" / "memory").mkdir(parents=True)
    assert discover_projects((root,)) == (bare, root / "alpha", root / "beta")


def test_discovery_merges_roots_and_reaches_each_directory_once(tmp_path: Path, root: Path) -> None:
    other = tmp_path / "other"
    gamma = project(other, "gamma")
    (other / "alpha-link").symlink_to(root / "alpha")
    found = discover_projects((other, root, root))
    # The first root to reach a directory names it: the symlink, here.
    assert found == (root / "beta", other / "alpha-link", gamma)


def test_relative_roots_are_made_absolute(
    tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert discover_projects((Path("R"),)) == (root / "alpha", root / "beta")


def test_no_scan_roots_is_an_error_naming_the_variable() -> None:
    with pytest.raises(SettingsError, match="PI_MEMSEARCH_SCAN_ROOTS"):
        discover_projects(())


def test_a_missing_root_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as error:
        discover_projects((tmp_path / "nowhere",))
    assert str(tmp_path / "nowhere") in str(error.value)
    assert "PI_MEMSEARCH_SCAN_ROOTS" in str(error.value)


def test_an_unreadable_root_is_an_error_naming_it(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def denied(path: object) -> object:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(os, "scandir", denied)
    with pytest.raises(SettingsError, match=f"cannot scan {root} .*Permission denied"):
        discover_projects((root,))


def test_a_root_that_is_a_file_is_an_error(root: Path) -> None:
    with pytest.raises(SettingsError, match="Not a directory"):
        discover_projects((root / "a-file",))


# -- TC-37: fan-out basics ---------------------------------------------------------------------


def test_fan_out_searches_the_session_first_then_each_project_and_merges_by_score(
    repo: Path, root: Path
) -> None:
    pimem, fake = fanout(PI_MEMSEARCH_SCAN_ROOTS=str(root))
    alpha, beta = Scope.derive_collection(root / "alpha"), Scope.derive_collection(root / "beta")
    fake.scores = {alpha: [1.0, 0.4], Scope.derive_collection(repo): [0.9], beta: [0.7]}
    result = search_all(pimem, repo)

    assert fake.searched == [Scope.derive_collection(repo), alpha, beta]
    assert [(h.project, h.score) for h in result.hits] == [
        (root / "alpha", 1.0),
        (repo, 0.9),
        (root / "beta", 0.7),
        (root / "alpha", 0.4),
    ]
    assert result.searched == (repo, root / "alpha", root / "beta")
    assert result.skipped == result.collapsed == ()
    text = render_cross_repo("which cache", result)
    assert text.startswith(
        "4 memory chunk(s), 3 projects searched, 0 skipped, "
        "best first (score = rank fusion, not relevance):\n\n"
    )
    labels = [hit.project for hit in read_hits(text)]
    assert labels == [str(root / "alpha"), str(repo), str(root / "beta"), str(root / "alpha")]
    assert (
        f"\n\n1. 2026-08-13 22:41 | rank fusion 1.00 | chunk {result.hits[0].chunk_hash} "
        f"| project {root / 'alpha'}\n- a memory of alpha scored 1.0\n\n"
    ) in text


def test_nothing_found_anywhere_says_where_it_looked(repo: Path, root: Path) -> None:
    pimem, _ = fanout(PI_MEMSEARCH_SCAN_ROOTS=str(root))
    result = search_all(pimem, repo, "nothing ever written")
    assert render_cross_repo("nothing ever written", result) == (
        'No memories found for "nothing ever written" across 3 projects searched, 0 skipped.'
    )


def test_top_k_applies_to_each_project_and_to_the_merge(repo: Path, root: Path) -> None:
    pimem, fake = fanout(PI_MEMSEARCH_SCAN_ROOTS=str(root))
    fake.scores = {
        Scope.derive_collection(root / "alpha"): [1.0, 0.4],
        Scope.derive_collection(repo): [0.9],
        Scope.derive_collection(root / "beta"): [0.7],
    }
    result = search_all(pimem, repo, top_k=2)
    assert {top_k for _, top_k, _ in fake.calls} == {2}
    assert [h.score for h in result.hits] == [1.0, 0.9]
    assert render_cross_repo("q", result).startswith("2 memory chunk(s), 3 projects searched")


def test_a_never_indexed_project_is_skipped_and_listed(repo: Path, root: Path) -> None:
    pimem, fake = fanout(PI_MEMSEARCH_SCAN_ROOTS=str(root))
    alpha, beta = Scope.derive_collection(root / "alpha"), Scope.derive_collection(root / "beta")
    fake.missing = {alpha}
    fake.scores = {beta: [0.7]}
    result = search_all(pimem, repo)
    assert fake.searched == [Scope.derive_collection(repo), alpha, beta]
    assert result.searched == (repo, root / "beta")
    assert result.skipped == (root / "alpha",)
    text = render_cross_repo("q", result)
    assert (
        "1 memory chunk(s), 2 projects searched, 1 skipped, "
        "best first (score = rank fusion, not relevance):" in text
    )
    assert text.endswith(f"skipped, never indexed on this machine: {root / 'alpha'}")


def test_a_project_with_no_memory_yet_is_searched_not_skipped(repo: Path, root: Path) -> None:
    """Skipping it would advise an index run, which has nothing to index."""
    pimem, fake = fanout(PI_MEMSEARCH_SCAN_ROOTS=str(root))
    alpha, beta = Scope.derive_collection(root / "alpha"), Scope.derive_collection(root / "beta")
    fake.empty = {Scope.derive_collection(repo), alpha}
    fake.scores = {beta: [0.7]}
    result = search_all(pimem, repo)
    assert result.searched == (repo, root / "alpha", root / "beta")
    assert result.skipped == ()
    assert [hit.project for hit in result.hits] == [root / "beta"]
    assert "never indexed" not in render_cross_repo("q", result)


def test_the_json_says_what_a_score_is(repo: Path, root: Path) -> None:
    pimem, fake = fanout(PI_MEMSEARCH_SCAN_ROOTS=str(root))
    fake.scores = {Scope.derive_collection(root / "beta"): [0.7]}
    hits = json.loads(json.dumps(cross_repo_to_json(search_all(pimem, repo))))["hits"]
    assert [(hit["score"], hit["score_kind"]) for hit in hits] == [(0.7, "rank_fusion")]


def test_other_failures_fail_the_whole_search(repo: Path, root: Path) -> None:
    pimem, fake = fanout(PI_MEMSEARCH_SCAN_ROOTS=str(root))
    fake.broken = {Scope.derive_collection(root / "alpha")}
    with pytest.raises(PimemError, match="broken"):
        search_all(pimem, repo)


def test_a_session_under_the_scan_root_is_searched_once(root: Path) -> None:
    pimem, fake = fanout(PI_MEMSEARCH_SCAN_ROOTS=str(root))
    result = search_all(pimem, root / "alpha")
    assert fake.searched == [
        Scope.derive_collection(root / "alpha"),
        Scope.derive_collection(root / "beta"),
    ]
    assert result.searched == (root / "alpha", root / "beta")
    assert render_cross_repo("q", result) == (
        'No memories found for "q" across 2 projects searched, 0 skipped.'
    )


def test_no_scan_roots_fails_before_any_search(repo: Path) -> None:
    pimem, fake = fanout()
    with pytest.raises(SettingsError, match="PI_MEMSEARCH_SCAN_ROOTS"):
        search_all(pimem, repo)
    assert fake.calls == []


def test_a_missing_root_fails_before_any_search(repo: Path, root: Path, tmp_path: Path) -> None:
    missing = tmp_path / "typo"
    pimem, fake = fanout(PI_MEMSEARCH_SCAN_ROOTS=os.pathsep.join([str(root), str(missing)]))
    with pytest.raises(SettingsError, match=f"{missing}.*PI_MEMSEARCH_SCAN_ROOTS"):
        search_all(pimem, repo)
    assert fake.calls == []


def test_a_bare_memory_store_is_discovered_and_named_from_its_directory(
    repo: Path, tmp_path: Path
) -> None:
    scan_root = tmp_path / "stores"
    store = project(scan_root, "alpha", bare=True)
    pimem, fake = fanout(PI_MEMSEARCH_SCAN_ROOTS=str(scan_root))
    result = search_all(pimem, repo)
    assert fake.searched == [Scope.derive_collection(repo), Scope.derive_collection(store)]
    assert result.searched == (repo, store)


def test_a_project_search_is_not_touched_by_scan_roots(repo: Path, root: Path) -> None:
    pimem, fake = fanout(PI_MEMSEARCH_SCAN_ROOTS=str(root))
    fake.scores = {Scope.derive_collection(repo): [0.9]}
    hits = pimem.search_memory(pimem.resolve_scope(repo), SearchQuery(text="q"))
    assert fake.calls == [(Scope.derive_collection(repo), 5, False)]
    assert [h.project for h in hits] == [None]


# -- TC-38: #95 and collapsed accounting ---------------------------------------------------------


def test_memsearch_dir_names_the_session_and_nothing_else(
    repo: Path, root: Path, tmp_path: Path
) -> None:
    """#95: the session's MEMSEARCH_DIR applied to every discovered project collapsed the
    whole fan-out into one search. Each project keeps its own collection."""
    shared = tmp_path / "shared"
    pimem, fake = fanout(PI_MEMSEARCH_SCAN_ROOTS=str(root), MEMSEARCH_DIR=str(shared))
    result = search_all(pimem, repo)
    assert fake.searched == [
        Scope.derive_collection(shared),
        Scope.derive_collection(root / "alpha"),
        Scope.derive_collection(root / "beta"),
    ]
    assert result.searched == (shared, root / "alpha", root / "beta")
    assert result.collapsed == ()


def test_a_recorded_collection_outranks_the_derivation(repo: Path, root: Path) -> None:
    record(root / "alpha" / ".memsearch" / ".index-state.json", "ms_alpha_recorded")
    pimem, fake = fanout(PI_MEMSEARCH_SCAN_ROOTS=str(root))
    search_all(pimem, repo)
    assert fake.searched[1] == "ms_alpha_recorded"


def test_a_bad_state_file_falls_back_to_the_derivation(repo: Path, root: Path) -> None:
    (root / "alpha" / ".memsearch" / ".index-state.json").write_text('{"schema_version": 9}')
    pimem, fake = fanout(PI_MEMSEARCH_SCAN_ROOTS=str(root))
    search_all(pimem, repo)
    assert fake.searched[1] == Scope.derive_collection(root / "alpha")


def test_projects_sharing_a_collection_are_collapsed_and_listed(repo: Path, root: Path) -> None:
    gamma = project(root, "gamma")
    for name in ("alpha", "gamma"):
        record(root / name / ".memsearch" / ".index-state.json", "ms_shared_store")
    pimem, fake = fanout(PI_MEMSEARCH_SCAN_ROOTS=str(root))
    fake.scores = {"ms_shared_store": [0.8]}
    result = search_all(pimem, repo)

    assert fake.searched == [
        Scope.derive_collection(repo),
        "ms_shared_store",
        Scope.derive_collection(root / "beta"),
    ]
    assert result.searched == (repo, root / "alpha", root / "beta")
    assert result.collapsed == (gamma,)
    assert [h.project for h in result.hits] == [root / "alpha"]
    text = render_cross_repo("q", result)
    assert (
        "1 memory chunk(s), 3 projects searched, 0 skipped, 1 collapsed, "
        "best first (score = rank fusion, not relevance):" in text
    )
    assert text.endswith(f"collapsed, sharing the collection of a project searched before: {gamma}")
    assert cross_repo_to_json(result)["collapsed"] == [str(gamma)]


def test_a_project_sharing_the_sessions_collection_is_collapsed(repo: Path, root: Path) -> None:
    record(root / "beta" / ".memsearch" / ".index-state.json", Scope.derive_collection(repo))
    pimem, fake = fanout(PI_MEMSEARCH_SCAN_ROOTS=str(root))
    result = search_all(pimem, repo, "nothing")
    assert fake.searched == [Scope.derive_collection(repo), Scope.derive_collection(root / "alpha")]
    assert result.collapsed == (root / "beta",)
    assert render_cross_repo("nothing", result) == (
        'No memories found for "nothing" across 2 projects searched, 0 skipped, 1 collapsed.\n'
        f"collapsed, sharing the collection of a project searched before: {root / 'beta'}"
    )


def test_skipped_and_collapsed_are_both_listed(repo: Path, root: Path) -> None:
    project(root, "gamma")
    for name in ("beta", "gamma"):
        record(root / name / ".memsearch" / ".index-state.json", "ms_shared_store")
    pimem, fake = fanout(PI_MEMSEARCH_SCAN_ROOTS=str(root))
    fake.missing = {Scope.derive_collection(root / "alpha")}
    text = render_cross_repo("q", search_all(pimem, repo))
    assert text.splitlines() == [
        'No memories found for "q" across 2 projects searched, 1 skipped, 1 collapsed.',
        f"skipped, never indexed on this machine: {root / 'alpha'}",
        f"collapsed, sharing the collection of a project searched before: {root / 'gamma'}",
    ]


def test_a_single_project_is_counted_in_the_singular(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "empty-root").mkdir()
    pimem, _ = fanout(PI_MEMSEARCH_SCAN_ROOTS=str(tmp_path / "empty-root"))
    assert render_cross_repo("q", search_all(pimem, repo)) == (
        'No memories found for "q" across 1 project searched, 0 skipped.'
    )


def test_the_store_command_names_every_discovered_project_but_not_the_session(
    repo: Path, root: Path, tmp_path: Path
) -> None:
    log = tmp_path / "asked.log"
    command = write_script(
        tmp_path / "store.sh",
        f'echo "$1 $PWD" >> {log}\n'
        'case "$1" in\n'
        f'  memory-dir) echo "{tmp_path}/central/session/memory" ;;\n'
        '  collection) echo "ms_cmd_$(basename "$PWD")" ;;\n'
        "esac\n",
    )
    pimem, fake = fanout(PI_MEMSEARCH_SCAN_ROOTS=str(root), PI_MEMSEARCH_STORE_CMD=str(command))
    result = search_all(pimem, repo)
    assert fake.searched == ["ms_cmd_repo", "ms_cmd_alpha", "ms_cmd_beta"]
    assert result.searched == (tmp_path / "central" / "session", root / "alpha", root / "beta")
    asked = log.read_text().splitlines()
    assert f"collection {root / 'alpha'}" in asked
    assert f"collection {root / 'beta'}" in asked
    assert not any(line.startswith("memory-dir " + str(root)) for line in asked)


# -- read-only, progress, and the facade ---------------------------------------------------------


def test_only_the_sessions_own_leg_may_write(repo: Path, root: Path) -> None:
    pimem, fake = fanout(PI_MEMSEARCH_SCAN_ROOTS=str(root))
    search_all(pimem, repo)
    assert [read_only for _, _, read_only in fake.calls] == [False, True, True]


def test_one_wait_note_for_the_whole_fan_out_and_progress_per_project(
    repo: Path, root: Path
) -> None:
    pimem, _ = fanout(PI_MEMSEARCH_SCAN_ROOTS=str(root))
    notes: list[str] = []
    progress: list[tuple[int, int]] = []
    pimem.search_everywhere(
        pimem.resolve_scope(repo),
        SearchQuery(text="q"),
        on_wait=notes.append,
        progress=lambda done, total: progress.append((done, total)),
    )
    assert notes == ["an index run"]
    assert progress == [(1, 3), (2, 3), (3, 3)]


def test_without_the_plugin_the_facade_names_the_hook(repo: Path, root: Path) -> None:
    pimem, _ = fanout(
        PI_MEMSEARCH_SCAN_ROOTS=str(root), PIMEM_DISABLE_PLUGINS="memsearch-index,cross-repo"
    )
    with pytest.raises(NoProviderError, match=r"pimem_search_projects .*cross-repo"):
        search_all(pimem, repo)


def test_json_lists_every_project_by_its_label(repo: Path, root: Path) -> None:
    pimem, fake = fanout(PI_MEMSEARCH_SCAN_ROOTS=str(root))
    fake.missing = {Scope.derive_collection(root / "beta")}
    fake.scores = {Scope.derive_collection(root / "alpha"): [0.5]}
    data = cross_repo_to_json(search_all(pimem, repo))
    assert data["searched"] == [str(repo), str(root / "alpha")]
    assert data["skipped"] == [str(root / "beta")]
    assert data["collapsed"] == []
    hits = data["hits"]
    assert isinstance(hits, list)
    assert [(hit["project"], hit["score"]) for hit in hits] == [(str(root / "alpha"), 0.5)]


def test_a_hits_label_names_the_same_collection_for_expansion(repo: Path, root: Path) -> None:
    record(root / "alpha" / ".memsearch" / ".index-state.json", "ms_alpha_recorded")
    pimem, fake = fanout(PI_MEMSEARCH_SCAN_ROOTS=str(root))
    fake.scores = {"ms_alpha_recorded": [0.9]}
    [best] = search_all(pimem, repo).hits
    assert best.project is not None
    assert pimem.resolve_project(best.project).collection == "ms_alpha_recorded"


# -- the command line ----------------------------------------------------------------------------


def test_cli_search_all_without_scan_roots_is_a_user_error(repo: Path) -> None:
    result = run_cli("search", "cache", "--all", "--cwd", str(repo))
    assert result.code == 1
    assert result.stderr.startswith("pimem: error: cross-repo recall needs PI_MEMSEARCH_SCAN_ROOTS")
    assert "Traceback" not in result.stderr


def test_cli_search_all_with_a_missing_root_names_it(repo: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    result = run_cli(
        "search", "cache", "--all", "--json", "--cwd", str(repo),
        env={"PI_MEMSEARCH_SCAN_ROOTS": str(missing)},
    )  # fmt: skip
    assert result.code == 1
    assert f"cannot scan {missing}" in result.stderr
    assert result.stdout == ""
