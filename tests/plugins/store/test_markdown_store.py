"""The markdown store: exact entry bytes, session headings, anchors and content validation."""

from __future__ import annotations

import os
from datetime import date, datetime
from pathlib import Path

import pytest

from pimem_core import Pimem
from pimem_core.errors import StoreError
from pimem_core.types import Anchor, DayAddress, Entry, Scope

from conftest import make_pimem, run_cli

SESSION = "3f2c9b1e-8d4a-4f6b-9c0d-1a2b3c4d5e6f"
ANCHOR = f"<!-- session:{SESSION} turn:ab12cd34 transcript:T -->"
FIRST = "- decided to adopt TDD for the write path"
FIRST_BYTES = f"\n## Session 22:41\n\n### 22:41\n{ANCHOR}\n{FIRST}\n\n"
AT_2241 = datetime(2026, 8, 13, 22, 41)


def entry(
    content: str,
    *,
    session: str = SESSION,
    turn: str = "ab12cd34",
    at: datetime = AT_2241,
    transcript: str = "T",
) -> Entry:
    return Entry(
        anchor=Anchor(session=session, turn=turn, transcript=transcript),
        content=content,
        written_at=at,
    )


def day_file(repo: Path, day: str = "2026-08-13") -> Path:
    return repo / ".memsearch" / "memory" / f"{day}.md"


def scope_of(pimem: Pimem, repo: Path) -> Scope:
    return pimem.resolve_scope(repo / "packages" / "core")


# -- TC-14 -------------------------------------------------------------------------------------


def test_first_entry_bytes_through_the_api(repo: Path) -> None:
    pimem = make_pimem()
    scope = scope_of(pimem, repo)
    file = pimem.append_entry(
        scope,
        Entry(
            anchor=Anchor(session=SESSION, turn="ab12cd34", transcript="T"),
            content=FIRST,
            written_at=pimem.settings.now(),
        ),
    )
    assert file == day_file(repo)
    assert file.read_bytes() == FIRST_BYTES.encode()


def test_first_entry_bytes_through_the_cli(repo: Path) -> None:
    result = run_cli(
        "write",
        FIRST,
        "--session",
        SESSION,
        "--turn",
        "ab12cd34",
        "--transcript",
        "T",
        "--cwd",
        str(repo / "packages" / "core"),
    )
    assert result.code == 0, result.stderr
    assert str(day_file(repo)) in result.stdout
    assert day_file(repo).read_bytes() == FIRST_BYTES.encode()


def test_cli_reads_content_from_stdin(repo: Path) -> None:
    result = run_cli(
        "write",
        "-",
        "--session",
        SESSION,
        "--turn",
        "ab12cd34",
        "--transcript",
        "T",
        "--cwd",
        str(repo),
        stdin=FIRST + "\n",
    )
    assert result.code == 0, result.stderr
    assert day_file(repo).read_bytes() == FIRST_BYTES.encode()


def test_no_title_line_is_written(repo: Path) -> None:
    pimem = make_pimem()
    pimem.append_entry(scope_of(pimem, repo), entry(FIRST))
    assert not day_file(repo).read_text().startswith("# ")


# -- TC-15 -------------------------------------------------------------------------------------


def session_headings(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.startswith("## Session ")]


def test_same_session_twice_has_one_heading(repo: Path) -> None:
    pimem = make_pimem()
    scope = scope_of(pimem, repo)
    pimem.append_entry(scope, entry("- first entry"))
    pimem.append_entry(
        scope, entry("- second entry", turn="cd34ef56", at=datetime(2026, 8, 13, 22, 55))
    )
    text = day_file(repo).read_text()
    assert session_headings(text) == ["## Session 22:41"]
    assert text.endswith(
        f"### 22:55\n<!-- session:{SESSION} turn:cd34ef56 transcript:T -->\n- second entry\n\n"
    )


def test_second_session_gets_its_own_heading(repo: Path) -> None:
    pimem = make_pimem()
    scope = scope_of(pimem, repo)
    pimem.append_entry(scope, entry("- first entry"))
    pimem.append_entry(
        scope, entry("- other session", session="s2", at=datetime(2026, 8, 13, 23, 10))
    )
    assert session_headings(day_file(repo).read_text()) == [
        "## Session 22:41",
        "## Session 23:10",
    ]


def test_a_new_day_file_opens_with_a_heading(repo: Path) -> None:
    pimem = make_pimem()
    scope = scope_of(pimem, repo)
    pimem.append_entry(scope, entry("- late", at=datetime(2026, 8, 13, 23, 59)))
    file = pimem.append_entry(scope, entry("- next day", at=datetime(2026, 8, 14, 23, 59)))
    assert file == day_file(repo, "2026-08-14")
    assert file.read_text().startswith("\n## Session 23:59\n")
    assert session_headings(day_file(repo).read_text()) == ["## Session 23:59"]


