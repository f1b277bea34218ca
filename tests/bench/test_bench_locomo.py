"""The LoCoMo part's pure pieces: reading the zip, writing a store, summarizing, the page."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from bench.locomo import dataset, report
from bench.locomo.offtopic import OFF_TOPIC
from bench.locomo.run import summarize_runs

CONVERSATION = {
    "speaker_a": "Maria",
    "speaker_b": "John",
    "session_1_date_time": "11:01 am on 17 December, 2022",
    "session_1": [
        {"speaker": "Maria", "dia_id": "D1:1", "text": "Hey John! Long time no see!"},
        {
            "speaker": "John",
            "dia_id": "D1:2",
            "text": "Just got back from a road trip.\nIt was fun.",
        },
    ],
    "session_2_date_time": "2:15 pm on 3 May, 2023",
    "session_2": [
        {"speaker": "Maria", "dia_id": "D2:1", "text": "I had dinner with my # mother."},
    ],
    "qa": [
        {"question": "Who did Maria have dinner with?", "evidence": ["D2:1"], "category": 4},
        {"question": "When did John take a road trip?", "evidence": ["D1:2"], "category": 2},
        {"question": "Is there an answer?", "evidence": ["D1:1"], "category": 5},
    ],
}


@pytest.fixture
def locomo_zip(tmp_path: Path) -> Path:
    path = tmp_path / "locomo10.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for number in (41, 42, 43, 44, 47, 48, 49):
            archive.writestr(
                f"data/multimodal_dialog/locomo10_v2/{number}.json", json.dumps(CONVERSATION)
            )
        # Any other conversation is never opened: unreadable JSON proves it.
        archive.writestr("data/multimodal_dialog/locomo10_v2/99.json", "{not json")
    return path


def test_only_the_development_conversations_are_read(locomo_zip: Path) -> None:
    conversations = dataset.read(locomo_zip)
    assert [c.name for c in conversations] == list(dataset.DEVELOPMENT)
    with pytest.raises(dataset.DatasetError, match="not conv-99"):
        dataset.read(locomo_zip, ["conv-41", "conv-99"])


def test_a_zip_that_is_not_locomo_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "other.zip").write_bytes(b"not a zip")
    with pytest.raises(dataset.DatasetError, match="not a readable zip"):
        dataset.read(tmp_path / "other.zip")
    with zipfile.ZipFile(tmp_path / "empty.zip", "w"):
        pass
    with pytest.raises(dataset.DatasetError, match="no conv-41"):
        dataset.read(tmp_path / "empty.zip", ["conv-41"])


def test_a_conversation_is_a_store_of_one_entry_per_turn(locomo_zip: Path, tmp_path: Path) -> None:
    conversation = dataset.read(locomo_zip, ["conv-41"])[0]
    assert [q.category for q in conversation.questions] == [4, 2]  # category 5 has no answer
    memory = tmp_path / "memory"
    assert dataset.write_store(conversation, memory) == 3
    assert sorted(p.name for p in memory.iterdir()) == ["2022-12-17.md", "2023-05-03.md"]
    assert (memory / "2022-12-17.md").read_text() == (
        "\n## Session 11:01\n\n"
        "### 11:01\n"
        "<!-- session:conv-41-s1 turn:D1:1 transcript:locomo/conv-41/session_1.jsonl -->\n"
        "- Maria said: Hey John! Long time no see!\n\n"
        "### 11:01\n"
        "<!-- session:conv-41-s1 turn:D1:2 transcript:locomo/conv-41/session_1.jsonl -->\n"
        "- John said: Just got back from a road trip. It was fun.\n\n"
    )
    assert (
        "- Maria said: I had dinner with my # mother.\n" in (memory / "2023-05-03.md").read_text()
    )


def test_the_off_topic_questions_are_enough_and_for_development_conversations() -> None:
    assert len(OFF_TOPIC) >= 50
    assert {name for name, _ in OFF_TOPIC} == set(dataset.DEVELOPMENT)


def run(ranks: list[tuple[int | None, int | None]]) -> dict[str, object]:
    return {
        "conversation": "conv-41",
        "entries": 3,
        "index_s": 1.5,
        "questions": [
            {
                "category": 4 if n % 2 else 2,
                "ranks": {"pimem": ours, "memsearch": theirs},
                "ms": {"pimem": 5.0, "memsearch": 9.0},
                "top_relevance": 0.9,
                "injected": 1,
                "served": ours == 1,
            }
            for n, (ours, theirs) in enumerate(ranks)
        ],
        "off_topic": [{"top_relevance": 0.1, "injected": 0}, {"top_relevance": 0.5, "injected": 1}],
    }


def test_the_summary_and_its_targets_compare_both_rankers_per_category() -> None:
    summary = summarize_runs([run([(1, 2), (3, None), (None, 1), (1, 1)])])
    assert summary["overall"]["pimem"]["r5"] == 0.75
    assert summary["overall"]["memsearch"]["r5"] == 0.75
    assert summary["overall"]["pimem"]["mrr"] == pytest.approx((1 + 1 / 3 + 0 + 1) / 4)
    assert summary["categories"]["temporal"]["pimem"]["n"] == 2
    assert summary["calibration"]["right_top_hits"] == 2
    assert summary["calibration"]["off_topic_below"] == 0.5
    assert summary["auto_context"]["served"] == 2
    checks = {check["target"]: check["met"] for check in report.targets(summary)}
    assert checks["LoCoMo dev R@5 >= 0.70"] is True
    assert checks["LoCoMo off-topic questions below the threshold >= 95%"] is False
    page = report.render({"summary": summary})
    assert page.startswith("# Recall on public conversational memory (LoCoMo)\n")
    assert "| temporal | pimem | 2 |" in page
