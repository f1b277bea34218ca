"""A third-party scope resolver, installed as a real distribution, seen through the real CLI.

The distribution is laid out with its ``dist-info`` in a directory put on ``sys.path``, where
``importlib.metadata`` finds it as it finds a pip-installed plugin, and the CLI runs in process
through the test kit's ``run_pimem``, loading the installed plugins.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TypedDict

import pytest

from pimem_core.testing import CliResult, RunPimem

from conftest import make_distribution

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


def put_on_path(site: Path, module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Install the distribution laid out in *site* for this test: on ``sys.path``, and its
    *module* imported afresh (a module another test imported from its own directory would
    otherwise answer) and forgotten after the test."""
    monkeypatch.syspath_prepend(site)
    monkeypatch.delitem(sys.modules, module, raising=False)


def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = make_distribution(
        tmp_path / "site",
        "pimem-central",
        {"central": "pimem_central"},
        {"pimem_central": RESOLVER},
        version="2.3.1",
    )
    put_on_path(site, "pimem_central", monkeypatch)


def run(run_pimem: RunPimem, *args: str | Path, env: dict[str, str] | None = None) -> CliResult:
    """``pimem ARGS`` with the installed plugins, the one installed here included."""
    return run_pimem(*args, installed=True, env=env)


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
    routes_memory: bool
    only_when_chosen: list[str]
    group: str | None


class PluginListing(TypedDict):
    """What ``pimem plugins --json`` prints."""

    plugins: list[PluginRow]
    single_answer_hooks: dict[str, str | None]


def plugins_json(run_pimem: RunPimem, env: dict[str, str] | None = None) -> PluginListing:
    result = run(run_pimem, "plugins", "--json", env=env)
    assert result.exit_code == 0, result.stderr
    data: PluginListing = result.json
    return data


def test_an_installed_resolver_replaces_the_default(
    tmp_path: Path, repo: Path, run_pimem: RunPimem, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(tmp_path, monkeypatch)
    data = plugins_json(run_pimem)
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
        "routes_memory": False,
        "only_when_chosen": [],
        "group": None,
    }
    assert central == expected
    assert data["single_answer_hooks"]["pimem_resolve_scope"] == "central"

    scope = run(run_pimem, "scope", "--json", "--cwd", repo).json
    assert scope["collection"] == "ms_central_repo"
    assert scope["memory_dir"] == str(tmp_path / "site" / "central" / "repo" / "memory")

    written = run(
        run_pimem,
        "write",
        "- kept centrally",
        "--cwd",
        repo,
        "--session",
        "s1",
        "--turn",
        "t1",
        "--transcript",
        "/t.jsonl",
        "--json",
    )
    assert written.exit_code == 0, written.stderr
    assert Path(written.json["file"]).parent == tmp_path / "site/central/repo/memory"


def test_blocking_the_resolver_by_name_restores_the_default(
    tmp_path: Path, repo: Path, run_pimem: RunPimem, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(tmp_path, monkeypatch)
    env = {"PIMEM_DISABLE_PLUGINS": "central"}
    data = plugins_json(run_pimem, env)
    statuses = {p["name"]: p["status"] for p in data["plugins"]}
    assert statuses["central"] == "blocked"
    assert statuses["scope-default"] == "active"
    assert data["single_answer_hooks"]["pimem_resolve_scope"] == "scope-default"

    scope = run(run_pimem, "scope", "--json", "--cwd", repo, env=env).json
    assert scope["memory_dir"] == str(repo / ".memsearch" / "memory")


def test_the_text_listing_names_status_and_answers(
    tmp_path: Path, run_pimem: RunPimem, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(tmp_path, monkeypatch)
    result = run(run_pimem, "plugins")
    assert result.exit_code == 0, result.stderr
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


def install_greeter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = make_distribution(
        tmp_path / "greeter-site",
        "pimem-greeter",
        {"greeter": "pimem_greeter"},
        {"pimem_greeter": GREETER},
    )
    put_on_path(site, "pimem_greeter", monkeypatch)


def test_a_third_party_plugin_declares_validates_and_reads_its_setting(
    tmp_path: Path, repo: Path, run_pimem: RunPimem, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_greeter(tmp_path, monkeypatch)
    loud = {"PIMEM_GREETER_VOLUME": "5", "PIMEM_GREETER_TOKEN": "sk-secret-value"}

    status = run(run_pimem, "status", "--cwd", repo, env=loud)
    assert status.exit_code == 0, status.stderr
    assert "hello!!!!!" in status.stdout.splitlines()
    assert "  greeter: PIMEM_GREETER_VOLUME=5, PIMEM_GREETER_TOKEN=****" in status.stdout
    assert "sk-secret-value" not in status.stdout
    data = run(run_pimem, "status", "--json", "--cwd", repo, env=loud).json
    assert data["greeter"] == {"volume": 5}
    assert data["plugin_settings"]["greeter"][0] == {
        "name": "volume",
        "env": "PIMEM_GREETER_VOLUME",
        "value": 5,
        "default": 3,
        "help": "how loud the greeting is",
    }

    greeter = next(p for p in plugins_json(run_pimem, loud)["plugins"] if p["name"] == "greeter")
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
    listing = run(run_pimem, "plugins", env=loud)
    assert "    PIMEM_GREETER_VOLUME=5  (how loud the greeting is; default 3)" in listing.stdout
    assert "sk-secret-value" not in listing.stdout

    quiet = run(run_pimem, "status", "--cwd", repo)
    assert "hello!!!" in quiet.stdout.splitlines()


def test_a_bad_value_of_a_declared_setting_fails_loudly(
    tmp_path: Path, repo: Path, run_pimem: RunPimem, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_greeter(tmp_path, monkeypatch)
    env = {"PIMEM_GREETER_VOLUME": "12"}
    for args in (("status", "--cwd", str(repo)), ("plugins",)):
        result = run(run_pimem, *args, env=env)
        assert result.exit_code == 1
        assert result.stdout == ""
        assert (
            "PIMEM_GREETER_VOLUME must be a whole number from 1 to 11, got '12'; "
            "unset it for the default of 3." in result.stderr
        )
