"""Files replaced all at once: a reader (or a crash) sees the old file or the new one.

A file is written beside its target under a name that carries :data:`TEMP_MARK`, then moved into
place; maintenance removes what a killed run left with that mark (under its lock).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

#: Marks files being written; one left by a killed run is removed by the next run.
TEMP_MARK = ".pimem-tmp-"


def temp_path(target: Path) -> Path:
    """A private name beside *target*, for writing it and then moving it into place."""
    return target.with_name(f".{target.name}{TEMP_MARK}{os.getpid()}-{secrets.token_hex(4)}")


def write_atomically(path: Path, text: str) -> None:
    """Replace *path* with *text* all at once: a reader (or a crash) sees the old file or the
    new one, never half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = temp_path(path)
    try:
        with temporary.open("w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
