"""The plugin manager and the typed facade: loading, blocking, validation and hook coverage."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import logging
import re
import subprocess
import sys
import types
import uuid
from datetime import date
from pathlib import Path

import pytest

from pimem_core import Pimem, Settings, hookimpl
from pimem_core.errors import (
    NoProviderError,
    PluginError,
    PluginLoadError,
    SettingsError,
    StoreError,
)
from pimem_core.hookspecs import PimemSpecs
from pimem_core.manager import PimemPluginManager, build_plugin_manager
from pimem_core.services import MemoryStore
from pimem_core.types import Scope
from pimem_plugins.markdown_store import MarkdownMemoryStore

from conftest import REPO_ROOT, make_distribution, make_pimem, run_cli

ROOT = REPO_ROOT
BUNDLED = {
    "scope-default",
    "store-command",
    "markdown-store",
    "stable-snapshot",
    "memsearch-index",
    "pi-transcript",
    "capture-gates",
    "distill-host",
    "distill-http",
    "distill-extractive",
    "secret-patterns",
    "cross-repo",
    "auto-context",
    "project-review",
    "user-profile",
    "memory-to-skill",
    "memsearch-llm",
    "memsearch-tools",
    "pi-setup",
    "git-merge",
    "usage",
}
INACTIVE = {"store-command", "distill-http"}  # on only when their setting is given
HOOKS = sorted(name for name in dir(PimemSpecs) if name.startswith("pimem_"))

RESOLVER = """
from pathlib import Path
from pimem_core import hookimpl
from pimem_core.types import Scope

@hookimpl
def pimem_resolve_scope(cwd):
    return Scope(
        repository_dir=cwd, scope_dir=Path("/elsewhere"), memory_dir=Path("/elsewhere/memory"),
        collection="ms_third_party", index_state_path=None,
    )
