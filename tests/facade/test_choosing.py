"""Choosing by name which plugin answers a single-answer hook: ``PIMEM_USE``, its errors, the
warning of ``pimem plugins``, and ``PIMEM_DISTILLER`` naming any installed distiller (ADR 0019)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from pimem_core import Pimem, Settings, hookimpl
from pimem_core.errors import NoProviderError, SettingsError
from pimem_core.manager import ContestedHook
from pimem_core.testing import FakeHostModel, InMemoryIndex, MakePimem, TempProject
from pimem_core.types import (
    Anchor,
    Distillation,
    DistillRequest,
    Exchange,
    ExchangeMessage,
    Scope,
)

import conftest
from conftest import make_distribution, run_cli

INDEX = """
from pimem_core import hookimpl
from pimem_core.testing import InMemoryIndex

class Index(InMemoryIndex):
    plugin = {name!r}

@hookimpl
def pimem_open_index(scope):
    return Index(scope)
"""

DISTILLER = """
from pimem_core import hookimpl
from pimem_core.types import Distillation

@hookimpl
def pimem_distill_exchange(request):
    return Distillation(text="- distilled by {name}", distiller={name!r}, used_model=False)
"""

#: A distiller that never applies: it passes every exchange on.
PASSING = """
from pimem_core import hookimpl

@hookimpl
def pimem_distill_exchange(request):
    return None
