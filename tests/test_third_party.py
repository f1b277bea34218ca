"""A third-party scope resolver, installed as a real distribution, seen through the real CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TypedDict

from conftest import make_distribution, run_cli

RESOLVER = '''
"""Keeps every project's memory in one central folder, keyed by the project's name."""
from pathlib import Path

from pimem_core import hookimpl
from pimem_core.types import Scope

CENTRAL = Path(__file__).parent / "central"


@hookimpl
def pimem_resolve_scope(cwd):
    store = CENTRAL / cwd.name
    return Scope(
        repository_dir=cwd,
        scope_dir=store,
        memory_dir=store / "memory",
        collection="ms_central_" + cwd.name,
        index_state_path=store / ".index-state.json",
    )
'''


def install(tmp_path: Path) -> dict[str, str]:
    site = make_distribution(
        tmp_path / "site",
        "pimem-central",
        {"central": "pimem_central"},
        {"pimem_central": RESOLVER},
        version="2.3.1",
    )
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}


class PluginRow(TypedDict):
    """One entry of ``pimem plugins --json``'s ``plugins`` list."""

    name: str
    distribution: str | None
    version: str | None
    status: str
    hooks: list[str]
    error: str | None
    setting: str | None


class PluginListing(TypedDict):
    """What ``pimem plugins --json`` prints."""

    plugins: list[PluginRow]
    single_answer_hooks: dict[str, str | None]


def plugins_json(env: dict[str, str]) -> PluginListing:
    result = run_cli("plugins", "--json", env=env)
    assert result.code == 0, result.stderr
    data: PluginListing = json.loads(result.stdout)
    return data


def test_an_installed_resolver_replaces_the_default(tmp_path: Path, repo: Path) -> None:
    env = install(tmp_path)
    data = plugins_json(env)
    central = next(p for p in data["plugins"] if p["name"] == "central")
    assert central == {
        "name": "central",
        "distribution": "pimem-central",
        "version": "2.3.1",
        "status": "active",
        "hooks": ["pimem_resolve_scope"],
        "error": None,
        "setting": None,
    }
    assert data["single_answer_hooks"]["pimem_resolve_scope"] == "central"

    scope = json.loads(run_cli("scope", "--json", "--cwd", str(repo), env=env).stdout)
    assert scope["collection"] == "ms_central_repo"
    assert scope["memory_dir"] == str(tmp_path / "site" / "central" / "repo" / "memory")

    written = run_cli(
        "write",
        "- kept centrally",
        "--cwd",
        str(repo),
        "--session",
        "s1",
        "--turn",
        "t1",
        "--transcript",
        "/t.jsonl",
        "--json",
        env=env,
    )
    assert written.code == 0, written.stderr
    assert Path(json.loads(written.stdout)["file"]).parent == tmp_path / "site/central/repo/memory"


def test_blocking_the_resolver_by_name_restores_the_default(tmp_path: Path, repo: Path) -> None:
    env = install(tmp_path) | {"PIMEM_DISABLE_PLUGINS": "central"}
    data = plugins_json(env)
    statuses = {p["name"]: p["status"] for p in data["plugins"]}
    assert statuses["central"] == "blocked"
    assert statuses["scope-default"] == "active"
    assert data["single_answer_hooks"]["pimem_resolve_scope"] == "scope-default"

    scope = json.loads(run_cli("scope", "--json", "--cwd", str(repo), env=env).stdout)
    assert scope["memory_dir"] == str(repo / ".memsearch" / "memory")


def test_the_text_listing_names_status_and_answers(tmp_path: Path) -> None:
    result = run_cli("plugins", env=install(tmp_path))
    assert result.code == 0
    line = next(line for line in result.stdout.splitlines() if line.startswith("central "))
    assert line.split()[:4] == ["central", "pimem-central", "2.3.1", "active"]
    assert "pimem_resolve_scope -> central" in result.stdout
