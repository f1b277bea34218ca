"""Scenario 4, permissions: what pimem creates follows the umask, and another user's store is
readable through pimem only as far as its file permissions allow.

Every write path runs under umask 077 and 022 (writes, a forget's rewrite, an index run with
its state file and database, a bridge session's capture with its journal and budget): no file
may be more open than the umask allows. Then a store made under 077 is given to another user
(uid 4242), and pimem, run as a user who is not its owner (as root: without the capabilities
that override permissions), tries to read and change it.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from reliability.host import Bridge, SessionFile, drop_file_privileges, start_params
from reliability.outcome import Outcome
from reliability.sandbox import Sandbox, make_sandbox, offline_model

OWNER = 4242
SECRET_FACT = "the owner's private fact q7x9"


def _with_umask(mask: int) -> Callable[[], None]:
    def apply() -> None:
        os.umask(mask)

    return apply


def _exercise(box: Sandbox, mask: int) -> list[str]:
    """Every write path under *mask*: writes on two days, an index run, and a forget that
    rewrites a file (a staged copy renamed over it). Returns what failed."""
    steps: list[tuple[tuple[str, ...], dict[str, str]]] = [
        (tuple(box.write_args(f"- {SECRET_FACT} t1", session="s", turn="t1")), {}),
        (tuple(box.write_args(f"- {SECRET_FACT} t2", session="s", turn="t2")), {}),
        (("index", "--cwd", str(box.project)), {}),
        (
            tuple(box.write_args("- kept", session="s", turn="t3")),
            {"PIMEM_NOW": "2026-08-14T09:00"},
        ),
        (
            tuple(box.write_args("- forgotten", session="s", turn="t4")),
            {"PIMEM_NOW": "2026-08-14T09:30"},
        ),
        (("forget", "--date", "2026-08-14", "--time", "09:30", "--cwd", str(box.project)), {}),
    ]
    failures = []
    for args, extra in steps:
        done = subprocess.run(
            [sys.executable, "-m", "pimem_core", *args],
            env=box.env(extra),
            capture_output=True,
            text=True,
            preexec_fn=_with_umask(mask),
            timeout=300,
            check=False,
        )
        if done.returncode:
            failures.append(f"{args[0]}: {done.stderr.strip()[-200:]}")
    return failures


def _open_files(box: Sandbox, mask: int, before: set[Path]) -> list[str]:
    too_open = []
    for root in (box.project, box.root / "pimem-home", box.database):
        for path in [root, *root.rglob("*")] if root.exists() else []:
            if path in before or path.is_symlink():
                continue
            mode = stat.S_IMODE(path.lstat().st_mode)
            if mode & mask:
                too_open.append(f"{path.relative_to(box.root)} {mode:o}")
    return too_open


def _modes(root: Path, mask: int) -> Outcome:
    outcome = Outcome(
        scenario=f"Safety: files follow umask {mask:03o}",
        load="write, forget (a rewrite), index (state file, database), a bridge session capture",
        faults="(a check on created files)",
    )
    box = make_sandbox(root / f"umask-{mask:03o}", offline_model())
    before = set(box.root.rglob("*"))
    outcome.problems.extend(_exercise(box, mask))
    transcript = SessionFile(root / f"umask-{mask:03o}.jsonl", "s-umask")
    os.umask(mask)  # the bridge inherits it
    try:
        bridge = Bridge(box)
    finally:
        os.umask(0o022)
    bridge.call("session.start", **start_params(box, transcript))
    bridge.call("session.settled", leaf=transcript.exchange("note the private fact", SECRET_FACT))
    bridge.call("session.shutdown")
    bridge.close()
    too_open = _open_files(box, mask, before)
    created = [p for p in box.root.rglob("*") if p not in before]
    outcome.inputs = len(created)
    outcome.expect(not too_open, f"more open than umask {mask:03o} allows: {too_open[:5]}")
    outcome.details = {
        "files_created": len(created),
        "day_file_mode": f"{stat.S_IMODE(box.day_file.stat().st_mode):o}",
    }
    return outcome


def _second_user(root: Path) -> Outcome:
    outcome = Outcome(
        scenario="Safety: another user's store",
        load="a store made under umask 077 and owned by uid 4242; snapshot, transcript, search, "
        "forget, write and a bridge session run by another user",
        faults="(permissions)",
    )
    if os.geteuid() != 0:
        outcome.skipped = "needs root to give the store to another user"
        return outcome
    owner = make_sandbox(root / "owner", offline_model())
    _exercise(owner, 0o077)
    transcript = owner.root / "owner.jsonl"
    SessionFile(transcript, "s-owner").exchange("note the private fact", SECRET_FACT)
    transcript.chmod(0o600)
    for path in [owner.root, *owner.root.rglob("*")]:
        os.lchown(path, OWNER, OWNER)
    untouched = {p: p.read_bytes() for p in owner.memory_dir.rglob("*.md")}

    other = make_sandbox(root / "other", offline_model())
    attempts = {
        "snapshot": ("snapshot", "--cwd", str(owner.project)),
        "transcript": ("transcript", str(transcript)),
        "search": ("search", "private fact", "--cwd", str(owner.project)),
        "forget": (
            "forget",
            "--date",
            "2026-08-13",
            "--time",
            "22:41",
            "--cwd",
            str(owner.project),
        ),
        "write": other.write_args("- planted", session="x", turn="y"),
    }
    outputs = {}
    for name, args in attempts.items():
        if name == "write":
            args = (*args[:2], "--cwd", str(owner.project), *args[4:])
        done = subprocess.run(
            [sys.executable, "-m", "pimem_core", *args],
            env=other.env(),
            capture_output=True,
            text=True,
            cwd=other.project,
            preexec_fn=drop_file_privileges,
            timeout=120,
            check=False,
        )
        outputs[name] = done
        outcome.expect(
            done.returncode == 1, f"{name} exited {done.returncode} (expected a refusal)"
        )
        outcome.expect("Traceback" not in done.stderr, f"{name}: a traceback")
        outcome.expect(
            SECRET_FACT not in done.stdout + done.stderr, f"{name} showed the owner's memory"
        )
    serve = subprocess.run(
        [sys.executable, "-m", "pimem_core", "serve"],
        input=(
            '{"id": 1, "method": "session.start", "params": {"session_id": "x", "cwd": "'
            + str(owner.project)
            + '", "transcript": null}}\n{"id": 2, "method": "session.before_prompt", "params": {"prompt": "hi"}}\n'
        ),
        env=other.env(),
        capture_output=True,
        text=True,
        cwd=other.project,
        preexec_fn=drop_file_privileges,
        timeout=120,
        check=False,
    )
    outcome.expect(SECRET_FACT not in serve.stdout, "the bridge showed the owner's memory")
    outcome.expect(
        all(p.read_bytes() == data for p, data in untouched.items()), "the owner's files changed"
    )
    outcome.inputs = len(attempts) + 1
    outcome.details = {
        name: (done.stderr.strip().splitlines() or [""])[-1][:160] for name, done in outputs.items()
    }
    return outcome


def run(quick: bool) -> list[Outcome]:
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="pimem-rel-perms-") as scratch:
        root = Path(scratch)
        parts: list[Callable[[], Outcome]] = [
            lambda: _modes(root, 0o077),
            *([] if quick else [lambda: _modes(root, 0o022)]),
            lambda: _second_user(root),
        ]
        for part in parts:
            started = time.perf_counter()
            outcome = part()
            outcome.seconds = time.perf_counter() - started
            outcomes.append(outcome)
    return outcomes
