"""The walk of a broken plugin, as its author and its users meet it, through every door: a
resolver broken at import and fixed while the memory service runs, a hook that raises, a status
hook that raises. Real distributions on ``PYTHONPATH``; the command line in process, through the
memory service, and ``pimem serve``."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from bridge import Bridge

from conftest import Result, make_distribution, run_cli

#: Every project's memory goes to ``$HOME/central/<project name>``.
RESOLVER = """
from pathlib import Path

from pimem_core.plugin import Scope, hookimpl


@hookimpl(tryfirst=True)
def pimem_resolve_scope(cwd, settings):
    store = Path.home() / "central" / cwd.name
    return Scope(
        repository_dir=cwd, scope_dir=store, memory_dir=store / "memory",
        collection="ms_central_" + cwd.name, index_state_path=store / ".index-state.json",
    )
"""
BROKEN_AT_IMPORT = "raise ImportError('No module named branchlib')\n" + RESOLVER
RAISES = RESOLVER.replace(
    "    store = Path.home()",
    "    raise RuntimeError('the branch is detached')\n    store = Path.home()",
)
STATUS_RAISES = """
from pimem_core.plugin import hookimpl


@hookimpl
def pimem_collect_status(scope, settings, index):
    raise KeyError("last_run")
"""
ENTRY = "- the team chose Redis for the hot cache"


@attrs.define
class Walk:
    env: dict[str, str]
    project: Path
    site: Path

    def install(self, name: str, source: str) -> Path:
        module = f"pimem_{name}"
        make_distribution(self.site, f"pimem-{name}", {name: module}, {module: source})
        return self.site / f"{module}.py"

    def run(self, *args: str, service: bool, stdin: str | None = None) -> Result:
        env = {**self.env, "PIMEM_SERVICE": "on" if service else "off"}
        return run_cli(*args, env=env, cwd=self.project, stdin=stdin)

    def write(self, *, service: bool) -> Result:
        anchor = ("--session", "walk", "--turn", "t1", "--transcript", "/h/walk.jsonl")
        return self.run("write", "-", *anchor, service=service, stdin=ENTRY)

    def day_files(self) -> list[Path]:
        home = Path(self.env["HOME"])
        return sorted(home.rglob("*.md")) + sorted(self.project.rglob("*.md"))


@pytest.fixture
def walk(service_env: dict[str, str], repo: Path, tmp_path: Path) -> Iterator[Walk]:
    site = tmp_path / "site"
    site.mkdir()
    env = {
        **service_env,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
        "PIMEM_STRICT_PLUGINS": "0",
    }
    yield Walk(env=env, project=repo, site=site)
    run_cli("service", "stop", "--all", env={**env, "PIMEM_SERVICE": "off"})


def _without_log_path(text: str) -> str:
    return text.split("; the traceback is in ")[0]


def test_a_resolver_broken_at_import_refuses_writes_alike_everywhere(walk: Walk) -> None:
    walk.install("branchy", BROKEN_AT_IMPORT)
    served, in_process = walk.write(service=True), walk.write(service=False)
    for done in (served, in_process):
        assert done.code == 1
        (line,) = done.stderr.splitlines()
        assert line.startswith("pimem: error: plugin 'branchy' failed to load")
        assert "branchlib" in line
        assert "writes and forgets are refused" in line
        assert "PIMEM_DISABLE_PLUGINS=branchy" in line
    assert served.stderr == in_process.stderr
    assert walk.day_files() == []  # nothing written to any store
    forgot = walk.run("forget", "--date", "2026-08-13", "--time", "22:41", service=True)
    assert forgot.code == 1
    assert "'branchy' failed to load" in forgot.stderr

    # Reads go on, and say which memory they read.
    for service in (True, False):
        status = walk.run("status", service=service)
        assert status.code == 0, status.stderr
        first = status.stdout.splitlines()[0]
        assert first.startswith("warning: plugin 'branchy' failed to load")
        snapshot = walk.run("snapshot", service=service)
        assert snapshot.code == 0, snapshot.stderr
        warning = snapshot.stderr.splitlines()[-1]
        assert warning.startswith("pimem: warning: plugin 'branchy' failed to load")
        assert f"used the memory in {walk.project / '.memsearch' / 'memory'}" in warning
    listed = walk.run("plugins", service=True)
    assert "warning: plugin 'branchy' failed to load" in listed.stdout

    blocked = {**walk.env, "PIMEM_DISABLE_PLUGINS": "branchy", "PIMEM_SERVICE": "on"}
    assert (
        run_cli(
            "write",
            "-",
            "--session",
            "w",
            "--turn",
            "t2",
            "--transcript",
            "/h/w.jsonl",
            env=blocked,
            cwd=walk.project,
            stdin=ENTRY,
        ).code
        == 0
    )
    assert [path.parent for path in walk.day_files()] == [walk.project / ".memsearch" / "memory"]


def test_fixing_the_resolver_counts_from_the_next_request_through_the_service(
    walk: Walk,
) -> None:
    module = walk.install("branchy", BROKEN_AT_IMPORT)
    assert walk.write(service=True).code == 1
    module.write_text(RESOLVER)  # the fix, while the service runs
    fixed = walk.write(service=True)
    assert fixed.code == 0, fixed.stderr
    assert fixed.stderr == ""
    home = Path(walk.env["HOME"])
    (day,) = walk.day_files()
    assert day.parent == home / "central" / walk.project.name / "memory"
    assert ENTRY in day.read_text()


def test_a_hook_that_raises_is_one_line_naming_the_plugin_the_hook_and_the_log(
    walk: Walk,
) -> None:
    walk.install("branchy", RAISES)
    served, in_process = walk.write(service=True), walk.write(service=False)
    for done in (served, in_process):
        assert done.code == 1
        (line,) = done.stderr.splitlines()
        assert line.startswith(
            "pimem: error: plugin 'branchy' raised RuntimeError('the branch is detached') "
            "in pimem_resolve_scope; the traceback is in "
        )
        assert "PIMEM_DISABLE_PLUGINS=branchy" in line
        kept = Path(line.split("; the traceback is in ")[1].split(" (")[0])
        assert "Traceback" in kept.read_text()
        assert "the branch is detached" in kept.read_text()
    assert _without_log_path(served.stderr) == _without_log_path(in_process.stderr)
    assert walk.day_files() == []


def test_a_status_hook_that_raises_costs_its_own_section_only(walk: Walk) -> None:
    walk.install("shaky", STATUS_RAISES)
    assert walk.write(service=False).code == 0
    reports = []
    for service in (True, False):
        status = walk.run("status", "--json", service=service)
        assert status.code == 0, status.stderr
        reports.append(json.loads(status.stdout))
        text = walk.run("status", service=service).stdout
        assert (
            "warning: plugin 'shaky' raised KeyError('last_run') in pimem_collect_status; its "
            "section is left out (fix the plugin, or set PIMEM_DISABLE_PLUGINS=shaky)"
        ) in text
        assert "scope: " in text  # the other sections are all there
    assert set(reports[0]) - {"service"} == set(reports[1])


def test_pimem_serve_says_it_first_in_memory_status(walk: Walk) -> None:
    walk.install("branchy", BROKEN_AT_IMPORT)
    bridge = Bridge({**walk.env, "PIMEM_SERVICE": "off"}, cwd=walk.project)
    try:
        bridge.call("session.start", session_id="s", cwd=str(walk.project), transcript=None)
        text = bridge.call("memory.status")["result"]["text"]
        assert text.splitlines()[0].startswith("warning: plugin 'branchy' failed to load")
    finally:
        bridge.close()
    assert walk.day_files() == []


ENV_PROBE = """
import os

from pimem_core.plugin import SettingSpec, StatusSection, hookimpl

DECLARED = SettingSpec(
    plugin="probe", name="declared", env="PROBE_DECLARED", parse=str, default="",
    help="a variable the plugin declares",
)


@hookimpl
def pimem_declare_settings():
    return (DECLARED,)


@hookimpl
def pimem_collect_status(scope, settings, index):
    seen = ", ".join(f"{name}={os.environ.get(name, '(unset)')}"
                     for name in ("PROBE_DECLARED", "PROBE_UNDECLARED"))
    return (StatusSection(name="probe", rank=99, lines=(f"probe sees {seen}",)),)
"""


def test_a_plugin_sees_one_environment_in_process_and_in_the_service(walk: Walk) -> None:
    walk.install("probe", ENV_PROBE)
    walk.env |= {"PROBE_DECLARED": "yes", "PROBE_UNDECLARED": "shell only"}
    seen = {
        line
        for service in (True, False)
        for line in walk.run("status", service=service).stdout.splitlines()
        if line.startswith("probe sees")
    }
    assert seen == {"probe sees PROBE_DECLARED=yes, PROBE_UNDECLARED=(unset)"}
