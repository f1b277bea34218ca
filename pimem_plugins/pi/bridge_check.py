"""The last step of ``pimem setup pi``: start a bridge as the adapter does (``<command> serve``)
and see it answer ``ping``; through the memory service, when it is on, as pi's bridges go."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

import attrs

from pimem_core.plugin import PimemError

#: A first bridge may start the memory service, which imports pimem and its plugins first.
CHECK_TIMEOUT_SECONDS = 60
PING = json.dumps({"id": 1, "method": "ping", "params": {}}) + "\n"


@attrs.frozen
class BridgeAnswer:
    seconds: float


def check_bridge(command: Path, cwd: Path, environ: Mapping[str, str]) -> BridgeAnswer:
    """Run ``command serve``, ask ``ping`` and end its stdin; raises :class:`PimemError` with
    what went wrong and what to do when no ``pong`` comes back."""
    started = time.monotonic()
    try:
        done = subprocess.run(
            [str(command), "serve"],
            input=PING,
            capture_output=True,
            text=True,
            cwd=cwd,
            env={**environ, "PYTHONIOENCODING": "utf-8"},
            timeout=CHECK_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise PimemError(
            f"`{command} serve` did not answer ping within {CHECK_TIMEOUT_SECONDS} s: run "
            "`pimem -v status` to see what holds it up"
        ) from None
    except OSError as error:
        raise PimemError(
            f"`{command} serve` could not be started ({error.strerror or error}): reinstall pimem, "
            "then run `pimem setup pi` again"
        ) from None
    if not any(_is_pong(line) for line in done.stdout.splitlines()):
        said = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        raise PimemError(
            f"`{command} serve` exited with code {done.returncode} without answering ping"
            f" ({said[-1] if said else 'nothing on stderr'}): run `{command} -v status` in "
            "this directory to see why"
        )
    return BridgeAnswer(seconds=time.monotonic() - started)


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