def test_new_day_through_the_cli(repo: Path) -> None:
    for clock in ("2026-08-13T23:59", "2026-08-14T23:59"):
        result = run_cli(
            "write",
            "- entry",
            "--session",
            SESSION,
            "--turn",
            "t1",
            "--transcript",
            "T",
            "--cwd",
            str(repo),
            env={"PIMEM_NOW": clock},
        )
        assert result.code == 0, result.stderr
    assert day_file(repo, "2026-08-14").read_text().startswith("\n## Session 23:59\n")


# -- TC-16 -------------------------------------------------------------------------------------


def test_a_fresh_process_sees_its_session_in_the_file(repo: Path) -> None:
    make_pimem().append_entry(scope_of(make_pimem(), repo), entry("- first"))
    pimem = make_pimem()  # new process state
    pimem.append_entry(scope_of(pimem, repo), entry("- second", at=datetime(2026, 8, 13, 22, 50)))
    text = day_file(repo).read_text()
    assert session_headings(text) == ["## Session 22:41"]
    assert text.endswith(
        f"### 22:50\n<!-- session:{SESSION} turn:ab12cd34 transcript:T -->\n- second\n\n"
    )


def test_a_session_id_that_only_prefixes_another_gets_a_heading(repo: Path) -> None:
    pimem = make_pimem()
    pimem.append_entry(scope_of(pimem, repo), entry("- long id", session="abc-longer"))
    fresh = make_pimem()
    fresh.append_entry(scope_of(fresh, repo), entry("- short id", session="abc"))
    assert len(session_headings(day_file(repo).read_text())) == 2


def test_another_agents_append_does_not_cause_a_second_heading(repo: Path) -> None:
    pimem = make_pimem()
    scope = scope_of(pimem, repo)
    pimem.append_entry(scope, entry("- mine"))
    with day_file(repo).open("a") as other:
        other.write(
            "\n## Session 22:45\n\n### 22:45\n"
            "<!-- session:other turn:o1 transcript:/o.jsonl -->\n- theirs\n\n"
        )
    pimem.append_entry(scope, entry("- mine again", at=datetime(2026, 8, 13, 22, 50)))
    text = day_file(repo).read_text()
    assert session_headings(text) == ["## Session 22:41", "## Session 22:45"]
    assert text.endswith(f"### 22:50\n{ANCHOR}\n- mine again\n\n")


def test_heading_decision_is_not_reread_from_the_file(repo: Path) -> None:
    pimem = make_pimem()
    scope = scope_of(pimem, repo)
    pimem.append_entry(scope, entry("- first"))
    day_file(repo).write_text("")  # the file was emptied behind this session's back
    pimem.append_entry(scope, entry("- second", at=datetime(2026, 8, 13, 22, 50)))
    assert not day_file(repo).read_text().startswith("\n## Session")


def test_memory_dir_that_is_a_file_fails_naming_the_file(repo: Path) -> None:
    pimem = make_pimem()
    scope = scope_of(pimem, repo)
    (repo / ".memsearch").mkdir()
    (repo / ".memsearch" / "memory").write_text("not a directory")
    with pytest.raises(StoreError) as caught:
        pimem.append_entry(scope, entry(FIRST))
    assert str(day_file(repo)) in str(caught.value)
    (repo / ".memsearch" / "memory").unlink()
    pimem.append_entry(scope, entry(FIRST))
    assert day_file(repo).read_bytes() == FIRST_BYTES.encode()


def test_a_failed_append_after_the_first_read_still_writes_the_heading_on_retry(
    repo: Path, tmp_path: Path
) -> None:
    # The day file is a dangling symlink (within the store): reading finds nothing, the append
    # then fails.
    memory = repo / ".memsearch" / "memory"
    target_dir = memory / "elsewhere"
    memory.mkdir(parents=True)
    day_file(repo).symlink_to(target_dir / "2026-08-13.md")
    pimem = make_pimem()
    scope = scope_of(pimem, repo)
    with pytest.raises(StoreError) as caught:
        pimem.append_entry(scope, entry(FIRST))
    assert str(day_file(repo)) in str(caught.value)
    target_dir.mkdir()
    pimem.append_entry(scope, entry(FIRST))
    assert day_file(repo).read_bytes() == FIRST_BYTES.encode()


