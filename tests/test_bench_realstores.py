"""The real-store development set: its list, its queries, the export, byte for byte."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from bench.realstores import dataset, prepare

#: A prepared copy (``python -m bench.realstores.prepare DEST``), when this machine has one.
PREPARED = Path(os.environ.get("PIMEM_REALSTORES", "/work/realstores"))


def test_the_list_names_no_held_out_repository_and_every_store_has_its_queries() -> None:
    stores = dataset.load_stores()
    assert len(stores) >= 4
    assert {store.repo.lower() for store in stores}.isdisjoint(dataset.HELD_OUT)
    assert len({store.name for store in stores}) == len(stores)
    assert any(store.agent != "claude-code" for store in stores)
    for store in stores:
        queries = dataset.load_queries(store)
        assert len(queries) >= 20, store.name
        for kind in dataset.KINDS:
            assert sum(q.kind == kind for q in queries) >= 3, (store.name, kind)


def test_a_held_out_repository_is_refused(tmp_path: Path) -> None:
    listed = {
        "stores": [
            {
                "name": "x",
                "repo": "SU0510/clawd-on-desk",
                "commit": "0" * 40,
                "memory_dir": ".memsearch/memory",
                "agent": "claude-code",
                "files": [],
            }
        ]
    }
    (tmp_path / "stores.json").write_text(json.dumps(listed))
    with pytest.raises(dataset.DatasetError, match="held out"):
        dataset.load_stores(tmp_path / "stores.json")


def test_a_query_is_right_on_its_day_file_and_substring() -> None:
    query = dataset.Query(
        id="q",
        kind="question",
        text="which cache?",
        relevant=(dataset.Relevant(file="2026-01-02.md", contains="Redis"),),
    )
    hits = [
        ("/p/.memsearch/memory/2026-01-01.md", "we use Redis"),
        ("/p/.memsearch/memory/2026-01-02.md", "nothing here"),
        ("/p/.memsearch/memory/2026-01-02.md", "- the cache is Redis"),
    ]
    assert query.rank(hits) == 3
    assert query.rank(hits[:2]) is None


def test_entries_are_cut_before_each_heading() -> None:
    text = "## Session 10:00\n\n### 10:00\n<!-- session:a -->\n- one\n\n### 10:05\n- two\n"
    assert dataset.entries(text) == [
        "## Session 10:00\n\n",
        "### 10:00\n<!-- session:a -->\n- one\n\n",
        "### 10:05\n- two\n",
    ]


def _git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_prepare_exports_the_listed_commit_byte_for_byte(tmp_path: Path) -> None:
    repo = tmp_path / "mirrors" / "someone+notes"
    memory = repo / ".memsearch" / "memory"
    memory.mkdir(parents=True)
    day = "### 09:00\r\n- crlf, a trailing space, ü \n".encode()
    (memory / "2026-01-05.md").write_bytes(day)
    _git("init", "-q", cwd=repo)
    _git("add", ".", cwd=repo)
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "m", cwd=repo)
    commit = _git("rev-parse", "HEAD", cwd=repo)
    (memory / "2026-01-05.md").write_bytes(b"changed after the commit\n")
    store = dataset.Store(
        name="notes",
        repo="someone/notes",
        commit=commit,
        memory_dir=".memsearch/memory",
        agent="hand",
        files=(dataset.DayFile(name="2026-01-05.md", bytes=len(day), sha256=dataset.sha256(day)),),
    )
    dest = tmp_path / "dest"
    assert prepare.export(store, tmp_path / "mirrors", dest) == len(day)
    assert (dest / "notes" / ".memsearch" / "memory" / "2026-01-05.md").read_bytes() == day
    dataset.verify(dest, store)
    (dest / "notes" / ".memsearch" / "memory" / "2026-01-05.md").write_bytes(b"edited")
    with pytest.raises(dataset.DatasetError, match="not the file"):
        dataset.verify(dest, store)
    with pytest.raises(dataset.DatasetError, match="fetch github:someone/notes first"):
        prepare.export(store, tmp_path / "elsewhere", dest)


@pytest.mark.skipif(not PREPARED.is_dir(), reason="no prepared copy of the development set")
def test_every_relevant_entry_is_one_entry_of_the_prepared_copy() -> None:
    problems = []
    for store in dataset.load_stores():
        dataset.verify(PREPARED, store)
        problems += dataset.ambiguous(PREPARED, store, dataset.load_queries(store))
    assert problems == []
