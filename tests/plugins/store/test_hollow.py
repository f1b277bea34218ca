"""Hollow entries: which entries hold nothing to recall, as the snapshot, the ranker and status
judge them (``pimem_plugins.shared.hollow``)."""

from __future__ import annotations

import pytest

from pimem_core.runtime.capture import marker
from pimem_plugins.shared.hollow import (
    HollowCount,
    count_hollow,
    hollow_kind,
    is_hollow,
    without_empty_bullets,
)

#: An anchor as memsearch's Claude Code plugin writes it under each entry's heading.
ANCHOR = (
    "<!-- session:5b0e2c4a-91d3-4f6e-a7b2-3c8d9e0f1a2b turn:e41f7a90-2b6c-4d8e-9f13-0a5b7c9d2e4f "
    "transcript:/home/dana/.claude/projects/-home-dana-src-rota/"
    "5b0e2c4a-91d3-4f6e-a7b2-3c8d9e0f1a2b.jsonl -->"
)


def entry(*body: str, heading: str = "### 14:32") -> str:
    return "\n".join((heading, ANCHOR, *body))


@pytest.mark.parametrize(
    "body",
    [
        "Prompt is too long",
        "Prompt is too long: 212044 tokens > 200000 maximum",
        'API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
        "API Error: Request timed out.",
        "API Error (Connection error.)",
        "Request timed out.",
        "Invalid API key · Please run /login",
        "Not logged in · Please run /login",
        "Credit balance is too low",
        "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing.",
        "Claude AI usage limit reached|1767225600",
        "Claude usage limit reached. Your limit will reset at 3pm (Europe/Berlin).",
        "5-hour limit reached ∙ resets 3pm",
        "You've hit your session limit · resets 9:10pm (UTC)",
        "OAuth token has expired. Please obtain a new token or refresh your existing token.",
        "Execution error",
        "Error: Reached max turns (1)",
        "(no content)",
        "Rate limit exceeded",
        "Overloaded",
        "stream disconnected before completion: error sending request",
        "This model's maximum context length is 128000 tokens. However, you requested 131072.",
        "- Prompt is too long",
        marker("the model did not answer within 30000 ms"),
    ],
)
def test_an_agents_failure_message_is_a_failure_marker(body: str) -> None:
    assert hollow_kind(entry(body)) == "failure marker"
    assert is_hollow(entry(body))


def test_several_failure_lines_are_still_a_marker() -> None:
    assert hollow_kind(entry("API Error: Request timed out.", "", "Prompt is too long")) == (
        "failure marker"
    )


@pytest.mark.parametrize(
    "text",
    [
        entry(),  # a heading and its anchor
        entry("", "   "),
        entry("- ", "-", "*   ", "1.", "- [ ]"),
        "### 09:12",
        "## Session 09:12",
        "# 2026-08-07",
        "## Memory Compact 11:00\n\n### Decisions\n\n### Open questions",
        "",
    ],
)
def test_nothing_but_headings_comments_and_empty_bullets_is_blank(text: str) -> None:
    assert hollow_kind(text) == "blank"


@pytest.mark.parametrize(
    "text",
    [
        entry(
            "- User asked why the nightly shift export timed out",
            "- Claude traced it to the 30 s gateway limit and moved the export to a job queue",
        ),
        # Memory that talks about a failure is memory.
        entry("- Fixed the 'Prompt is too long' failure by trimming the transcript first"),
        entry("- Invalid API key errors from /v1/users now answer 401, not 500"),
        entry("- Request timed out after 30 s when the export ran in the request"),
        entry("API Error handling moved into middleware/errors.ts"),
        # One line of memory among failure lines keeps the entry.
        entry("Prompt is too long", "- The team keeps PostgreSQL 16 for the rota service"),
        entry("- ", "- Shifts may not overlap: enforced by an exclusion constraint"),
        "# 2026-08-07\n\nnotes by hand",
        "## Memory Compact 11:00\n\n### Decisions\n- Redis for the session cache",
        # memsearch's plugin writes the raw turn when its summariser is missing.
        entry("[Human]: how do we stop two shifts from overlapping?"),
    ],
)
def test_an_entry_with_something_to_recall_is_not_hollow(text: str) -> None:
    assert hollow_kind(text) is None
    assert not is_hollow(text)


def test_empty_bullets_are_taken_out_and_the_rest_kept_byte_for_byte() -> None:
    text = "### 10:05\n- \n- Rota exports run nightly at 02:00\n-\n  - nested stays\n*  \n"
    assert without_empty_bullets(text) == (
        "### 10:05\n- Rota exports run nightly at 02:00\n  - nested stays\n"
    )


def test_a_day_file_is_counted_entry_by_entry() -> None:
    day = "\n".join(
        (
            "",
            "## Session 14:25",
            "",
            entry("- User asked to add a rota export", heading="### 14:25"),
            "",
            entry("Prompt is too long", heading="### 14:31"),
            "",
            entry("Prompt is too long", heading="### 14:40"),
            "",
            entry("- ", heading="### 14:52"),
            "",
            "## Memory Compact 15:00",
            "",
            "### Decisions",
            "- CSV, not XLSX",
            "",
        )
    )
    assert count_hollow(day) == HollowCount(entries=4, failure_markers=2, blank=1)
    assert (count_hollow(day) + count_hollow(day)).hollow == 6
    assert count_hollow("") == HollowCount()
