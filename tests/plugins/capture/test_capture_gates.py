"""The capture gates about memory itself and small talk, and near-duplicates at capture (ADRs
0014 and 0021)."""

from __future__ import annotations

import pytest

from pimem_core.runtime.repeats import RECENT_ENTRIES, facts, recent_facts, repeats
from pimem_core.types import BranchEntry
from pimem_plugins.capture_gates import (
    ABOUT_MEMORY,
    ALREADY_WRITTEN,
    ANSWERED_FROM_MEMORY,
    ASKED_TO_FORGET,
    RECALL_PROMPTS,
    SMALL_TALK,
    Said,
    act,
    gate,
    said,
)

from conftest import REPO_ROOT

ADAPTER = REPO_ROOT / "adapters" / "pi"


def exchange(ask: str, *calls: str, answer: str = "done") -> list[BranchEntry]:
    return [
        BranchEntry(id="u", kind="message", role="user", text=ask),
        BranchEntry(id="a", kind="message", role="assistant", text=answer, tool_calls=calls),
    ]


@pytest.mark.parametrize(
    ("window", "reason"),
    [
        (exchange("why does the login page loop?", "edit(path=src/login.py, …)"), None),
        (exchange("what did we decide about the cache?"), ANSWERED_FROM_MEMORY),
        (exchange("what did we decide?", "memory_search(query=cache)"), ABOUT_MEMORY),
        (
            exchange("is memory ok?", "memory_status()", "memory_expand(chunk_hash=ab12)"),
            ABOUT_MEMORY,
        ),
        (
            exchange("recall the cache", "read(path=/pkg/skills/recall/SKILL.md)"),
            ABOUT_MEMORY,
        ),
        (exchange("Use the recall skill to answer from memory: redis\n\nIf …"), ABOUT_MEMORY),
        (
            exchange('<skill name="recall" location="/p/SKILL.md">\n…\n</skill>\n\nredis'),
            ABOUT_MEMORY,
        ),
        (
            exchange("remember: we use Redis", "memory_write(content=- we use Redis)"),
            ALREADY_WRITTEN,
        ),
        (
            exchange("pin httpx and remember it", "edit(path=pyproject.toml)", "memory_write()"),
            None,  # other work too: captured (near-duplicates are dropped after distillation)
        ),
        (exchange("forget the Redis entry", "memory_forget(chunk_hash=ab12)"), ASKED_TO_FORGET),
        (
            exchange("forget it, then fix the bug", "memory_forget()", "edit(path=a.py)"),
            ASKED_TO_FORGET,
        ),
    ],
)
def test_gates(window: list[BranchEntry], reason: str | None) -> None:
    assert gate(window) == reason


# Questions answered from memory and small talk (ADR 0021): the agent did no work, and the user
# stated nothing.
ANSWERED = [
    "Which database did we pick for the ledger service?",
    "What did we decide about the cache?",
    "Remind me what we chose for the billing queue.",
    "Ok, which one did we pick again?",
    "Could you remind me what we decided?",
    "Do we use Redis for the cache?",
    "Is memory healthy?",
    "Hi! Which option did we pick for the rate limiter?",  # a greeting does not state
]
SMALL_TALK_PROMPTS = [
    "How is your day going?",
    "Good morning!",
    "Thanks, that was helpful!",
    "Thanks, that looks good.",
    "Sounds good to me!",
    "Hi there, how are you?",
    "Great work, thank you! 🎉",
]
#: Decisions, preferences and facts: kept, whatever their punctuation.
STATED = [
    "We pick Redis for the cache.",
    "we pick Redis for the cache, ok?",
    "We pick Redis for the cache; can you note that?",
    "Use tabs from now on.",
    "Can we use tabs from now on?",
    "Which database? We pick PostgreSQL for the ledger.",
    "What did we decide about the cache? Also, use tabs from now on.",
    "Let's go with Kafka for the audit log.",
    "Should we use Redis for the cache?",  # a proposal: the answer may settle it
    "Is it ok if we switch the queue to RabbitMQ?",
    "How about SQLite in WAL mode for the test fixtures?",
    "The staging database moved to eu-west-1.",
    "yes",  # may confirm what the agent proposed
    "ok",
    "Wir nehmen Redis für den Cache.",  # not English: states
]


@pytest.mark.parametrize("ask", ANSWERED)
def test_a_question_answered_without_work_is_answered_from_memory(ask: str) -> None:
    assert gate(exchange(ask, answer="We chose PostgreSQL 16.")) == ANSWERED_FROM_MEMORY


@pytest.mark.parametrize("talk", SMALL_TALK_PROMPTS)
def test_small_talk_without_work_is_skipped(talk: str) -> None:
    assert gate(exchange(talk, answer="Doing well, thanks!")) == SMALL_TALK


@pytest.mark.parametrize("statement", STATED)
def test_a_user_who_states_something_is_captured(statement: str) -> None:
    assert gate(exchange(statement, answer="Noted.")) is None


@pytest.mark.parametrize("statement", STATED)
def test_what_the_user_stated_is_captured_even_when_the_agent_only_read_memory(
    statement: str,
) -> None:
    window = exchange(statement, "memory_search(query=cache)", "memory_expand(chunk_hash=ab12)")
    assert gate(window) is None


