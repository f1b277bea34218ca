"""What the memory service's tests share: waiting for it, and asking it who it is."""

from __future__ import annotations

import time

from pimem_core.doors import service_client, service_wire

#: What the thin client says when it ran a command in process because no service answered.
WARNING = "running in process, the memory service is unavailable"
#: Bounds a wait for something that must happen; never a measured assertion.
PATIENCE_S = 60.0


def wait_until(done: object, what: str) -> None:
    assert callable(done)
    deadline = time.monotonic() + PATIENCE_S
    while not done():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def hello(env: dict[str, str]) -> service_client.Hello:
    found = service_client.probe(service_wire.socket_path(env))
    assert found is not None, "no service answers"
    found.close()
    return found.hello
