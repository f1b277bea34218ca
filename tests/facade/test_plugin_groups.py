"""A backend by one name: a distribution groups its plugins under one name (the entry-point group
``pimem.groups`` names a package; the group is the distribution's plugins that lie in it), and
``PIMEM_DISABLE_PLUGINS`` and ``PIMEM_USE`` take that name. memsearch, pimem's bundled backend,
is the group ``memsearch``."""

from __future__ import annotations

import importlib.metadata
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path

import pytest

from pimem_core.errors import SettingsError
from pimem_core.groups import ENTRY_POINT_GROUP, find_groups
from pimem_core.testing import MakePimem, RunPimem

from conftest import make_distribution

#: The bundled plugins whose entry points lie in ``pimem_plugins.memsearch``.
MEMSEARCH = (
    "memory-to-skill",
    "memsearch-index",
    "memsearch-llm",
    "memsearch-tools",
    "project-review",
    "user-profile",
)

INDEX = """
from pimem_core.plugin import hookimpl

ONLY_WHEN_CHOSEN = ("open_index",)


@hookimpl
def pimem_open_index(scope, settings, store):
    return None
"""

LLM = """
from pimem_core.plugin import hookimpl


class Llm:
    @hookimpl
    def pimem_provide_model(self, scope, settings):
        return None
"""

PATTERNS = """
from pimem_core.plugin import hookimpl


@hookimpl
def pimem_collect_secret_patterns():
    return ()
"""


def install_acme(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    groups: Mapping[str, str] | None = None,
    second_index: bool = False,
) -> str:
    """Install the distribution ``acme-backend`` for this test: the plugins ``acme-index`` and
    ``acme-llm`` in its package, ``acme-patterns`` in a module beside it, and *groups* (by
    default ``acme``, the package). The package's name is the test's own, so no other test's
    import answers; it is returned."""
    package = f"acme_{uuid.uuid4().hex[:8]}"
    root = tmp_path / "site"
    (root / package).mkdir(parents=True)
    entry_points = {
        "acme-index": f"{package}.index",
        "acme-llm": f"{package}.llm:Llm",
        "acme-patterns": f"{package}_patterns",
    }
    modules = {
        f"{package}/__init__": "",
        f"{package}/index": INDEX,
        f"{package}/llm": LLM,
        f"{package}_patterns": PATTERNS,
    }
    if second_index:
        entry_points["acme-index-two"] = f"{package}.index_two"
        modules[f"{package}/index_two"] = INDEX
    site = make_distribution(root, "acme-backend", entry_points, modules)
    declared = {"acme": package} if groups is None else groups
    (entry_points_txt,) = site.glob("*.dist-info/entry_points.txt")
    with entry_points_txt.open("a") as file:
        file.write("\n[pimem.groups]\n")
        file.writelines(
            f"{name} = {value.format(package=package)}\n" for name, value in declared.items()
        )
    monkeypatch.syspath_prepend(site)
    return package


def statuses(make_pimem: MakePimem, env: Mapping[str, str]) -> dict[str, str]:
    pimem = make_pimem(installed=True, env=env)
    return {record.name: record.status_text for record in pimem.pm.records}


def test_memsearch_is_one_group_of_its_six_plugins() -> None:
    installed = list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
    groups = {group.name: group for group in find_groups(installed)}
    memsearch = groups["memsearch"]
    assert (memsearch.distribution, memsearch.package, memsearch.error) == (
        "pimem",
        "pimem_plugins.memsearch",
        None,
    )
    assert memsearch.plugins == MEMSEARCH


def test_disabling_memsearch_blocks_all_of_its_plugins(make_pimem: MakePimem) -> None:
    found = statuses(make_pimem, {"PIMEM_DISABLE_PLUGINS": "memsearch"})
    assert {name: found[name] for name in MEMSEARCH} == dict.fromkeys(
        MEMSEARCH, "blocked (PIMEM_DISABLE_PLUGINS=memsearch)"
    )
    assert found["markdown-store"] == "active"
    # A plugin blocked by its own name says only that.
    assert statuses(make_pimem, {"PIMEM_DISABLE_PLUGINS": "memsearch-llm"})["memsearch-llm"] == (
        "blocked"
    )


def test_choosing_memsearch_chooses_its_index(make_pimem: MakePimem) -> None:
    pimem = make_pimem(installed=True, env={"PIMEM_USE": "open_index:memsearch"})
    assert pimem.pm.answering_plugins()["pimem_open_index"] == "memsearch-index"
    # Everyone reading the settings sees the plugin chosen; the setting as it was written stays.
    for settings in (pimem.settings, pimem.pm.settings):
        choice = settings.choice("pimem_open_index")
        assert choice is not None
        assert (choice.plugin, choice.setting) == (
            "memsearch-index",
            "PIMEM_USE=open_index:memsearch",
        )