"""


def entry_point(name: str, value: str) -> importlib.metadata.EntryPoint:
    return importlib.metadata.EntryPoint(name=name, value=value, group="pimem")


def manager_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, **env: str) -> Pimem:
    """The installed plugins plus one third-party plugin module holding *source*."""
    module = f"pimem_extra_{uuid.uuid4().hex}"  # a fresh import for every test
    make_distribution(tmp_path / "site", "pimem-extra", {"extra": module}, {module: source})
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return make_pimem(env)


def test_bundled_plugins_are_loaded_from_the_entry_point_group() -> None:
    records = {record.name: record for record in make_pimem().pm.records}
    assert set(records) == BUNDLED
    assert {record.distribution for record in records.values()} == {"pimem"}
    assert {name for name in BUNDLED if records[name].status == "inactive-by-setting"} == INACTIVE
    assert all(records[name].status == "active" for name in BUNDLED - INACTIVE)
    assert records["markdown-store"].hooks == (
        "pimem_collect_status",
        "pimem_merge_day_file",
        "pimem_open_store",
    )
    assert records["memsearch-index"].hooks == (
        "pimem_declare_settings",
        "pimem_observe_change",
        "pimem_open_index",
    )


def test_defaults_answer_every_implemented_single_answer_hook() -> None:
    answers = make_pimem().pm.answering_plugins()
    assert answers["pimem_resolve_scope"] == "scope-default"
    assert answers["pimem_open_store"] == "markdown-store"
    assert answers["pimem_build_snapshot"] == "stable-snapshot"
    assert answers["pimem_open_index"] == "memsearch-index"
    assert answers["pimem_distill_exchange"] == "distill-host"
    assert answers["pimem_open_transcript"] == "pi-transcript"
    assert answers["pimem_open_skills"] == "memory-to-skill"
    assert answers["pimem_merge_day_file"] == "markdown-store"
    assert "pimem_observe_change" not in answers  # a collecting hook


def test_store_command_is_asked_before_the_default(tmp_path: Path) -> None:
    pimem = make_pimem({"PI_MEMSEARCH_STORE_CMD": str(tmp_path / "resolver")})
    assert pimem.pm.answering_plugins()["pimem_resolve_scope"] == "store-command"


def test_third_party_resolver_replaces_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo: Path
) -> None:
    pimem = manager_with(tmp_path, monkeypatch, RESOLVER)
    assert pimem.pm.answering_plugins()["pimem_resolve_scope"] == "extra"
    assert pimem.resolve_scope(repo).collection == "ms_third_party"
    record = next(record for record in pimem.pm.records if record.name == "extra")
    assert (record.distribution, record.version, record.status) == ("pimem-extra", "1.0", "active")


def test_blocking_a_plugin_restores_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo: Path
) -> None:
    pimem = manager_with(tmp_path, monkeypatch, RESOLVER, PIMEM_DISABLE_PLUGINS="extra")
    assert pimem.pm.answering_plugins()["pimem_resolve_scope"] == "scope-default"
    assert pimem.resolve_scope(repo).scope_dir == repo
    statuses = {record.name: record.status for record in pimem.pm.records}
    assert statuses["extra"] == "blocked"


def test_a_plugin_that_fails_to_import_is_reported_and_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        pimem = manager_with(
            tmp_path, monkeypatch, "raise ImportError('needs a GPU')", PIMEM_STRICT_PLUGINS="0"
        )
    record = next(record for record in pimem.pm.records if record.name == "extra")
    assert record.status == "failed"
    assert "needs a GPU" in (record.error or "")
    assert not record.routes_memory  # its source names no hook that decides where memory goes
    assert pimem.pm.failed == (record,)
    assert "extra" in caplog.text
    assert "PIMEM_STRICT_PLUGINS" in caplog.text
    assert {r.name for r in pimem.pm.records if r.status == "active"} == BUNDLED - INACTIVE


def test_strict_mode_makes_an_import_failure_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(PluginLoadError, match=r"'extra'.*needs a GPU"):
        manager_with(tmp_path, monkeypatch, "raise ImportError('needs a GPU')")


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            "from pimem_core.plugin import hookimpl\n@hookimpl\ndef pimem_resolve_scop(cwd):\n"
            "    pass\n",
            r"pimem_resolve_scop, which is not a pimem hook \(misspelled\?\)",
        ),
        (
            "def pimem_resolve_scope(cwd):\n    pass\n",
            r"without @hookimpl, so it would never be called; mark it "
            r"\(`from pimem_core\.plugin import hookimpl`\)",
        ),
        (
            "from pimem_core.plugin import hookimpl\n@hookimpl\n"
            "def pimem_resolve_scope(directory):\n"
            "    pass\n",
            r"(?s)does not fit the pimem hooks.*directory",
        ),
    ],
    ids=["misspelled", "unmarked", "unknown-argument"],
)
def test_a_hook_implementation_that_does_not_fit_is_skipped_and_strict_mode_raises(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    source: str,
    message: str,
) -> None:
    with caplog.at_level(logging.INFO):
        pimem = manager_with(tmp_path, monkeypatch, source, PIMEM_STRICT_PLUGINS="0")
    record = next(record for record in pimem.pm.records if record.name == "extra")
    assert record.status == "failed"
    assert re.search(message, record.error or "")
    assert re.search(message, caplog.text)
    assert "skipped" in caplog.text
    assert not pimem.pm.has_plugin("extra")
    assert {r.name for r in pimem.pm.records if r.status == "active"} == BUNDLED - INACTIVE

    with pytest.raises(PluginLoadError, match=message) as raised:
        make_pimem()  # the suite runs with PIMEM_STRICT_PLUGINS=1
    assert "PIMEM_DISABLE_PLUGINS=extra" in str(raised.value) or "does not fit" in str(raised.value)


HELPER = """
from pimem_core import hookimpl

def pimem_format_line(text):
    return "- " + text

@hookimpl
def pimem_collect_secret_patterns():
    return []
