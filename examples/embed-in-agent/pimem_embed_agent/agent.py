"""The agent loop: a conversation with a chat model that remembers through pimem.

Each user message is one exchange: the model is asked (the system prompt ends with pimem's
snapshot), runs the memory tools it calls, and is asked again, until it answers in words or the
loop's step limit is reached. The exchange is then settled: pimem captures it in the
background, distilled by the same model.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pimem_core import MemorySession, Message, PimemError
from pimem_embed_agent.model import ChatModel, Json

#: Model calls per exchange at most: a model that keeps calling tools is stopped there.
MAX_STEPS = 8

SYSTEM_PROMPT = (
    "You are a concise assistant working in the project at {cwd}. You have a memory that "
    "outlives this conversation: search it with memory_search before saying you do not know "
    "something about the project, read a whole entry with memory_expand, and save what the "
    "user asks you to remember with memory_write."
)


def _tool(name: str, description: str, **properties: str) -> Json:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {
                    key: {"type": "string", "description": text} for key, text in properties.items()
                },
                "required": list(properties),
            },
        },
    }


#: The memory tools the model may call, named as pimem's snapshot and capture gates name them.
TOOLS: tuple[Json, ...] = (
    _tool(
        "memory_search",
        "Search the project's memory; each hit names a chunk hash for memory_expand.",
        query="what to look for, in words",
    ),
    _tool(
        "memory_expand",
        "The whole memory entry behind a chunk hash from memory_search, with its origin.",
        chunk_hash="a chunk hash from memory_search",
    ),
    _tool(
        "memory_write",
        "Save a memory entry: markdown bullets, third person, in the conversation's language.",
        content="the bullets to save",
    ),
)


class Agent:
    """One conversation of the agent, in one pimem session."""

    def __init__(self, model: ChatModel, session: MemorySession, transcript: Path) -> None:
        self.model = model
        self.session = session
        self._transcript = transcript
        self._history: list[Json] = []
        self._tools: Mapping[str, Callable[[Mapping[str, Any]], str]] = {
            "memory_search": lambda args: session.search(str(args["query"])).text,
            "memory_expand": lambda args: session.expand(str(args["chunk_hash"])).text,
            "memory_write": lambda args: session.write(str(args["content"])).text,
        }

    def ask(self, text: str) -> str:
        """The agent's answer to the user's *text*, after whatever tools the model called."""
        additions = self.session.before_prompt(text)
        system = SYSTEM_PROMPT.format(cwd=self.session.memory.cwd)
        if additions.snapshot:
            system += "\n\n" + additions.snapshot
        user = text
        if additions.hidden:  # per-prompt context (auto-context), beside the user's words
            user += "\n\n" + "\n\n".join(injection.text for injection in additions.hidden)
        exchange = [Message(role="user", text=text)]
        self._keep({"role": "user", "content": user})
        for _ in range(MAX_STEPS):
            reply = self.model.chat(
                [{"role": "system", "content": system}, *self._history], tools=TOOLS
            )
            calls = reply.get("tool_calls") or []
            content = str(reply.get("content") or "")
            self._keep(
                {
                    "role": "assistant",
                    "content": content,
                    **({"tool_calls": calls} if calls else {}),
                }
            )
            exchange.append(
                Message(role="assistant", text=content, tool_calls=tuple(map(_one_line, calls)))
            )
            if not calls:
                self.session.settle(exchange)
                return content
            for call in calls:
                result = self._run(call)
                self._keep({"role": "tool", "tool_call_id": call.get("id", ""), "content": result})
                exchange.append(Message(role="tool", text=result))
        stopped = f"(stopped after {MAX_STEPS} model calls without an answer)"
        # Not captured: an exchange stopped midway holds no answer worth remembering.
        self.session.settle([*exchange, Message(role="assistant", text=stopped, aborted=True)])
        return stopped

    def _run(self, call: Mapping[str, Any]) -> str:
        """The tool result for one of the model's calls; a failure is the result, in words."""
        function = call.get("function") or {}
        name = str(function.get("name", ""))
        tool = self._tools.get(name)
        if tool is None:
            return f"error: there is no tool {name!r}"
        try:
            arguments = json.loads(function.get("arguments") or "{}")
            return tool(arguments)
        except (ValueError, KeyError, TypeError) as error:
            return f"error: bad arguments for {name}: {error}"
        except PimemError as error:
            return f"error: {error}"

    def _keep(self, message: Json) -> None:
        """Add *message* to the conversation and to its transcript (one JSON line each), the
        file every memory entry of this conversation names."""
        self._history.append(message)
        with self._transcript.open("a", encoding="utf-8") as out:
            out.write(json.dumps(message, ensure_ascii=False) + "\n")


def _one_line(call: Mapping[str, Any]) -> str:
    """A tool call as capture reads it: ``memory_search(query=staging port)``."""
    function = call.get("function") or {}
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except ValueError:
        arguments = {}
    shown = ", ".join(
        f"{key}={' '.join(str(value).split())[:60]}"
        for key, value in (arguments.items() if isinstance(arguments, dict) else ())
    )
    return f"{function.get('name', '?')}({shown})"
