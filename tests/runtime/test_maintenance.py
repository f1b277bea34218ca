"""Maintenance end to end: the real ``pimem maintenance run`` and ``pimem serve`` against a
scripted model on 127.0.0.1 (memsearch's ``[llm]`` path) or answering ``complete`` as a host.

Each task writes its file from a sample store, in memsearch's layout; a run with no new input
calls no model; disabled tasks never call it; the daily budget stops them; and a process killed
during the model call leaves no partial file and no lock behind.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from bench.pi_host import ModelServer, Rule, Text
from pimem_core import Settings
from pimem_core.atomic_files import TEMP_MARK
from pimem_core.errors import SettingsError
from pimem_core.runtime.budget import DistillBudget
from pimem_core.runtime.maintenance import (
    LOCK_FILE,
    MaintenanceRunner,
    maintenance_root,
    project_lock,
)
from pimem_core.types import HostModel
from pimem_plugins.memsearch.maintenance import (
    STATE_FILE,
    SYSTEM_PROMPT,
    StateEntry,
    input_digest,
)

from conftest import CLOCK, make_pimem, run_cli

ALL = "project_review,user_profile,memory_to_skill"
DAY_1 = (
    "## Session 09:15\n\n### 09:15\n"
    "<!-- session:s1 turn:t1 transcript:/sessions/s1.jsonl -->\n"
    "- project decision: the ledger service uses PostgreSQL 16\n"
    "- the user ran the test suite with `make test` before committing\n"
)
DAY_2 = (
    "## Session 10:02\n\n### 10:02\n"
    "<!-- session:s2 turn:t9 transcript:/sessions/s2.jsonl -->\n"
    "- the user prefers short answers without summaries\n"
    "- the user ran the test suite with `make test` before committing\n"
)
PROJECT = "# Project Memory\n\n## Decisions\n\n- The ledger service uses PostgreSQL 16."
USER = "# User Memory\n\n## Communication Notes\n\n- Prefers short answers without summaries."
SKILL = {
    "name": "run-tests",
    "description": "Run the test suite before committing. Use when asked to run or check tests.",
    "body": "## Run the tests\n\n1. Run `make test`.\n2. Fix failures before committing.",
    "occurrences": 3,
    "sources": ["2026-08-12.md", "2026-08-13.md"],
    "reason": "recurs in every session",
}


def task_of(prompt: str) -> str:
    """Which task a maintenance prompt is for (memsearch's prompt builders name it)."""
    if "Task: project_review" in prompt:
        return "project_review"
    if "Task: user_profile" in prompt:
        return "user_profile"
    if "## Existing skills (you may revise these)" in prompt:
        return "memory_to_skill"
    raise AssertionError(f"not a maintenance prompt: {prompt[:200]!r}")


def answer(prompt: str) -> str:
    task = task_of(prompt)
    if task == "project_review":
        return json.dumps({"action": "replace", "reason": "a decision", "content": PROJECT})
    if task == "user_profile":
        # Answered inside a fenced block with prose around it, as models do.
        reply = {"action": "replace", "reason": "a preference", "content": USER}
        return f"Here you go:\n```json\n{json.dumps(reply)}\n```"
    return json.dumps({"skills": [SKILL]})


def answering(reply: Callable[[str], str]) -> list[Rule]:
    """Every request answered by *reply* to its prompt: memsearch sends one user message."""
    return [Rule("maintenance", lambda request: True, lambda request: Text(reply(request.prompt)))]


def prompts(model: ModelServer) -> list[str]:
    return [request.prompt for request in model.requests]


@pytest.fixture
def model() -> Iterator[ModelServer]:
    with ModelServer(answering(answer)) as server:
        yield server


@pytest.fixture
def store(repo: Path) -> Path:
    memory = repo / ".memsearch" / "memory"
    memory.mkdir(parents=True)
    (memory / "2026-08-12.md").write_text(DAY_1)
    (memory / "2026-08-13.md").write_text(DAY_2)
    return repo / ".memsearch"


@pytest.fixture
def llm_config(model: ModelServer) -> Path:
    """memsearch's ``[llm]`` settings in the test's HOME, pointing at the scripted model."""
    config = Path(os.environ["HOME"]) / ".memsearch" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        f'[llm]\nprovider = "openai"\nmodel = "scripted"\nbase_url = "{model.url}"\n'
        'api_key = "env:SCRIPTED_KEY"\n'
    )
    return config


def maintain(repo: Path, *args: str, **env: str) -> dict[str, dict[str, Any]]:
    """``pimem maintenance run --json`` in *repo*: the report of each task, by name."""
    result = run_cli(
        "maintenance", "run", "--cwd", str(repo), "--json", *args,
        env={"SCRIPTED_KEY": "scripted-key", **env},
    )  # fmt: skip
    assert result.code == 0, result.stderr
    return {report["name"]: report for report in json.loads(result.stdout)}