"""

EXCHANGE = Exchange(
    anchor=Anchor(session="s", turn="t", transcript="/t.jsonl"),
    messages=(
        ExchangeMessage(role="user", text="Why does the login page loop?"),
        ExchangeMessage(role="assistant", text="The return URL was not escaped."),
    ),
)


def install(root: Path, plugins: dict[str, str]) -> Path:
    """One distribution per plugin (its name to its module's source) under *root*, laid out as
    pip installs them; *root* goes on ``sys.path`` or ``PYTHONPATH``."""
    for name, source in plugins.items():
        module = f"pimem_{name.replace('-', '_')}_{uuid.uuid4().hex}"  # a fresh import each time
        make_distribution(root, f"pimem-{name}", {name: module}, {module: source})
    return root


@pytest.fixture
def indexes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two installed plugins answering ``pimem_open_index``: ``aaa-index`` and ``zzz-index``."""
    site = install(
        tmp_path / "site",
        {name: INDEX.format(name=name) for name in ("aaa-index", "zzz-index")},
    )
    monkeypatch.syspath_prepend(str(site))
    return site


def opened_by(pimem: Pimem, repo: Path) -> str:
    """The plugin whose index the facade opened for *repo*."""
    return str(getattr(pimem.index(pimem.resolve_scope(repo)), "plugin", "?"))


def distill(pimem: Pimem, host: FakeHostModel | None = None) -> Distillation:
    return pimem.distill_exchange(
        DistillRequest(
            exchange=EXCHANGE,
            settings=pimem.settings,
            host_model=host.host_model if host is not None else None,
        )
    )


# -- choosing ------------------------------------------------------------------------------------


@pytest.mark.usefixtures("indexes")
def test_without_a_choice_the_last_name_answers(repo: Path) -> None:
    pimem = conftest.make_pimem()
    assert pimem.pm.answering_plugins()["pimem_open_index"] == "zzz-index"
    assert opened_by(pimem, repo) == "zzz-index"
    assert pimem.pm.contested_hooks() == (
        ContestedHook(hook="pimem_open_index", plugins=("zzz-index", "aaa-index")),
    )


@pytest.mark.usefixtures("indexes")
@pytest.mark.parametrize("chosen", ["aaa-index", "zzz-index"])
@pytest.mark.parametrize("written", ["open_index", "pimem_open_index"])
def test_pimem_use_chooses_either_installed_plugin(repo: Path, chosen: str, written: str) -> None:
    pimem = conftest.make_pimem({"PIMEM_USE": f"{written}:{chosen}"})
    assert pimem.pm.answering_plugins()["pimem_open_index"] == chosen
    assert opened_by(pimem, repo) == chosen
    # The other alternative is not asked at all; the bundled default still is, after it.
    assert pimem.pm.implementing_plugins("pimem_open_index") == (chosen, "memsearch-index")
    assert pimem.pm.contested_hooks() == ()


class NamedIndex:
    """An index plugin registered as an object, as a host or the test kit registers one."""

    def __init__(self, name: str) -> None:
        self.name = name

    @hookimpl
    def pimem_open_index(self, scope: Scope) -> InMemoryIndex:
        index = InMemoryIndex(scope)
        index.operations.append(f"opened by {self.name}")
        return index


@pytest.mark.parametrize("order", [("a-index", "b-index"), ("b-index", "a-index")])
@pytest.mark.parametrize("chosen", ["a-index", "b-index"])
def test_the_choice_holds_in_either_order_of_registration(
    make_pimem: MakePimem, pimem_project: TempProject, order: tuple[str, str], chosen: str
) -> None:
    plugins = [(name, NamedIndex(name)) for name in order]
    unchosen = make_pimem(*plugins, installed=True)
    assert unchosen.pm.answering_plugins()["pimem_open_index"] == order[1]  # the later one

    pimem = make_pimem(*plugins, installed=True, env={"PIMEM_USE": f"open_index:{chosen}"})
    assert pimem.pm.answering_plugins()["pimem_open_index"] == chosen
    index = pimem.index(pimem_project.scope)
    assert isinstance(index, InMemoryIndex)
    assert index.operations == [f"opened by {chosen}"]
    # The facade calls every hook as the manager gives it, with the choice applied.
    direct = pimem.pm.caller("pimem_open_index")(
        scope=pimem_project.scope, settings=pimem.settings, store=None
    )
    assert direct.operations == [f"opened by {chosen}"]


def test_a_chosen_plugin_that_passes_leaves_the_answer_to_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = install(
        tmp_path / "site", {"aaa-distiller": PASSING, "zzz-distiller": DISTILLER.format(name="z")}
    )
    monkeypatch.syspath_prepend(str(site))
    pimem = conftest.make_pimem({"PIMEM_USE": "distill_exchange:aaa-distiller"})
    # zzz-distiller would answer, but only the chosen plugin and the default are asked.
    assert distill(pimem).distiller == "extractive"


def test_a_chosen_plugin_without_a_default_to_fall_back_on_leaves_no_answer(
    make_pimem: MakePimem, pimem_project: TempProject
) -> None:
    class Passing:
        @hookimpl
        def pimem_resolve_scope(self) -> None:
            return None

    pimem = make_pimem(("passing", Passing()), env={"PIMEM_USE": "resolve_scope:passing"})
    with pytest.raises(NoProviderError, match=r"PIMEM_USE=resolve_scope:passing chose 'passing'"):
        pimem.resolve_scope(pimem_project.directory)


def test_a_chosen_plugin_inactive_by_its_setting_leaves_the_answer_to_the_default() -> None:
    pimem = conftest.make_pimem({"PIMEM_USE": "resolve_scope:store-command"})
    assert pimem.pm.answering_plugins()["pimem_resolve_scope"] == "scope-default"
    listed = run_cli("plugins", env={"PIMEM_USE": "resolve_scope:store-command"})
    assert listed.code == 0, listed.stderr
    assert (
        "pimem_resolve_scope -> scope-default  (PIMEM_USE=resolve_scope:store-command: "
        "store-command is inactive-by-setting (PI_MEMSEARCH_STORE_CMD))"
    ) in listed.stdout


# -- errors --------------------------------------------------------------------------------------

SINGLE_ANSWER = (
    "build_snapshot, distill_exchange, merge_day_file, open_index, open_skills, open_store, "
    "open_transcript, provide_model, rerank_hits, resolve_project, resolve_scope, search_projects"
)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            "open_index",
            "PIMEM_USE must list hook:plugin pairs separated by commas, such as "
            "open_index:grep-index, got 'open_index'; unset it to let the plugins' order decide.",
        ),
        (
            "open_index:",
            "PIMEM_USE must list hook:plugin pairs separated by commas, such as "
            "open_index:grep-index, got 'open_index:'; unset it to let the plugins' order decide.",
        ),
        (
            "open_index:aaa-index, open_index:zzz-index",
            "PIMEM_USE chooses two plugins for open_index (aaa-index, zzz-index); name one.",
        ),
    ],
    ids=["no-colon", "no-plugin", "twice"],
)
def test_a_malformed_choice_is_refused_when_settings_are_read(raw: str, message: str) -> None:
    with pytest.raises(SettingsError) as raised:
        Settings.from_env({"PIMEM_USE": raw})
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            "open_idx:aaa-index",
            "PIMEM_USE names 'open_idx', which is not a pimem hook; choose a plugin for one of the "
            f"single-answer hooks ({SINGLE_ANSWER}), or unset it.",
        ),
        (
            "collect_status:aaa-index",
            "PIMEM_USE names 'collect_status', a collecting hook: every plugin implementing it is "
            "called, so there is none to choose; choose for a single-answer hook "
            f"({SINGLE_ANSWER}), or unset it.",
        ),
    ],
    ids=["unknown-hook", "collecting-hook"],
)
def test_a_choice_of_no_single_answer_hook_is_refused_when_pimem_starts(
    raw: str, message: str
) -> None:
    with pytest.raises(SettingsError) as raised:
        Pimem.from_env({"PIMEM_USE": raw}, entry_points=())
    assert str(raised.value) == message


