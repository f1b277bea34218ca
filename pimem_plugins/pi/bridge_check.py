"""The last step of ``pimem setup pi``: start a bridge as the adapter does (``<command> serve``)
and see it answer ``ping``; through the memory service, when it is on, as pi's bridges go.

stdin stays open until the answer is read: a bridge whose host has ended its input points its
stdout at the null device (a host that does not wait must not break it), answers included.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

import attrs

from pimem_core.plugin import PimemError

#: A first bridge may start the memory service, which imports pimem and its plugins first.
CHECK_TIMEOUT_SECONDS = 60
#: After the answer: how long the bridge has to end once its input has.
EXIT_SECONDS = 10
PING = json.dumps({"id": 1, "method": "ping", "params": {}}) + "\n"


@attrs.frozen
class BridgeAnswer:
    seconds: float


def check_bridge(command: Path, cwd: Path, environ: Mapping[str, str]) -> BridgeAnswer:
    """Run ``command serve``, ask ``ping``, end its input once answered; raises
    :class:`PimemError` with what went wrong and what to do when no ``pong`` comes back."""
    started = time.monotonic()
    try:
        process = subprocess.Popen(
            [str(command), "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
            env={**environ, "PYTHONIOENCODING": "utf-8"},
        )
    except OSError as error:
        raise PimemError(
            f"`{command} serve` could not be started ({error.strerror or error}): reinstall "
            "pimem, then run `pimem setup pi` again"
        ) from None
    # Pipes were asked for, so they are there.
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    lines: queue.Queue[str | None] = queue.Queue()
    errors: list[str | None] = []
    readers = [
        threading.Thread(target=_read, args=(process.stdout, lines.put), daemon=True),
        threading.Thread(target=_read, args=(process.stderr, errors.append), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        process.stdin.write(PING)
        process.stdin.flush()
        answered = _wait_for_pong(lines, started + CHECK_TIMEOUT_SECONDS)
    except OSError:
        answered = False  # it exited before reading: said below
    finally:
        _end(process)
        for reader in readers:
            reader.join(timeout=EXIT_SECONDS)
    if answered:
        return BridgeAnswer(seconds=time.monotonic() - started)
    said = [line.strip() for line in errors if line and line.strip()]
    how = (
        f"did not answer ping within {CHECK_TIMEOUT_SECONDS} s"
        if process.returncode in (None, -9)
        else f"exited with code {process.returncode} without answering ping"
    )
    raise PimemError(
        f"`{command} serve` {how} ({said[-1] if said else 'nothing on stderr'}): run "
        f"`{command} -v status` in this directory to see why"
    )


def _read(stream: IO[str], put: Callable[[str | None], None]) -> None:
    for line in stream:
        put(line)
    put(None)


def _wait_for_pong(lines: queue.Queue[str | None], deadline: float) -> bool:
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return False
        if line is None:
            return False
        if _is_pong(line):
            return True


def _end(process: subprocess.Popen[str]) -> None:
    """End the bridge's input, as pi does at exit, and reap it (killed if it lingers)."""
    try:
        if process.stdin is not None:
            process.stdin.close()
    except OSError:
        pass  # it is gone already
    try:
        process.wait(timeout=EXIT_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _is_pong(line: str) -> bool:
    try:
        message = json.loads(line)
    except ValueError:
        return False
    return (
        isinstance(message, dict)
        and message.get("id") == 1
        and message.get("result") == {"pong": True}
    )
