"""A host's side of ``pimem serve`` for the scenarios: requests, pimem's ``complete`` asks,
a pi session file to capture from, and a way to drop privileges a root shell would override."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from reliability.sandbox import Sandbox

#: The host lends these models; pimem picks the cheapest of the session's provider.
MODEL = {"provider": "fake", "id": "big", "input_cost": 10, "output_cost": 10}
MODELS = [MODEL, {"provider": "fake", "id": "small", "input_cost": 1, "output_cost": 1}]
#: Capabilities that let root ignore file permissions (DAC override, DAC read search, owner).
_DAC_CAPABILITIES = (1, 2, 3)
_PR_CAPBSET_DROP = 24


def drop_file_privileges() -> None:
    """In a child before exec: make file permissions apply even when running as root.

    As root the scenarios would otherwise write to read-only directories and read other
    users' files; dropping the capabilities that override permission checks from the bounding
    set puts the child where an ordinary user stands. A no-op for an ordinary user.
    """
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in _DAC_CAPABILITIES:
        if libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


def echo_bullets(prompt: str) -> str:
    """What the scripted host model answers: one bullet per user line of the exchange."""
    asked = [line[len("[User]: ") :] for line in prompt.split("\n") if line.startswith("[User]: ")]
    return "\n".join(f"- the user asked: {text}" for text in asked) or "- nothing was asked"


class Bridge:
    """One ``pimem serve`` child and the host's end of its pipes."""

    def __init__(
        self,
        box: Sandbox,
        extra: Mapping[str, str] | None = None,
        *,
        answer: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None,
    ) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pimem_core", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=box.project,
            env=box.env(extra),
        )
        #: Decides the host's answer to pimem's ``complete`` (``None``: never answer).
        self.answer = answer or (
            lambda params: {"result": {"text": echo_bullets(params["prompt"])}}
        )
        #: Every ``complete`` request pimem sent, in order.
        self.asked: list[dict[str, Any]] = []
        self._replies: dict[object, queue.SimpleQueue[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._ids = 0
        self._reader = threading.Thread(target=self._read, name="host-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in iter(self.process.stdout.readline, b""):
            message = json.loads(raw)
            if message.get("method") == "complete":
                self.asked.append(message["params"])
                reply = self.answer(message["params"])
                if reply is not None:
                    self._write({"id": message["id"], **reply})
                continue
            if "progress" in message or "event" in message:
                continue
            self._box(message.get("id")).put(message)

    def _box(self, request_id: object) -> queue.SimpleQueue[dict[str, Any]]:
        with self._lock:
            return self._replies.setdefault(request_id, queue.SimpleQueue())

    def _write(self, message: Mapping[str, object]) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write((json.dumps(message) + "\n").encode())
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass  # the bridge is gone; the caller finds out from its missing reply

    def send(self, method: str, **params: Any) -> int:
        """Send a request without waiting; returns its id."""
        with self._lock:
            self._ids += 1
            request_id = self._ids
        self._write({"id": request_id, "method": method, "params": params})
        return request_id

    def reply(self, request_id: int, timeout: float = 60) -> dict[str, Any] | None:
        try:
            return self._box(request_id).get(timeout=timeout)
        except queue.Empty:
            return None

    def call(self, method: str, timeout: float = 60, **params: Any) -> dict[str, Any]:
        reply = self.reply(self.send(method, **params), timeout)
        if reply is None:
            raise TimeoutError(f"{method}: no reply within {timeout:g} s")
        return reply

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        self._close()

    def close(self, timeout: float = 60) -> int:
        """End input; the bridge shuts the session down and exits."""
        assert self.process.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.process.stdin.close()
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self._close()
        return code

    def _close(self) -> None:
        self._reader.join(5)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None and not stream.closed:
                with contextlib.suppress(BrokenPipeError):
                    stream.close()


class SessionFile:
    """A pi session file (format 3) the scenario appends exchanges to, as pi would."""

    def __init__(self, path: Path, session_id: str) -> None:
        self.path = path
        self.session_id = session_id
        self._last: str | None = None
        self._count = 0
        header = {"type": "session", "version": 3, "id": session_id, "cwd": str(path.parent)}
        path.write_text(json.dumps(header) + "\n")

    def _append(self, role: str, text: str) -> str:
        self._count += 1
        entry_id = f"{self.session_id}-{self._count:04d}"
        content = [{"type": "text", "text": text}]
        message: dict[str, Any] = {
            "role": role,
            "content": content,
            "timestamp": time.time() * 1000,
        }
        if role == "assistant":
            message["stopReason"] = "stop"
        line = {"type": "message", "id": entry_id, "parentId": self._last, "message": message}
        with self.path.open("a") as file:
            file.write(json.dumps(line) + "\n")
        self._last = entry_id
        return entry_id

    def exchange(self, question: str, answer: str) -> str:
        """Append one user question and the assistant's answer; returns the leaf id."""
        self._append("user", question)
        return self._append("assistant", answer)


def start_params(box: Sandbox, transcript: SessionFile) -> dict[str, Any]:
    return {
        "session_id": transcript.session_id,
        "cwd": str(box.project),
        "transcript": str(transcript.path),
        "model": MODEL,
        "models": MODELS,
    }


def wait_until(condition: Callable[[], bool], timeout: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return condition()


def entries(text: str) -> Sequence[str]:
    """The ``### HH:MM`` entries of a daily memory file, each up to the next heading."""
    blocks, current = [], None
    for line in text.split("\n"):
        if line.startswith("#"):
            if current is not None:
                blocks.append("\n".join(current).rstrip("\n"))
            current = [line] if line.startswith("### ") else None
        elif current is not None:
            current.append(line)
    if current is not None:
        blocks.append("\n".join(current).rstrip("\n"))
    return blocks