def state(store: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((store / STATE_FILE).read_text())
    return data


def leftovers(store: Path) -> list[Path]:
    return [path for path in store.rglob("*") if TEMP_MARK in path.name]


def lock_is_free(store: Path) -> bool:
    fd = os.open(store / LOCK_FILE, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def test_a_tasks_state_is_its_entry_in_memsearchs_file(tmp_path: Path) -> None:
    """The memsearch plugin keeps a task's state as memsearch does: its digest, its file's
    bytes, and the other agents' entries left as they were."""
    from memsearch.maintenance import _input_digest, _load_state

    path = tmp_path / STATE_FILE
    theirs = {"claude-code.project_review": {"last_action": "none"}}
    path.write_text(json.dumps(theirs))
    entry = StateEntry(path, "pimem.project_review")
    assert entry.read() == {}
    entry.update({"last_action": "replace"})
    entry.update({"model": "fake"})
    data = {**theirs, "pimem.project_review": {"last_action": "replace", "model": "fake"}}
    assert path.read_text() == json.dumps(data, indent=2, sort_keys=True) + "\n"
    assert _load_state(path) == data
    memory = tmp_path / "memory"
    (memory / "sub").mkdir(parents=True)
    (memory / "2026-08-12.md").write_text(DAY_1)
    (memory / "sub" / "notes.md").write_text(DAY_2)
    (memory / "notes.txt").write_text("not input")
    assert input_digest(memory) == _input_digest(memory)
    assert input_digest(tmp_path / "none") == _input_digest(tmp_path / "none") == "sha256:empty"


# -- memsearch's [llm] path ----------------------------------------------------------------


@pytest.mark.usefixtures("llm_config")
def test_each_task_writes_its_file_in_memsearchs_layout(
    repo: Path, store: Path, model: ModelServer
) -> None:
    reports = maintain(repo, PIMEM_MAINTENANCE=ALL)
    assert {name: report["result"] for name, report in reports.items()} == {
        "memory_to_skill": "distilled",
        "project_review": "replace",
        "user_profile": "replace",
    }
    assert (store / "PROJECT.md").read_text() == PROJECT + "\n"
    assert (store / "USER.md").read_text() == USER + "\n"
    skill = store / "skill-candidates" / "run-tests"
    assert (skill / "SKILL.md").read_text().startswith("---\nname: run-tests\ndescription: ")
    assert "1. Run `make test`." in (skill / "SKILL.md").read_text()
    meta = json.loads((skill / "meta.json").read_text())
    assert (meta["status"], meta["occurrences"]) == ("candidate", 3)
    log = subprocess.run(
        ["git", "-C", str(skill.parent), "log", "--format=%s"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert log == "distill: add 1 candidate skill(s) [pimem]\n"
    assert leftovers(store) == []

    # One call per task: memsearch's templates with the journals, no tools, and the key sent.
    assert len(model.requests) == 3
    assert all("tools" not in request.body for request in model.requests)
    template = resources.files("memsearch.prompts").joinpath("project_review.txt").read_text()
    (review,) = [prompt for prompt in prompts(model) if task_of(prompt) == "project_review"]
    first_line = template.splitlines()[0].replace("{{AGENT_NAME}}", "pimem")
    assert review.startswith(f"{SYSTEM_PROMPT}\n\n{first_line}\n")
    assert "PostgreSQL 16" in review
    assert "prefers short answers" in review

    entries = state(store)
    assert set(entries) == {"pimem.project_review", "pimem.user_profile", "pimem.memory_to_skill"}
    # Written as memsearch's _save_state writes it, byte for byte (the file is the mesh's).
    assert (store / STATE_FILE).read_text() == json.dumps(entries, indent=2, sort_keys=True) + "\n"
    assert entries["pimem.project_review"]["last_action"] == "replace"
    assert entries["pimem.project_review"]["last_input_digest"].startswith("sha256:")
    # memsearch reads the same state: its own due rule sees the input as handled.
    from memsearch.config import PluginMaintenanceTaskConfig
    from memsearch.maintenance import _input_digest, _is_due

    digest = _input_digest(store / "memory")
    assert digest == entries["pimem.user_profile"]["last_input_digest"]
    assert _is_due(PluginMaintenanceTaskConfig(), entries["pimem.user_profile"], digest, False) == (
        False,
        "input unchanged",
    )


@pytest.mark.usefixtures("llm_config")
def test_a_run_with_no_new_input_calls_no_model(
    repo: Path, store: Path, model: ModelServer
) -> None:
    maintain(repo, PIMEM_MAINTENANCE=ALL, PIMEM_MAINTENANCE_INTERVAL_HOURS="0")
    assert len(model.requests) == 3
    reports = maintain(repo, PIMEM_MAINTENANCE=ALL, PIMEM_MAINTENANCE_INTERVAL_HOURS="0")
    assert {report["result"] for report in reports.values()} == {"not due"}
    assert len(model.requests) == 3

    # New input: due again at once with no interval, but not within the default 24 hours.
    with (store / "memory" / "2026-08-13.md").open("a") as day:
        day.write("- project progress: the ledger migrations run in CI\n")
    reports = maintain(repo, PIMEM_MAINTENANCE=ALL)
    assert reports["project_review"]["result"] == "not due"
    assert reports["project_review"]["detail"].startswith("not due before ")
    assert len(model.requests) == 3
    maintain(repo, PIMEM_MAINTENANCE="project_review", PIMEM_MAINTENANCE_INTERVAL_HOURS="0")
    assert len(model.requests) == 4
    assert "migrations run in CI" in prompts(model)[-1]


@pytest.mark.usefixtures("llm_config")
def test_disabled_tasks_never_call_the_model(repo: Path, store: Path, model: ModelServer) -> None:
    reports = maintain(repo)
    assert {report["result"] for report in reports.values()} == {"off"}
    assert model.requests == []
    assert not (store / LOCK_FILE).exists()
    assert not (store / STATE_FILE).exists()

    reports = maintain(repo, PIMEM_MAINTENANCE="project-review")  # a hyphen is forgiven
    assert [task_of(prompt) for prompt in prompts(model)] == ["project_review"]
    assert (reports["user_profile"]["result"], reports["memory_to_skill"]["result"]) == (
        "off",
        "off",
    )
    assert not (store / "USER.md").exists()
    assert not (store / "skill-candidates").exists()


@pytest.mark.usefixtures("llm_config")
def test_the_budget_stops_them_until_the_next_day(
    repo: Path, store: Path, model: ModelServer
) -> None:
    # One capture distillation already spent today's budget of two.
    budget = Path(os.environ["HOME"]) / "pimem-home" / "state" / "distill-budget.json"
    budget.parent.mkdir(parents=True)
    budget.write_text(json.dumps({"date": CLOCK[:10], "used": 1}))
    env = {
        "PIMEM_MAINTENANCE": ALL,
        "PIMEM_DISTILL_BUDGET": "2",
        "PIMEM_HOME": str(budget.parents[1]),
    }
    reports = maintain(repo, **env)
    results = sorted(report["result"] for report in reports.values())
    assert results == ["distilled", "waiting for budget", "waiting for budget"]
    assert len(model.requests) == 1
    assert json.loads(budget.read_text()) == {"date": CLOCK[:10], "used": 2}

    status = run_cli("status", "--cwd", str(repo), env=env)
    assert "maintenance project_review: on; last run never; next due tomorrow" in status.stdout
    assert "maintenance waits for tomorrow" in status.stdout

    assert {r["result"] for r in maintain(repo, **env).values()} >= {"waiting for budget"}
    assert len(model.requests) == 1

    tomorrow = maintain(repo, **env, PIMEM_NOW="2026-08-14T09:00")
    assert sorted(report["result"] for report in tomorrow.values()) == [
        "not due",
        "replace",
        "replace",
    ]
    assert len(model.requests) == 3
    assert json.loads(budget.read_text()) == {"date": "2026-08-14", "used": 2}


@pytest.mark.usefixtures("llm_config")
def test_a_failed_run_is_reported_and_waits_out_the_interval(
    repo: Path, store: Path, model: ModelServer
) -> None:
    model.rules = answering(lambda prompt: "I cannot help with that.")
    reports = maintain(repo, PIMEM_MAINTENANCE="project_review")
    assert reports["project_review"]["result"] == "failed"
    assert "did not return valid JSON" in reports["project_review"]["detail"]
    assert not (store / "PROJECT.md").exists()
    status = run_cli("status", "--cwd", str(repo), env={"PIMEM_MAINTENANCE": "project_review"})
    assert "maintenance project_review last error (" in status.stdout
    assert "did not return valid JSON" in status.stdout

    model.rules = answering(answer)
    reports = maintain(repo, PIMEM_MAINTENANCE="project_review")
    assert reports["project_review"]["detail"].startswith("failed on this input; retries after")
    assert len(model.requests) == 1
    reports = maintain(
        repo, PIMEM_MAINTENANCE="project_review", PIMEM_MAINTENANCE_INTERVAL_HOURS="0"
    )
    assert reports["project_review"]["result"] == "replace"
    status = run_cli("status", "--cwd", str(repo), env={"PIMEM_MAINTENANCE": "project_review"})
    assert "last error" not in status.stdout


@pytest.mark.usefixtures("llm_config")
def test_a_crash_during_the_model_call_leaves_no_partial_file_and_no_stale_lock(
    repo: Path, store: Path, model: ModelServer
) -> None:
    (store / "PROJECT.md").write_text("# Project Memory\n\nthe old file\n")
    model.hold()
    child = subprocess.Popen(
        [sys.executable, "-m", "pimem_core", "maintenance", "run", "--cwd", str(repo)],
        env={**os.environ, "PIMEM_NOW": CLOCK, "PIMEM_MAINTENANCE": "project_review,user_profile",
             "SCRIPTED_KEY": "k"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert model.arrived.wait(30), "the model call never came"
        assert not lock_is_free(store), "the run holds the project's lock during the call"
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(10) == -signal.SIGKILL
    finally:
        model.release()
    assert (store / "PROJECT.md").read_text() == "# Project Memory\n\nthe old file\n"
    assert not (store / "USER.md").exists()
    assert leftovers(store) == []
    assert lock_is_free(store)
    assert not (store / STATE_FILE).exists()

    reports = maintain(repo, PIMEM_MAINTENANCE="project_review,user_profile")
    assert (reports["project_review"]["result"], reports["user_profile"]["result"]) == (
        "replace",
        "replace",
    )
    assert (store / "PROJECT.md").read_text() == PROJECT + "\n"


def test_without_a_model_nothing_runs_and_status_says_why(repo: Path, store: Path) -> None:
    reports = maintain(repo, PIMEM_MAINTENANCE="project_review")
    assert reports["project_review"]["result"] == "no model"
    assert "[llm] provider" in reports["project_review"]["detail"]
    assert not (store / STATE_FILE).exists()


def test_status_shows_each_task(repo: Path, store: Path) -> None:
    status = run_cli(
        "status", "--cwd", str(repo), "--json", env={"PIMEM_MAINTENANCE": "user_profile"}
    )
    data = json.loads(status.stdout)
    assert data["maintenance.project_review"] == {"enabled": False}
    assert (
        data["maintenance.user_profile"]["next_due"] == "now (at the next capture or session start)"
    )
    assert data["maintenance.memory_to_skill"]["pending_candidates"] == 0
    text = run_cli("status", "--cwd", str(repo), env={"PIMEM_MAINTENANCE": "user_profile"}).stdout
    assert "maintenance project_review: off (add project_review to PIMEM_MAINTENANCE" in text
    assert "maintenance user_profile: on; last run never; next due now" in text
    assert "skill candidates: 0 pending install of 0 in " in text


# -- in process ----------------------------------------------------------------------------


def test_settings_name_the_tasks_and_the_interval() -> None:
    assert (Settings().maintenance, Settings().maintenance_interval_hours) == (frozenset(), 24)
    settings = Settings.from_env(
        {
            "PIMEM_MAINTENANCE": " project_review, user-profile ,",
            "PIMEM_MAINTENANCE_INTERVAL_HOURS": "0",
        }
    )
    assert settings.maintenance == {"project_review", "user_profile"}
    assert settings.maintenance_interval_hours == 0
    with pytest.raises(SettingsError, match="PIMEM_MAINTENANCE must list task names"):
        Settings.from_env({"PIMEM_MAINTENANCE": "project review"})
    with pytest.raises(
        SettingsError,
        match=r"PIMEM_MAINTENANCE_INTERVAL_HOURS must be a whole number of hours, got '2h'",
    ):
        Settings.from_env({"PIMEM_MAINTENANCE_INTERVAL_HOURS": "2h"})


def test_one_run_at_a_time_per_project(repo: Path, store: Path, tmp_path: Path) -> None:
    pimem = make_pimem({"PIMEM_MAINTENANCE": "project_review"})
    scope = pimem.resolve_scope(repo)
    prompts: list[str] = []

    def complete(system: str, prompt: str, timeout: float) -> str:
        prompts.append(prompt)
        return answer(prompt)

    budget = DistillBudget(limit=0, path=tmp_path / "budget.json")
    runner = MaintenanceRunner(
        pimem, scope, budget=budget, host_model=HostModel(name="fake", complete=complete)
    )
    with project_lock(maintenance_root(scope)) as held:
        assert held
        (report,) = [r for r in runner.run_due() if r.name == "project_review"]
        assert (report.result, report.detail) == (
            "busy",
            "another process runs maintenance for this project",
        )
    assert prompts == []
    runner.wake("test")
    assert runner.wait_idle(30)
    assert [r.result for r in runner.last_reports if r.name == "project_review"] == ["replace"]
    assert len(prompts) == 1
    assert budget.used() == 1
