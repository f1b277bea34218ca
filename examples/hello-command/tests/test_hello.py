"""``pimem hello``, installed from its directory: shown, run, and served.

The fixtures ``run_pimem`` and ``pimem_project`` come from pimem's test kit (the pytest plugin
``pimem_core.testing``), loaded because pimem is installed: no conftest needed.
"""

from __future__ import annotations

import os
from pathlib import Path

from pimem_core.testing import RunPimem, TempProject, ask_pimem_serve

NOW = {"PIMEM_NOW": "2026-08-13T22:41"}


def test_the_help_and_the_plugin_listing_show_the_command(run_pimem: RunPimem) -> None:
    helped = run_pimem("--help", installed=True)
    assert helped.exit_code == 0
    assert "greet someone, and count today's memory entries" in helped.stdout
    listed = run_pimem("plugins", "--json", installed=True).json
    assert {"command": "hello", "plugin": "hello", "method": "hello.greet"} in listed["commands"]
    assert listed["commands_left_out"] == []


def test_the_command_runs_on_the_project_it_is_given(
    run_pimem: RunPimem, pimem_project: TempProject
) -> None:
    where = ("--cwd", str(pimem_project.directory))
    anchor = ("--session", "s1", "--turn", "t1", "--transcript", "/t/s1.jsonl")
    wrote = run_pimem(
        "write", "-", *where, *anchor, installed=True, env=NOW, stdin="- we chose tabs"
    )
    assert wrote.exit_code == 0, wrote.stderr
    greeted = run_pimem("hello", "Ada", "--json", *where, installed=True, env=NOW)
    assert greeted.exit_code == 0, greeted.stderr
    assert greeted.json == {"greeted": "Ada", "entries_today": 1}
    missing = run_pimem("hello", installed=True)
    assert missing.exit_code == 2
    assert "NAME" in missing.stderr


def test_an_agent_reaches_it_through_pimem_serve(
    tmp_path: Path, pimem_project: TempProject
) -> None:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path / "home"),
        "PIMEM_SERVICE": "off",
        **NOW,
    }
    requests = [
        {"id": 1, "method": "session.start", "params": {
            "session_id": "s1", "cwd": str(pimem_project.directory),
            "transcript": str(tmp_path / "s1.jsonl")}},
        {"id": 2, "method": "hello.greet", "params": {"name": "Grace"}},
        {"id": 3, "method": "session.shutdown", "params": {}},
    ]  # fmt: skip
    answers = ask_pimem_serve(requests, env=env)
    assert answers[2]["result"]["text"].startswith("hello, Grace: 0 memory entries today")
    assert answers[2]["result"]["greeted"] == "Grace"
