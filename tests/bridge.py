"""A host's end of the host protocol over real pipes: ``pimem serve`` as an adapter drives it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import CLOCK


class Bridge:
    """A host's end of the protocol: send requests, answer pimem's own requests."""

    def __init__(self, env: dict[str, str], cwd: Path | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pimem_core", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PIMEM_NOW": CLOCK, **env},
            cwd=cwd,
        )
        self.ready = self.read()
        self.next_id = 0
        self.completions: list[dict[str, Any]] = []
        self.progress: list[str] = []
        #: What pimem told the host to show its user (``{"event": "notice", ...}``).
        self.events: list[dict[str, Any]] = []
        self.model_answer = "- the user asked for a fix\n- the agent fixed it"
        #: Distils each exchange into its own bullets, when set (else every answer is alike).
        self.distil: Callable[[str], str] | None = None

    def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, "the bridge closed its output"
        message: dict[str, Any] = json.loads(line)
        return message

    def send(self, message: dict[str, Any] | str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(
            message if isinstance(message, str) else json.dumps(message) + "\n"
        )
        self.process.stdin.flush()

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        request_id = self.next_id
        self.send({"id": request_id, "method": method, "params": params})
        while True:
            message = self.read()
            if message.get("method") == "complete":  # pimem asks the host's model
                self.completions.append(message["params"])
                prompt = message["params"]["prompt"]
                text = self.model_answer if self.distil is None else self.distil(prompt)
                self.send({"id": message["id"], "result": {"text": text}})
                continue
            if "event" in message:  # a notice for the user, not an answer
                self.events.append(message)
                continue
            assert message.get("id") == request_id, message
            if "progress" in message:  # told while it waits in line; the answer follows
                self.progress.append(message["progress"])
                continue
            return message

    def close(self) -> int:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.close()
        code = self.process.wait(timeout=60)
        self.process.stdout.close()
        return code
