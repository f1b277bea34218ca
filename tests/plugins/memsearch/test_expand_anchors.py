"""L2 shows an anchor written on another machine without that machine's absolute paths: the
transcript's file name and "written elsewhere". pimem's own form, Claude Code's (its ``turn:``
may be empty), Codex's ``rollout:`` and OpenCode's ``db:`` alike; the JSON keeps the paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from pimem_core.render import render_section, section_to_json, shown_transcript
from pimem_core.testing import CliResult, InMemoryIndexPlugin, RunPimem, TempProject, read_hits
from pimem_core.types import Anchor, Section

DAY_FILE = "/home/user/repo/.memsearch/memory/2026-08-13.md"
ALICE = "/home/alice/.claude/projects/-home-alice-web/5b1d0c7e-9f2a.jsonl"
BULLETS = "- shifts that overlap for one nurse are refused by the roster service"


def section(anchor_line: str, anchor: Anchor | None = None) -> Section:
    return Section(
        chunk_hash="0123456789abcdef",
        source=DAY_FILE,
        heading="22:41",
        start_line=4,
        end_line=6,
        content=f"### 22:41\n{anchor_line}\n{BULLETS}",
        anchor=anchor,
    )


def test_a_transcript_of_another_machine_is_shown_by_its_file_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    here = tmp_path / "me" / ".pi" / "s.jsonl"
    here.parent.mkdir(parents=True)
    here.touch()
    assert shown_transcript(ALICE) == "5b1d0c7e-9f2a.jsonl (written elsewhere)"
    # On this machine, or under this home though gone, it is this user's: shown as ever.
    assert shown_transcript(str(here)) == "~/.pi/s.jsonl"
    assert shown_transcript(str(tmp_path / "me" / "gone.jsonl")) == "~/gone.jsonl"
    assert shown_transcript(ALICE, here=True) == ALICE
    assert shown_transcript("relative/s.jsonl") == "relative/s.jsonl"


def test_claude_codes_anchor_with_an_empty_turn_is_shown_without_its_path() -> None:
    """memsearch's Claude Code plugin writes ``turn:`` with nothing after it before a session's
    first turn id is known: pimem does not read it as its own anchor, and shows its fields."""
    comment = f"<!-- session:5b1d0c7e turn: transcript:{ALICE} -->"
    text = render_section(section(comment))
    assert text == (
        f"{DAY_FILE}:4-6 | 22:41\n\n{BULLETS}\n\n"
        "session: 5b1d0c7e\ntranscript: 5b1d0c7e-9f2a.jsonl (written elsewhere)"
    )
    assert "/home/alice" not in text
    assert "<!--" not in text


def test_codex_and_opencode_anchors_are_shown_field_by_field() -> None:
    rollout = "/home/bob/.codex/sessions/2026/08/13/rollout-2026-08-13T22-41-07-abc.jsonl"
    text = render_section(section(f"<!-- session:abc rollout:{rollout} -->"))
    assert text.endswith(
        "\n\nsession: abc\nrollout: rollout-2026-08-13T22-41-07-abc.jsonl (written elsewhere)"
    )
    db = "/home/carol/.local/share/opencode/opencode.db"
    text = render_section(section(f"<!-- session:ses_42 db:{db} -->"))
    assert text.endswith("\n\nsession: ses_42\ndb: opencode.db (written elsewhere)")


def test_pimems_own_anchor_of_another_machine_and_its_json() -> None:
    anchor = Anchor(session="s1", turn="t1", transcript=ALICE)
    shown = section(anchor.comment(), anchor)
    text = render_section(shown, transcript_here=False)
    assert text.endswith(
        "the entry above is all that was kept of it.\n"
        "session: s1 | turn: t1\ntranscript: 5b1d0c7e-9f2a.jsonl (written elsewhere)"
    )
    # Scripts get the anchor whole, and whether its transcript is here.
    data = section_to_json(shown, transcript_here=False)
    assert data["anchor"] == {"session": "s1", "turn": "t1", "transcript": ALICE}
    assert data["transcript_on_this_machine"] is False


def test_pimem_expand_of_another_agents_entry_shows_no_foreign_path(
    run_pimem: RunPimem, pimem_project: TempProject
) -> None:
    """End to end through the command line: another agent's entry, committed to the store."""
    memory = pimem_project.scope.memory_dir
    memory.mkdir(parents=True)
    (memory / "2026-08-13.md").write_text(
        "## Session 22:41\n\n"
        f"### 22:41\n<!-- session:5b1d0c7e turn: transcript:{ALICE} -->\n{BULLETS}\n"
    )
    index = InMemoryIndexPlugin()

    def run(*args: str) -> CliResult:
        return run_pimem(*args, plugins=[index], installed=True, cwd=pimem_project.directory)

    assert run("index").exit_code == 0
    (hit,) = read_hits(run("search", "overlapping shifts").stdout)
    expanded = run("expand", hit.chunk_hash)
    assert expanded.exit_code == 0, expanded.stderr
    assert expanded.stdout.endswith(
        f"{BULLETS}\n\nsession: 5b1d0c7e\ntranscript: 5b1d0c7e-9f2a.jsonl (written elsewhere)\n"
    )
    assert "/home/alice" not in expanded.stdout
