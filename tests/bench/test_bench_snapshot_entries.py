"""The snapshot's entry count (``bench/snapshot_entries.py``) on a hand-made workload run."""

from __future__ import annotations

from bench.snapshot_entries import as_written, measure, render

SESSION = "--tmp-pimem-bench-ab12cd34-workload-after-1.6-project--"
ANCHOR = (
    "<!-- session:01a235c0 turn:{turn:08x} transcript:<run>/agent/sessions/"
    f"{SESSION}/2026-12-02T07-55-30-949Z_01a235c0.jsonl -->"
)


def day_file(entries: int) -> str:
    text = "\n## Session 10:00\n\n"
    for n in range(entries):
        text += (
            f"### 10:00\n{ANCHOR.format(turn=n)}\n- the team decided to use Kafka for queue {n}\n\n"
        )
    return text


def test_the_run_directory_is_put_back_in_the_anchors() -> None:
    assert (
        as_written(day_file(1), "after", "1.6").count(
            "transcript:/tmp/pimem-bench-ab12cd34/workload/after-1.6/agent/sessions/"
        )
        == 1
    )


def test_the_entries_layout_holds_more_than_twice_the_seeds() -> None:
    run = {"variant": "after", "line": "1.6", "day_files": {"2026-09-01.md": day_file(120)}}
    counts = {(c.section, c.layout): c for c in measure([run])}
    for section in ("Today", "Yesterday"):
        seed, entries = counts[section, "tail"], counts[section, "entries"]
        assert entries.in_file == seed.in_file == 120
        assert (seed.headless_bullets, entries.headless_bullets) == (1, 0)
        assert entries.anchor_chars == 0 < seed.anchor_chars
        assert entries.entries >= 2 * seed.entries > 0
        assert entries.decisions == entries.entries
    assert "times as many" in render(list(counts.values()))