def test_a_day_file_linked_out_of_the_store_is_never_written_or_read(
    repo: Path, tmp_path: Path
) -> None:
    # Found by the reliability suite: a committed symlink turned appends into writes elsewhere.
    outside = tmp_path / "bashrc"
    outside.write_text("### 22:41\nexport PATH=/usr/bin\n")
    memory = repo / ".memsearch" / "memory"
    memory.mkdir(parents=True)
    day_file(repo).symlink_to(outside)
    pimem = make_pimem()
    scope = scope_of(pimem, repo)
    with pytest.raises(StoreError, match="outside the memory store"):
        pimem.append_entry(scope, entry(FIRST))
    with pytest.raises(StoreError, match="outside the memory store"):
        pimem.forget_entry(scope, DayAddress.parse("2026-08-13", "22:41"))
    assert outside.read_text() == "### 22:41\nexport PATH=/usr/bin\n"
    assert day_file(repo).is_symlink()


def test_a_short_append_is_taken_back(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Found by the reliability suite: a disk filling up mid-write left half an entry, which
    # swallowed the heading of the next one.
    pimem = make_pimem()
    scope = scope_of(pimem, repo)
    pimem.append_entry(scope, entry(FIRST))
    before = day_file(repo).read_bytes()
    real_write = os.write

    def half(fd: int, data: bytes) -> int:
        return real_write(fd, bytes(data)[: len(data) // 2])

    monkeypatch.setattr(os, "write", half)
    with pytest.raises(StoreError, match="is the disk full"):
        pimem.append_entry(scope, entry("- second", at=datetime(2026, 8, 13, 22, 50)))
    assert day_file(repo).read_bytes() == before


# -- TC-17 and anchors ---------------------------------------------------------------------------


def test_empty_transcript_is_refused() -> None:
    with pytest.raises(StoreError, match="transcript") as caught:
        Anchor(session=SESSION, turn="ab12cd34", transcript="")
    assert "anchor" in str(caught.value)


def test_blank_transcript_is_refused() -> None:
    with pytest.raises(StoreError, match="transcript"):
        Anchor(session=SESSION, turn="ab12cd34", transcript="   ")


def test_empty_turn_is_refused() -> None:
    with pytest.raises(StoreError, match="turn") as caught:
        Anchor(session=SESSION, turn="", transcript="T")
    assert "anchor" in str(caught.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [("session", "a b"), ("turn", "x-->y"), ("transcript", "/t -->"), ("transcript", "a\nb")],
)
def test_anchor_fields_that_would_break_the_comment_are_refused(field: str, value: str) -> None:
    fields = {"session": SESSION, "turn": "ab12cd34", "transcript": "T", field: value}
    with pytest.raises(StoreError, match=field):
        Anchor(**fields)


def test_transcript_path_with_spaces_is_kept(repo: Path) -> None:
    pimem = make_pimem()
    pimem.append_entry(scope_of(pimem, repo), entry(FIRST, transcript="/home/a b/t.jsonl"))
    assert "transcript:/home/a b/t.jsonl -->" in day_file(repo).read_text()


@pytest.mark.parametrize("flag", ["--turn", "--transcript"])
def test_cli_refuses_an_unanchored_write_and_creates_no_file(repo: Path, flag: str) -> None:
    args = {"--session": SESSION, "--turn": "ab12cd34", "--transcript": "T", flag: ""}
    result = run_cli(
        "write", FIRST, *(part for pair in args.items() for part in pair), "--cwd", str(repo)
    )
    assert result.code == 1
    assert result.stderr.startswith("pimem: error:")
    assert "anchor" in result.stderr
    assert not (repo / ".memsearch").exists()


# -- content validation ------------------------------------------------------------------------


@pytest.mark.parametrize("content", ["", "   ", "\n\n\t\n"])
def test_blank_content_is_refused(content: str) -> None:
    with pytest.raises(StoreError, match="content"):
        entry(content)


@pytest.mark.parametrize(
    "content",
    ["## Decisions\n- a", "- a\n### 10:00\n- b", "- a\n# Title", "- a\n###\tx"],
)
def test_heading_inside_content_is_refused(content: str) -> None:
    with pytest.raises(StoreError, match="heading"):
        entry(content)


def test_cli_refuses_a_heading_and_creates_no_file(repo: Path) -> None:
    result = run_cli(
        "write",
        "## Decisions\n- a",
        "--session",
        SESSION,
        "--turn",
        "t1",
        "--transcript",
        "T",
        "--cwd",
        str(repo),
    )
    assert result.code == 1
    assert "heading" in result.stderr
    assert not (repo / ".memsearch").exists()


@pytest.mark.parametrize("content", ["#### Details\n- a", "- #hashtag", "-  ## not a heading"])
def test_deeper_headings_and_inline_hashes_are_allowed(content: str) -> None:
    assert entry(content).content == content


def test_trailing_whitespace_is_normalised(repo: Path) -> None:
    pimem = make_pimem()
    pimem.append_entry(scope_of(pimem, repo), entry(FIRST + "  \n\n\n\t"))
    assert day_file(repo).read_bytes() == FIRST_BYTES.encode()


def test_leading_and_inner_blank_lines_are_kept(repo: Path) -> None:
    pimem = make_pimem()
    pimem.append_entry(scope_of(pimem, repo), entry("- a\n\n- b"))
    assert day_file(repo).read_text().endswith(f"{ANCHOR}\n- a\n\n- b\n\n")


# -- MEMSEARCH_DIR routing and read_day ----------------------------------------------------------


def test_memsearch_dir_routes_the_write(repo: Path, tmp_path: Path) -> None:
    shared = tmp_path / "shared" / "memsearch"
    pimem = make_pimem({"MEMSEARCH_DIR": str(shared)})
    file = pimem.append_entry(scope_of(pimem, repo), entry(FIRST))
    assert file == shared / "memory" / "2026-08-13.md"
    assert file.read_bytes() == FIRST_BYTES.encode()
    assert not (repo / ".memsearch").exists()


def test_append_creates_the_store_directory(repo: Path) -> None:
    pimem = make_pimem()
    assert not (repo / ".memsearch").exists()
    pimem.append_entry(scope_of(pimem, repo), entry(FIRST))
    assert (repo / ".memsearch" / "memory").is_dir()


def test_append_leaves_the_existing_bytes_alone(repo: Path) -> None:
    day_file(repo).parent.mkdir(parents=True)
    day_file(repo).write_bytes(b"# 2026-08-13\n\nhand-written")
    pimem = make_pimem()
    pimem.append_entry(scope_of(pimem, repo), entry(FIRST))
    assert day_file(repo).read_bytes() == b"# 2026-08-13\n\nhand-written" + FIRST_BYTES.encode()


def test_read_day_returns_the_file_text(repo: Path) -> None:
    pimem = make_pimem()
    scope = scope_of(pimem, repo)
    pimem.append_entry(scope, entry(FIRST))
    assert pimem.read_day(scope, date(2026, 8, 13)) == FIRST_BYTES


def test_read_day_without_a_file_is_none(repo: Path) -> None:
    pimem = make_pimem()
    assert pimem.read_day(scope_of(pimem, repo), date(2026, 8, 12)) is None


def test_read_day_of_an_empty_file_is_none(repo: Path) -> None:
    day_file(repo).parent.mkdir(parents=True)
    day_file(repo).write_text("")
    pimem = make_pimem()
    assert pimem.read_day(scope_of(pimem, repo), date(2026, 8, 13)) is None


def test_read_day_of_non_utf8_bytes_raises(repo: Path) -> None:
    day_file(repo).parent.mkdir(parents=True)
    day_file(repo).write_bytes(b"\xff\xfe")
    pimem = make_pimem()
    with pytest.raises(StoreError, match=str(day_file(repo))):
        pimem.read_day(scope_of(pimem, repo), date(2026, 8, 13))


def test_append_is_one_write_with_o_append(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[tuple[int, bytes]] = []
    real_open, real_write = os.open, os.write
    flags: list[int] = []

    def spy_open(
        path: str | bytes | os.PathLike[str] | os.PathLike[bytes], flag: int, *args: int
    ) -> int:
        fd = real_open(path, flag, *args)
        if str(path).endswith("2026-08-13.md"):
            flags.append(flag)
            writes.append((fd, b""))
        return fd

    def spy_write(fd: int, data: bytes) -> int:
        if writes and fd == writes[-1][0]:
            writes.append((fd, bytes(data)))
        return real_write(fd, data)

    monkeypatch.setattr(os, "open", spy_open)
    monkeypatch.setattr(os, "write", spy_write)
    pimem = make_pimem()
    pimem.append_entry(scope_of(pimem, repo), entry(FIRST))
    monkeypatch.undo()
    assert len(flags) == 1
    assert flags[0] & os.O_APPEND
    assert [data for _, data in writes[1:]] == [FIRST_BYTES.encode()]


def test_a_store_pimem_may_not_look_into_is_an_error_not_a_crash(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by the reliability suite, as a user who does not own the store: stat() raised
    # PermissionError straight through forget (and through the symlink check of write).
    pimem = make_pimem()
    scope = scope_of(pimem, repo)
    pimem.append_entry(scope, entry(FIRST))

    def denied(self: Path) -> bool:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "is_file", denied)
    monkeypatch.setattr(Path, "is_symlink", denied)
    with pytest.raises(StoreError, match=r"cannot read the daily memory file .*Permission denied"):
        pimem.forget_entry(scope, DayAddress.parse("2026-08-13", "22:41"))
    pimem.append_entry(scope, entry("- second", at=datetime(2026, 8, 13, 22, 50)))
