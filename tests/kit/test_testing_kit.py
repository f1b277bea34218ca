"""pimem_core.testing, the plugin authors' kit: its fixtures (loaded as a pytest plugin), and the
public scope helpers of Scope."""

from __future__ import annotations

import inspect
import logging
import os
import re
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from pimem_core import Settings, SettingSpec, hookimpl, testing
from pimem_core.errors import PluginLoadError, SettingsError
from pimem_core.testing import (
    CliResult,
    FakeHostModel,
    InMemoryIndexPlugin,
    MakePimem,
    RunPimem,
    TempProject,
    plugin_name,
    read_hits,
)
from pimem_core.types import (
    Anchor,
    Distillation,
    DistillRequest,
    Exchange,
    ExchangeMessage,
    Scope,
)
from pimem_plugins.scope_default import DefaultScope

from conftest import make_distribution


class ModelDistiller:
    """Distils with the host's model: what a third-party distiller does."""

    @hookimpl
    def pimem_distill_exchange(self, request: DistillRequest) -> Distillation | None:
        if request.host_model is None:
            return None
        text = request.host_model.complete("distil", request.exchange.transcript, 5.0)
        return Distillation(text=text, distiller="model-distiller", used_model=True)


def request(model: FakeHostModel, settings: Settings) -> DistillRequest:
    exchange = Exchange(
        anchor=Anchor(session="s", turn="t", transcript="/t.jsonl"),
        messages=(ExchangeMessage(role="user", text="use tabs"),),
    )
    return DistillRequest(exchange=exchange, settings=settings, host_model=model.host_model)


def test_make_pimem_loads_only_the_plugins_given(
    make_pimem: MakePimem, fake_host_model: FakeHostModel
) -> None:
    pimem = make_pimem(ModelDistiller)
    assert [(r.name, r.status) for r in pimem.pm.records] == [("ModelDistiller", "active")]
    assert pimem.pm.answering_plugins()["pimem_resolve_scope"] is None

    fake_host_model.script("- The user prefers tabs.")
    answer = pimem.distill_exchange(request(fake_host_model, pimem.settings))
    assert answer == Distillation(
        text="- The user prefers tabs.", distiller="model-distiller", used_model=True
    )
    assert fake_host_model.calls == [("distil", "[User]: use tabs")]
    with pytest.raises(LookupError, match="no scripted reply left"):
        pimem.distill_exchange(request(fake_host_model, pimem.settings))


def test_make_pimem_with_installed_plugins_asks_the_given_ones_as_well(
    make_pimem: MakePimem, pimem_project: TempProject
) -> None:
    resolver = types.ModuleType("tests.central_resolver")
    exec(
        "from pimem_core import hookimpl\n"
        "@hookimpl(tryfirst=True)\n"
        "def pimem_resolve_scope(cwd):\n"
        "    return SCOPE\n",
        resolver.__dict__,
    )
    resolver.SCOPE = Scope.for_project(pimem_project.directory / "elsewhere")  # type: ignore[attr-defined]
    pimem = make_pimem(resolver, installed=True)
    assert pimem.pm.answering_plugins()["pimem_resolve_scope"] == "central_resolver"
    assert pimem.resolve_scope(pimem_project.directory).scope_dir.name == "elsewhere"
    assert pimem.pm.get_plugin("scope-default") is not None


def test_make_pimem_loads_an_installed_module_once(make_pimem: MakePimem) -> None:
    from pimem_plugins import secret_patterns

    pimem = make_pimem(secret_patterns, installed=True)
    names = [record.name for record in pimem.pm.records]
    assert "secret-patterns" in names
    assert "secret_patterns" not in names


