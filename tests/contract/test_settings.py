"""Settings parsed from the environment: defaults, switches, timeouts, lists and PIMEM_NOW."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from pathlib import Path

import pytest

from pimem_core import Settings
from pimem_core.errors import SettingsError
from pimem_plugins.auto_context import ENABLED as AUTO_CONTEXT
from pimem_plugins.auto_context import MIN_SIMILARITY
from pimem_plugins.cross_repo import SCAN_ROOTS
from pimem_plugins.store_command import COMMAND as STORE_COMMAND

from conftest import make_pimem, run_cli

#: Bundled plugins' declared settings, validated as the plugin manager does when it loads them.
PLUGIN_SPECS = (AUTO_CONTEXT, MIN_SIMILARITY, SCAN_ROOTS, STORE_COMMAND)


def parse(env: Mapping[str, str] | None = None) -> Settings:
    """Core settings and the bundled plugins' declared ones, as ``Pimem.from_env`` parses them."""
    return Settings.from_env(env).declare(PLUGIN_SPECS)


SWITCHES: dict[str, tuple[Callable[[Settings], bool], bool]] = {
    "PI_MEMSEARCH_CAPTURE": (lambda settings: settings.capture, True),
    "PI_MEMSEARCH_SNAPSHOT": (lambda settings: settings.snapshot, True),
    "PI_MEMSEARCH_AUTO_CONTEXT": (AUTO_CONTEXT.read, False),
    "PIMEM_STRICT_PLUGINS": (lambda settings: settings.strict_plugins, False),
}
TIMEOUTS = {
    "PI_MEMSEARCH_SEARCH_TIMEOUT_MS": ("search_timeout_ms", 30_000),
    "PI_MEMSEARCH_COMPACT_TIMEOUT_MS": ("compact_timeout_ms", 300_000),
}


def test_defaults() -> None:
    settings = Settings.from_env({})
    assert settings == Settings()
    assert settings.capture is True
    assert settings.capture_model is None
    assert settings.snapshot is True
    assert AUTO_CONTEXT.read(settings) is False
    assert settings.search_timeout_ms == 30_000
    assert settings.compact_timeout_ms == 300_000
    assert SCAN_ROOTS.read(settings) == ()
    assert STORE_COMMAND.read(settings) is None
    assert settings.memsearch_dir is None
    assert settings.disabled_plugins == frozenset()
    assert settings.strict_plugins is False
    assert settings.fixed_now is None
    assert MIN_SIMILARITY.read(settings) == 0.5


@pytest.mark.parametrize(("raw", "value"), [("0", 0.0), ("0.35", 0.35), ("1", 1.0)])
def test_the_similarity_floor_is_a_fraction(raw: str, value: float) -> None:
    env = {"PIMEM_AUTO_CONTEXT_MIN_SIMILARITY": raw}
    assert MIN_SIMILARITY.read(parse(env)) == value


@pytest.mark.parametrize("raw", ["1.5", "-0.1", "high", "nan"])
def test_the_similarity_floor_rejects_anything_else(raw: str) -> None:
    with pytest.raises(SettingsError) as raised:
        parse({"PIMEM_AUTO_CONTEXT_MIN_SIMILARITY": raw})
    assert str(raised.value) == (
        f"PIMEM_AUTO_CONTEXT_MIN_SIMILARITY must be a number from 0 to 1, got {raw!r}; "
        "unset it for the default of 0.5."
    )


def test_empty_values_mean_unset() -> None:
    names = [*SWITCHES, *TIMEOUTS, "PI_MEMSEARCH_SCAN_ROOTS", "PI_MEMSEARCH_STORE_CMD"]
    names += ["MEMSEARCH_DIR", "PIMEM_DISABLE_PLUGINS", "PIMEM_NOW", "PI_MEMSEARCH_CAPTURE_MODEL"]
    assert parse(dict.fromkeys(names, "")) == parse({})


def test_from_env_reads_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PI_MEMSEARCH_CAPTURE_MODEL", "openrouter/anthropic/claude-haiku")
    assert Settings.from_env().capture_model == "openrouter/anthropic/claude-haiku"


def test_plain_string_variables_are_kept_as_given() -> None:
    settings = parse({"PI_MEMSEARCH_STORE_CMD": "/usr/local/bin/store", "MEMSEARCH_DIR": "rel/dir"})
    assert STORE_COMMAND.read(settings) == "/usr/local/bin/store"
    assert settings.memsearch_dir == "rel/dir"


# -- switches ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SWITCHES)
@pytest.mark.parametrize(("raw", "value"), [("on", True), ("off", False)])
def test_switch_accepts_on_and_off(name: str, raw: str, value: bool) -> None:
    read, _ = SWITCHES[name]
    assert read(parse({name: raw})) is value


@pytest.mark.parametrize("name", SWITCHES)
def test_switch_unset_is_its_default(name: str) -> None:
    read, default = SWITCHES[name]
    assert read(parse({})) is default


@pytest.mark.parametrize("name", SWITCHES)
@pytest.mark.parametrize("raw", ["maybe", "enabled", "o n"])
def test_switch_rejects_other_words(name: str, raw: str) -> None:
    with pytest.raises(SettingsError) as caught:
        parse({name: raw})
    assert name in str(caught.value)
    assert repr(raw) in str(caught.value)