"""


def test_a_helper_named_like_a_hook_does_not_stop_pimem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pimem = manager_with(tmp_path, monkeypatch, HELPER)  # strict: it would raise if refused
    record = next(record for record in pimem.pm.records if record.name == "extra")
    assert (record.status, record.hooks) == ("active", ("pimem_collect_secret_patterns",))


def test_pimem_plugins_lists_a_plugin_that_does_not_fit(tmp_path: Path) -> None:
    module = f"pimem_unfit_{uuid.uuid4().hex}"
    site = make_distribution(
        tmp_path / "site",
        "pimem-unfit",
        {"unfit": module},
        {module: "from pimem_core import hookimpl\n@hookimpl\ndef pimem_typo(cwd):\n    pass\n"},
    )
    env = {"PYTHONPATH": str(site), "PIMEM_STRICT_PLUGINS": "0"}
    listed = run_cli("plugins", env=env)
    assert listed.code == 0, listed.stderr
    line = next(line for line in listed.stdout.splitlines() if line.startswith("unfit "))
    assert line.split()[3] == "failed"
    assert "pimem_typo, which is not a pimem hook" in line
    # Said once, in its own answer: no warning line on stderr beside it.
    assert "warning: plugin 'unfit' failed to load" in listed.stdout
    assert "PIMEM_DISABLE_PLUGINS=unfit" in listed.stdout
    assert listed.stderr == ""
    assert run_cli("plugins", env=env | {"PIMEM_STRICT_PLUGINS": "1"}).code == 1


def test_pimem_plugins_names_the_setting_that_deactivated_a_plugin() -> None:
    listed = run_cli("plugins", env={"PI_MEMSEARCH_SNAPSHOT": "off"})
    assert listed.code == 0, listed.stderr
    rows = {line.split()[0]: line for line in listed.stdout.splitlines() if line}
    assert "inactive-by-setting (PI_MEMSEARCH_SNAPSHOT)" in rows["stable-snapshot"]
    assert "inactive-by-setting (PI_MEMSEARCH_STORE_CMD)" in rows["store-command"]
    assert "inactive-by-setting (PIMEM_DISTILL_URL)" in rows["distill-http"]
    data = json.loads(run_cli("plugins", "--json").stdout)
    settings = {row["name"]: row["setting"] for row in data["plugins"]}
    assert settings["store-command"] == "PI_MEMSEARCH_STORE_CMD"
    assert settings["markdown-store"] is None


class BuggyStore(MarkdownMemoryStore):
    def read_day(self, day: date) -> str | None:
        raise ZeroDivisionError("a bug in the plugin")


class Buggy:
    @hookimpl(tryfirst=True)
    def pimem_open_store(self, scope: Scope) -> MemoryStore:
        return BuggyStore(scope)


def test_an_exception_inside_a_plugin_names_the_plugin(repo: Path) -> None:
    pimem = make_pimem()
    pimem.pm.add_plugin(Buggy(), "buggy")
    with pytest.raises(ZeroDivisionError) as raised:
        pimem.read_day(pimem.resolve_scope(repo), date(2026, 8, 13))
    assert raised.value.__notes__ == ["pimem plugin 'buggy' raised this in MemoryStore.read_day"]


def test_an_exception_inside_a_hook_names_the_plugin(repo: Path) -> None:
    class BuggyOpener:
        @hookimpl(tryfirst=True)
        def pimem_open_store(self) -> None:
            raise ZeroDivisionError("a bug in the plugin")

    pimem = make_pimem()
    pimem.pm.add_plugin(BuggyOpener(), "buggy-opener")
    with pytest.raises(ZeroDivisionError) as raised:
        pimem.read_day(pimem.resolve_scope(repo), date(2026, 8, 13))
    assert raised.value.__notes__ == ["pimem plugin 'buggy-opener' raised this in pimem_open_store"]


class RefusingStore(MarkdownMemoryStore):
    def read_day(self, day: date) -> str | None:
        raise StoreError("the store is read-only: remount it")


def test_a_deliberate_pimem_error_is_left_as_the_plugin_wrote_it(repo: Path) -> None:
    class Refusing:
        @hookimpl(tryfirst=True)
        def pimem_open_store(self, scope: Scope) -> MemoryStore:
            return RefusingStore(scope)

    pimem = make_pimem()
    pimem.pm.add_plugin(Refusing(), "refusing")
    with pytest.raises(StoreError, match="read-only") as raised:
        pimem.read_day(pimem.resolve_scope(repo), date(2026, 8, 13))
    assert not hasattr(raised.value, "__notes__")


def test_the_cli_shows_which_plugin_raised(tmp_path: Path, repo: Path) -> None:
    module = f"pimem_buggy_{uuid.uuid4().hex}"
    source = (
        "from pimem_core import hookimpl\n"
        "@hookimpl(tryfirst=True)\n"
        "def pimem_resolve_scope(cwd):\n"
        "    raise ZeroDivisionError('a bug in the plugin')\n"
    )
    site = make_distribution(tmp_path / "site", "pimem-buggy", {"buggy": module}, {module: source})
    result = run_cli("scope", "--cwd", str(repo), env={"PYTHONPATH": str(site)})
    assert result.code == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith(
        "pimem: error: plugin 'buggy' raised ZeroDivisionError('a bug in the plugin') in "
        "pimem_resolve_scope; the traceback is in "
    )
    kept = Path(line.split("; the traceback is in ")[1].split(" (fix")[0])
    assert "Traceback" in kept.read_text()


def test_a_rejected_plugin_is_not_left_half_registered() -> None:
    plugin = types.ModuleType("broken")
    exec(
        "from pimem_core import hookimpl\n@hookimpl\ndef pimem_open_store(nonsense):\n    pass\n",
        plugin.__dict__,
    )
    pm = PimemPluginManager()
    with pytest.raises(PluginLoadError, match="nonsense"):
        pm.add_plugin(plugin, "broken")
    assert not pm.has_plugin("broken")


def test_inactive_plugins_are_recorded_but_not_registered(tmp_path: Path) -> None:
    pm = build_plugin_manager(
        Settings(snapshot=False),
        entry_points=[entry_point("stable-snapshot", "pimem_plugins.snapshot")],
    )
    assert [record.status for record in pm.records] == ["inactive-by-setting"]
    assert pm.records[0].setting == "PI_MEMSEARCH_SNAPSHOT"
    assert pm.get_plugins() == set()


def test_plugin_classes_are_instantiated_once_per_manager() -> None:
    points = [entry_point("markdown-store", "pimem_plugins.markdown_store:MarkdownStore")]
    first = build_plugin_manager(Settings(), entry_points=points).get_plugin("markdown-store")
    second = build_plugin_manager(Settings(), entry_points=points).get_plugin("markdown-store")
    assert type(first).__name__ == "MarkdownStore"
    assert first is not second


def test_two_distributions_cannot_share_a_plugin_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for dist in ("pimem-one", "pimem-two"):
        module = f"{dist.replace('-', '_')}_{uuid.uuid4().hex}"
        make_distribution(tmp_path / dist, dist, {"twin": module}, {module: ""})
        monkeypatch.syspath_prepend(str(tmp_path / dist))
    records = {record.name: record for record in make_pimem().pm.records}
    assert records["twin"].status == "active"
    duplicate = next(record for name, record in records.items() if name.startswith("twin ("))
    assert duplicate.status == "failed"
    assert "already taken" in (duplicate.error or "")


def test_no_answer_names_the_hook_and_the_blocked_plugins(repo: Path) -> None:
    pimem = make_pimem({"PIMEM_DISABLE_PLUGINS": "scope-default"})
    with pytest.raises(NoProviderError, match=r"pimem_resolve_scope.*scope-default"):
        pimem.resolve_scope(repo)


def test_an_answer_of_the_wrong_type_is_reported(repo: Path) -> None:
    pimem = make_pimem()

    class Wrong:
        from pimem_core import hookimpl

        @hookimpl
        def pimem_resolve_scope(self) -> str:
            return "not a scope"

    pimem.pm.add_plugin(Wrong(), "wrong")
    with pytest.raises(PluginError, match=r"pimem_resolve_scope answered with a str, not a Scope"):
        pimem.resolve_scope(repo)


def test_the_facade_is_the_only_caller_of_pm_hook_and_covers_every_hook() -> None:
    def is_facade(path: Path) -> bool:  # pimem_core/api.py and its parts, pimem_core/facade/
        return path.name == "api.py" or path.parent.name == "facade"

    called: set[str] = set()
    for path in [
        *ROOT.joinpath("pimem_core").rglob("*.py"),
        *ROOT.joinpath("pimem_plugins").rglob("*.py"),
    ]:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Attribute)
                and node.value.attr == "hook"
                and node.attr.startswith("pimem_")
            ):
                assert is_facade(path), f"{path} calls pm.hook.{node.attr} directly"
                called.add(node.attr)
            if (  # pm.caller("pimem_..."): the hook with a choice by name applied
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "caller"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and str(node.args[0].value).startswith("pimem_")
            ):
                assert is_facade(path), f"{path} calls {node.args[0].value!s} directly"
                called.add(str(node.args[0].value))
    assert called == set(HOOKS)


def test_importing_pimem_loads_no_plugin() -> None:
    probe = "import sys, pimem_core; print(any(m.startswith('pimem_plugins') for m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize(
    "source",
    [
        "def is_active(settings):\n    raise RuntimeError('cannot decide')\n",
        "class Plugin:\n    def __init__(self):\n        raise RuntimeError('cannot start')\n",
    ],
    ids=["is-active-raises", "constructor-raises"],
)
def test_a_plugin_that_fails_while_starting_is_reported_and_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    module = f"pimem_starting_{uuid.uuid4().hex}"
    target = f"{module}:Plugin" if source.startswith("class") else module
    make_distribution(tmp_path / "site", "pimem-starting", {"starting": target}, {module: source})
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    records = {r.name: r for r in make_pimem({"PIMEM_STRICT_PLUGINS": "0"}).pm.records}
    assert records["starting"].status == "failed"
    assert "cannot" in (records["starting"].error or "")
    with pytest.raises(PluginLoadError, match="cannot"):
        make_pimem()


def test_a_marked_function_without_the_hook_prefix_fails_at_load() -> None:
    plugin = types.ModuleType("unprefixed")
    exec(
        "from pimem_core import hookimpl\n@hookimpl\ndef resolve_scope(cwd):\n    pass\n",
        plugin.__dict__,
    )
    with pytest.raises(PluginLoadError, match="resolve_scope, which is not a pimem hook"):
        PimemPluginManager().add_plugin(plugin, "unprefixed")


def test_an_observer_failure_does_not_undo_a_successful_write(
    repo: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from pimem_core import hookimpl
    from pimem_core.types import Anchor, Entry

    class Failing:
        @hookimpl
        def pimem_observe_change(self) -> None:
            raise RuntimeError("indexer exploded")

    pimem = make_pimem()
    pimem.pm.add_plugin(Failing(), "failing")
    entry = Entry(
        anchor=Anchor(session="s", turn="t", transcript="/t"),
        content="- kept",
        written_at=pimem.settings.now(),
    )
    with caplog.at_level(logging.ERROR):
        file = pimem.append_entry(pimem.resolve_scope(repo), entry)
    assert file.read_text().endswith("- kept\n\n")
    assert "indexer exploded" in caplog.text


# -- plugin settings (pimem_declare_settings) -----------------------------------------------------

LOUD = """
from pimem_core import SettingSpec, hookimpl
from pimem_core.settings import parse_switch  # core's own parser, under the plugin API's SettingSpec.switch

