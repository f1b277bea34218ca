"""Parity: every command the memory service answers, it answers as pimem in process would,
after each change a user makes between two commands (docs/service.md, ADR 0017).

Each case starts a service on a project with memory, makes one change (a plugin installed or
removed, a setting changed, a ``.git`` made or removed above, a store command added or edited,
memsearch's configuration edited, the model rewritten), then runs each routed command through
the service first and in process second, and compares: JSON answers equal, writes in the same
day file.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest

from pimem_core.doors import service_client, service_wire

from conftest import Result, make_distribution, run_cli, write_script

#: A third-party resolver with a setting of its own, outside pimem's prefixes: every project's
#: memory goes to ``$CENTRAL_STORE/<project name>``.
CENTRAL = """
import os
from pathlib import Path

from pimem_core import SettingSpec, hookimpl
from pimem_core.types import Scope

STORE = SettingSpec(
    plugin="central", name="store", env="CENTRAL_STORE", parse=str,
    default="", help="where every project's memory goes",
)


@hookimpl
def pimem_declare_settings():
    return (STORE,)


@hookimpl(tryfirst=True)
def pimem_resolve_scope(cwd, settings):
    root = STORE.read(settings)
    if not root:
        return None
    store = Path(root) / cwd.name
    return Scope(
        repository_dir=cwd,
        scope_dir=store,
        memory_dir=store / "memory",
        collection="ms_central_" + cwd.name,
        index_state_path=store / ".index-state.json",
    )