def test_make_pimem_reads_settings_only_from_env(
    make_pimem: MakePimem, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PI_MEMSEARCH_SNAPSHOT", "off")  # the test process's: not read
    pimem = make_pimem(env={"PIMEM_NOW": "2026-08-13T22:41"})
    assert pimem.settings.snapshot
    assert pimem.settings.now().isoformat().startswith("2026-08-13T22:41")
    assert Path.home() == tmp_path / "pimem-home"
    assert pimem.settings.strict_plugins


def test_make_pimem_names_plugins_and_takes_a_name(make_pimem: MakePimem) -> None:
    pimem = make_pimem(("mine", ModelDistiller()))
    assert [record.name for record in pimem.pm.records] == ["mine"]
    assert plugin_name(types) == "types"
    assert plugin_name(ModelDistiller) == plugin_name(ModelDistiller()) == "ModelDistiller"


def test_make_pimem_is_strict_about_plugins_that_do_not_fit(make_pimem: MakePimem) -> None:
    class Misspelled:
        @hookimpl
        def pimem_resolve_scop(self) -> None:
            pass

    with pytest.raises(PluginLoadError, match="pimem_resolve_scop"):
        make_pimem(Misspelled)


def test_pimem_project_is_a_git_root_with_the_default_scope(pimem_project: TempProject) -> None:
    assert (pimem_project.directory / ".git").is_dir()
    assert Scope.find_repository_dir(pimem_project.directory / "a" / "b") == pimem_project.directory
    assert pimem_project.scope == DefaultScope().pimem_resolve_scope(
        cwd=pimem_project.directory, settings=Settings()
    )
    assert pimem_project.scope.collection == Scope.derive_collection(pimem_project.directory)


def test_runtime_imports_do_not_import_pytest() -> None:
    probe = (
        "import sys, pimem_core.api, pimem_core.doors.cli, pimem_core.scope, pimem_core.manager\n"
        "print('pytest' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_the_kit_without_pytest_says_what_to_install() -> None:
    probe = "import sys; sys.modules['pytest'] = None; import pimem_core.testing"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 1
    assert "pip install 'pimem[testing]'" in done.stderr


def test_the_fixtures_reach_a_suite_with_no_conftest(tmp_path: Path) -> None:
    (tmp_path / "test_outside.py").write_text(
        "def test_kit(make_pimem, pimem_project, fake_host_model):\n"
        "    pimem = make_pimem(installed=True)\n"
        "    assert pimem.resolve_scope(pimem_project.directory) == pimem_project.scope\n"
        "    assert fake_host_model.script('hi').host_model.complete('s', 'p', 1.0) == 'hi'\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


# -- a plugin given that is installed too: registered once, under its entry-point name --------


def test_an_installed_class_given_is_registered_once_under_its_entry_point_name(
    make_pimem: MakePimem,
) -> None:
    pimem = make_pimem(DefaultScope, installed=True)
    names = [record.name for record in pimem.pm.records]
    assert names.count("scope-default") == 1
    assert "DefaultScope" not in names
    assert pimem.pm.implementing_plugins("pimem_resolve_scope").count("scope-default") == 1
    assert sum(isinstance(plugin, DefaultScope) for plugin in pimem.pm.get_plugins()) == 1


def test_an_installed_plugin_given_as_an_object_is_that_object_in_its_place(
    make_pimem: MakePimem,
) -> None:
    given = DefaultScope()
    pimem = make_pimem(given, installed=True)
    assert pimem.pm.get_plugin("scope-default") is given
    assert sum(isinstance(plugin, DefaultScope) for plugin in pimem.pm.get_plugins()) == 1
    record = next(record for record in pimem.pm.records if record.name == "scope-default")
    assert record.distribution == "pimem"  # loaded as the entry point, with its distribution
    # In the installed plugins' order, not last: the resolvers are asked as pimem asks them.
    installed = make_pimem(installed=True).pm.implementing_plugins("pimem_resolve_scope")
    assert pimem.pm.implementing_plugins("pimem_resolve_scope") == installed


def test_an_installed_plugin_given_under_another_name_is_refused(make_pimem: MakePimem) -> None:
    from pimem_plugins import secret_patterns

    with pytest.raises(ValueError, match="installed as 'scope-default'"):
        make_pimem(("my-scope", DefaultScope), installed=True)
    with pytest.raises(ValueError, match="installed as 'scope-default'"):  # after another match
        make_pimem(secret_patterns, ("my-scope", DefaultScope), installed=True)
    named = make_pimem(secret_patterns, ("scope-default", DefaultScope), installed=True)
    assert [record.name for record in named.pm.records].count("scope-default") == 1
    pimem = make_pimem(("my-scope", DefaultScope))  # not installed here: the name is kept
    assert [record.name for record in pimem.pm.records] == ["my-scope"]


# -- the facade carries the settings the plugins declare -----------------------------------------

VOLUME = SettingSpec(
    plugin="greeter",
    name="volume",
    env="PIMEM_GREETER_VOLUME",
    parse=int,
    default=3,
    help="how loud the greeting is",
)


class Greeter:
    # Static, as pimem asks a class plugin for its settings before instantiating it.
    @staticmethod
    @hookimpl
    def pimem_declare_settings() -> tuple[SettingSpec[int]]:
        return (VOLUME,)


def test_the_facade_has_the_settings_the_plugins_declare(make_pimem: MakePimem) -> None:
    pimem = make_pimem(Greeter, env={"PIMEM_GREETER_VOLUME": "7"})
    assert pimem.settings.plugin_values == {"PIMEM_GREETER_VOLUME": 7}
    assert pimem.settings is pimem.pm.settings
    assert VOLUME.read(pimem.settings) == 7
    assert pimem.declared_settings() == (VOLUME,)
    assert make_pimem(Greeter).settings.plugin_values == {"PIMEM_GREETER_VOLUME": 3}
    with pytest.raises(SettingsError, match="PIMEM_GREETER_VOLUME"):
        make_pimem(Greeter, env={"PIMEM_GREETER_VOLUME": "loud"})


# -- run_pimem: the command line, in process ------------------------------------------------------


class Recorder:
    """A resolver that records the environment and directory the command ran with."""

    def __init__(self) -> None:
        self.seen: list[tuple[dict[str, str], Path]] = []

    @hookimpl(tryfirst=True)
    def pimem_resolve_scope(self, cwd: Path) -> Scope:
        self.seen.append((dict(os.environ), Path.cwd()))
        return Scope.for_project(cwd)


def test_run_pimem_lists_the_plugins_chosen(run_pimem: RunPimem) -> None:
    only = run_pimem("plugins", "--json", plugins=[Recorder])
    assert only.exit_code == 0, only.stderr
    assert [row["name"] for row in only.json["plugins"]] == ["Recorder"]
    assert only.json["single_answer_hooks"]["pimem_resolve_scope"] == "Recorder"

    every = run_pimem("plugins", "--json", plugins=[DefaultScope], installed=True)
    names = [row["name"] for row in every.json["plugins"]]
    assert names.count("scope-default") == 1
    assert "DefaultScope" not in names
    assert "markdown-store" in names

    text = run_pimem("plugins", plugins=[Recorder])
    assert text.json is None
    assert "Recorder" in text.stdout
    assert text.args == ("plugins",)


def test_run_pimem_writes_and_searches_with_the_in_memory_index(
    run_pimem: RunPimem, pimem_project: TempProject
) -> None:
    index = InMemoryIndexPlugin()
    anchor = ("--session", "s1", "--turn", "t1", "--transcript", "/t/s1.jsonl")

    def run(*args: str, stdin: str | None = None) -> CliResult:
        return run_pimem(
            *args,
            plugins=[index],
            installed=True,
            env={"PIMEM_NOW": "2026-08-13T22:41"},
            cwd=pimem_project.directory,
            stdin=stdin,
        )

    written = run("write", "-", *anchor, "--json", stdin="- the build needs node 22\n")
    assert written.exit_code == 0, written.stderr
    assert Path(written.json["file"]) == pimem_project.scope.memory_dir / "2026-08-13.md"

    assert run("index").exit_code == 0  # the in-memory index reads the day files when told to
    found = run("search", "which node")
    assert found.exit_code == 0, found.stderr
    (hit,) = read_hits(found.stdout)
    assert hit.content == "- the build needs node 22"
    assert hit.day == "2026-08-13"
    # The object given is the same in every run: its index is the one the search used.
    assert index.indexes[pimem_project.scope.collection].operations[-1] == "search"


def test_run_pimem_reports_error_exits(run_pimem: RunPimem, pimem_project: TempProject) -> None:
    nothing = run_pimem("scope", "--json", cwd=pimem_project.directory)  # no plugin at all
    assert nothing.exit_code == 1
    assert nothing.stdout == ""
    assert nothing.stderr.startswith("pimem: error: no plugin answered pimem_resolve_scope")
    assert nothing.json is None

    assert read_hits(nothing.stderr) == ()

    unknown = run_pimem("no-such-command")
    assert unknown.exit_code == 2
    assert "invalid choice: 'no-such-command'" in unknown.stderr

    version = run_pimem("--version")
    assert version.exit_code == 0
    assert version.stdout.startswith("pimem ")

    strict = run_pimem("plugins", plugins=[("greeter", Greeter)], env={"PIMEM_GREETER_VOLUME": "x"})
    assert strict.exit_code == 1
    assert "PIMEM_GREETER_VOLUME" in strict.stderr


def test_run_pimem_runs_in_an_environment_of_its_own(
    run_pimem: RunPimem,
    pimem_project: TempProject,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("PIMEM_DISABLE_PLUGINS", "Recorder")  # the test process's: not seen
    monkeypatch.setenv("PI_MEMSEARCH_SNAPSHOT", "off")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "the-users-data"))
    before = dict(os.environ)
    recorder = Recorder()
    result = run_pimem("scope", "--json", plugins=[recorder], env={"PIMEM_NOW": "2026-08-13T22:41"})
    assert result.exit_code == 0, result.stderr
    env, cwd = recorder.seen[0]
    assert env["HOME"] == str(tmp_path / "pimem-home")
    assert env["PIMEM_NOW"] == "2026-08-13T22:41"
    assert env["PIMEM_SERVICE"] == "off"
    assert env["PIMEM_STRICT_PLUGINS"] == "1"
    assert not {"PIMEM_DISABLE_PLUGINS", "PI_MEMSEARCH_SNAPSHOT", "XDG_DATA_HOME"} & set(env)
    assert Path(env["XDG_RUNTIME_DIR"]).stat().st_mode & 0o077 == 0
    assert cwd == tmp_path  # not where pytest was started
    assert os.environ == before  # restored after the run

    run_pimem(
        "scope", "--cwd", pimem_project.directory, plugins=[recorder], cwd=pimem_project.directory
    )
    assert recorder.seen[1][1] == pimem_project.directory
    assert Path.cwd() != pimem_project.directory


def test_run_pimem_leaves_no_log_handler_behind(run_pimem: RunPimem) -> None:
    logger = logging.getLogger("pimem_core")
    handlers, level = list(logger.handlers), logger.level
    assert run_pimem("plugins", "-vv", plugins=[Recorder]).exit_code == 0
    assert (logger.handlers, logger.level) == (handlers, level)


# -- every example of the kit's documentation runs -----------------------------------------------

# The plugin the module's example tests: installed under the entry-point name `my-plugin`.
MY_PLUGIN = '''
"""Keeps every project under ~/notes in one store."""
from pathlib import Path

from pimem_core.plugin import Scope, hookimpl


@hookimpl(tryfirst=True)
def pimem_resolve_scope(cwd):
    notes = Path.home() / "notes"
    if cwd != notes and notes not in cwd.parents:
        return None
    return Scope.for_project(notes)
'''


def literal_blocks(doc: str) -> list[str]:
    """The blocks after a line ending in ``::``: the lines indented under it, dedented."""
    blocks: list[str] = []
    lines = doc.splitlines()
    for number, line in enumerate(lines):
        if not line.rstrip().endswith("::"):
            continue
        margin = len(line) - len(line.lstrip())
        block: list[str] = []
        for following in lines[number + 1 :]:
            if following.strip() and len(following) - len(following.lstrip()) <= margin:
                break
            block.append(following)
        blocks.append(textwrap.dedent("\n".join(block)).strip("\n") + "\n")
    return blocks


def kit_docstrings() -> list[tuple[str, str]]:
    """Each documented thing of ``pimem_core.testing`` (module, classes, their methods,
    functions, fixtures) and its docstring."""
    found = [("pimem_core.testing", inspect.getdoc(testing) or "")]
    for name in testing.__all__:
        value = getattr(testing, name)
        found.append((name, inspect.getdoc(value) or ""))
        if isinstance(value, type):
            for attr, member in vars(value).items():
                if callable(member) or isinstance(member, property):
                    found.append((f"{name}.{attr}", inspect.getdoc(member) or ""))
    return found


def test_every_example_in_the_kits_docstrings_runs(tmp_path: Path) -> None:
    examples = [(where, block) for where, doc in kit_docstrings() for block in literal_blocks(doc)]
    assert examples, "the kit's documentation shows an example"
    tests = 0
    for number, (where, block) in enumerate(examples):
        defined = len(re.findall(r"^def test_", block, re.MULTILINE))
        assert defined, f"the example in {where}'s docstring defines no test, so none runs it"
        tests += defined
        (tmp_path / f"test_example_{number}.py").write_text(block)
    site = make_distribution(
        tmp_path / "site", "my-plugin", {"my-plugin": "my_plugin"}, {"my_plugin": MY_PLUGIN}
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error", "."],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site)},
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{tests} passed" in done.stdout, done.stdout
