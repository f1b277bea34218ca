"""A session whose store fails mid-way: ``python -m reliability.fault_child MODE ARGS``.

The child runs a real ``Session`` (capture through a scripted host model) and ``pimem write``'s
path (``Pimem.append_entry``), captures a few exchanges, then makes the store fail in one of
these ways while it captures and writes more, then lets it recover and goes on:

- ``enospc``: every append to a daily memory file fails with ENOSPC (a full disk);
- ``short-write``: the disk fills mid-write: half the bytes land, then the write stops;
- ``readonly-file``: the daily memory file is made read-only;
- ``readonly-dir``: the memory directory is made read-only before the day's file exists.

Run it with file permissions enforced (``host.drop_file_privileges`` when root). It writes a
JSON report to ``args["result"]``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reliability.host import echo_bullets


@contextlib.contextmanager
def failing_store(mode: str, memory_dir: Path, day_file: Path) -> Iterator[None]:
    """The store fails as *mode* says while the block runs."""
    if mode in ("enospc", "short-write"):
        real_write = os.write

        def write(fd: int, data: Any) -> int:
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                target = ""
            if not target.startswith(str(memory_dir)):
                return real_write(fd, data)
            if mode == "short-write":
                return real_write(fd, bytes(data)[: max(1, len(data) // 2)])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        os.write = write
        try:
            yield
        finally:
            os.write = real_write
        return
    target = day_file if mode == "readonly-file" else memory_dir
    mode_before = target.stat().st_mode
    target.chmod(0o444 if mode == "readonly-file" else 0o555)
    try:
        yield
    finally:
        target.chmod(mode_before)


def main(argv: list[str]) -> int:
    mode, raw = argv
    args = json.loads(raw)
    from pimem_core import Pimem
    from pimem_core.errors import PimemError
    from pimem_core.runtime.session import Session, SessionInfo
    from pimem_core.types import Anchor, BranchEntry, Entry, HostModel

    pimem = Pimem.from_env()
    session = Session(
        pimem, host_model=HostModel(name="echo", complete=lambda s, p, t: echo_bullets(p))
    )
    transcript = Path(args["transcript"])
    info = SessionInfo(session_id="s-fault", cwd=Path(args["project"]), transcript=transcript)
    session.start(info)
    scope = session.scope
    capture = session.capture
    assert scope is not None
    assert capture is not None
    memory_dir, day_file = Path(args["memory_dir"]), Path(args["day_file"])
    branch: list[BranchEntry] = []
    report: dict[str, Any] = {"write_errors": [], "status": []}

    def exchange(number: int) -> None:
        branch.extend(
            [
                BranchEntry(
                    id=f"u{number}", kind="message", role="user", text=f"question {number}"
                ),
                BranchEntry(
                    id=f"a{number}", kind="message", role="assistant", text=f"answer {number}"
                ),
            ]
        )
        started = time.perf_counter()
        session.settled(leaf=f"a{number}", branch=list(branch))
        report.setdefault("settled_ms", []).append((time.perf_counter() - started) * 1000)
        capture.drain(time.monotonic() + 30)

    def write(number: int) -> None:
        entry = Entry(
            anchor=Anchor(session="s-fault", turn=f"w{number}", transcript=str(transcript)),
            content=f"- written fact {number}",
            written_at=pimem.settings.now(),
        )
        try:
            pimem.append_entry(scope, entry)
        except PimemError as error:
            report["write_errors"].append(str(error))

    if mode == "readonly-dir":
        memory_dir.mkdir(parents=True, exist_ok=True)
    else:
        for number in range(3):
            exchange(number)
        write(0)
    before = day_file.read_bytes() if day_file.exists() else b""
    with failing_store(mode, memory_dir, day_file):
        exchange(3)
        write(1)
        report["status"] = [
            line for section in pimem.collect_status(scope) for line in section.lines
        ]
        during = day_file.read_bytes() if day_file.exists() else b""
    report["unchanged_during_fault"] = during == before
    exchange(4)
    write(2)
    shutdown = session.shutdown(cap=15)
    report["captured_in_time"] = shutdown.captured_in_time
    report["text"] = day_file.read_text(encoding="utf-8") if day_file.exists() else ""
    Path(args["result"]).write_text(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