def test_a_group_chosen_for_a_hook_none_of_its_plugins_implements_stops_pimem(
    make_pimem: MakePimem,
) -> None:
    with pytest.raises(SettingsError, match=r"no plugin of the group 'memsearch' \(memory-to"):
        make_pimem(installed=True, env={"PIMEM_USE": "resolve_scope:memsearch"})


def test_an_installed_distributions_group_blocks_its_plugins_and_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_pimem: MakePimem
) -> None:
    package = install_acme(tmp_path, monkeypatch)
    pimem = make_pimem(installed=True, env={"PIMEM_DISABLE_PLUGINS": "acme"})
    records = {record.name: record for record in pimem.pm.records}
    assert {
        name: records[name].status_text for name in ("acme-index", "acme-llm")
    } == dict.fromkeys(("acme-index", "acme-llm"), "blocked (PIMEM_DISABLE_PLUGINS=acme)")
    # Outside the package, outside the group.
    assert (records["acme-patterns"].status, records["acme-patterns"].group) == ("active", None)
    assert records["acme-index"].group == "acme"
    # Blocked plugins are never imported.
    assert not any(name.startswith(f"{package}.") for name in sys.modules)
    (acme,) = [group for group in pimem.pm.groups if group.name == "acme"]
    assert (acme.distribution, acme.package, acme.plugins) == (
        "acme-backend",
        package,
        ("acme-index", "acme-llm"),
    )


def test_an_installed_distributions_group_chooses_its_plugin_per_hook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_pimem: MakePimem
) -> None:
    install_acme(tmp_path, monkeypatch)
    # acme-index answers only when chosen: installing it changes nothing.
    assert make_pimem(installed=True).pm.answering_plugins()["pimem_open_index"] == (
        "memsearch-index"
    )
    pimem = make_pimem(installed=True, env={"PIMEM_USE": "open_index:acme,provide_model:acme"})
    answers = pimem.pm.answering_plugins()
    assert (answers["pimem_open_index"], answers["pimem_provide_model"]) == (
        "acme-index",
        "acme-llm",
    )
    assert pimem.pm.contested_hooks() == ()


def test_a_group_with_two_plugins_for_the_hook_must_be_chosen_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_pimem: MakePimem
) -> None:
    install_acme(tmp_path, monkeypatch, second_index=True)
    with pytest.raises(SettingsError) as raised:
        make_pimem(installed=True, env={"PIMEM_USE": "open_index:acme"})
    assert str(raised.value) == (
        "PIMEM_USE=open_index:acme names the plugin group 'acme', in which acme-index, "
        "acme-index-two all implement open_index: choose one of them by name "
        "(PIMEM_USE=open_index:acme-index)."
    )
    # Its other hooks still have one plugin each.
    pimem = make_pimem(installed=True, env={"PIMEM_USE": "provide_model:acme"})
    assert pimem.pm.answering_plugins()["pimem_provide_model"] == "acme-llm"


def test_a_blocked_group_cannot_be_chosen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_pimem: MakePimem
) -> None:
    install_acme(tmp_path, monkeypatch)
    env = {"PIMEM_USE": "open_index:acme", "PIMEM_DISABLE_PLUGINS": "acme"}
    with pytest.raises(SettingsError, match="chooses the plugin group 'acme', but PIMEM_DISABLE"):
        make_pimem(installed=True, env=env)


def test_a_group_named_like_a_plugin_or_not_a_package_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_pimem: MakePimem
) -> None:
    install_acme(
        tmp_path,
        monkeypatch,
        groups={"acme-patterns": "{package}", "acme": "{package}:Thing", "empty": "nowhere"},
    )
    pimem = make_pimem(installed=True, env={"PIMEM_DISABLE_PLUGINS": "acme-patterns,acme"})
    groups = {group.name: group.error for group in pimem.pm.groups}
    assert groups["acme-patterns (acme-backend)"] == (
        "the name 'acme-patterns' is a plugin's; rename the group"
    )
    assert "is not a package name" in str(groups["acme"])
    assert groups["empty"] == "no plugin of acme-backend lies in nowhere"
    found = {record.name: record.status_text for record in pimem.pm.records}
    # The name blocks the plugin of that name only, and the broken group blocks nothing.
    assert (found["acme-patterns"], found["acme-index"], found["acme-llm"]) == (
        "blocked",
        "active",
        "active",
    )


def test_pimem_plugins_shows_each_plugins_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_pimem: RunPimem
) -> None:
    install_acme(tmp_path, monkeypatch)
    env = {"PIMEM_DISABLE_PLUGINS": "acme"}
    listed = run_pimem("plugins", "--json", installed=True, env=env)
    assert listed.exit_code == 0, listed.stderr
    groups = {row["name"]: row["group"] for row in listed.json["plugins"]}
    assert (groups["acme-index"], groups["memsearch-index"], groups["acme-patterns"]) == (
        "acme",
        "memsearch",
        None,
    )
    text = run_pimem("plugins", installed=True, env=env).stdout
    assert "blocked (PIMEM_DISABLE_PLUGINS=acme)" in text
