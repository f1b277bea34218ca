"""The README's team walk, run as written: two clones of one repository write memory on the
same day and the same minute, push and pull in both orders, and each finds the other's
entries with no manual index. Then each captures an exchange in a session and they pull the
other way round. Real git, the real ``pimem`` command, memsearch on Milvus Lite and the
offline model."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pimem_core.runtime.session import Session, SessionInfo
from pimem_core.types import BranchEntry
from pimem_plugins.memsearch.offline_model import OfflineModel

from conftest import CLOCK, REPO_ROOT, make_pimem

ROOT = REPO_ROOT
DAY = CLOCK[:10]
ALICE = "- chose Redis for the hot cache"
BOB = "- the login loop came from a stale cookie domain"


def readme_walk() -> str:
    """The shell block of the README's team section."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Share memory with your team", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```sh\n(.*?)```", section, re.DOTALL)
    return str(block)


@pytest.fixture
def env(memsearch_home: Path, offline_model: OfflineModel) -> dict[str, str]:
    """What a teammate's shell has: pimem on PATH (this checkout's), memsearch on the offline
    model, and who commits."""
    return {
        **os.environ,
        **offline_model.environment(),
        "HOME": str(memsearch_home),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PIMEM_NOW": CLOCK,  # both clones write in the same minute: the hardest merge
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }


def day_file(clone: Path) -> str:
    return (clone / ".memsearch" / "memory" / f"{DAY}.md").read_text()


def sh(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    return done


def capture(clone: Path, session: str, asked: str, answered: str) -> None:
    """One settled exchange captured by a session in *clone* (extractive distillation)."""
    pimem = make_pimem({"HOME": os.environ["HOME"]})
    host = Session(pimem)
    host.start(SessionInfo(session_id=session, cwd=clone, transcript=clone / f"{session}.jsonl"))
    branch = [
        BranchEntry(id=f"{session}-u", kind="message", role="user", text=asked),
        BranchEntry(id=f"{session}-a", kind="message", role="assistant", text=answered),
    ]
    assert host.settled(leaf=f"{session}-a", branch=branch)
    assert host.shutdown().captured_in_time


def test_two_clones_share_memory_through_git(
    tmp_path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    walk = sh(readme_walk(), tmp_path, env)
    alice, bob = tmp_path / "alice", tmp_path / "bob"

    # Both appended today's file; git merged it, and both clones hold each entry once.
    assert day_file(alice) == day_file(bob)
    for bullet, session in ((ALICE, "alice-1"), (BOB, "bob-1")):
        assert day_file(bob).count(bullet) == 1
        assert day_file(bob).count(f"<!-- session:{session} ") == 1
    assert "<<<<<<<" not in day_file(bob)
    # Each search found the teammate's entry in the pulled day file, with no index run first.
    first, second = walk.stdout.split("memory chunk(s)")[1:]
    assert ALICE[2:] in first
    assert BOB[2:] in second
    assert "indexed" not in walk.stderr, walk.stderr
    # The index state stays on each machine.
    tracked = sh("git ls-files .memsearch", bob, env).stdout.split()
    assert tracked == [f".memsearch/memory/{DAY}.md"]

    # The other way round: each captures in a session, bob pushes first, alice pulls.
    monkeypatch.setenv("HOME", env["HOME"])
    capture(alice, "alice-2", "we deploy with blue-green releases", "Noted, blue-green it is.")
    capture(bob, "bob-2", "pin the runner image to fix flaky CI", "Pinned it.")
    commit = "git add .memsearch && git commit --quiet -m memory"
    sh(f"{commit} && git push --quiet origin HEAD:main", bob, env)
    sh(f"{commit} && git pull --quiet --no-rebase origin main", alice, env)
    sh("git push --quiet origin HEAD:main", alice, env)
    sh("git pull --quiet --no-rebase origin main", bob, env)

    assert day_file(alice) == day_file(bob)
    for session in ("alice-1", "bob-1", "alice-2", "bob-2"):
        assert day_file(alice).count(f"<!-- session:{session} ") == 1
    for clone, query, found in (
        (bob, "how do we deploy", "blue-green"),
        (alice, "why was CI flaky", "runner image"),
    ):
        result = sh(f"pimem search {query!r}", clone, env)
        assert found in result.stdout, result.stdout

    # memsearch reads the merged file as it reads its own: one chunk per entry, none empty.
    from memsearch.chunker import chunk_markdown

    chunks = chunk_markdown(day_file(alice), source=f"{DAY}.md")
    headed = [chunk for chunk in chunks if "<!-- session:" in chunk.content]
    assert len(headed) == 4
