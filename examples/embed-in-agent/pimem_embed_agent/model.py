"""An OpenAI-compatible chat model over HTTP, with the standard library only."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

#: A chat message or a tool definition, as the OpenAI chat API writes them.
Json = dict[str, Any]


class ModelError(Exception):
    """The model could not be reached, or answered with something that is not a reply."""


def _without_trailing_slash(url: str) -> str:
    return url.rstrip("/")


@attrs.frozen(kw_only=True)
class ChatModel:
    """``POST {base_url}/chat/completions`` with *model*; *api_key* as a bearer token, if any."""

    base_url: str = attrs.field(converter=_without_trailing_slash)
    model: str
    api_key: str | None = attrs.field(default=None, repr=False)
    timeout: float = 120.0

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] = (),
        timeout: float | None = None,
    ) -> Json:
        """The assistant's message (``content`` and any ``tool_calls``) for *messages*."""
        body: Json = {"model": self.model, "messages": list(messages)}
        if tools:
            body["tools"] = list(tools)
        request = urllib.request.Request(
            f"{self.base_url}/chat/completions",
            data=json.dumps(body).encode(),
            headers={
                "Content-Type": "application/json",
                **({"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}),
            },
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout or self.timeout) as response:
                answer = json.load(response)
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")[:500]
            raise ModelError(f"the model answered HTTP {error.code}: {detail}") from None
        except (OSError, ValueError) as error:
            raise ModelError(f"the model could not be asked: {error}") from None
        try:
            message = answer["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise ModelError(f"the model's answer holds no message: {answer!r:.300}") from None
        if not isinstance(message, dict):
            raise ModelError(f"the model's message is not an object: {message!r:.300}")
        return message

    def complete(self, system: str, prompt: str, timeout_seconds: float) -> str:
        """One answer to *prompt* under *system*, no tools: the hook pimem's capture calls to
        distil a settled exchange with this model (``Memory.session(model=...)``)."""
        message = self.chat(
            [{"role": "system", "content": system}, {"role": "user", "content": prompt}],
            timeout=timeout_seconds,
        )
        return str(message.get("content") or "")
