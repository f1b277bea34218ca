"""Where pimem keeps its own files: platformdirs, or one folder when ``PIMEM_HOME`` is set."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import attrs
import platformdirs


@attrs.frozen(kw_only=True)
class PimemPaths:
    data_dir: Path
    cache_dir: Path
    state_dir: Path

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PimemPaths:
        home = (os.environ if environ is None else environ).get("PIMEM_HOME")
        if home:
            base = Path(home).expanduser()
            return cls(data_dir=base, cache_dir=base / "cache", state_dir=base / "state")
        # appauthor=False keeps Windows paths flat (AppData\Local\pimem, not pimem\pimem).
        dirs = platformdirs.PlatformDirs("pimem", appauthor=False)
        return cls(
            data_dir=dirs.user_data_path,
            cache_dir=dirs.user_cache_path,
            state_dir=dirs.user_state_path,
        )
