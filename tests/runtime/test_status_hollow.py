"""``pimem status`` counts the store's hollow entries: failure markers and blank entries."""

from __future__ import annotations

import json
from pathlib import Path

from pimem_core.runtime.capture import marker
from pimem_core.types import Anchor
from pimem_plugins.markdown_store import HollowScans
from pimem_plugins.shared.hollow import HollowCount

from conftest import make_pimem, run_cli

#: No backend: the store's sections are what is looked at.
ENV = {"PIMEM_DISABLE_PLUGINS": "memsearch-index"}


def entry(time: str, *body: str) -> str:
    anchor = Anchor(session="5b0e2c4a", turn="e41f7a90", transcript="/t/5b0e2c4a.jsonl").comment()
    return f"### {time}\n{anchor}\n" + "\n".join(body) + "\n\n"


def store(repo: Path) -> Path:
    memory = repo / ".memsearch" / "memory"
    memory.mkdir(parents=True)
    (memory / "2026-08-05.md").write_text(
        "\n## Session 11:00\n\n"
        + entry("11:04", "Prompt is too long")
        + entry("11:09", "- The rota service keeps PostgreSQL 16")
        + entry("11:15", "Prompt is too long")
    )
    (memory / "2026-08-07.md").write_text(
        entry("09:03", "- Shifts may not overlap")
        + entry("09:20", "Invalid API key · Please run /login")
        + entry("09:41", "- ")
    )
    return memory


def test_status_counts_the_hollow_entries_of_the_whole_store(repo: Path) -> None:
    store(repo)
    result = run_cli("status", "--cwd", str(repo), env=ENV)
    assert result.code == 0, result.stderr
    assert (
        "hollow entries: 4 of 6 in the store hold nothing to recall (3 failure markers, "
        "1 blank); the snapshot leaves them out and search ranks them last\n"
    ) in result.stdout
    data = json.loads(run_cli("status", "--cwd", str(repo), "--json", env=ENV).stdout)
    assert data["hollow"] == {"entries": 6, "failure_markers": 3, "blank": 1}


def test_a_store_without_hollow_entries_says_nothing(repo: Path) -> None:
    memory = repo / ".memsearch" / "memory"
    memory.mkdir(parents=True)
    (memory / "2026-08-13.md").write_text(entry("09:00", "- The export runs at 02:00"))
    pimem = make_pimem(ENV)
    sections = {
        section.name: section for section in pimem.collect_status(pimem.resolve_scope(repo))
    }
    assert sections["hollow"].lines == ()
    assert sections["hollow"].data == {"entries": 1, "failure_markers": 0, "blank": 0}


def test_a_changed_day_file_is_counted_again(repo: Path) -> None:
    memory = store(repo)
    scans = HollowScans()
    assert scans.count(memory) == HollowCount(entries=6, failure_markers=3, blank=1)
    with (memory / "2026-08-07.md").open("a") as file:
        file.write(entry("10:00", marker("the model did not answer")))
    assert scans.count(memory) == HollowCount(entries=7, failure_markers=4, blank=1)
    (memory / "2026-08-05.md").unlink()
    assert scans.count(memory) == HollowCount(entries=4, failure_markers=2, blank=1)
    assert scans.count(memory.parent / "none") == HollowCount()
