"""A plugin that fails never moves memory: one that decides where memory goes makes writes and
forgets refuse; any failure is said where the user looks (status, `pimem plugins`, a warning
line after the command), in process and through the memory service alike."""

from __future__ import annotations

import uuid
from datetime import date, datetime
from pathlib import Path

import pytest

from pimem_core import Pimem
from pimem_core.errors import PluginError
from pimem_core.types import Anchor, DayAddress, Entry

from conftest import make_distribution, make_pimem

BROKEN_RESOLVER = """
raise ImportError("no module named 'branchlib'")
from pimem_core import hookimpl

@hookimpl
def pimem_resolve_scope(cwd, settings):
    return None
"""
BROKEN_GATE = """
raise ImportError("no module named 'nltk'")

def pimem_gate_exchange(window, settings):
    return None
"""


def with_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str) -> Pimem:
    module = f"pimem_broken_{uuid.uuid4().hex}"
    make_distribution(tmp_path / "site", "pimem-broken", {"broken": module}, {module: source})
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return make_pimem({"PIMEM_STRICT_PLUGINS": "0"})


def entry(text: str = "- a decision") -> Entry:
    return Entry(
        anchor=Anchor(session="s", turn="t", transcript="/t"),
        content=text,
        written_at=datetime(2026, 8, 13, 22, 41),
    )


def test_a_resolver_that_fails_to_import_refuses_writes_and_forgets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo: Path
) -> None:
    pimem = with_plugin(tmp_path, monkeypatch, BROKEN_RESOLVER)
    (record,) = pimem.pm.failed
    assert record.routes_memory
    assert record.hooks == ("pimem_resolve_scope",)
    scope = pimem.resolve_scope(repo)  # reads go on, with the defaults' scope
    with pytest.raises(PluginError) as refused:
        pimem.append_entry(scope, entry())
    said = str(refused.value)
    assert "'broken' failed to load" in said
    assert "branchlib" in said
    assert "PIMEM_DISABLE_PLUGINS=broken" in said
    with pytest.raises(PluginError):
        pimem.forget_entry(scope, DayAddress(day=date(2026, 8, 13), time="22:41"))
    assert not scope.memory_dir.exists()  # nothing written anywhere


def test_blocking_the_failed_resolver_lets_writes_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo: Path
) -> None:
    with_plugin(tmp_path, monkeypatch, BROKEN_RESOLVER)
    pimem = make_pimem({"PIMEM_STRICT_PLUGINS": "0", "PIMEM_DISABLE_PLUGINS": "broken"})
    assert pimem.pm.failed == ()
    scope = pimem.resolve_scope(repo)
    assert "a decision" in pimem.append_entry(scope, entry()).read_text()


def test_another_failed_plugin_is_reported_and_writes_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo: Path
) -> None:
    pimem = with_plugin(tmp_path, monkeypatch, BROKEN_GATE)
    (record,) = pimem.pm.failed
    assert not record.routes_memory
    assert record.hooks == ("pimem_gate_exchange",)
    scope = pimem.resolve_scope(repo)
    assert "a decision" in pimem.append_entry(scope, entry()).read_text()
    assert "writes and forgets are refused" not in record.failure


def test_a_plugin_whose_source_cannot_be_found_counts_as_moving_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_distribution(tmp_path / "site", "pimem-ghost", {"ghost": "pimem_no_such_module"}, {})
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    (record,) = make_pimem({"PIMEM_STRICT_PLUGINS": "0"}).pm.failed
    assert record.name == "ghost"
    assert record.routes_memory
