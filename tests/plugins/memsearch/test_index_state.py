"""Where .index-state.json lives, how it is parsed, and the index-health lines built from it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pimem_core.types import CONFIGURATION_RANK, Scope
from pimem_plugins.shared.index_state import (
    IndexHealth,
    IndexStateError,
    describe_index_health,
    index_status_sections,
    parse_index_state,
    read_index_health,
)
from pimem_plugins.shared.layout import index_state_path

from conftest import make_pimem, write_script


def state_path(
    memory_dir: Path,
    repository_dir: Path,
    *,
    memsearch_dir: str | None = None,
    state_dir: Path | None = None,
    store_command: bool = False,
) -> Path | None:
    return index_state_path(
        memory_dir=memory_dir,
        repository_dir=repository_dir,
        memsearch_dir=memsearch_dir,
        state_dir=state_dir,
        store_command=store_command,
    )


def store_script(tmp_path: Path, memory_dir: Path, state_dir: Path | None = None) -> Path:
    state = f"  state-dir) echo {state_dir} ;;\n" if state_dir is not None else ""
    return write_script(
        tmp_path / "store-cmd",
        'case "$1" in\n'
        f"  memory-dir) echo {memory_dir} ;;\n"
        "  collection) echo ms_store_12345678 ;;\n"
        f"{state}"
        "  *) exit 0 ;;\n"
        "esac\n",
    )


# -- TC-11 (layout.index_state_path) -----------------------------------------------------------


def test_a_store_outside_a_tree_keeps_its_state_beside_it(tmp_path: Path, repo: Path) -> None:
    store = tmp_path / "S"
    assert state_path(store / "pi", repo) == store / ".index-state.json"


def test_memsearch_dir_wins_when_the_command_declines_state_dir(tmp_path: Path, repo: Path) -> None:
    shared = tmp_path / "D"
    assert (
        state_path(tmp_path / "S" / "pi", repo, memsearch_dir=str(shared), store_command=True)
        == shared / ".index-state.json"
    )


def test_store_command_outside_a_tree_has_no_state_path(tmp_path: Path, repo: Path) -> None:
    assert state_path(tmp_path / "S" / "pi", repo, store_command=True) is None


def test_state_dir_outranks_memsearch_dir(tmp_path: Path, repo: Path) -> None:
    assert (
        state_path(
            tmp_path / "S" / "pi",
            repo,
            memsearch_dir=str(tmp_path / "Y"),
            state_dir=tmp_path / "X",
            store_command=True,
        )
        == tmp_path / "X" / ".index-state.json"
    )


def test_default_repository_state_path(repo: Path) -> None:
    assert (
        state_path(repo / ".memsearch" / "memory", repo)
        == repo / ".memsearch" / ".index-state.json"
    )


def test_relative_memsearch_dir_resolves_at_the_repository(repo: Path) -> None:
    assert (
        state_path(repo / "x" / "memory", repo, memsearch_dir="store")
        == repo / "store" / ".index-state.json"
    )


# -- TC-11 through scopes ------------------------------------------------------------------------


def test_scope_default_repository(repo: Path) -> None:
    scope = make_pimem().resolve_scope(repo / "packages" / "core")
    assert scope.index_state_path == repo / ".memsearch" / ".index-state.json"


def test_scope_command_declining_with_memsearch_dir(repo: Path, tmp_path: Path) -> None:
    script = store_script(tmp_path, tmp_path / "S" / "pi")
    scope = make_pimem(
        {"PI_MEMSEARCH_STORE_CMD": str(script), "MEMSEARCH_DIR": str(tmp_path / "D")}
    ).resolve_scope(repo)
    assert scope.memory_dir == tmp_path / "S" / "pi"
    assert scope.index_state_path == tmp_path / "D" / ".index-state.json"


def test_scope_command_declining_without_memsearch_dir(repo: Path, tmp_path: Path) -> None:
    script = store_script(tmp_path, tmp_path / "S" / "pi")
    scope = make_pimem({"PI_MEMSEARCH_STORE_CMD": str(script)}).resolve_scope(repo)
    assert scope.index_state_path is None


def test_scope_command_answering_state_dir(repo: Path, tmp_path: Path) -> None:
    script = store_script(tmp_path, tmp_path / "S" / "pi", state_dir=tmp_path / "X")
    scope = make_pimem(
        {"PI_MEMSEARCH_STORE_CMD": str(script), "MEMSEARCH_DIR": str(tmp_path / "Y")}
    ).resolve_scope(repo)
    assert scope.index_state_path == tmp_path / "X" / ".index-state.json"


# -- TC-12 -------------------------------------------------------------------------------------


def test_a_store_nested_in_a_tree_reads_the_tree_root(tmp_path: Path, repo: Path) -> None:
    memory = tmp_path / "X" / ".memsearch" / "a" / "b" / "memory"
    assert state_path(memory, repo) == tmp_path / "X" / ".memsearch" / ".index-state.json"


def test_the_first_memsearch_component_is_the_root(tmp_path: Path, repo: Path) -> None:
    memory = tmp_path / "X" / ".memsearch" / "y" / ".memsearch" / "memory"
    assert state_path(memory, repo) == tmp_path / "X" / ".memsearch" / ".index-state.json"


def test_tree_root_holds_even_with_a_store_command(tmp_path: Path, repo: Path) -> None:
    memory = tmp_path / "X" / ".memsearch" / "a" / "memory"
    assert (
        state_path(memory, repo, store_command=True)
        == tmp_path / "X" / ".memsearch" / ".index-state.json"
    )


def test_tree_root_is_found_through_a_symlink_with_a_missing_leaf(
    tmp_path: Path, repo: Path
) -> None:
    stores = tmp_path / "T" / ".memsearch" / "stores"
    stores.mkdir(parents=True)
    link = tmp_path / "S" / "link"
    link.parent.mkdir()
    link.symlink_to(stores)
    memory = link / "not-yet" / "memory"
    assert not memory.exists()
    assert (
        state_path(memory, repo, store_command=True)
        == tmp_path / "T" / ".memsearch" / ".index-state.json"
    )


def test_lexical_tree_root_wins_over_the_resolved_one(tmp_path: Path, repo: Path) -> None:
    (tmp_path / "T" / ".memsearch" / "real").mkdir(parents=True)
    (tmp_path / "A" / ".memsearch").mkdir(parents=True)
    (tmp_path / "A" / ".memsearch" / "link").symlink_to(tmp_path / "T" / ".memsearch" / "real")
    memory = tmp_path / "A" / ".memsearch" / "link" / "memory"
    assert state_path(memory, repo) == tmp_path / "A" / ".memsearch" / ".index-state.json"


def test_scope_through_a_symlinked_store_reads_the_tree_root(repo: Path, tmp_path: Path) -> None:
    stores = tmp_path / "T" / ".memsearch" / "stores"
    stores.mkdir(parents=True)
    (tmp_path / "link").symlink_to(stores)
    script = store_script(tmp_path, tmp_path / "link" / "my-app" / "memory")
    scope = make_pimem({"PI_MEMSEARCH_STORE_CMD": str(script)}).resolve_scope(repo)
    assert scope.index_state_path == tmp_path / "T" / ".memsearch" / ".index-state.json"


# -- TC-13 -------------------------------------------------------------------------------------


def health_lines(repo: Path, content: str | None) -> list[str]:
    path = repo / ".memsearch" / ".index-state.json"
    if content is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    pimem = make_pimem()
    return describe_index_health(read_index_health(pimem.resolve_scope(repo)))


def state_json(**fields: object) -> str:
    return json.dumps({"schema_version": 1, **fields})


def test_health_missing_state_file(repo: Path) -> None:
    lines = health_lines(repo, None)
    assert len(lines) == 1
    assert lines[0].startswith("index: no state recorded yet")


def test_health_ok_with_last_completed_at(repo: Path) -> None:
    lines = health_lines(
        repo, state_json(status="ok", failed_files=[], last_completed_at="2026-08-14T07:00:05Z")
    )
    assert lines == ["index: ok (last indexed 2026-08-14T07:00:05Z)"]


def test_health_ok_without_last_completed_at(repo: Path) -> None:
    assert health_lines(repo, state_json(status="ok"))[0] == "index: ok"


def test_health_degraded_lists_failed_files(repo: Path) -> None:
    lines = health_lines(
        repo,
        state_json(
            status="degraded", failed_files=[{"path": "F", "error": "UnicodeDecodeError: boom"}]
        ),
    )
    assert lines == [
        "index: degraded (1 failed file(s))",
        "  failed: F (UnicodeDecodeError: boom)",
    ]


def test_health_error_with_last_error(repo: Path) -> None:
    lines = health_lines(
        repo, state_json(status="error", last_error="RuntimeError: could not open the database")
    )
    assert lines[0] == "index: error (RuntimeError: could not open the database)"


def test_health_unknown_status_is_shown_as_is(repo: Path) -> None:
    assert health_lines(repo, state_json(status="indexing"))[0] == "index: indexing"


def test_health_schema_version_2_is_unreadable_and_drifted(repo: Path) -> None:
    lines = health_lines(repo, json.dumps({"schema_version": 2, "status": "ok"}))
    assert lines[0].startswith("index: state unreadable")
    assert "drifted" in lines[0]
    assert "schema_version 2" in lines[0]


def test_health_invalid_json_is_unreadable(repo: Path) -> None:
    lines = health_lines(repo, "{not json")
    assert lines[0].startswith("index: state unreadable")
    assert "drifted" in lines[0]
    assert "JSON" in lines[0]


def test_health_state_path_that_is_a_directory_is_unreadable(repo: Path) -> None:
    (repo / ".memsearch" / ".index-state.json").mkdir(parents=True)
    lines = health_lines(repo, None)
    assert lines[0].startswith("index: state unreadable")


def test_the_index_state_path_is_configuration_and_its_health_comes_first(repo: Path) -> None:
    """Status shows how the index is doing with the health sections, and where its state file
    is with the configuration, after the scope lines."""
    path = repo / ".memsearch" / ".index-state.json"
    path.parent.mkdir(parents=True)
    path.write_text(state_json(status="ok"))
    health, where = index_status_sections(make_pimem().resolve_scope(repo))
    assert (health.name, health.lines, health.data["state_path"]) == (
        "index",
        ("index: ok",),
        str(path),
    )
    assert (where.name, where.lines, where.data) == (
        "index_state",
        (f"index state: {path}",),
        {"path": str(path)},
    )
    assert health.rank < CONFIGURATION_RANK <= where.rank


def test_read_index_health_keeps_the_parsed_state(repo: Path) -> None:
    path = repo / ".memsearch" / ".index-state.json"
    path.parent.mkdir(parents=True)
    scope = make_pimem().resolve_scope(repo)
    path.write_text(state_json(status="ok", collection=scope.collection))
    health = read_index_health(scope)
    assert health.state_path == path
    assert health.unreadable is None
    assert health.other_collection is None
    assert health.state is not None
    assert health.state.collection == scope.collection


def test_a_state_file_of_another_collection_is_not_this_index_s_health(
    repo: Path, tmp_path: Path
) -> None:
    """A project copied with its ``.memsearch`` directory carries the original's state file,
    which names the original's collection: status says this one is not indexed yet, never
    ``ok`` beside 0 chunks."""
    original = make_pimem().resolve_scope(repo)
    path = repo / ".memsearch" / ".index-state.json"
    path.parent.mkdir(parents=True)
    (repo / ".memsearch" / "memory").mkdir()
    (repo / ".memsearch" / "memory" / "2026-08-13.md").write_text("### 22:41\n- a fact\n")
    path.write_text(
        state_json(status="ok", collection=original.collection, last_completed_at="2026-08-14")
    )
    copy = tmp_path / "copy"
    shutil.copytree(repo, copy)
    scope = make_pimem().resolve_scope(copy)
    assert scope.collection != original.collection
    health = read_index_health(scope)
    assert health == IndexHealth(
        state_path=copy / ".memsearch" / ".index-state.json",
        other_collection=original.collection,
    )
    section = index_status_sections(scope)[0]
    assert section.lines == (
        "index: not indexed yet (the state file here was written for another collection, "
        f"{original.collection}, as a copied store carries it; the next index run writes "
        "this one's)",
    )
    assert (section.data["status"], section.data["other_collection"]) == (
        None,
        original.collection,
    )
    # The original still reads its own state; a state naming no collection is taken as is.
    assert describe_index_health(read_index_health(original)) == [
        "index: ok (last indexed 2026-08-14)"
    ]
    path.write_text(state_json(status="ok"))
    assert health_lines(repo, None) == ["index: ok"]


def test_health_without_a_state_path_says_none_will_be_written(tmp_path: Path) -> None:
    scope = Scope(
        repository_dir=tmp_path,
        scope_dir=tmp_path / "S",
        memory_dir=tmp_path / "S" / "pi",
        collection="ms_s_12345678",
        index_state_path=None,
        store_command="/bin/true",
    )
    health = read_index_health(scope)
    assert health == IndexHealth(state_path=None)
    lines = describe_index_health(health)
    assert len(lines) == 1
    assert lines[0].startswith("index: ")
    assert "state" in lines[0]
    assert "state-dir" in lines[0]


# -- parse_index_state ---------------------------------------------------------------------------


def test_parse_a_full_state() -> None:
    state = parse_index_state(
        state_json(
            status="degraded",
            failed_files=[{"path": "a.md", "error": "E"}],
            last_completed_at="2026-08-14T07:00:05Z",
            last_error="boom",
            collection="ms_x_12345678",
            unknown_field=[1, 2],
        )
    )
    assert state.status == "degraded"
    assert [(f.path, f.error) for f in state.failed_files] == [("a.md", "E")]
    assert state.last_completed_at == "2026-08-14T07:00:05Z"
    assert state.last_error == "boom"
    assert state.collection == "ms_x_12345678"


def test_parse_minimal_state_defaults() -> None:
    state = parse_index_state(state_json(status="ok"))
    assert state.failed_files == ()
    assert state.last_completed_at is None
    assert state.last_error is None
    assert state.collection is None


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ("{not json", "JSON"),
        ("", "JSON"),
        ("[]", "object"),
        ('"ok"', "object"),
        (json.dumps({"status": "ok"}), "schema_version"),
        (json.dumps({"schema_version": 2, "status": "ok"}), "schema_version 2"),
        (json.dumps({"schema_version": "1", "status": "ok"}), "schema_version"),
        (json.dumps({"schema_version": True, "status": "ok"}), "schema_version"),
        (json.dumps({"schema_version": 1}), '"status"'),
        (json.dumps({"schema_version": 1, "status": 3}), '"status"'),
        (json.dumps({"schema_version": 1, "status": "ok", "failed_files": {}}), '"failed_files"'),
        (
            json.dumps({"schema_version": 1, "status": "ok", "failed_files": [{"path": "a"}]}),
            "failed_files[0]",
        ),
        (
            json.dumps(
                {
                    "schema_version": 1,
                    "status": "ok",
                    "failed_files": [{"path": "a", "error": "e"}, "b"],
                }
            ),
            "failed_files[1]",
        ),
        (json.dumps({"schema_version": 1, "status": "ok", "last_error": 5}), '"last_error"'),
        (json.dumps({"schema_version": 1, "status": "ok", "collection": []}), '"collection"'),
        (
            json.dumps({"schema_version": 1, "status": "ok", "last_completed_at": 1}),
            '"last_completed_at"',
        ),
    ],
)
def test_parse_drift_errors(text: str, detail: str) -> None:
    with pytest.raises(IndexStateError) as caught:
        parse_index_state(text)
    assert "drifted" in str(caught.value)
    assert detail in str(caught.value)


def test_nesting_too_deep_for_the_parser_is_drifted_not_a_crash() -> None:
    # Found by the reliability suite: json.loads raises RecursionError, not ValueError, here.
    with pytest.raises(IndexStateError) as caught:
        parse_index_state("[" * 100_000)
    assert "not valid JSON" in str(caught.value)
