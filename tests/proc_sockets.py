"""What ``/proc`` says of a process's sockets and open files, looked at from outside (Linux)."""

from __future__ import annotations

import os
from pathlib import Path


def family(pid: int) -> set[int]:
    """*pid* and every process descended from it."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    found = {pid}
    while True:
        more = {child for child, parent in parents.items() if parent in found} - found
        if not more:
            return found
        found |= more


def descriptors(pids: set[int]) -> list[str]:
    """Where the open file descriptors of *pids* point."""
    targets = []
    for pid in pids:
        try:
            entries = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for entry in entries:
            try:
                targets.append(os.readlink(entry))
            except OSError:
                continue
    return targets


def socket_inodes(pids: set[int]) -> set[str]:
    return {target[8:-1] for target in descriptors(pids) if target.startswith("socket:[")}


def tcp_listeners(pids: set[int]) -> set[str]:
    """The local addresses (``/proc/net/tcp*`` form) of TCP sockets *pids* listen on."""
    inodes = socket_inodes(pids)
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                found.add(f"{table} {fields[1]}")
    return found


def unix_listeners(pids: set[int]) -> set[str]:
    """The paths of the Unix sockets *pids* listen on."""
    inodes = socket_inodes(pids)
    found = set()
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        # Flags 00010000: accepting connections.
        if len(fields) == 8 and int(fields[3], 16) & 0x10000 and fields[6] in inodes:
            found.add(fields[7])
    return found


def holds_database(pids: set[int], database: Path) -> bool:
    """Whether one of *pids* has the database open (its lock file), looked at from outside: a
    look that opened the lock file would be a knock, and the service would step aside."""
    return str(database / "LOCK") in descriptors(pids)
