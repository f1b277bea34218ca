""".gitattributes for a store in git: one line, written at the first change, never by a read,
never twice, never over someone's decision, never for a store that lives elsewhere."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime
from pathlib import Path

import pytest

from pimem_core import Pimem
from pimem_core.gitrepo import ensure_attribute, locate_store, merge_attribute, work_tree_of
from pimem_core.runtime.status import status_sections
from pimem_core.types import Anchor, Entry, StatusSection

from conftest import make_pimem, run_cli, write_script

LINE = ".memsearch/memory/????-??-??.md merge=union\n"
WRITE_ANCHOR = ("--session", "s1", "--turn", "t1", "--transcript", "/t/s1.jsonl")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A real git repository (``git init``), with a subdirectory to work in."""
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    git(root, "init", "--quiet")
    return root


def write(pimem: Pimem, cwd: Path, turn: str = "t1") -> Path:
    entry = Entry(
        anchor=Anchor(session="s1", turn=turn, transcript="/t/s1.jsonl"),
        content="- chose Redis for the hot cache",
        written_at=datetime(2026, 8, 13, 10, 0),
    )
    return pimem.append_entry(pimem.resolve_scope(cwd), entry)


def git_section(pimem: Pimem, cwd: Path) -> StatusSection:
    sections = status_sections(pimem, pimem.resolve_scope(cwd))
    return next(section for section in sections if section.name == "git")


def test_the_first_write_marks_the_day_files_merge_union(project: Path) -> None:
    write(make_pimem(), project / "src")
    assert (project / ".gitattributes").read_text() == LINE
    # git reads it as meant: a day file merges by union, a note beside it does not.
    day = ".memsearch/memory/2026-08-13.md"
    assert git(project, "check-attr", "merge", "--", day, ".memsearch/memory/notes.md") == (
        f"{day}: merge: union\n.memsearch/memory/notes.md: merge: unspecified\n"
    )


def test_sessions_and_writes_add_it_once(project: Path) -> None:
    first = make_pimem()
    write(first, project, "t1")
    write(first, project, "t2")
    (project / ".gitattributes").write_text("")  # someone removed it: the next session adds it
    write(make_pimem(), project, "t3")
    write(make_pimem(), project, "t4")
    assert (project / ".gitattributes").read_text() == LINE


def test_memsearchs_index_state_stays_on_this_machine(project: Path) -> None:
    (project / ".gitignore").write_text("node_modules/\n")
    write(make_pimem(), project / "src", "t1")
    write(make_pimem(), project, "t2")  # a second process: the line is not added again
    assert (project / ".gitignore").read_text() == "node_modules/\n/.memsearch/.index-state.json\n"
    (project / ".memsearch" / ".index-state.json").write_text("{}")
    assert git(project, "status", "--porcelain", "--untracked-files=all", ".memsearch") == (
        "?? .memsearch/memory/2026-08-13.md\n"
    )


def test_other_lines_stay_byte_for_byte(project: Path) -> None:
    before = "# assets\r\n*.png binary\r\nCHANGELOG.md merge=union"  # no final newline, CRLF
    (project / ".gitattributes").write_bytes(before.encode())
    write(make_pimem(), project)
    after = (project / ".gitattributes").read_bytes().decode()
    assert after == before + "\r\n" + LINE.replace("\n", "\r\n")


@pytest.mark.parametrize("said", ["merge=binary", "-merge", "merge=pimem-day-files"])
def test_a_line_that_already_says_how_to_merge_them_is_left_alone(project: Path, said: str) -> None:
    before = f"*.png binary\n.memsearch/memory/????-??-??.md {said}\n"
    (project / ".gitattributes").write_text(before)
    write(make_pimem(), project)
    assert (project / ".gitattributes").read_text() == before


def test_off_by_setting(project: Path) -> None:
    pimem = make_pimem({"PIMEM_GIT_UNION_MERGE": "off"})
    write(pimem, project)
    assert not (project / ".gitattributes").exists()
    assert git_section(pimem, project).lines[1] == (
        "  .gitattributes: no line (PIMEM_GIT_UNION_MERGE=off)"
    )


