"""A bug reaches the user as one line: the plugin and the hook that raised it, and the file
that keeps its traceback. The front door keeps the traceback (the memory service in its log,
a command line in pimem's error log), so the line is the same wherever the command ran."""

from __future__ import annotations

import os
import time
import traceback
from pathlib import Path

from pimem_core.manager import culprit
from pimem_core.paths import PimemPaths
from pimem_core.private_files import open_private

#: The error log starts afresh past this size: it keeps the latest tracebacks, not all.
ERROR_LOG_LIMIT = 1 << 20


def error_log() -> Path:
    """Where a command run in process keeps the tracebacks of bugs."""
    return PimemPaths.from_env().state_dir / "errors.log"


def keep_traceback(error: BaseException, path: Path) -> Path | None:
    """Append *error*'s traceback to *path*, private to the user; ``None`` when it cannot."""
    text = "".join(traceback.format_exception(error))
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    try:
        if path.exists() and path.stat().st_size > ERROR_LOG_LIMIT:
            path.unlink()
        fd = open_private(path, os.O_WRONLY | os.O_APPEND)
        with os.fdopen(fd, "a", encoding="utf-8") as stream:
            stream.write(f"{stamp} pid {os.getpid()}\n{text}\n")
    except OSError:
        return None
    return path


def described(error: BaseException, kept: Path | None) -> str:
    """A bug in a few words: who raised what where, where the traceback is, the way on."""
    where = f"; the traceback is in {kept}" if kept is not None else ""
    named = culprit(error)
    if named is None:
        return f"internal error: {error!r}{where}"
    plugin, hook = named
    return (
        f"plugin {plugin!r} raised {error!r} in {hook}{where} "
        f"(fix the plugin, or set PIMEM_DISABLE_PLUGINS={plugin} to go on without it)"
    )


def one_line(error: BaseException, kept: Path | None) -> str:
    """What the command line prints of a bug."""
    text = described(error, kept)
    return f"pimem: {text}" if text.startswith("internal error") else f"pimem: error: {text}"