@pytest.mark.parametrize("ask", [*ANSWERED, *SMALL_TALK_PROMPTS])
def test_a_question_the_agent_worked_on_is_captured(ask: str) -> None:
    """Work that is not memory work (a read, a command) found something new."""
    assert gate(exchange(ask, "read(path=src/ledger/db.py)")) is None


def test_an_exchange_with_no_words_from_the_user_is_captured() -> None:
    """An image or an emoji alone neither asks nor states: nothing to judge it by."""
    assert gate(exchange("")) is None
    assert gate(exchange("👍")) is None


def test_an_auto_context_injection_changes_nothing() -> None:
    """Injected memory is not the user's words: the question still only asked."""
    injected = BranchEntry(
        id="c",
        kind="custom_message",
        text="Memory recalled for this prompt (auto-context): we use PostgreSQL 16.",
    )
    ask, answer = exchange("Which database did we pick for the ledger service?")
    assert gate([ask, injected, answer]) == ANSWERED_FROM_MEMORY


def test_every_user_message_of_the_exchange_counts() -> None:
    steered = [
        BranchEntry(id="u1", kind="message", role="user", text="Which cache did we pick?"),
        BranchEntry(id="u2", kind="message", role="user", text="We switched it to Redis."),
        BranchEntry(id="a", kind="message", role="assistant", text="Noted."),
    ]
    assert gate(steered) is None


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("What did we decide?", "asks"),
        ("what did we decide", "asks"),  # a question word opens it, no mark needed
        ("Did we decide?", "asks"),
        ("Did we decide.", "states"),  # a verb of fact asks only with a question mark
        ("Please search memory for the cache decision", "asks"),
        ("Tell me what we chose", "asks"),
        ("Remember that the payments team owns the ledger", "states"),
        ("Can you add a test for src/app.py?", "states"),  # a request to work
        ("Why don't we use Redis?", "states"),  # a proposal
        ("> - What\u2019s the retry policy?", "asks"),  # quote and list marks, a curly apostrophe
        ("- [x] Which tests did we skip?", "asks"),  # a checkbox
        ("[WIP] How is memory doing?", "asks"),  # a tag
        ("Thanks!", "talk"),
        ("?", None),
    ],
)
def test_how_a_sentence_reads(sentence: str, expected: str | None) -> None:
    assert act(sentence) == expected


def test_the_users_words_are_read_sentence_by_sentence() -> None:
    text = "Hi! Which cache did we pick?\n- We use Redis for the queue."
    assert said([text]) == Said(asks=1, states=1, talk=1)
    assert said(["src/app.py fails. Why?"]) == Said(asks=1, states=1)


def test_the_recall_prompt_template_begins_as_the_gate_expects() -> None:
    template = (ADAPTER / "prompts" / "recall.md").read_text(encoding="utf-8")
    body = template.split("---\n", 2)[2]
    assert body.startswith(RECALL_PROMPTS[0])


def test_the_recall_instruction_injected_beside_the_query_is_about_memory() -> None:
    """The pi adapter sends ``/recall <query>`` as the user's query, with its instruction as
    an injected message: the gate reads it there. Auto-context injected beside an ordinary
    prompt changes nothing."""
    query = BranchEntry(id="u", kind="message", role="user", text="which cache did we pick")
    answer = BranchEntry(id="a", kind="message", role="assistant", text="Redis.")
    recall = BranchEntry(id="c", kind="custom_message", text=f"{RECALL_PROMPTS[0]} the user…")
    hits = BranchEntry(id="h", kind="custom_message", text="## Memory about this prompt\n- x")
    assert gate([query, recall, answer]) == ABOUT_MEMORY
    assert gate([query, hits, answer]) == gate([query, answer])


def test_the_adapters_recall_instruction_begins_as_the_gate_expects() -> None:
    source = (ADAPTER / "src" / "commands.ts").read_text(encoding="utf-8")
    assert f'RECALL_INSTRUCTION =\n  "{RECALL_PROMPTS[0]} ' in source


def test_facts_are_bullets_normalised() -> None:
    assert facts("- Chose Redis  for the cache.\n  with 5 minute TTLs\nsome prose\n* pinned x") == {
        "chose redis for the cache. with 5 minute ttls",
        "pinned x",
    }


def day(*entries: tuple[str, str]) -> str:
    return "".join(
        f"### 10:00\n<!-- session:{session} turn:t transcript:/t.jsonl -->\n{content}\n\n"
        for session, content in entries
    )


def test_an_entry_repeats_only_when_every_fact_is_known() -> None:
    known = recent_facts([day(("s1", "- we use Redis\n- TTL is 5 minutes"))], "s1")
    assert repeats("- We use Redis.", known)
    assert not repeats("- we use Redis\n- the TTL is now 10 minutes", known)
    assert not repeats("The agent looked around.", known)  # no bullet: nothing to compare


def test_other_sessions_count_only_among_the_last_entries() -> None:
    old = [("other", "- an old fact")]
    newer = [("other", f"- fact {n}") for n in range(RECENT_ENTRIES)]
    known = recent_facts([day(*old, *newer)], "mine")
    assert not repeats("- an old fact", known)
    assert repeats("- fact 3", known)
    assert repeats("- an old fact", recent_facts([day(("mine", "- an old fact"), *newer)], "mine"))
