"""The exchange a capture looks at: the part of a session's branch since the last capture, the
hard gates it must pass, and its messages as a distiller reads them, scrubbed of secrets."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from pimem_core.scrub import Scrubber
from pimem_core.types import BranchEntry, ExchangeMessage


@attrs.frozen(kw_only=True)
class Window:
    """The part of a branch a capture looks at, and the id to remember as captured."""

    entries: tuple[BranchEntry, ...]
    last_id: str | None
    #: The entries with the messages the host injected among them (a ``/recall``
    #: instruction, auto-context), in branch order: what the gates judge. Never distilled.
    with_injected: tuple[BranchEntry, ...] = ()


def exchange_window(branch: Sequence[BranchEntry], last_captured: str | None) -> Window:
    """The messages after the last captured entry when it is still on the branch, else from the
    branch's last user message. Injected context messages never count as the exchange's, but
    the gates see them: how the host framed the request says whether it was about memory."""
    messages = [entry for entry in branch if entry.kind == "message"]
    if not messages:
        return Window(entries=(), last_id=None)
    ids = [entry.id for entry in branch]
    if last_captured is not None and last_captured in ids:
        tail = list(branch[ids.index(last_captured) + 1 :])
    else:
        users = [
            i for i, entry in enumerate(branch) if entry.kind == "message" and entry.role == "user"
        ]
        tail = list(branch[users[-1] :]) if users else []
    return Window(
        entries=tuple(entry for entry in tail if entry.kind == "message"),
        last_id=messages[-1].id,
        with_injected=tuple(entry for entry in tail if entry.kind in ("message", "custom_message")),
    )


def passes_gates(window: Sequence[BranchEntry]) -> bool:
    """Hard gates only, never a judgement of relevance: someone asked, the agent answered in
    words, and the run was not aborted."""
    assistants = [entry for entry in window if entry.role == "assistant"]
    return (
        any(entry.role == "user" for entry in window)
        and any(entry.text.strip() for entry in assistants)
        and not assistants[-1].aborted
    )


def to_messages(window: Sequence[BranchEntry]) -> tuple[ExchangeMessage, ...]:
    messages = []
    for entry in window:
        if entry.role == "user" and entry.text.strip():
            messages.append(ExchangeMessage(role="user", text=entry.text))
        elif entry.role == "assistant":
            calls = f"\n(tool calls: {', '.join(entry.tool_calls)})" if entry.tool_calls else ""
            if entry.text.strip() or calls:
                messages.append(ExchangeMessage(role="assistant", text=entry.text + calls))
    return tuple(messages)


def scrubbed_messages(
    scrubber: Scrubber, window: Sequence[BranchEntry]
) -> tuple[tuple[ExchangeMessage, ...], tuple[tuple[str, int], ...]]:
    """*window*'s messages with their secrets replaced, and how many of each kind were."""
    found: dict[str, int] = {}
    messages = []
    for message in to_messages(window):
        scrubbed = scrubber.scrubbed(message.text)
        for kind, count in scrubbed.found:
            found[kind] = found.get(kind, 0) + count
        messages.append(attrs.evolve(message, text=scrubbed.text))
    return tuple(messages), tuple(found.items())
