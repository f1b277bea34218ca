"""pimem_core.testing, the plugin authors' kit: its fixtures (loaded as a pytest plugin), and the
public scope helpers of pimem_core.scopes."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest

from pimem_core import Settings, hookimpl
from pimem_core.errors import PluginLoadError
from pimem_core.scopes import derive_collection, find_repository_dir, project_scope
from pimem_core.testing import FakeHostModel, MakePimem, TempProject, plugin_name
from pimem_core.types import Anchor, Distillation, DistillRequest, Exchange, ExchangeMessage
from pimem_plugins.scope_default import DefaultScope


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
    resolver.SCOPE = project_scope(pimem_project.directory / "elsewhere")  # type: ignore[attr-defined]
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
    assert find_repository_dir(pimem_project.directory / "a" / "b") == pimem_project.directory
    assert pimem_project.scope == DefaultScope().pimem_resolve_scope(
        cwd=pimem_project.directory, settings=Settings()
    )
    assert pimem_project.scope.collection == derive_collection(pimem_project.directory)


def test_the_scope_helpers_are_the_ones_the_bundled_plugins_use() -> None:
    from pimem_plugins.shared import layout

    assert layout.derive_collection is derive_collection
    assert layout.find_repository_dir is find_repository_dir


def test_runtime_imports_do_not_import_pytest() -> None:
    probe = (
        "import sys, pimem_core.api, pimem_core.doors.cli, pimem_core.scopes, pimem_core.manager\n"
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
