"""The bundled distillers: the host's model, an OpenAI-compatible endpoint, the extractive fallback."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar, Literal

import attrs
import pytest

from pimem_core import Pimem, PimemError
from pimem_core.runtime.host_model import ModelRef, resolve_capture_model
from pimem_core.types import (
    Anchor,
    Distillation,
    DistillRequest,
    Entry,
    Exchange,
    ExchangeMessage,
    HostModel,
)
from pimem_plugins.distill_extractive import extract, shorten
from pimem_plugins.shared.distill_prompt import (
    NOTHING_TO_KEEP,
    SYSTEM_PROMPT,
    clean_bullets,
    nothing_to_keep,
)

from conftest import make_pimem

KEY = "sk-test-8f3a9c2e-do-not-leak"
BULLETS = "- the agent fixed the login redirect loop\n- the user prefers pytest fixtures"
ANCHOR = Anchor(session="s1", turn="e9", transcript="/tmp/session.jsonl")


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    # The scripted server is on the loopback interface: never go through a proxy to reach it.
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")


def exchange(*messages: tuple[Literal["user", "assistant"], str]) -> Exchange:
    return Exchange(
        anchor=ANCHOR,
        messages=tuple(ExchangeMessage(role=role, text=text) for role, text in messages),
    )


EXCHANGE = exchange(
    ("user", "Why does the login page loop forever?"),
    ("assistant", "The return URL was not escaped; I escaped it and the loop is gone."),
)


@attrs.define
class FakeHost:
    """A host model that records its calls and answers with a fixed reply (or raises)."""

    reply: str = BULLETS
    error: BaseException | None = None
    calls: list[tuple[str, str, float]] = attrs.field(factory=list)

    def complete(self, system: str, prompt: str, timeout: float) -> str:
        self.calls.append((system, prompt, timeout))
        if self.error is not None:
            raise self.error
        return self.reply

    def model(self, name: str = "anthropic/claude-haiku") -> HostModel:
        return HostModel(name=name, complete=self.complete)


def distill(
    pimem: Pimem,
    host: FakeHost | None = None,
    *,
    models_allowed: bool = True,
    ex: Exchange = EXCHANGE,
) -> Distillation:
    return pimem.distill_exchange(
        DistillRequest(
            exchange=ex,
            settings=pimem.settings,
            host_model=host.model() if host is not None else None,
            models_allowed=models_allowed,
        )
    )


# -- the scripted OpenAI-compatible server -----------------------------------------------------


@attrs.define
class Script:
    """What the scripted server answers, and what it was sent."""

    url: str = ""
    status: int = 200
    content: object = BULLETS
    raw: bytes | None = None
    delay: float = 0.0
    requests: list[tuple[str, dict[str, str], dict[str, object]]] = attrs.field(factory=list)
    release: threading.Event = attrs.field(factory=threading.Event)


class ScriptedChat(BaseHTTPRequestHandler):
    script: ClassVar[Script]

    def do_POST(self) -> None:
        script = self.script
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        script.requests.append((self.path, dict(self.headers), body))
        if script.delay:
            script.release.wait(script.delay)  # bounded; the fixture releases it at teardown
        if script.raw is not None:
            reply = script.raw
        elif script.status != 200:
            # Echo the credentials, as a careless proxy might: pimem must still not show them.
            reply = f"upstream exploded; auth was {self.headers.get('Authorization')}".encode()
        else:
            reply = json.dumps(
                {
                    "id": "c1",
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": script.content},
                        }
                    ],
                }
            ).encode()
        try:
            self.send_response(script.status)
            self.send_header("Content-Type", "application/json")
            if script.status in (301, 302, 303, 307, 308):
                self.send_header("Location", "http://127.0.0.1:9/elsewhere")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)
        except OSError:
            pass  # the client gave up (the timeout test)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def chat() -> Iterator[Script]:
    script = Script()
    handler = type("Handler", (ScriptedChat,), {"script": script})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    script.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    yield script
    script.release.set()
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def http_env(script: Script, **extra: str) -> dict[str, str]:
    return {
        "PIMEM_DISTILL_URL": script.url,
        "PIMEM_DISTILL_MODEL": "qwen2.5-coder:7b",
        "PIMEM_DISTILL_API_KEY": KEY,
        **extra,
    }


# -- the prompt and cleaning -------------------------------------------------------------------


def test_the_prompt_asks_for_third_person_past_tense_bullets_only() -> None:
    lines = SYSTEM_PROMPT.splitlines()
    assert len(lines) == 6
    for words in ('"- "', "2 and 10", "third person", "past tense", '"the user"', '"the agent"'):
        assert words in SYSTEM_PROMPT
    assert "no headings, no introduction, no code fences" in lines[-1]


def test_the_prompt_allows_nothing_to_keep_but_not_for_a_stated_choice() -> None:
    """ADR 0021: small talk and questions answered from memory may be answered with
    NOTHING TO KEEP; a choice, a preference or a fact stated inside a question may not."""
    allowed = SYSTEM_PROMPT.splitlines()[4]
    assert f"reply with the single line {NOTHING_TO_KEEP};" in allowed
    assert "small talk" in allowed
    assert "a question answered only from memory" in allowed
    assert "a choice, a preference or a fact, even inside a question, write the bullets" in allowed


@pytest.mark.parametrize(
    "reply",
    [
        "NOTHING TO KEEP",
        "nothing to keep",
        "- Nothing to keep.",
        "**NOTHING_TO_KEEP**",
        '"NOTHING TO KEEP"',
        "NOTHING TO KEEP: the user only said hello",
        "NOTHING TO KEEP \u2014 a question answered from memory",
        "<think>only a greeting</think>\nNOTHING TO KEEP\n",
        "```\nNOTHING TO KEEP\n```",
    ],
)
def test_a_reply_of_nothing_to_keep_is_read_as_such(reply: str) -> None:
    assert nothing_to_keep(reply)
    assert clean_bullets(reply) == ""


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "- the user chose Redis for the hot cache",
        "- the user chose Redis for the hot cache\nNOTHING TO KEEP",
        "Nothing to keep in mind except that the user chose Redis.",
        "- nothing to keeps",
    ],
)
def test_a_reply_with_anything_else_is_bullets(reply: str) -> None:
    assert not nothing_to_keep(reply)


def test_a_stray_nothing_to_keep_beside_bullets_is_dropped() -> None:
    reply = "- the user chose Redis for the hot cache\n- NOTHING TO KEEP"
    assert clean_bullets(reply) == "- the user chose Redis for the hot cache"


def test_clean_bullets_drops_preamble_fences_and_demotes_headings() -> None:
    reply = (
        "Here are the memory notes:\n\n"
        "```markdown\n"
        "## Decisions\n"
        "* the user chose Redis for the hot cache\n"
        "\n"
        "# Fixes\n"
        "1. the agent escaped the return URL\n"
        "   which ended the redirect loop\n"
        "### \n"
        "- \n"
        "+ the user prefers pytest fixtures\n"
        "```\n"
    )
    assert clean_bullets(reply) == (
        "- the user chose Redis for the hot cache\n"
        "#### Fixes\n"
        "- the agent escaped the return URL\n"
        "   which ended the redirect loop\n"
        "- the user prefers pytest fixtures"
    )


def test_clean_bullets_keeps_deeper_headings_and_nested_bullets() -> None:
    reply = "- one\n  - nested detail\n#### kept as is\n- two"
    assert clean_bullets(reply) == reply


def test_clean_bullets_drops_reasoning_and_bullets_plain_prose() -> None:
    assert clean_bullets("<think>the user wants...\n# plan</think>\n- the fact") == "- the fact"
    assert clean_bullets("## The agent fixed it.\nThe user was happy.") == (
        "- The agent fixed it.\n- The user was happy."
    )


@pytest.mark.parametrize("reply", ["", "   \n\t", "```\n```", "<think>hmm</think>", "#\n##"])
def test_clean_bullets_of_nothing_is_empty(reply: str) -> None:
    assert clean_bullets(reply) == ""


def test_cleaned_bullets_are_always_a_valid_entry() -> None:
    reply = "Sure!\n# Title\n- a\n## b\n  ### c\n- d\n#e"
    content = clean_bullets(reply)
    Entry(anchor=ANCHOR, content=content, written_at=datetime(2026, 8, 13, 22, 41))


# -- the extractive distiller ------------------------------------------------------------------


def test_extractive_bullets_quote_the_ask_and_the_final_answer() -> None:
    ex = exchange(
        ("user", "  Why does\n\nthe login   page loop?  "),
        ("assistant", "Let me look.\n(tool calls: read(path=app.py))"),
        ("user", "also check the logout"),
        ("assistant", "# Fixed\nThe return URL was not escaped."),
        ("assistant", "\n(tool calls: bash(command=pytest))"),
    )
    assert extract(ex) == (
        "- the user asked: Why does the login page loop?\n"
        "- the agent answered: # Fixed The return URL was not escaped."
    )
    assert extract(ex) == extract(ex)


def test_extractive_falls_back_to_the_last_tool_calls_without_words() -> None:
    ex = exchange(
        ("user", "run the tests"),
        ("assistant", "\n(tool calls: bash(command=pytest -x))"),
        ("assistant", "\n(tool calls: edit(path=src/app.py, …))"),
    )
    assert extract(ex) == (
        "- the user asked: run the tests\n- the agent called: edit(path=src/app.py, …)"
    )


def test_extractive_shortens_long_text_at_a_word() -> None:
    long_ask = "word " * 200
    text = extract(exchange(("user", long_ask), ("assistant", "x" * 2000)))
    ask, answer = text.splitlines()
    assert len(ask) <= len("- the user asked: ") + 300
    assert ask.endswith("word...")
    assert len(answer) == len("- the agent answered: ") + 500
    assert shorten("a b", 300) == "a b"


def test_extractive_without_any_text_still_answers() -> None:
    assert extract(exchange()) == "- the exchange held no text worth recalling"


def test_extractive_finds_nothing_to_keep_only_without_any_text() -> None:
    pimem = make_pimem({"PIMEM_DISTILLER": "extractive"})
    assert distill(pimem, ex=exchange()).nothing_to_keep
    assert not distill(pimem, ex=exchange(("user", "How is your day going?"))).nothing_to_keep


# -- which distiller answers -------------------------------------------------------------------


# -- nothing to keep (ADR 0021) ------------------------------------------------------------------

SMALL_TALK = exchange(("user", "How is your day going?"), ("assistant", "Fine, thanks!"))


def test_the_hosts_model_may_find_nothing_to_keep() -> None:
    host = FakeHost(reply="- Nothing to keep.")
    answer = distill(make_pimem(), host, ex=SMALL_TALK)
    assert answer == Distillation(
        text="", distiller="host:anthropic/claude-haiku", used_model=True, nothing_to_keep=True
    )


def test_the_endpoint_may_find_nothing_to_keep(chat: Script) -> None:
    chat.content = "NOTHING_TO_KEEP"
    answer = distill(make_pimem(http_env(chat)), ex=SMALL_TALK)
    assert answer == Distillation(
        text="", distiller="http:qwen2.5-coder:7b", used_model=True, nothing_to_keep=True
    )


def test_bullets_are_kept_whatever_else_the_model_said(chat: Script) -> None:
    chat.content = f"{BULLETS}\n{NOTHING_TO_KEEP}"
    assert distill(make_pimem(http_env(chat))).text == BULLETS
    host = FakeHost(reply=f"{NOTHING_TO_KEEP}\n{BULLETS}")
    assert distill(make_pimem(), host).text == BULLETS


def test_the_host_model_wins_in_auto_mode(chat: Script) -> None:
    host = FakeHost()
    answer = distill(make_pimem(http_env(chat)), host)
    assert answer == Distillation(
        text=BULLETS, distiller="host:anthropic/claude-haiku", used_model=True
    )
    assert chat.requests == []
    [(system, prompt, timeout)] = host.calls
    assert system == SYSTEM_PROMPT
    assert prompt == EXCHANGE.transcript
    assert timeout == 30.0


def test_without_a_host_model_the_endpoint_answers(chat: Script) -> None:
    answer = distill(make_pimem(http_env(chat)))
    assert answer == Distillation(text=BULLETS, distiller="http:qwen2.5-coder:7b", used_model=True)
    assert len(chat.requests) == 1


def test_without_models_the_extractive_distiller_answers(chat: Script) -> None:
    host = FakeHost()
    answer = distill(make_pimem(http_env(chat)), host, models_allowed=False)
    assert answer.distiller == "extractive"
    assert answer.used_model is False
    assert answer.text.startswith("- the user asked: Why does the login page loop forever?")
    assert host.calls == []
    assert chat.requests == []


def test_distiller_extractive_ignores_the_host_model(chat: Script) -> None:
    host = FakeHost()
    pimem = make_pimem(http_env(chat, PIMEM_DISTILLER="extractive"))
    assert distill(pimem, host).distiller == "extractive"
    assert host.calls == []
    assert chat.requests == []


def test_distiller_http_without_a_url_is_extractive() -> None:
    pimem = make_pimem({"PIMEM_DISTILLER": "http", "PIMEM_DISTILL_MODEL": "m"})
    assert distill(pimem, FakeHost()).distiller == "extractive"
    status = {record.name: record.status for record in pimem.pm.records}
    assert status["distill-http"] == "inactive-by-setting"
    assert status["distill-host"] == status["distill-extractive"] == "active"


def test_distiller_http_outranks_the_host_model(chat: Script) -> None:
    host = FakeHost()
    answer = distill(make_pimem(http_env(chat, PIMEM_DISTILLER="http")), host)
    assert answer.distiller == "http:qwen2.5-coder:7b"
    assert host.calls == []


def test_distiller_host_never_calls_the_endpoint(chat: Script) -> None:
    pimem = make_pimem(http_env(chat, PIMEM_DISTILLER="host"))
    assert distill(pimem).distiller == "extractive"
    assert distill(pimem, FakeHost()).distiller == "host:anthropic/claude-haiku"
    assert chat.requests == []


def test_an_endpoint_without_a_model_is_not_used(chat: Script) -> None:
    env = http_env(chat)
    del env["PIMEM_DISTILL_MODEL"]
    assert distill(make_pimem(env)).distiller == "extractive"
    assert chat.requests == []


def test_extractive_is_the_default_without_any_model() -> None:
    pimem = make_pimem()
    assert pimem.pm.answering_plugins()["pimem_distill_exchange"] == "distill-host"
    assert distill(pimem).distiller == "extractive"


# -- the host model's failures -----------------------------------------------------------------


def test_host_reply_is_cleaned() -> None:
    host = FakeHost(reply="Notes:\n- the agent did it\n## Open\n- the user will decide\n")
    pimem = make_pimem({"PIMEM_DISTILL_TIMEOUT_MS": "1500"})
    assert distill(pimem, host).text == "- the agent did it\n#### Open\n- the user will decide"
    assert host.calls[0][2] == 1.5


@pytest.mark.parametrize(
    ("host", "reason"),
    [
        (FakeHost(reply="  \n"), "distillation returned no text"),
        (FakeHost(reply="```\n```"), "distillation returned no text"),
        (FakeHost(error=RuntimeError("provider exploded")), "provider exploded"),
        (FakeHost(error=TimeoutError()), "distillation timed out after 30000ms"),
        (FakeHost(error=PimemError("aborted by the shutdown cap")), "aborted by the shutdown cap"),
    ],
)
def test_host_failures_raise_the_reason(host: FakeHost, reason: str) -> None:
    with pytest.raises(PimemError) as raised:
        distill(make_pimem(), host)
    assert str(raised.value) == reason


# -- the HTTP distiller against a real server --------------------------------------------------


def test_the_endpoint_gets_the_model_prompt_transcript_and_key(chat: Script) -> None:
    distill(make_pimem(http_env(chat, PIMEM_DISTILL_URL=chat.url + "/")))
    [(path, headers, body)] = chat.requests
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == f"Bearer {KEY}"
    assert headers["Content-Type"] == "application/json"
    assert body == {
        "model": "qwen2.5-coder:7b",
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": EXCHANGE.transcript},
        ],
        "temperature": 0,
    }


def test_without_a_key_no_authorization_is_sent(chat: Script) -> None:
    env = http_env(chat)
    del env["PIMEM_DISTILL_API_KEY"]
    distill(make_pimem(env))
    [(_, headers, _)] = chat.requests
    assert "Authorization" not in headers


def test_the_endpoint_reply_is_cleaned_and_may_come_in_parts(chat: Script) -> None:
    chat.content = [
        {"type": "text", "text": "Here you go:\n```\n- the agent "},
        {"type": "text", "text": "fixed it\n```"},
    ]
    assert distill(make_pimem(http_env(chat))).text == "- the agent fixed it"


def assert_clear_error(error: PimemError, script: Script, *words: str) -> None:
    message = str(error)
    assert KEY not in message
    assert f"{script.url}/chat/completions" in message
    for word in words:
        assert word in message


def test_an_http_error_names_the_status_and_not_the_key(chat: Script) -> None:
    chat.status = 500
    with pytest.raises(PimemError) as raised:
        distill(make_pimem(http_env(chat)))
    assert_clear_error(raised.value, chat, "HTTP 500", "upstream exploded", "[REDACTED]")


def test_a_redirect_is_refused_so_the_key_goes_nowhere_else(chat: Script) -> None:
    chat.status = 302
    with pytest.raises(PimemError) as raised:
        distill(make_pimem(http_env(chat)))
    assert_clear_error(raised.value, chat, "HTTP 302")
    assert len(chat.requests) == 1


def test_a_closed_port_is_a_connection_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    closed = Script(url=f"http://127.0.0.1:{port}/v1")
    with pytest.raises(PimemError) as raised:
        distill(make_pimem(http_env(closed)))
    assert_clear_error(raised.value, closed, "cannot connect", "PIMEM_DISTILL_URL")


def test_a_slow_endpoint_times_out(chat: Script) -> None:
    chat.delay = 3.0
    started = time.monotonic()
    with pytest.raises(PimemError) as raised:
        distill(make_pimem(http_env(chat, PIMEM_DISTILL_TIMEOUT_MS="200")))
    assert time.monotonic() - started < 2.0
    assert_clear_error(raised.value, chat, "timed out after 200ms")


@pytest.mark.parametrize("content", ["", "  \n ", "```\n```", None])
def test_an_empty_reply_is_an_error(chat: Script, content: object) -> None:
    chat.content = content
    with pytest.raises(PimemError) as raised:
        distill(make_pimem(http_env(chat)))
    assert_clear_error(raised.value, chat, "distillation returned no text")


@pytest.mark.parametrize("raw", [b"not json at all", b'{"choices": []}', b""])
def test_a_reply_that_is_not_a_chat_completion_is_an_error(chat: Script, raw: bytes) -> None:
    chat.raw = raw
    with pytest.raises(PimemError) as raised:
        distill(make_pimem(http_env(chat)))
    assert_clear_error(raised.value, chat, "not a chat completion")


def test_credentials_in_the_url_are_not_shown() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        "PIMEM_DISTILL_URL": f"http://me:hunter2@127.0.0.1:{port}/v1",
        "PIMEM_DISTILL_MODEL": "m",
    }
    with pytest.raises(PimemError) as raised:
        distill(make_pimem(env))
    assert "hunter2" not in str(raised.value)
    assert f"http://127.0.0.1:{port}/v1/chat/completions" in str(raised.value)


def test_a_url_that_is_not_http_is_refused() -> None:
    env = {"PIMEM_DISTILL_URL": "file:///etc", "PIMEM_DISTILL_MODEL": "m"}
    with pytest.raises(PimemError, match="http:// or https://"):
        distill(make_pimem(env))


# -- TC-21: which model distils ----------------------------------------------------------------


def ref(
    provider: str, model_id: str, input_cost: float = 0.0, output_cost: float = 0.0
) -> ModelRef:
    return ModelRef(provider=provider, id=model_id, input_cost=input_cost, output_cost=output_cost)


def test_an_override_with_a_slash_splits_at_the_first_slash() -> None:
    haiku = ref("openrouter", "anthropic/claude-haiku")
    catalog = [ref("anthropic", "claude-haiku"), haiku]
    assert resolve_capture_model("openrouter/anthropic/claude-haiku", None, catalog) is haiku


def test_an_override_without_a_slash_picks_the_first_model_with_that_id() -> None:
    first = ref("openai", "gpt-mini")
    catalog = [ref("openai", "gpt-big"), first, ref("azure", "gpt-mini")]
    assert resolve_capture_model("gpt-mini", ref("anthropic", "big"), catalog) is first


@pytest.mark.parametrize("override", ["ghost", "anthropic/ghost", "openrouter/claude-haiku"])
def test_an_unknown_override_is_an_error_not_a_fallback(override: str) -> None:
    catalog = [ref("anthropic", "claude-haiku"), ref("openrouter", "anthropic/claude-haiku")]
    with pytest.raises(PimemError) as raised:
        resolve_capture_model(override, catalog[0], catalog)
    assert str(raised.value) == f"capture model '{override}' not found in the model registry"


def test_without_an_override_the_cheapest_model_of_the_session_provider() -> None:
    big = ref("anthropic", "big", 15, 75)
    small = ref("anthropic", "small", 1, 5)
    catalog = [big, ref("openai", "tiny", 0.1, 0.4), small]
    assert resolve_capture_model(None, big, catalog) is small
    assert resolve_capture_model("", big, catalog) is small


def test_equal_costs_are_broken_by_id() -> None:
    b, a = ref("anthropic", "b", 1, 1), ref("anthropic", "a", 1, 1)
    assert resolve_capture_model(None, ref("anthropic", "big", 9, 9), [b, a]) is a


def test_only_other_providers_means_the_session_model() -> None:
    session = ref("anthropic", "big", 15, 75)
    assert resolve_capture_model(None, session, [ref("openai", "tiny", 0.1, 0.4)]) is session
    assert resolve_capture_model(None, session, []) is session


def test_no_session_model_and_no_override_is_an_error() -> None:
    with pytest.raises(PimemError, match="no model available"):
        resolve_capture_model(None, None, [ref("openai", "tiny")])
