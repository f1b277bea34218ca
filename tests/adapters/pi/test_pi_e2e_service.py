"""End to end, in the real pi (0.73 and 1.6) with ``PIMEM_SERVICE=on``: pi's bridge is a thin
relay, and the user's one memory service captures, indexes and searches for every session.

Assertions are on bytes (the day file, what the model received) and on processes: one service
for every session and the shell's ``pimem search``, and no bridge left behind by pi.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.pi_host import (
    PI_LINES,
    ModelServer,
    PiWorld,
    Text,
    ToolCall,
    after_tool,
    anchors,
    bridge_pids,
    bridges_in,
    missing_pi,
    on_distill,
    on_prompt,
    pimem_command,
    read_session,
    wait_for,
)
from pimem_core.doors import service_client, service_wire

from conftest import CLOCK, alive

MISSING = missing_pi()
pytestmark = pytest.mark.skipif(
    MISSING is not None,
    reason=f"the pi adapter's Node packages are not installed (`make node`): {MISSING}",
)

DAY = "2026-08-13"
PROMPT_1 = "[v1] We deploy the billing worker with Nomad, not Kubernetes."
REPLY_1 = "Noted: Nomad for the billing worker."
FACT = "- the billing worker is deployed with Nomad, not Kubernetes"


@pytest.fixture(params=sorted(PI_LINES))
def world(
    request: pytest.FixtureRequest,
    repo: Path,
    memsearch_home: Path,
    tmp_path: Path,
    server: ModelServer,
) -> Iterator[PiWorld]:
    """The real pi with the memory service on, its runtime directory under the test's own
    ``PIMEM_HOME``; the service is stopped afterwards."""
    world = PiWorld.create(
        PI_LINES[request.param],
        repo=repo,
        agent_dir=tmp_path / "agent",
        server=server,
        base_env=dict(os.environ),
        extra_env={
            "PIMEM_NOW": CLOCK,
            "PIMEM_SERVICE": "on",
            "PIMEM_HOME": str(tmp_path / "pimem-home"),
        },
    )
    yield world
    path = service_wire.socket_path(world.env)
    found = service_client.probe(path)
    if found is not None:
        service_client.stop(found, path)


def service_pid(world: PiWorld) -> int:
    found = service_client.probe(service_wire.socket_path(world.env))
    assert found is not None, "no memory service answers"
    found.close()
    return found.hello.pid


def test_sessions_capture_and_recall_through_one_memory_service(world: PiWorld) -> None:
    server, day_file = world.server, world.day_file(DAY)
    server.rules = [on_prompt("[v1]", Text(REPLY_1)), on_distill(Text(FACT), marker="[v1]")]
    first = world.run(PROMPT_1)
    assert first.code == 0, first.stderr
    assert first.session is not None
    session = read_session(first.session)
    service = service_pid(world)
    # pi's exit waited for capture: the entry is on disk, anchored to the session's turn.
    (anchor,) = anchors(day_file.read_text())
    assert anchor[0] == session.id
    assert f"{FACT}\n" in day_file.read_text()
    # The bridge pi spawned was a relay; it is gone, and the service carries on.
    wait_for(lambda: not bridges_in(world.repo), 30, "pi's bridge to exit")
    assert "serving this session in process" not in first.stderr

    server.rules = [
        on_prompt("[v2]", ToolCall("memory_search", {"query": "billing worker deployment"})),
        after_tool("memory_search", Text("With Nomad."), marker="[v2]"),
        on_distill(marker="[v2]"),
    ]
    second = world.run("[v2] How do we deploy the billing worker?")
    assert second.code == 0, second.stderr
    (searched,) = [
        result.content
        for request in server.agent_requests()
        if "[v2]" in request.prompt and (result := request.last_tool_result) is not None
    ]
    assert FACT.removeprefix("- ") in searched, searched
    assert service_pid(world) == service, "both sessions used the same service"

    # The shell's search goes to the same warm service and finds the captured entry.
    shell = subprocess.run(
        [pimem_command(), "search", "billing worker deploy"],
        cwd=world.repo,
        env=world.env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "Nomad" in shell.stdout
    assert "running in process" not in shell.stderr
    assert re.search(r"\b1\. " + DAY, shell.stdout), shell.stdout
    assert service_pid(world) == service
    assert alive(service)


def test_a_pi_that_starts_no_session_starts_no_memory_service(world: PiWorld) -> None:
    """The adapter starts its bridge as pi loads it, ahead of the session; a pi that starts
    none (``pi --help``) exits without waiting for it, and nothing of pimem is left running."""
    ran = subprocess.run(
        world.line.command("--help"),
        cwd=world.repo,
        env=world.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    wait_for(lambda: not bridges_in(world.repo), 30, "the early bridge to exit")
    assert service_client.probe(service_wire.socket_path(world.env)) is None


def test_after_one_session_pi_attaches_to_the_memory_service_with_no_bridge(
    world: PiWorld,
) -> None:
    """The first session's bridge names the service it relays to; the adapter records that
    route, and the next session attaches to the service over its socket: no ``pimem serve``
    under pi, and memory answers as through a bridge."""
    server = world.server
    server.rules = [on_prompt("[v1]", Text(REPLY_1)), on_distill(Text(FACT), marker="[v1]")]
    assert world.run(PROMPT_1).code == 0
    route = json.loads((service_wire.runtime_dir(world.env) / "pi-route.json").read_text())
    assert route["socket"] == str(service_wire.socket_path(world.env))
    service = service_pid(world)

    server.rules = [
        on_prompt("[v2]", ToolCall("memory_search", {"query": "billing worker deployment"})),
        after_tool("memory_search", Text("With Nomad."), marker="[v2]"),
        on_distill(marker="[v2]"),
    ]
    with world.rpc() as pi:
        pi.prompt("[v2] How do we deploy the billing worker?")
        assert bridge_pids(pi.pid) == [], "the session started no bridge process"
        assert pi.close() == 0
    (searched,) = [
        result.content
        for request in server.agent_requests()
        if "[v2]" in request.prompt and (result := request.last_tool_result) is not None
    ]
    assert FACT.removeprefix("- ") in searched, searched
    assert service_pid(world) == service
