"""Two clones of one repository write memory and merge, with real git: what each merge leaves
in the daily memory file. Day files are written through pimem itself (the facade and the
markdown store), so the bytes are the ones agents write.

- with pimem's merge driver (``pimem git merge-driver``), every case merges into well-formed
  entries, each exactly once, and a forget stays forgotten;
- with ``merge=union`` only (what ``.gitattributes`` gives every clone), the cases union gets
  wrong are pinned here as they happen, so ADR 0016's account of them stays true;
- a merge git cannot finish (a text merge's markers, or a modify/delete) is made whole by
  ``pimem git resolve``.
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import attrs
import pytest

from pimem_core import Pimem
from pimem_core.conflicts import is_conflicted
from pimem_core.day_file import list_compact_blocks, list_entries
from pimem_core.types import Anchor, DayAddress, Entry, Scope

from conftest import make_pimem, run_cli

DAY = "2026-08-13"
_ANCHOR = re.compile(r"<!-- session:(\S+) turn:(\S+) transcript:\S+ -->")
_TIME = re.compile(r"### \d{2}:\d{2}")


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        check=check,
        capture_output=True,
        text=True,
    )


@attrs.frozen
class Clone:
    path: Path
    pimem: Pimem

    @property
    def scope(self) -> Scope:
        return self.pimem.resolve_scope(self.path)

    def write(self, session: str, turn: str, time: str, text: str, day: str = DAY) -> None:
        anchor = Anchor(session=session, turn=turn, transcript=f"/t/{session}.jsonl")
        written = datetime.fromisoformat(f"{day}T{time}")
        self.pimem.append_entry(self.scope, Entry(anchor=anchor, content=text, written_at=written))

    def forget(self, time: str) -> None:
        self.pimem.forget_entry(self.scope, DayAddress.parse(DAY, time))

    def compact(self, time: str, day: str = DAY) -> None:
        summary = "- the team chose Redis\n\n### Decisions\n- Postgres stays the source of truth"
        self.pimem.store(self.scope).append_compaction(
            summary, datetime.fromisoformat(f"{day}T{time}")
        )

    def commit(self, message: str) -> None:
        git(self.path, "add", "-A")
        git(self.path, "commit", "--quiet", "--allow-empty", "-m", message)

    def day(self, day: str = DAY) -> str:
        file = self.scope.memory_dir / f"{day}.md"
        return file.read_text() if file.exists() else ""


def clones(tmp_path: Path, mode: str) -> tuple[Clone, Clone]:
    """A bare origin and two clones; *mode* ``driver``: pimem's merge driver in both,
    ``union``: .gitattributes only, ``text``: neither."""
    env = {"PIMEM_GIT_UNION_MERGE": "off"} if mode == "text" else {}
    git(tmp_path, "init", "--quiet", "--bare", "--initial-branch=main", "origin.git")
    made = []
    for name in ("alice", "bob"):
        git(tmp_path, "clone", "--quiet", "origin.git", name)
        git(tmp_path / name, "checkout", "--quiet", "-B", "main")
        if mode == "driver":
            result = run_cli("git", "merge-driver", "--cwd", str(tmp_path / name))
            assert result.code == 0, result.stderr
        made.append(Clone(tmp_path / name, make_pimem(env)))
    return made[0], made[1]


def base_of_two(clone: Clone) -> None:
    clone.write("s0", "t1", "09:00", "- the base's first fact\n- its second fact")
    clone.write("s0", "t2", "09:30", "- the base's last fact")


def base_of_one(clone: Clone) -> None:
    clone.write("s0", "t1", "09:00", "- the only fact of the day")


@attrs.frozen
class Case:
    base: Callable[[Clone], None]
    alice: Callable[[Clone], None]
    bob: Callable[[Clone], None]
    #: (session, turn) of every entry the merged day file must hold, once each.
    entries: tuple[tuple[str, str], ...]
    compacted: bool = False


def _alice(clone: Clone) -> None:
    clone.write("sa", "a1", "10:00", "- alice chose Redis for the cache")


def _alice_same_session(clone: Clone) -> None:
    clone.write("s0", "a1", "10:00", "- alice chose Redis for the cache")


def _bob(clone: Clone) -> None:
    clone.write("sb", "b1", "10:05", "- bob fixed the login loop")


def _bob_same_minute(clone: Clone) -> None:
    clone.write("sb", "b1", "10:00", "- bob fixed the login loop")


def _bob_same_session(clone: Clone) -> None:
    clone.write("s0", "b1", "10:05", "- bob fixed the login loop")


BASE_TWO = (("s0", "t1"), ("s0", "t2"))
CASES = {
    "same session heading": Case(
        base_of_two, _alice_same_session, _bob_same_session, (*BASE_TWO, ("s0", "a1"), ("s0", "b1"))
    ),
    "different session headings": Case(
        base_of_two, _alice, _bob, (*BASE_TWO, ("sa", "a1"), ("sb", "b1"))
    ),
    "same minute": Case(
        base_of_two, _alice, _bob_same_minute, (*BASE_TWO, ("sa", "a1"), ("sb", "b1"))
    ),
    "different days": Case(
        base_of_two,
        lambda clone: clone.write("sa", "a1", "10:00", "- alice on the next day", "2026-08-14"),
        _bob,
        (*BASE_TWO, ("sb", "b1")),
    ),
    "forget the last entry against an append": Case(
        base_of_two, lambda clone: clone.forget("09:30"), _bob, (("s0", "t1"), ("sb", "b1"))
    ),
    "forget the first entry against an append": Case(
        base_of_two, lambda clone: clone.forget("09:00"), _bob, (("s0", "t2"), ("sb", "b1"))
    ),
    "compaction against an append": Case(
        base_of_two, lambda clone: clone.compact("11:00"), _bob, (*BASE_TWO, ("sb", "b1")), True
    ),
    "both create the day's file": Case(
        lambda clone: clone.write("s0", "t1", "09:00", "- yesterday", "2026-08-12"),
        _alice,
        _bob,
        (("sa", "a1"), ("sb", "b1")),
    ),
    "compaction opens the day's file against an append": Case(
        lambda clone: clone.write("s0", "t1", "09:00", "- yesterday", "2026-08-12"),
        lambda clone: clone.compact("11:00"),
        _bob,
        (("sb", "b1"),),
        True,
    ),
}


def well_formed(text: str) -> list[tuple[str, str]]:
    """The (session, turn) of each entry of a merged day file, after checking that every line
    belongs to a well-formed entry (heading, anchor, bullets), a session heading, a memory
    compaction block or the date title."""
    assert not is_conflicted(text), text
    owned: set[int] = set()
    found = []
    for entry in list_entries(text):
        heading, anchor, *bullets = entry.text.split("\n")
        assert _TIME.fullmatch(heading), entry.text
        match = _ANCHOR.fullmatch(anchor)
        assert match is not None, entry.text
        assert bullets, entry.text
        assert all(line.startswith("- ") for line in bullets), entry.text
        found.append((match.group(1), match.group(2)))
        owned.update(range(entry.start, entry.start + entry.text.count("\n") + 1))
    for block in list_compact_blocks(text):
        owned.update(range(block.start, block.last + 1))
    for number, line in enumerate(text.split("\n")):
        if number in owned or not line.strip():
            continue
        assert re.fullmatch(r"## Session \d{2}:\d{2}|# \d{4}-\d{2}-\d{2}", line), (line, text)
    return found


def merge(case: Case, tmp_path: Path, mode: str, *, first: str) -> tuple[Clone, Clone, bool]:
    """*case* written on both clones, *first* pushing first; the other pulls (a merge).
    Returns the clones, the one that merged last, and whether git finished the merge."""
    alice, bob = clones(tmp_path, mode)
    case.base(alice)
    alice.commit("base")
    git(alice.path, "push", "--quiet", "origin", "main")
    git(bob.path, "pull", "--quiet", "--no-rebase", "origin", "main")
    case.alice(alice)
    alice.commit("alice")
    case.bob(bob)
    bob.commit("bob")
    pusher, puller = (alice, bob) if first == "alice" else (bob, alice)
    git(pusher.path, "push", "--quiet", "origin", "main")
    pulled = git(puller.path, "pull", "--no-rebase", "origin", "main", check=False)
    return pusher, puller, pulled.returncode == 0


@pytest.mark.parametrize("first", ["alice", "bob"])
@pytest.mark.parametrize("name", list(CASES))
def test_the_merge_driver_keeps_every_entry_once_and_forgets_stay_forgotten(
    tmp_path: Path, name: str, first: str
) -> None:
    case = CASES[name]
    _, merged, finished = merge(case, tmp_path, "driver", first=first)
    assert finished
    text = merged.day()
    assert Counter(well_formed(text)) == Counter(case.entries)
    assert text.count("## Memory Compact") == int(case.compacted)
    if name == "different days":
        assert well_formed(merged.day("2026-08-14")) == [("sa", "a1")]
    # The merge commit is what the other clone gets: the same file there.
    git(merged.path, "push", "--quiet", "origin", "main")
    other = Clone(tmp_path / ("alice" if merged.path.name == "bob" else "bob"), merged.pimem)
    git(other.path, "pull", "--quiet", "--no-rebase", "origin", "main")
    assert other.day() == text


def test_the_merge_driver_serves_a_rebase_too(tmp_path: Path) -> None:
    case = CASES["forget the last entry against an append"]
    alice, bob = clones(tmp_path, "driver")
    case.base(alice)
    alice.commit("base")
    git(alice.path, "push", "--quiet", "origin", "main")
    git(bob.path, "pull", "--quiet", "origin", "main")
    case.alice(alice)
    alice.commit("alice forgets")
    case.bob(bob)
    bob.commit("bob writes")
    git(alice.path, "push", "--quiet", "origin", "main")
    git(bob.path, "pull", "--quiet", "--rebase", "origin", "main")
    assert Counter(well_formed(bob.day())) == Counter(case.entries)


UNION_GETS_RIGHT = {
    "same session heading",
    "different session headings",
    "different days",
    "forget the first entry against an append",
    "compaction against an append",
    "both create the day's file",
    "compaction opens the day's file against an append",
}


@pytest.mark.parametrize("name", sorted(UNION_GETS_RIGHT))
def test_union_alone_keeps_these_cases_well_formed(tmp_path: Path, name: str) -> None:
    case = CASES[name]
    _, merged, finished = merge(case, tmp_path, "union", first="alice")
    assert finished
    assert (merged.path / ".gitattributes").read_text() == (
        ".memsearch/memory/????-??-??.md merge=union\n"
    )
    assert Counter(well_formed(merged.day())) == Counter(case.entries)


def test_union_fuses_two_entries_of_the_same_minute(tmp_path: Path) -> None:
    _, merged, finished = merge(CASES["same minute"], tmp_path, "union", first="alice")
    assert finished
    # The shared `### 10:00` line is kept once: one entry with two anchors, one entry lost.
    assert merged.day().count("### 10:00\n") == 1
    assert merged.day().count("<!-- session:") == 4


def test_union_brings_back_a_forgotten_entry_next_to_an_append(tmp_path: Path) -> None:
    case = CASES["forget the last entry against an append"]
    _, merged, finished = merge(case, tmp_path, "union", first="alice")
    assert finished
    assert "the base's last fact" in merged.day()  # forgotten on alice's side, back again


@pytest.mark.parametrize("mode", ["text", "union", "driver"])
def test_resolve_makes_a_forget_of_the_last_entry_against_an_append_whole(
    tmp_path: Path, mode: str
) -> None:
    # A forget that removed the file's only entry deleted the file: git never runs a merge
    # driver for a modify/delete, whatever the attributes say.
    case = Case(base_of_one, lambda clone: clone.forget("09:00"), _bob, (("sb", "b1"),))
    _, merged, finished = merge(case, tmp_path, mode, first="alice")
    assert not finished
    assert "the only fact of the day" in merged.day()
    # No marker says so: status asks git.
    status = run_cli("status", "--cwd", str(merged.path))
    assert f"unmerged: git has not merged {DAY}.md yet; `pimem git resolve`" in status.stdout
    result = run_cli("git", "resolve", "--cwd", str(merged.path))
    assert result.code == 0, result.stderr
    assert Counter(well_formed(merged.day())) == Counter(case.entries)
    assert "the only fact of the day" not in merged.day()
    assert git(merged.path, "ls-files", "--unmerged").stdout == ""
    assert "unmerged:" not in run_cli("status", "--cwd", str(merged.path)).stdout


@pytest.mark.parametrize("name", ["forget the last entry against an append", "same minute"])
def test_resolve_mends_a_text_merges_conflict_and_keeps_what_was_written_since(
    tmp_path: Path, name: str
) -> None:
    case = CASES[name]
    _, merged, finished = merge(case, tmp_path, "text", first="alice")
    assert not finished
    assert is_conflicted(merged.day())
    merged.write("sc", "c1", "10:30", "- written while the conflict waited")
    result = run_cli("git", "resolve", "--cwd", str(merged.path), "--json")
    assert result.code == 0, result.stderr
    assert Counter(well_formed(merged.day())) == Counter((*case.entries, ("sc", "c1")))
    git(merged.path, "commit", "--quiet", "--no-edit")
