"""The ``distill-extractive`` distiller: LLM-free bullets, asked last and always answering.

It is what capture falls back to when no model may or can be used (``PIMEM_DISTILLER=extractive``,
the daily budget spent, or no model configured): the user's request and the agent's final answer,
each shortened to one line. Deterministic: the same exchange gives the same bullets. It judges
nothing: only an exchange without any words is nothing to keep.
"""

from __future__ import annotations

import re

from pimem_core.plugin import Distillation, DistillRequest, Exchange, hookimpl

ASK_LIMIT = 300
ANSWER_LIMIT = 500
NOTHING = "- the exchange held no text worth recalling"
# How capture appends an assistant message's tool calls to its text.
_TOOL_CALLS = re.compile(r"(?:^|\n)\(tool calls: ([^\n]*)\)\s*$")


@hookimpl(trylast=True)
def pimem_distill_exchange(request: DistillRequest) -> Distillation:
    text = extract(request.exchange)
    # No words on either side: nothing to keep (capture's gates rarely let such an exchange by).
    return Distillation(
        text=text, distiller="extractive", used_model=False, nothing_to_keep=text == NOTHING
    )


def extract(exchange: Exchange) -> str:
    """``- the user asked: ...`` and ``- the agent answered: ...``, one line each.

    The ask is the first user message with text; the answer is the words of the last assistant
    message that has some, or, when the agent said nothing in words, its last tool calls
    (``- the agent called: ...``). White space is collapsed, so no line can become a heading.
    """
    ask = next((m.text for m in exchange.messages if m.role == "user" and m.text.strip()), "")
    replies = [split_tool_calls(m.text) for m in exchange.messages if m.role == "assistant"]
    answer = next((words for words, _ in reversed(replies) if words.strip()), "")
    calls = next((calls for _, calls in reversed(replies) if calls.strip()), "")
    bullets = []
    if ask:
        bullets.append(f"- the user asked: {shorten(ask, ASK_LIMIT)}")
    if answer:
        bullets.append(f"- the agent answered: {shorten(answer, ANSWER_LIMIT)}")
    elif calls:
        bullets.append(f"- the agent called: {shorten(calls, ANSWER_LIMIT)}")
    return "\n".join(bullets) or NOTHING


def split_tool_calls(text: str) -> tuple[str, str]:
    """An assistant message's words and its trailing ``(tool calls: ...)`` line, apart."""
    found = _TOOL_CALLS.search(text)
    if found is None:
        return text, ""
    return text[: found.start()], found.group(1)


def shorten(text: str, limit: int) -> str:
    """*text* on one line, at most *limit* characters, cut at a word when one is near."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 3]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip() + "..."
