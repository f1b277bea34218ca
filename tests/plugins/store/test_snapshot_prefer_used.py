"""``PIMEM_SNAPSHOT_PREFER_USED``: over budget, the entries the usage record says the agent used
stay in the snapshot ahead of newer ones it never used; off, the latest entries only."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pimem_core.paths import PimemPaths
from pimem_plugins.snapshot import TODAY_BUDGET

from conftest import make_pimem

NOW = "2026-08-14T18:00"
USED = "- the deploy key lives in vault path secret/ci/deploy"


@pytest.fixture
def crowded(repo: Path) -> Path:
    """Today's file: an early entry, then more later entries than today's budget holds."""
    memory = repo / ".memsearch" / "memory"
    memory.mkdir(parents=True)
    later = "".join(
        f"### {9 + n // 60:02d}:{n % 60:02d}\n<!-- session:s turn:t{n} transcript:/t -->\n"
        f"- routine note number {n} about the build matrix and its caches\n\n"
        for n in range(60)
    )
    (memory / "2026-08-14.md").write_text(
        f"### 08:00\n<!-- session:s turn:t0 transcript:/t -->\n{USED}\n\n{later}"
    )
    assert len(later) > TODAY_BUDGET
    return memory


def record_use(repo: Path, day: str, time: str) -> None:
    """A ``used`` line in the record of *repo*'s collection, as the usage plugin writes it."""
    collection = make_pimem().resolve_scope(repo).collection
    record = PimemPaths.from_env(os.environ).state_dir / "usage" / collection
    record.mkdir(parents=True, exist_ok=True)
    line = {
        "v": 1,
        "at": "2026-08-14T12:00:00",
        "session": "a1",
        "kind": "used",
        "entry": {"day": day, "time": time},
        "via": "search",
        "evidence": "identifier",
        "term": "secret/ci/deploy",
    }
    with (record / "2026-08-14.jsonl").open("a") as file:
        file.write(json.dumps(line) + "\n")


def test_off_by_default_the_latest_entries_only(repo: Path, crowded: Path) -> None:
    record_use(repo, "2026-08-14", "08:00")
    pimem = make_pimem({"PIMEM_NOW": NOW})
    snapshot = pimem.build_snapshot(pimem.resolve_scope(repo))
    assert snapshot is not None
    assert USED not in snapshot
    assert "earlier entries omitted]" in snapshot
    assert "routine note number 59 " in snapshot


def test_on_an_entry_the_agent_used_stays_ahead_of_newer_unused_ones(
    repo: Path, crowded: Path
) -> None:
    record_use(repo, "2026-08-14", "08:00")
    pimem = make_pimem({"PIMEM_NOW": NOW, "PIMEM_SNAPSHOT_PREFER_USED": "on"})
    snapshot = pimem.build_snapshot(pimem.resolve_scope(repo))
    assert snapshot is not None
    today = snapshot.split("### Today (2026-08-14)\n\n", 1)[1]
    # In file order, after a marker that no longer claims the omitted ones are all earlier.
    assert today.startswith("[... ")
    assert "entries omitted]\n\n### 08:00\n" + USED in today
    assert "earlier entries omitted" not in today
    assert "routine note number 59 " in today
    assert len(today) <= TODAY_BUDGET + 100


def test_on_with_no_use_recorded_the_snapshot_is_the_default_one(repo: Path, crowded: Path) -> None:
    default = make_pimem({"PIMEM_NOW": NOW})
    preferring = make_pimem({"PIMEM_NOW": NOW, "PIMEM_SNAPSHOT_PREFER_USED": "on"})
    scope = default.resolve_scope(repo)
    assert preferring.build_snapshot(scope) == default.build_snapshot(scope)


def test_used_entries_come_from_the_record_of_the_span(repo: Path, crowded: Path) -> None:
    record_use(repo, "2026-08-14", "08:00")
    record_use(repo, "not-a-day", "08:00")
    pimem = make_pimem({"PIMEM_NOW": NOW})
    scope = pimem.resolve_scope(repo)
    (used,) = pimem.used_entries(scope, 30)
    assert (used.day.isoformat(), used.time) == ("2026-08-14", "08:00")
    later = make_pimem({"PIMEM_NOW": "2026-09-20T09:00"})
    assert later.used_entries(scope, 30) == frozenset()