@pytest.mark.parametrize(
    ("raw", "value"), [("ON", True), ("Off", False), ("1", True), ("no", False)]
)
def test_switch_synonyms_and_case(raw: str, value: bool) -> None:
    assert AUTO_CONTEXT.read(parse({"PI_MEMSEARCH_AUTO_CONTEXT": raw})) is value


# -- timeouts (TC-29) ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", TIMEOUTS)
def test_timeout_accepts_a_positive_integer(name: str) -> None:
    field, _ = TIMEOUTS[name]
    assert getattr(Settings.from_env({name: "45000"}), field) == 45_000


@pytest.mark.parametrize("name", TIMEOUTS)
def test_timeout_unset_is_the_default(name: str) -> None:
    field, default = TIMEOUTS[name]
    assert getattr(Settings.from_env({}), field) == default


@pytest.mark.parametrize("name", TIMEOUTS)
@pytest.mark.parametrize("raw", ["soon", "later", "0", "-5", "1.5", "1e3", " 45000", "٤٥"])
def test_timeout_rejects_anything_else(name: str, raw: str) -> None:
    with pytest.raises(SettingsError) as caught:
        parse({name: raw})
    assert name in str(caught.value)
    assert repr(raw) in str(caught.value)


def test_compact_timeout_can_be_raised() -> None:
    assert Settings.from_env({"PI_MEMSEARCH_COMPACT_TIMEOUT_MS": "600000"}).compact_timeout_ms == (
        600_000
    )


# -- lists -------------------------------------------------------------------------------------


def test_scan_roots_split_on_the_path_separator() -> None:
    raw = os.pathsep.join(["/a", "", "/b/c", ""])
    assert SCAN_ROOTS.read(parse({"PI_MEMSEARCH_SCAN_ROOTS": raw})) == (
        Path("/a"),
        Path("/b/c"),
    )


def test_single_scan_root() -> None:
    assert SCAN_ROOTS.read(parse({"PI_MEMSEARCH_SCAN_ROOTS": "/code"})) == (Path("/code"),)


def test_disabled_plugins_are_comma_separated_and_trimmed() -> None:
    settings = Settings.from_env({"PIMEM_DISABLE_PLUGINS": " stable-snapshot, ,index-state,,x "})
    assert settings.disabled_plugins == frozenset({"stable-snapshot", "index-state", "x"})


def test_disabled_plugins_only_separators_is_empty() -> None:
    assert Settings.from_env({"PIMEM_DISABLE_PLUGINS": " , ,"}).disabled_plugins == frozenset()


# -- PIMEM_NOW ---------------------------------------------------------------------------------


@pytest.fixture
def india_time() -> Iterator[None]:
    """Local time is UTC+05:30 (a POSIX TZ string: no time-zone database needed)."""
    saved = os.environ.get("TZ")
    os.environ["TZ"] = "IST-5:30"
    time.tzset()
    try:
        yield
    finally:
        if saved is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = saved
        time.tzset()


def test_pimem_now_fixes_the_clock() -> None:
    settings = Settings.from_env({"PIMEM_NOW": "2026-08-13T22:41"})
    assert settings.fixed_now == datetime(2026, 8, 13, 22, 41)
    assert settings.now() == datetime(2026, 8, 13, 22, 41)


def test_without_pimem_now_the_clock_runs() -> None:
    before = datetime.now()
    now = Settings.from_env({}).now()
    assert now >= before
    assert now.tzinfo is None


@pytest.mark.parametrize("raw", ["tomorrow", "2026-13-01T00:00", "22:41"])
def test_invalid_pimem_now_names_the_variable(raw: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({"PIMEM_NOW": raw})
    assert "PIMEM_NOW" in str(caught.value)
    assert repr(raw) in str(caught.value)


@pytest.mark.usefixtures("india_time")
def test_pimem_now_with_an_offset_becomes_local_naive_time() -> None:
    settings = Settings.from_env({"PIMEM_NOW": "2026-08-13T22:41:00+00:00"})
    assert settings.fixed_now == datetime(2026, 8, 14, 4, 11)
    assert settings.fixed_now.tzinfo is None


@pytest.mark.usefixtures("india_time")
def test_pimem_now_without_an_offset_is_already_local() -> None:
    assert Settings.from_env({"PIMEM_NOW": "2026-08-13T22:41"}).fixed_now == datetime(
        2026, 8, 13, 22, 41
    )


# -- errors at the edge ----------------------------------------------------------------------------


def test_make_pimem_raises_on_a_bad_variable() -> None:
    with pytest.raises(SettingsError, match="PI_MEMSEARCH_CAPTURE"):
        make_pimem({"PI_MEMSEARCH_CAPTURE": "maybe"})


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("PI_MEMSEARCH_SNAPSHOT", "maybe"),
        ("PI_MEMSEARCH_SEARCH_TIMEOUT_MS", "soon"),
        ("PIMEM_NOW", "tomorrow"),
    ],
)
def test_cli_exits_1_with_one_line_naming_the_variable(repo: Path, name: str, raw: str) -> None:
    result = run_cli("scope", "--cwd", str(repo), env={name: raw})
    assert result.code == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("pimem: error:")
    assert name in lines[0]
    assert "Traceback" not in result.stderr


def test_a_relative_store_command_is_anchored_where_pimem_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    settings = parse({"PI_MEMSEARCH_STORE_CMD": "bin/resolver"})
    assert STORE_COMMAND.read(settings) == str(tmp_path / "bin" / "resolver")
    assert STORE_COMMAND.read(parse({"PI_MEMSEARCH_STORE_CMD": "resolver"})) == "resolver"
