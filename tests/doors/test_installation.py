"""The memory service's footprint: what it loaded, and whether that changed on disk."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from pimem_core.api import Pimem
from pimem_core.doors.installation import Footprint
from pimem_core.doors.service import loaded_code

from conftest import make_distribution


def later(path: Path) -> None:
    """A new modification time, whatever the file system's clock resolution."""
    stamp = time.time_ns() + 10**9
    os.utime(path, ns=(stamp, stamp))


def test_a_distribution_installed_removed_or_edited_changes_the_footprint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site, code, model = tmp_path / "site", tmp_path / "code", tmp_path / "model"
    site.mkdir()
    (code / "pkg").mkdir(parents=True)
    (code / "pkg" / "mod.py").write_text("x = 1\n")
    (model / "onnx").mkdir(parents=True)
    (model / "onnx" / "model.onnx").write_bytes(b"weights")
    monkeypatch.setattr(sys, "path", [str(tmp_path), str(site)])

    def take() -> Footprint:
        return Footprint.take(code=[code], files=[model])

    first = take()
    assert take().differs(first) is None
    make_distribution(site, "pimem-central", {"central": "pimem_central"}, {"pimem_central": ""})
    installed = take()
    assert installed.differs(first) == "pimem_central-1.0.dist-info installed"
    later(code / "pkg" / "mod.py")
    assert take().differs(installed) == "mod.py changed"
    edited = take()
    later(model / "onnx" / "model.onnx")
    assert take().differs(edited) == "model.onnx changed"
    assert first.differs(installed) == "pimem_central-1.0.dist-info removed"


def test_the_code_watched_is_core_and_every_loaded_plugin(tmp_path: Path) -> None:
    site = make_distribution(
        tmp_path / "site",
        "pimem-solo",
        {"solo": "pimem_solo"},
        {"pimem_solo": "from pimem_core import hookimpl\n"},
    )
    sys.path.insert(0, str(site))
    try:
        import importlib.metadata

        (entry_point,) = importlib.metadata.entry_points(group="pimem", name="solo")
        pimem = Pimem.from_env(entry_points=[entry_point])
        code = loaded_code(pimem)
    finally:
        sys.path.remove(str(site))
        sys.modules.pop("pimem_solo", None)
    assert Path(sys.modules["pimem_core"].__file__ or "").parent in code
    # A module of its own is watched as its file, not the whole directory it lies in.
    assert site / "pimem_solo.py" in code
    assert site not in code
