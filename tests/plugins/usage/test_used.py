"""Whether the agent used what memory gave it: true uses, echoes, citations."""

from __future__ import annotations

from pimem_core.usage_events import ShownEntry
from pimem_plugins.usage.used import uses

REDIS = ShownEntry(
    day="2026-12-05",
    time="14:02",
    text="- chose Redis over Memcached for `session_cache`, TTL 3600 s in config/cache.toml",
)
LOGIN = ShownEntry(day="2026-12-04", time="09:12", text="- the login bug came from unescaped input")


def found(given: list[tuple[str, ShownEntry]], prompt: str, answer: str) -> list[tuple[str, str]]:
    return [(use.evidence, use.term) for use in uses(given, prompt, answer)]


def test_an_identifier_from_a_hit_in_the_answer_is_a_use() -> None:
    assert found([("search", REDIS)], "how is caching set up?", "It reads session_cache.") == [
        ("identifier", "session_cache")
    ]


def test_a_path_in_a_tool_call_is_a_use() -> None:
    answer = "Let me look.\nread(path=config/cache.toml)"
    assert found([("search", REDIS)], "tune the cache", answer) == [
        ("identifier", "config/cache.toml")
    ]


def test_a_number_and_a_name_are_uses() -> None:
    assert found([("snapshot", REDIS)], "what TTL?", "Keep it at 3600 seconds.") == [
        ("number", "3600")
    ]
    assert found([("snapshot", REDIS)], "which store?", "We settled on Memcached? No: Redis.")


def test_an_echo_of_the_prompt_is_not_a_use() -> None:
    prompt = "why is session_cache slow? TTL is 3600, in config/cache.toml; Memcached, Redis"
    answer = "session_cache with TTL 3600 in config/cache.toml is fine; Memcached and Redis too."
    assert found([("search", REDIS)], prompt, answer) == []


def test_common_words_and_unrelated_answers_are_not_uses() -> None:
    answer = "The bug is fixed. I ran the tests and everything passes."
    assert found([("snapshot", REDIS), ("snapshot", LOGIN)], "fix it", answer) == []


def test_citing_the_day_and_time_is_a_use_even_when_the_prompt_names_them() -> None:
    answer = "As memory says (2026-12-04 09:12), the input was not escaped."
    prompt = "what happened on 2026-12-04 09:12?"
    assert found([("snapshot", LOGIN)], prompt, answer) == [("citation", "2026-12-04 09:12")]
    assert found([("snapshot", LOGIN)], "x", "on 2026-12-04 it broke at 10:00") == []


def test_an_entry_given_twice_counts_once_by_its_most_deliberate_way() -> None:
    given = [("snapshot", REDIS), ("search", REDIS), ("expand", REDIS)]
    (use,) = uses(given, "cache?", "session_cache it is")
    assert use.via == "expand"


def decided(choice: str, subject: str) -> ShownEntry:
    """A decision entry of the workload's kind; all written in the same minute."""
    return ShownEntry(
        day="2026-09-01", time="10:00", text=f"- the team decided to use {choice} for {subject}"
    )


def test_entries_written_in_the_same_minute_are_judged_each_on_its_own() -> None:
    first, second = decided("Redis", "the billing queue"), decided("Kafka", "the audit cache")
    given = [("snapshot", first), ("snapshot", second)]
    (use,) = uses(given, "Which option for the audit cache?", "We use Kafka for the audit cache.")
    assert (use.entry, use.evidence, use.term) == (second, "name", "Kafka")
    # The same entry given as a hit and then expanded (its section, heading and all) is one.
    section = ShownEntry(day=second.day, time=second.time, text=f"### 10:00\n{second.text}")
    given = [("snapshot", first), ("search", second), ("expand", section)]
    (use,) = uses(given, "Which option for the audit cache?", "Kafka, for the audit cache.")
    assert use.via == "expand"


def test_a_mixed_case_name_is_an_identifier() -> None:
    entry = decided("SQLite in WAL mode", "the reporting feature flags")
    prompt = "What do we use for the reporting feature flags?"
    assert found([("snapshot", entry)], prompt, "SQLite in WAL mode, for those flags.") == [
        ("identifier", "SQLite")
    ]


def test_a_rare_word_other_entries_hold_goes_to_the_one_the_answer_follows() -> None:
    ours = decided("pgbouncer in transaction mode", "the gateway retry policy")
    theirs = decided("pgbouncer in transaction mode", "the search queue")
    given = [("snapshot", theirs), ("snapshot", ours)]
    prompt = "What do we use for the gateway retry policy these days?"
    answer = "We decided to use pgbouncer in transaction mode for the gateway retry policy."
    (use,) = uses(given, prompt, answer)
    assert (use.entry, use.evidence, use.term) == (ours, "rare word", "pgbouncer")
    # An answer that follows neither more than the other names neither.
    assert found(given, "which pooler?", "pgbouncer in transaction mode.") == []
