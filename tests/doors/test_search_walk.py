"""The walk of a search, traced: ``pimem search`` through the memory service and in process,
from the thin client to the ranker and back, crosses at most :data:`MOST_MODULES` of pimem's
modules, and no step of it calls back up a floor.

What "crosses" counts, exactly: the distinct pimem modules

* on the **call chain** at the moment the ranker orders the hits: the stack of frames, from the
  process's entry point to the ranker's function that orders them
  (``pimem_plugins.memsearch.recall.ranking.rank``), in the process that ranks (the memory
  service, or the ``pimem`` process itself in process); for a search through the service, also
  the thin client's stack where it hands its command line over and waits for the answer (its
  socket's write and reads), since the answer comes back along it;
* and **on the way back**, the modules whose functions the command's handler calls, once the
  hits are ranked, to format them into the answer (its text and JSON).

A helper a step calls and that returns before the ranking (a setting read, the wire's framing,
the scope resolved) is a tool used at a stop, not a stop: it is not on the chain. The processes
are traced by ``walk_tracer.py``, a wrapper that runs the real ``pimem`` entry point under a
profiler (no hook in the product): the service is started with it, then a client asks it.

"A call back up a floor": a frame of the walk (each frame of the chain calling the next, and the
handler calling what formats its answer) calling a function of a module on a higher floor
(:func:`test_architecture.floor`, from the imports). Core reaches a plugin only through the
contract (the facade calls the index service a hook opened), so a call from the contract floor
into a plugin goes through the contract and is not a call up; a plugin may call only the
contract floor of core. Callbacks a door lends the command (its scope, its notes, the door
itself) run in the door's own module by design and are not steps of the walk.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_architecture import floor, layer

from pimem_core.doors import service_client, service_wire
from pimem_core.doors.table import CORE

from conftest import Result, run_cli

#: The most pimem modules a search may cross (issue 37).
MOST_MODULES = 10
TRACER = Path(__file__).with_name("walk_tracer.py")
RANKER = "pimem_plugins.memsearch.recall.ranking:rank"
PATIENCE_S = 60.0
SESSION = ("--session", "s1", "--turn", "t1", "--transcript", "/home/user/s1.jsonl")


def module(frame: str) -> str:
    return frame.partition(":")[0]


def handler_frame() -> str:
    """The search command's handler, as the tracer names its frame."""
    (search,) = (command for command in CORE if command.path == ("search",))
    return f"{search.handler.__module__}:{search.handler.__qualname__}"


def calls_up(caller: str, callee: str) -> bool:
    """Whether module *caller* calling a function of module *callee* is a call back up."""
    if caller == callee:
        return False
    in_core, to_core = caller.startswith("pimem_core"), callee.startswith("pimem_core")
    if in_core and not to_core:  # core into a plugin: only the contract, through its services
        return layer(caller) != "contract"
    if to_core and not in_core:  # a plugin into core: only the contract floor
        return layer(callee) not in ("contract", "api")
    return floor(callee) > floor(caller)