"""

#: Differ between a warm process and a new one by nature, not by what they answer: the read
#: model loaded or not, and the time of the last index run (each round runs ``index``).
PROCESS_KEYS = {
    ("ranker", "loaded"),
    ("ranker", "chunks"),
    ("ranker", "origin"),
    ("ranker", "facts_pending"),
    ("ranker", "ranked_by_meaning"),
    ("index", "last_completed_at"),
    ("service",),
}


@attrs.define
class World:
    """A project with memory, the environment commands run with, and a place for plugins
    that is on ``PYTHONPATH`` from the start (so installing one changes no variable)."""

    env: dict[str, str]
    project: Path
    site: Path
    home: Path
    turns: Iterator[int] = attrs.field(factory=lambda: iter(range(1, 1000)))

    def run(self, *args: str, service: bool) -> Result:
        env = {**self.env, "PIMEM_SERVICE": "on" if service else "off"}
        return run_cli(*args, env=env, cwd=self.project)

    def write(self, content: str, *, service: bool) -> Result:
        turn = f"t{next(self.turns)}"
        session = ("--session", "parity", "--turn", turn, "--transcript", "/h/parity.jsonl")
        return self.run("write", content, *session, "--json", service=service)

    def install_central(self) -> None:
        make_distribution(
            self.site, "pimem-central", {"central": "pimem_central"}, {"pimem_central": CENTRAL}
        )

    def service_pid(self) -> int | None:
        found = service_client.probe(service_wire.socket_path({**self.env, "PIMEM_SERVICE": "on"}))
        if found is None:
            return None
        found.close()
        return found.hello.pid


def _json(result: Result) -> object:
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)


def _without_process_keys(status: object) -> object:
    assert isinstance(status, dict)
    out = {key: dict(value) if isinstance(value, dict) else value for key, value in status.items()}
    for path in PROCESS_KEYS:
        section = out if len(path) == 1 else out.get(path[0])
        if isinstance(section, dict):
            section.pop(path[-1], None)
    return out


def answers(world: World, *, service: bool) -> dict[str, object]:
    """What the read commands answer."""
    search = _json(
        world.run("search", "which cache did we choose", "--json", "-k", "3", service=service)
    )
    assert isinstance(search, list)
    expanded = None
    if search:
        chunk = str(search[0]["chunk_hash"])
        expanded = _json(world.run("expand", chunk, "--json", service=service))
    index = world.run("index", service=service)
    assert index.code == 0, index.stderr
    status = _json(world.run("status", "--json", service=service))
    return {"search": search, "expand": expanded, "status": _without_process_keys(status)}


def written_to(world: World, *, service: bool) -> object:
    """The day file a write lands in."""
    written = _json(world.write("- parity check: the agent wrote this entry", service=service))
    assert isinstance(written, dict)
    return written["file"]


def _diff(served: object, in_process: object) -> str:
    if isinstance(served, dict) and isinstance(in_process, dict):
        keys = sorted(
            k for k in served.keys() | in_process.keys() if served.get(k) != in_process.get(k)
        )
        return "; ".join(f"{k}: {served.get(k)!r} (service) != {in_process.get(k)!r}" for k in keys)
    return f"{served!r} (service) != {in_process!r}"


# -- the changes a user makes between two commands ----------------------------------------------


def git_root_made_above(world: World) -> None:
    """The reproduction of issue 26: ``rm -rf sub/.git && git init top``."""
    shutil.rmtree(world.project / ".git")


def git_root_made_here(world: World) -> None:
    (world.project / ".git").mkdir()


def plugin_installed(world: World) -> None:
    world.env["CENTRAL_STORE"] = str(world.home / "central")
    # The setting alone changes nothing yet: no plugin declares it. Then the install.
    world.run("status", service=True)
    world.install_central()


def plugin_removed(world: World) -> None:
    for path in world.site.iterdir():
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def plugin_setting_changed(world: World) -> None:
    world.env["CENTRAL_STORE"] = str(world.home / "elsewhere")


def pimem_setting_changed(world: World) -> None:
    world.env["PIMEM_RANKER"] = "memsearch"


def store_command_added(world: World) -> None:
    world.env["PI_MEMSEARCH_STORE_CMD"] = str(_store_command(world, "first"))


def store_command_edited(world: World) -> None:
    world.env["PI_MEMSEARCH_STORE_CMD"] = str(_store_command(world, "first"))
    assert world.run("status", service=True).code == 0
    script = _store_command(world, "second")
    os.utime(script, ns=(time.time_ns() + 10**9,) * 2)


def memsearch_config_edited(world: World) -> None:
    config = world.home / ".memsearch" / "config.toml"
    config.write_text(config.read_text().replace("milvus.db", "moved.db"))


def model_rewritten(world: World) -> None:
    hf_home = Path(world.env["HF_HOME"])
    later = time.time_ns() + 10**9
    for path in hf_home.rglob("*"):
        if path.is_file() and "all-MiniLM" in str(path):
            os.utime(path, ns=(later, later))


def _store_command(world: World, store: str) -> Path:
    return write_script(
        world.home / "store.sh",
        'case "$1" in\n'
        f"  memory-dir) echo {world.home}/{store}/memory ;;\n"
        f"  collection) echo ms_{store}_12345678 ;;\n"
        "esac\n",
    )


CHANGES: dict[str, Callable[[World], None]] = {
    "git init above a used store": git_root_made_above,
    "git init in the project": git_root_made_here,
    "a plugin installed while the service runs": plugin_installed,
    "a plugin removed": plugin_removed,
    "a plugin's setting changed": plugin_setting_changed,
    "a pimem setting changed": pimem_setting_changed,
    "a store command added": store_command_added,
    "a store command edited": store_command_edited,
    "memsearch's configuration edited": memsearch_config_edited,
    "the offline model rewritten": model_rewritten,
}
#: Where the world starts from, for the changes that undo something.
STARTS: dict[str, Callable[[World], None]] = {
    "git init above a used store": git_root_made_here,
    "a plugin removed": plugin_installed,
    "a plugin's setting changed": plugin_installed,
}


@pytest.fixture
def world(service_env: dict[str, str], repo: Path, tmp_path: Path) -> Iterator[World]:
    site = tmp_path / "site"
    site.mkdir()
    project = repo / "packages" / "core"
    env = {
        **service_env,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
    }
    made = World(env=env, project=project, site=site, home=Path(service_env["HOME"]))
    yield made
    # Services started with other settings than the fixture's (plugin settings, PYTHONPATH).
    run_cli("service", "stop", "--all", env={**made.env, "PIMEM_SERVICE": "off"})


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_the_service_answers_as_in_process_after(world: World, change: str) -> None:
    if change in STARTS:
        STARTS[change](world)
    for content in (
        "- the team chose Redis for the hot cache, with 5 minute TTLs",
        "- the agent fixed the login redirect loop by escaping the return URL",
    ):
        assert world.write(content, service=False).code == 0
    assert world.run("index", service=False).code == 0
    warm = world.run("search", "redis cache", service=True)
    assert warm.code == 0, warm.stderr
    before = world.service_pid()
    assert before is not None, "the service answered"

    CHANGES[change](world)

    served = answers(world, service=True)
    in_process = answers(world, service=False)
    for key in served:
        assert served[key] == in_process[key], _diff(served[key], in_process[key])
    assert written_to(world, service=True) == written_to(world, service=False)
    if change in ("a plugin installed while the service runs", "the offline model rewritten"):
        assert world.service_pid() not in (None, before), "a successor answered"
