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
    settings: list[dict[str, object]]


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
    expected: PluginRow = {
        "name": "central",
        "distribution": "pimem-central",
        "version": "2.3.1",
        "status": "active",
        "hooks": ["pimem_resolve_scope"],
        "error": None,
        "setting": None,
        "settings": [],
    }
    assert central == expected
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


# -- a third-party plugin's own settings ---------------------------------------------------------

GREETER = '''
"""Adds a greeting to the status, as loud as PIMEM_GREETER_VOLUME says."""
from pimem_core import SettingSpec, hookimpl
from pimem_core.types import StatusSection


def _volume(raw):
    value = int(raw)  # a ValueError gets the declared message
    if not 1 <= value <= 11:
        raise ValueError(raw)
    return value


VOLUME = SettingSpec(
    plugin="greeter",
    name="volume",
    env="PIMEM_GREETER_VOLUME",
    parse=_volume,
    default=3,
    help="how loud the greeting is",
    invalid="a whole number from 1 to 11",
)
TOKEN = SettingSpec(
    plugin="greeter",
    name="token",
    env="PIMEM_GREETER_TOKEN",
    parse=str,
    default=None,
    help="the greeting service's key",
    secret=True,
)


@hookimpl
def pimem_declare_settings():
    return (VOLUME, TOKEN)


@hookimpl
def pimem_collect_status(scope, settings):
    volume = VOLUME.read(settings)
    yield StatusSection(
        name="greeter", rank=85, lines=("hello" + "!" * volume,), data={"volume": volume}
    )
'''


def install_greeter(tmp_path: Path) -> dict[str, str]:
    site = make_distribution(
        tmp_path / "greeter-site",
        "pimem-greeter",
        {"greeter": "pimem_greeter"},
        {"pimem_greeter": GREETER},
    )
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}


def test_a_third_party_plugin_declares_validates_and_reads_its_setting(
    tmp_path: Path, repo: Path
) -> None:
    env = install_greeter(tmp_path)
    loud = {**env, "PIMEM_GREETER_VOLUME": "5", "PIMEM_GREETER_TOKEN": "sk-secret-value"}

    status = run_cli("status", "--cwd", str(repo), env=loud)
    assert status.code == 0, status.stderr
    assert "hello!!!!!" in status.stdout.splitlines()
    assert "  greeter: PIMEM_GREETER_VOLUME=5, PIMEM_GREETER_TOKEN=****" in status.stdout
    assert "sk-secret-value" not in status.stdout
    data = json.loads(run_cli("status", "--json", "--cwd", str(repo), env=loud).stdout)
    assert data["greeter"] == {"volume": 5}
    assert data["plugin_settings"]["greeter"][0] == {
        "name": "volume",
        "env": "PIMEM_GREETER_VOLUME",
        "value": 5,
        "default": 3,
        "help": "how loud the greeting is",
    }

    greeter = next(p for p in plugins_json(loud)["plugins"] if p["name"] == "greeter")
    assert greeter["settings"] == [
        {
            "name": "volume",
            "env": "PIMEM_GREETER_VOLUME",
            "value": 5,
            "default": 3,
            "help": "how loud the greeting is",
        },
        {
            "name": "token",
            "env": "PIMEM_GREETER_TOKEN",
            "value": "****",
            "default": None,
            "help": "the greeting service's key",
        },
    ]
    listing = run_cli("plugins", env=loud)
    assert "    PIMEM_GREETER_VOLUME=5  (how loud the greeting is; default 3)" in listing.stdout
    assert "sk-secret-value" not in listing.stdout

    quiet = run_cli("status", "--cwd", str(repo), env=env)
    assert "hello!!!" in quiet.stdout.splitlines()


def test_a_bad_value_of_a_declared_setting_fails_loudly(tmp_path: Path, repo: Path) -> None:
    env = {**install_greeter(tmp_path), "PIMEM_GREETER_VOLUME": "12"}
    for args in (("status", "--cwd", str(repo)), ("plugins",)):
        result = run_cli(*args, env=env)
        assert result.code != 0
        assert result.stdout == ""
        assert (
            "PIMEM_GREETER_VOLUME must be a whole number from 1 to 11, got '12'; "
            "unset it for the default of 3." in result.stderr
        )