def test_a_bad_setting_stops_pimem_with_its_message(project: Path) -> None:
    result = run_cli("write", "- x", "--session", "s", "--turn", "t", "--transcript", "/t",
                     "--cwd", str(project), env={"PIMEM_GIT_UNION_MERGE": "maybe"})  # fmt: skip
    assert result.code == 1
    assert "PIMEM_GIT_UNION_MERGE" in result.stderr


def test_nothing_is_written_outside_a_git_work_tree(tmp_path: Path) -> None:
    directory = tmp_path / "plain"
    directory.mkdir()
    pimem = make_pimem()
    write(pimem, directory)
    assert not (directory / ".gitattributes").exists()
    assert git_section(pimem, directory).lines == (
        "git: the project is not in a git work tree; pimem leaves .gitattributes alone",
    )


def test_nothing_is_written_when_a_store_command_puts_the_store_elsewhere(
    project: Path, tmp_path: Path
) -> None:
    central = tmp_path / "central" / "my-app"
    script = write_script(
        tmp_path / "store-cmd",
        f'case "$1" in\n  memory-dir) echo {central / "memory"} ;;\n'
        "  collection) echo ms_my_app_62c1f414 ;;\n  *) exit 0 ;;\nesac\n",
    )
    pimem = make_pimem({"PI_MEMSEARCH_STORE_CMD": str(script)})
    assert write(pimem, project).parent == central / "memory"
    assert not (project / ".gitattributes").exists()
    assert not (central / ".gitattributes").exists()
    assert "outside the repository" in git_section(pimem, project).lines[0]
    assert "store command" in git_section(pimem, project).lines[0]


def test_a_store_moved_inside_the_repository_gets_its_own_pattern(project: Path) -> None:
    write(make_pimem({"MEMSEARCH_DIR": "team/memsearch"}), project)
    assert (project / ".gitattributes").read_text() == (
        "team/memsearch/memory/????-??-??.md merge=union\n"
    )


def test_nothing_is_written_when_git_ignores_the_store(project: Path) -> None:
    (project / ".gitignore").write_text(".memsearch/\n")
    pimem = make_pimem()
    write(pimem, project)
    assert not (project / ".gitattributes").exists()
    assert git_section(pimem, project).lines == (
        "git: git ignores the daily memory files: nothing of them is merged",
    )


def test_nothing_is_written_where_git_cannot_tell(repo: Path) -> None:
    # The suite's `repo` has an empty .git directory: not a repository git can read.
    write(make_pimem(), repo)
    assert not (repo / ".gitattributes").exists()


def test_a_linked_worktree_gets_it_at_its_own_top(project: Path, tmp_path: Path) -> None:
    git(project, "commit", "--quiet", "--allow-empty", "-m", "start")
    linked = tmp_path / "linked"
    git(project, "worktree", "add", "--quiet", str(linked))
    assert (linked / ".git").is_file()
    write(make_pimem(), linked)
    assert (linked / ".gitattributes").read_text() == LINE
    assert not (project / ".gitattributes").exists()


def test_reads_never_write_it(project: Path) -> None:
    pimem = make_pimem()
    scope = pimem.resolve_scope(project)
    (scope.memory_dir).mkdir(parents=True)
    (scope.memory_dir / "2026-08-13.md").write_text("### 10:00\n- x\n")
    status_sections(pimem, scope)
    pimem.build_snapshot(scope)
    pimem.read_day(scope, datetime(2026, 8, 13).date())
    assert not (project / ".gitattributes").exists()


def test_status_says_how_git_merges_them(project: Path) -> None:
    pimem = make_pimem()
    assert git_section(pimem, project).lines == (
        "git: daily memory files (.memsearch/memory/????-??-??.md) merge by git's text merge: "
        "two sides that write on the same day conflict",
        "  .gitattributes: no line yet; the next write adds "
        "`.memsearch/memory/????-??-??.md merge=union`",
        "  merges that keep forgets and entries of the same minute apart: "
        "`pimem git merge-driver` (once per clone)",
    )
    write(pimem, project)
    section = git_section(pimem, project)
    assert section.lines[:3] == (
        "git: daily memory files (.memsearch/memory/????-??-??.md) merge by git's union merge",
        "  .gitattributes: `.memsearch/memory/????-??-??.md merge=union` (added by pimem on "
        "2026-08-13 22:41)",
        "  .gitignore: `/.memsearch/.index-state.json` (added by pimem on 2026-08-13 22:41)",
    )
    assert section.data["merge"] == "union"
    result = run_cli("git", "merge-driver", "--cwd", str(project))
    assert result.code == 0, result.stderr
    section = git_section(pimem, project)
    assert section.lines == (
        "git: daily memory files (.memsearch/memory/????-??-??.md) merge by pimem's merge "
        "driver, block by block (defined in this clone)",
        "  .gitattributes: `.memsearch/memory/????-??-??.md merge=union` (added by pimem on "
        "2026-08-13 22:41)",
        "  .gitignore: `/.memsearch/.index-state.json` (added by pimem on 2026-08-13 22:41)",
    )
    assert section.data["driver_defined"] is True


