"""Memory a long-lived process gives back to the system.

glibc's allocator keeps what a process freed for its next allocations, in every thread's arena:
a memory service that embedded a batch of long entries an hour ago would still hold the pages.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path


def give_back_memory() -> None:
    """Hand the allocator's free memory back to the system (well under a millisecond when
    there is little to give). glibc only, not macOS or musl; loading the already loaded C
    library costs microseconds."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def resident_kb() -> int | None:
    """This process's resident memory (``VmRSS``), where ``/proc`` tells it."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None
