"""A scripted OpenAI-compatible model on 127.0.0.1 for the maintenance tests: plain (not
streamed) chat completions, as memsearch's client asks for them.

Each request's last message is handed to ``answer``; the reply is its text. ``hold()`` makes the
next requests wait until ``release()``, so a test can kill its client mid-call.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self


class ScriptedModel:
    def __init__(self, answer: Callable[[str], str]) -> None:
        self.answer = answer
        self.requests: list[dict[str, Any]] = []
        self.arrived = threading.Event()
        self._open = threading.Event()
        self._open.set()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}/v1"

    def prompts(self) -> list[str]:
        return [str(request["messages"][-1]["content"]) for request in self.requests]

    def hold(self) -> None:
        self.arrived.clear()
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def close(self) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def _reply(self, raw: bytes) -> tuple[int, bytes]:
        body = json.loads(raw)
        self.requests.append(body)
        self.arrived.set()
        self._open.wait(60)
        try:
            text = self.answer(str(body["messages"][-1]["content"]))
        except Exception as error:  # noqa: BLE001 - the client sees a server error
            return 500, json.dumps({"error": {"message": str(error)}}).encode()
        reply = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "scripted"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        return 200, json.dumps(reply).encode()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                status, data = model._reply(raw)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client was killed mid-call

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