def test_the_write_that_adds_the_lines_says_so_once(project: Path) -> None:
    """The first write in a repository says what pimem added to its files and why; the
    writes after it say nothing more, in this process or another."""
    first = run_cli("write", "- one", *WRITE_ANCHOR, "--cwd", str(project))
    assert first.code == 0, first.stderr
    assert first.stdout.splitlines()[1:] == [
        "pimem added `.memsearch/memory/????-??-??.md merge=union` to .gitattributes, so that "
        "git keeps both sides' entries when teammates' daily memory files merge, and "
        "`/.memsearch/.index-state.json` to .gitignore, since that file describes this "
        "machine's index only. Commit them with the memory files."
    ]
    again = run_cli("write", "- two", *WRITE_ANCHOR, "--cwd", str(project), "--json")
    assert json.loads(again.stdout)["notices"] == []
    # Someone had ignored the state already: only the attribute line is news.
    other = project.parent / "other"
    git(other.parent, "init", "--quiet", str(other))
    (other / ".gitignore").write_text("/.memsearch/.index-state.json\n")
    notices = json.loads(
        run_cli("write", "- three", *WRITE_ANCHOR, "--cwd", str(other), "--json").stdout
    )["notices"]
    assert notices == [
        "pimem added `.memsearch/memory/????-??-??.md merge=union` to .gitattributes, so that "
        "git keeps both sides' entries when teammates' daily memory files merge. Commit it with "
        "the memory files."
    ]


def test_the_merge_driver_is_registered_once_in_the_clone_only(project: Path) -> None:
    for _ in range(2):
        result = run_cli("git", "merge-driver", "--cwd", str(project / "src"), "--json")
        assert result.code == 0, result.stderr
    attributes = project / ".git" / "info" / "attributes"
    assert attributes.read_text() == ".memsearch/memory/????-??-??.md merge=pimem-day-files\n"
    driver = git(project, "config", "--get", "merge.pimem-day-files.driver")
    assert " -m pimem_core git merge-day-files %O %A %B || git merge-file %A %O %B" in driver
    assert not (project / ".gitattributes").exists()  # shared files are not the command's


def test_the_merge_driver_is_not_registered_outside_git(tmp_path: Path) -> None:
    result = run_cli("git", "merge-driver", "--cwd", str(tmp_path))
    assert result.code == 1
    assert "nothing to register: the project is not in a git work tree" in result.stderr


def test_the_repository_is_found_without_git(project: Path, tmp_path: Path) -> None:
    assert work_tree_of(project / "src" / "not" / "there") == project
    assert work_tree_of(tmp_path) is None
    scope = make_pimem().resolve_scope(project / "src")
    assert locate_store(scope).pattern == ".memsearch/memory/????-??-??.md"


def test_what_a_line_says_about_merging() -> None:
    text = "# c\n*.md text\nmem/????-??-??.md text merge=union\nmem/????-??-??.md -merge\n"
    assert merge_attribute(text, "mem/????-??-??.md") == "-merge"
    assert merge_attribute(text, "*.md") is None
    assert merge_attribute("", "*.md") is None


def test_ensure_appends_only_when_needed(tmp_path: Path) -> None:
    file = tmp_path / "info" / "attributes"
    assert ensure_attribute(file, "a/*.md", "merge=union")
    assert not ensure_attribute(file, "a/*.md", "merge=other")
    assert file.read_text() == "a/*.md merge=union\n"