def traced(record: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TRACER), str(record), "--", *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def read(record: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(record.read_text())
    return loaded


class Walk:
    """A traced search: the chain's frames in each process, and the formatting's calls."""

    def __init__(self, ranked: Path, client: Path | None = None) -> None:
        ranking = read(ranked)
        chain = ranking["ranking"]
        assert chain, f"nothing was ranked in the process traced into {ranked.name}"
        assert chain[-1] == RANKER, chain
        self.stacks: list[list[str]] = [[str(frame) for frame in chain]]
        if client is not None:
            handing = read(client)["handing"]
            assert handing, "the thin client handed nothing over"
            # From the request's write on: the client waits along these stacks for the answer.
            stacks = [[str(frame) for frame in stack] for stack in handing]
            sent = next(i for i, stack in enumerate(stacks) if stack[-1].endswith(":_ask"))
            self.stacks.insert(0, stacks[sent])
            self.stacks[1:1] = stacks[sent + 1 :]
        handler = handler_frame()
        assert handler in self.stacks[-1], f"{handler} is not on the chain"
        after = ranking["after"] or []
        self.formatting = [
            (str(caller), str(callee)) for caller, callee in after if caller == handler
        ]
        assert self.formatting, "the handler formatted nothing after the ranking"

    @property
    def modules(self) -> list[str]:
        """The modules crossed, in the order first met."""
        met = [module(frame) for stack in self.stacks for frame in stack]
        met += [module(callee) for _, callee in self.formatting]
        return list(dict.fromkeys(met))

    @property
    def steps(self) -> set[tuple[str, str]]:
        """Every call between two modules the walk makes: a frame calling the next on a
        stack, and the handler calling what formats its answer."""
        found = {
            (module(caller), module(callee))
            for stack in self.stacks
            for caller, callee in itertools.pairwise(stack)
        }
        return found | {(module(caller), module(callee)) for caller, callee in self.formatting}


@pytest.fixture
def searchable(service_env: dict[str, str], repo: Path) -> dict[str, str]:
    """A store with one entry indexed; the environment with the service off."""
    local = {**service_env, "PIMEM_SERVICE": "off"}
    content = "- the team chose Redis for the hot cache with 5 minute TTLs"
    for args in (("write", content, *SESSION), ("index",)):
        done = run_cli(*args, "--cwd", str(repo), env=local)
        assert done.code == 0, done.stderr
    return local


def check(walk: Walk, stdout: str) -> None:
    assert "Redis" in stdout
    assert len(walk.modules) <= MOST_MODULES, walk.modules
    up = {(caller, callee) for caller, callee in walk.steps if calls_up(caller, callee)}
    assert up == set(), "calls back up a floor"


def test_a_search_in_process_crosses_few_modules_and_never_climbs(
    searchable: dict[str, str], repo: Path, tmp_path: Path
) -> None:
    record = tmp_path / "in_process.json"
    done = traced(record, "search", "which cache did we choose", "--cwd", str(repo), env=searchable)
    assert done.returncode == 0, done.stderr
    walk = Walk(record)
    check(walk, done.stdout)
    assert walk.modules == [
        "pimem_core.doors.launcher",
        "pimem_core.doors.cli",
        "pimem_core.doors.command_line",
        "pimem_core.doors.commands",
        "pimem_core.facade.recall",
        "pimem_plugins.memsearch.index",
        "pimem_plugins.memsearch.recall.service",
        "pimem_plugins.memsearch.recall.ranking",
        "pimem_core.render",
    ]


def test_a_search_through_the_service_crosses_few_modules_and_never_climbs(
    searchable: dict[str, str], service_env: dict[str, str], repo: Path, tmp_path: Path
) -> None:
    served, asked = tmp_path / "service.json", tmp_path / "client.json"
    path = service_wire.socket_path(service_env)
    with (tmp_path / "service.log").open("w") as log:
        service = subprocess.Popen(
            [sys.executable, str(TRACER), str(served), "--", "service", "run"],
            env=service_env,
            stdout=log,
            stderr=log,
        )
        try:
            deadline = time.monotonic() + PATIENCE_S
            while (found := service_client.probe(path)) is None:
                assert service.poll() is None, (tmp_path / "service.log").read_text()
                assert time.monotonic() < deadline, "the traced service never answered"
                time.sleep(0.05)
            found.close()
            args = ("search", "which cache did we choose", "--cwd", str(repo))
            done = traced(asked, *args, env=service_env)
            answered = Result(done.returncode, done.stdout, done.stderr)
            in_process = run_cli(*args, env=searchable)
        finally:
            found = service_client.probe(path)
            if found is not None:
                service_client.stop(found, path)
            service.wait(PATIENCE_S)
    assert answered.code == 0, answered.stderr
    assert "running in process" not in answered.stderr
    assert answered.stdout == in_process.stdout  # the same answer, the walk aside
    walk = Walk(served, client=asked)
    check(walk, answered.stdout)
    assert walk.modules == [
        "pimem_core.doors.launcher",
        "pimem_core.doors.service_client",
        "pimem_core.doors.service",
        "pimem_core.doors.command_line",
        "pimem_core.doors.commands",
        "pimem_core.facade.recall",
        "pimem_plugins.memsearch.index",
        "pimem_plugins.memsearch.recall.service",
        "pimem_plugins.memsearch.recall.ranking",
        "pimem_core.render",
    ]


def test_a_call_back_up_is_told_apart() -> None:
    # The service calling back into the command line's own module, as it once did, climbs.
    assert calls_up("pimem_core.doors.service", "pimem_core.doors.cli")
    assert not calls_up("pimem_core.doors.cli", "pimem_core.doors.command_line")
    # Core reaches a plugin through the contract only; a plugin reaches only core's contract.
    assert not calls_up("pimem_core.facade.recall", "pimem_plugins.memsearch.index")
    assert calls_up("pimem_core.doors.commands", "pimem_plugins.memsearch.index")
    assert not calls_up("pimem_plugins.memsearch.recall.ranking", "pimem_core.scores")
    assert calls_up("pimem_plugins.memsearch.index", "pimem_core.doors.service_request")