def test_items_are_trimmed_and_empty_ones_skipped() -> None:
    settings = Settings.from_env({"PIMEM_USE": " open_index : aaa-index ,, resolve_scope:r ,"})
    assert settings.chosen("pimem_open_index") == "aaa-index"
    assert settings.chosen("pimem_resolve_scope") == "r"
    assert settings.chosen("pimem_open_store") is None
    assert Settings.from_env({"PIMEM_USE": " , "}).chosen_plugins == ()


@pytest.mark.usefixtures("indexes")
@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"PIMEM_USE": "open_index:grep-index"},
            "PIMEM_USE=open_index:grep-index names a plugin that cannot answer open_index: no "
            "plugin of that name is installed; the plugins implementing it are aaa-index, "
            "memsearch-index, zzz-index (see `pimem plugins`): choose one of them, or unset "
            "PIMEM_USE to let the plugins' order decide.",
        ),
        (
            {"PIMEM_USE": "open_index:secret-patterns"},
            "PIMEM_USE=open_index:secret-patterns names a plugin that cannot answer open_index: "
            "it does not implement pimem_open_index; the plugins implementing it are aaa-index, "
            "memsearch-index, zzz-index (see `pimem plugins`): choose one of them, or unset "
            "PIMEM_USE to let the plugins' order decide.",
        ),
        (  # inactive, but what it implements is known all the same
            {"PIMEM_USE": "open_index:store-command"},
            "PIMEM_USE=open_index:store-command names a plugin that cannot answer open_index: "
            "it does not implement pimem_open_index; the plugins implementing it are aaa-index, "
            "memsearch-index, zzz-index (see `pimem plugins`): choose one of them, or unset "
            "PIMEM_USE to let the plugins' order decide.",
        ),
        (
            {"PIMEM_USE": "open_index:aaa-index", "PIMEM_DISABLE_PLUGINS": "aaa-index"},
            "PIMEM_USE=open_index:aaa-index chooses 'aaa-index', but PIMEM_DISABLE_PLUGINS "
            "blocks it; unblock it, or choose another plugin.",
        ),
    ],
    ids=["not-installed", "not-implementing", "inactive-not-implementing", "blocked"],
)
def test_a_choice_no_loaded_plugin_can_answer_is_refused_at_start(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(SettingsError) as raised:
        conftest.make_pimem(env)
    assert str(raised.value) == message


def test_the_cli_stops_with_one_line_on_a_bad_choice(indexes: Path) -> None:
    env = {"PYTHONPATH": str(indexes), "PIMEM_USE": "open_index:grep-index"}
    result = run_cli("plugins", env=env)
    assert result.code == 1
    assert result.stdout == ""
    assert result.stderr.startswith(
        "pimem: error: PIMEM_USE=open_index:grep-index names a plugin that cannot answer"
    )
    assert len(result.stderr.splitlines()) == 1


# -- pimem plugins -------------------------------------------------------------------------------


def test_pimem_plugins_warns_of_a_contested_hook_and_not_once_it_is_chosen(indexes: Path) -> None:
    env = {"PYTHONPATH": str(indexes)}
    listed = run_cli("plugins", env=env)
    assert listed.code == 0, listed.stderr
    warning = (
        "warning: pimem_open_index is implemented by 2 alternative plugins (zzz-index, "
        "aaa-index): zzz-index is asked first and answers unless it passes; choose one with "
        "PIMEM_USE=open_index:<name>"
    )
    assert warning in listed.stdout.splitlines()
    assert "  pimem_open_index -> zzz-index" in listed.stdout.splitlines()
    data = json.loads(run_cli("plugins", "--json", env=env).stdout)
    assert data["warnings"] == [
        {
            "hook": "pimem_open_index",
            "plugins": ["zzz-index", "aaa-index"],
            "asked_first": "zzz-index",
            "text": warning.removeprefix("warning: "),
        }
    ]
    assert data["chosen"] == []

    env["PIMEM_USE"] = "open_index:aaa-index"
    chosen = run_cli("plugins", env=env)
    assert chosen.code == 0, chosen.stderr
    assert "warning:" not in chosen.stdout
    assert (
        "  pimem_open_index -> aaa-index  (chosen: PIMEM_USE=open_index:aaa-index)"
        in chosen.stdout.splitlines()
    )
    data = json.loads(run_cli("plugins", "--json", env=env).stdout)
    assert data["warnings"] == []
    assert data["single_answer_hooks"]["pimem_open_index"] == "aaa-index"
    assert data["chosen"] == [
        {
            "hook": "pimem_open_index",
            "plugin": "aaa-index",
            "setting": "PIMEM_USE=open_index:aaa-index",
        }
    ]


def test_bundled_plugins_alone_contest_nothing() -> None:
    pimem = conftest.make_pimem({"PIMEM_DISTILL_URL": "http://127.0.0.1:9/v1"})
    # distill-host and distill-http both answer: bundled, each decided by its own settings.
    assert pimem.pm.implementing_plugins("pimem_distill_exchange")[:2] == (
        "distill-http",
        "distill-host",
    )
    assert pimem.pm.contested_hooks() == ()


def test_one_alternative_beside_the_default_contests_nothing(
    make_pimem: MakePimem,
) -> None:
    pimem = make_pimem(("a-index", NamedIndex("a-index")), installed=True)
    assert pimem.pm.contested_hooks() == ()


# -- the distiller, by any installed name --------------------------------------------------------


@pytest.fixture
def distillers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two third-party distillers installed beside the bundled ones."""
    site = install(
        tmp_path / "site",
        {name: DISTILLER.format(name=name) for name in ("aaa-distiller", "zzz-distiller")},
    )
    monkeypatch.syspath_prepend(str(site))


@pytest.mark.usefixtures("distillers")
@pytest.mark.parametrize("name", ["aaa-distiller", "zzz-distiller"])
@pytest.mark.parametrize("variable", ["PIMEM_DISTILLER", "PIMEM_USE"])
def test_the_distiller_is_chosen_by_any_installed_name(name: str, variable: str) -> None:
    value = name if variable == "PIMEM_DISTILLER" else f"distill_exchange:{name}"
    pimem = conftest.make_pimem({variable: value})
    host = FakeHostModel().script("- the host's model distilled it")
    assert pimem.pm.answering_plugins()["pimem_distill_exchange"] == name
    assert distill(pimem, host).distiller == name
    assert host.calls == []  # distill-host is not asked, though the host lends a model
    assert pimem.pm.contested_hooks() == ()


@pytest.mark.usefixtures("distillers")
def test_two_alternative_distillers_are_a_contested_hook() -> None:
    pimem = conftest.make_pimem()
    [contested] = pimem.pm.contested_hooks()
    assert contested.hook == "pimem_distill_exchange"
    assert contested.plugins == ("zzz-distiller", "aaa-distiller")


@pytest.mark.usefixtures("distillers")
@pytest.mark.parametrize("name", ["host", "distill-host"])
def test_todays_names_keep_working_beside_installed_distillers(name: str) -> None:
    pimem = conftest.make_pimem({"PIMEM_DISTILLER": name})
    assert pimem.settings.chosen("pimem_distill_exchange") == "distill-host"
    host = FakeHostModel().script("- the host's model distilled it")
    assert distill(pimem, host).distiller == "host:fake/model"
    # Without a model the host's distiller passes, and the default answers, not another one.
    assert distill(pimem).distiller == "extractive"


@pytest.mark.usefixtures("distillers")
def test_distiller_extractive_is_the_bundled_one_by_its_short_name() -> None:
    pimem = conftest.make_pimem({"PIMEM_DISTILLER": "extractive"})
    host = FakeHostModel()
    assert distill(pimem, host).distiller == "extractive"
    assert host.calls == []


@pytest.mark.usefixtures("distillers")
def test_the_same_distiller_may_be_chosen_by_both_settings() -> None:
    env = {"PIMEM_DISTILLER": "http", "PIMEM_USE": "distill_exchange:distill-http"}
    [choice] = Settings.from_env(env).chosen_plugins
    assert choice.setting == "PIMEM_USE=distill_exchange:distill-http"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"PIMEM_DISTILLER": "bogus"},
            "PIMEM_DISTILLER must be auto, host, http, extractive or the name of an installed "
            "distiller (aaa-distiller, distill-extractive, distill-host, distill-http, "
            "zzz-distiller), got 'bogus': no plugin of that name is installed; unset it for auto.",
        ),
        (
            {"PIMEM_DISTILLER": "secret-patterns"},
            "PIMEM_DISTILLER must be auto, host, http, extractive or the name of an installed "
            "distiller (aaa-distiller, distill-extractive, distill-host, distill-http, "
            "zzz-distiller), got 'secret-patterns': it does not implement "
            "pimem_distill_exchange; unset it for auto.",
        ),
    ],
    ids=["not-installed", "not-a-distiller"],
)
@pytest.mark.usefixtures("distillers")
def test_a_distiller_that_is_not_installed_is_refused(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as raised:
        conftest.make_pimem(env)
    assert str(raised.value) == message


def test_two_settings_choosing_different_distillers_are_refused() -> None:
    env = {"PIMEM_DISTILLER": "host", "PIMEM_USE": "distill_exchange:aaa-distiller"}
    with pytest.raises(SettingsError) as raised:
        Settings.from_env(env)
    assert str(raised.value) == (
        "PIMEM_DISTILLER=host and PIMEM_USE=distill_exchange:aaa-distiller choose different "
        "distillers; set only one of them."
    )


# -- answering only when chosen (ONLY_WHEN_CHOSEN) -------------------------------------------------


WAITING_INDEX = INDEX + 'ONLY_WHEN_CHOSEN = ("open_index",)\n'


def test_a_plugin_that_waits_to_be_chosen_is_not_asked_until_then(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo: Path
) -> None:
    site = install(tmp_path / "site", {"fts-index": WAITING_INDEX.format(name="fts-index")})
    monkeypatch.syspath_prepend(str(site))
    installed = conftest.make_pimem()
    assert installed.pm.answering_plugins()["pimem_open_index"] == "memsearch-index"
    assert installed.pm.implementing_plugins("pimem_open_index") == ("memsearch-index",)
    record = next(r for r in installed.pm.records if r.name == "fts-index")
    assert record.only_when_chosen == ("pimem_open_index",)

    chosen = conftest.make_pimem({"PIMEM_USE": "open_index:fts-index"})
    assert chosen.pm.answering_plugins()["pimem_open_index"] == "fts-index"
    assert opened_by(chosen, repo) == "fts-index"

    listed = run_cli("plugins", env={"PYTHONPATH": str(site)})
    line = next(line for line in listed.stdout.splitlines() if line.startswith("fts-index "))
    assert "open_index (only when chosen)" in line
    assert "pimem_open_index -> memsearch-index" in listed.stdout


def test_waiting_for_a_hook_that_cannot_be_chosen_is_refused_at_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = INDEX.format(name="odd") + 'ONLY_WHEN_CHOSEN = ("collect_status",)\n'
    monkeypatch.syspath_prepend(str(install(tmp_path / "site", {"odd": source})))
    record = next(
        r for r in conftest.make_pimem({"PIMEM_STRICT_PLUGINS": "0"}).pm.records if r.name == "odd"
    )
    assert record.status == "failed"
    assert "pimem_collect_status, which is not a single-answer hook" in (record.error or "")