LOUD = SettingSpec(
    plugin="extra",
    name="loud",
    env="PIMEM_EXTRA_LOUD",
    parse=parse_switch("PIMEM_EXTRA_LOUD"),
    default=False,
    help="shout",
)


class Loud:
    @staticmethod
    @hookimpl
    def pimem_declare_settings():
        return (LOUD,)

    @staticmethod
    def is_active(settings):
        return LOUD.read(settings)
"""


def test_a_declared_setting_activates_its_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = f"pimem_loud_{uuid.uuid4().hex}"
    make_distribution(tmp_path / "site", "pimem-loud", {"extra": f"{module}:Loud"}, {module: LOUD})
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    points = [entry_point("extra", f"{module}:Loud")]

    quiet = build_plugin_manager(Settings.from_env({}), entry_points=points)
    assert [record.status for record in quiet.records] == ["inactive-by-setting"]
    assert [value.value for value in quiet.records[0].settings] == [False]

    loud = build_plugin_manager(Settings.from_env({"PIMEM_EXTRA_LOUD": "on"}), entry_points=points)
    assert [record.status for record in loud.records] == ["active"]
    spec = next(iter(loud.hook.pimem_declare_settings()))[0]
    assert spec.read(loud.settings) is True
    assert spec.read(Settings().with_values((spec, True))) is True

    with pytest.raises(SettingsError, match=r"^PIMEM_EXTRA_LOUD must be 'on' or 'off', got 'loud'"):
        build_plugin_manager(Settings.from_env({"PIMEM_EXTRA_LOUD": "loud"}), entry_points=points)


def test_a_declaration_that_is_not_a_setting_spec_does_not_fit() -> None:
    class Wrong:
        @staticmethod
        @hookimpl
        def pimem_declare_settings() -> tuple[str]:
            return ("PIMEM_WRONG",)

    with pytest.raises(
        PluginLoadError,
        match=r"gave a str, not a SettingSpec \(`from pimem_core\.plugin import SettingSpec`\)",
    ):
        PimemPluginManager().add_plugin(Wrong(), "wrong")


def test_a_service_that_is_not_whole_is_refused_with_what_it_lacks(repo: Path) -> None:
    class SearchOnly:
        def search(self) -> tuple[()]:
            return ()

    class HalfAnIndex:
        @hookimpl(tryfirst=True)
        def pimem_open_index(self) -> SearchOnly:
            return SearchOnly()

    pimem = make_pimem()
    pimem.pm.add_plugin(HalfAnIndex(), "half-an-index")
    with pytest.raises(PluginError) as refused:
        pimem.index(pimem.resolve_scope(repo))
    assert str(refused.value) == (
        "pimem_open_index answered with a SearchOnly, which is not a whole MemoryIndex: it lacks "
        "expand, index, status; the plugin that answers it (see `pimem plugins`) is broken"
    )
