"""The ``distill-http`` distiller: an OpenAI-compatible chat-completions endpoint.

Active when ``PIMEM_DISTILL_URL`` is set (for example ``http://127.0.0.1:8000/v1``, a local
llama.cpp, vLLM or Ollama server). It answers when ``PIMEM_DISTILL_MODEL`` is set too, models are
allowed, and it is chosen by name (``PIMEM_DISTILLER=http``), or nothing is chosen and the host
lends no model (the host's model wins). Standard library only. The API key
(``PIMEM_DISTILL_API_KEY``) is sent as a bearer token and never appears in an error message.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from pimem_core.plugin import (
    Distillation,
    DistillRequest,
    PimemError,
    Settings,
    SettingSpec,
    hookimpl,
)
from pimem_plugins.shared.distill_prompt import (
    NO_TEXT,
    NOTHING_TO_KEEP,
    SYSTEM_PROMPT,
    clean_bullets,
    nothing_to_keep,
)

#: The most of a reply pimem reads; a chat completion of 2-10 bullets is far smaller.
MAX_REPLY_BYTES = 1 << 20
EXCERPT = 200
_CHUNK = 64 * 1024


#: This plugin's entry-point name: ``PIMEM_DISTILLER=http`` chooses it.
PLUGIN = "distill-http"
#: The setting that turns this distiller on (shown by `pimem plugins`).
ACTIVATION_SETTING = "PIMEM_DISTILL_URL"


def _text(name: str, env: str, help: str, *, secret: bool = False) -> SettingSpec[str | None]:
    """One of this plugin's settings: text taken as written, none when unset."""
    return SettingSpec.text(plugin=PLUGIN, name=name, env=env, help=help, secret=secret)


URL = _text(
    "url", "PIMEM_DISTILL_URL", "base URL of an OpenAI-compatible API (activates this distiller)"
)
MODEL = _text(
    "model",
    "PIMEM_DISTILL_MODEL",
    "the model sent to the endpoint (without it the endpoint is not used)",
)
API_KEY = _text("api_key", "PIMEM_DISTILL_API_KEY", "sent as a bearer token", secret=True)


@hookimpl
def pimem_declare_settings() -> tuple[SettingSpec[str | None], ...]:
    return (URL, MODEL, API_KEY)


def is_active(settings: Settings) -> bool:
    return URL.read(settings) is not None


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect would carry the bearer key to another address: treat it as an error."""

    def redirect_request(self, *_: Any, **__: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


@hookimpl
def pimem_distill_exchange(request: DistillRequest) -> Distillation | None:
    settings = request.settings
    model = MODEL.read(settings)
    if not (URL.read(settings) and model and request.models_allowed):
        return None
    # Asked before distill-host (its name sorts later): unless chosen, it leaves a lent model
    # the answer. When another distiller is chosen, it is not asked at all.
    if request.host_model is not None and settings.chosen("pimem_distill_exchange") != PLUGIN:
        return None
    text = complete(settings, SYSTEM_PROMPT, request.exchange.transcript)
    if text == NOTHING_TO_KEEP:
        return Distillation(
            text="", distiller=f"http:{model}", used_model=True, nothing_to_keep=True
        )
    return Distillation(text=text, distiller=f"http:{model}", used_model=True)


def complete(settings: Settings, system: str, prompt: str) -> str:
    """Ask the endpoint of *settings* for bullets; raise :class:`PimemError` on any failure.
    A reply that says there is nothing to keep comes back as :data:`NOTHING_TO_KEEP`."""
    base, model = URL.read(settings), MODEL.read(settings)
    if not (base and model):
        raise PimemError("distillation over HTTP needs PIMEM_DISTILL_URL and PIMEM_DISTILL_MODEL")
    url = base.rstrip("/") + "/chat/completions"
    where = _display(url)
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise PimemError(
            f"PIMEM_DISTILL_URL must be an http:// or https:// URL, got {_display(base)!r}"
        )
    key = API_KEY.read(settings)
    try:
        return _complete(settings, url, where, system, prompt)
    except PimemError as error:
        message = str(error)
        if key and key in message:
            raise PimemError(message.replace(key, "[REDACTED]")) from None
        raise


def _complete(settings: Settings, url: str, where: str, system: str, prompt: str) -> str:
    body = json.dumps(
        {
            "model": MODEL.read(settings),
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": prompt},
            ],
            "temperature": 0,
        }
    ).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    key = API_KEY.read(settings)
    if key:
        headers["Authorization"] = f"Bearer {key}"
    call = urllib.request.Request(url, data=body, headers=headers, method="POST")
    timeout_ms = settings.distill_timeout_ms
    deadline = time.monotonic() + timeout_ms / 1000
    timed_out = PimemError(f"distillation at {where} timed out after {timeout_ms}ms")
    try:
        with _OPENER.open(call, timeout=timeout_ms / 1000) as response:
            raw = _read(response, deadline, timed_out, where)
    except urllib.error.HTTPError as error:
        excerpt = _excerpt(_error_body(error))
        detail = f": {excerpt}" if excerpt else ""
        raise PimemError(
            f"distillation at {where} failed: HTTP {error.code} {error.reason}{detail}"
        ) from None
    except urllib.error.URLError as error:
        if isinstance(error.reason, TimeoutError):
            raise timed_out from None
        raise PimemError(
            f"distillation at {where} failed: cannot connect ({_reason(error.reason)}); "
            "check PIMEM_DISTILL_URL and that the server is running"
        ) from None
    except TimeoutError:
        raise timed_out from None
    except (OSError, http.client.HTTPException) as error:
        raise PimemError(
            f"distillation at {where} failed: the connection broke ({_reason(error)})"
        ) from None
    content = _content(raw, where)
    if nothing_to_keep(content):
        return NOTHING_TO_KEEP
    text = clean_bullets(content)
    if not text:
        raise PimemError(f"{NO_TEXT} (from {where})")
    return text


def _read(response: Any, deadline: float, timed_out: PimemError, where: str) -> bytes:
    """The reply body, within the deadline (each read is also bounded by the socket timeout)."""
    parts: list[bytes] = []
    size = 0
    while True:
        if time.monotonic() > deadline:
            raise timed_out
        part: bytes = response.read(_CHUNK)
        if not part:
            return b"".join(parts)
        parts.append(part)
        size += len(part)
        if size > MAX_REPLY_BYTES:
            raise PimemError(
                f"distillation at {where} failed: the reply is larger than {MAX_REPLY_BYTES} bytes"
            )


def _content(raw: bytes, where: str) -> str:
    """``choices[0].message.content`` of a chat completion (a string or a list of text parts)."""
    try:
        reply = json.loads(raw)
        content = reply["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise PimemError(
            f"distillation at {where} failed: the reply is not a chat completion "
            f"({_excerpt(raw) or 'empty body'}); is PIMEM_DISTILL_URL an OpenAI-compatible "
            "endpoint ending before /chat/completions?"
        ) from None
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


def _error_body(error: urllib.error.HTTPError) -> bytes:
    try:
        return error.read(EXCERPT * 4)
    except (OSError, ValueError):
        return b""
    finally:
        error.close()


def _excerpt(raw: bytes) -> str:
    text = " ".join(raw.decode("utf-8", errors="replace").split())
    return text if len(text) <= EXCERPT else text[: EXCERPT - 3] + "..."


def _reason(reason: object) -> str:
    text = str(reason)
    return text if text else type(reason).__name__


def _display(url: str) -> str:
    """*url* without any user name or password in it."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
