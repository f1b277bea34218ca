"""The real-store development set: its list, its queries, the export, byte for byte."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from bench.realstores import dataset, prepare, report, run
from bench.realstores.summary import summarize

from conftest import REPO_ROOT

#: A prepared copy (``python -m bench.realstores.prepare DEST``), when this machine has one.
#: ``PIMEM_REALSTORES`` names it; unset, the test that needs it is skipped.
PREPARED = Path(os.environ["PIMEM_REALSTORES"]) if "PIMEM_REALSTORES" in os.environ else None


def test_every_store_has_its_queries() -> None:
    stores = dataset.load_stores()
    assert len(stores) >= 4
    assert len({store.name for store in stores}) == len(stores)
    assert any(store.agent != "claude-code" for store in stores)
    for store in stores:
        queries = dataset.load_queries(store)
        assert len(queries) >= 20, store.name
        for kind in dataset.KINDS:
            assert sum(q.kind == kind for q in queries) >= 3, (store.name, kind)


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


@pytest.mark.skipif(PREPARED is None, reason="no prepared copy (PIMEM_REALSTORES)")
def test_every_relevant_entry_is_one_entry_of_the_prepared_copy() -> None:
    assert PREPARED is not None
    problems = []
    for store in dataset.load_stores():
        dataset.verify(PREPARED, store)
        problems += dataset.ambiguous(PREPARED, store, dataset.load_queries(store))
    assert problems == []


def _search(
    query: str, kind: str, rank: int | None, scores: list[float], **extra: object
) -> dict[str, object]:
    return {
        "id": query,
        "kind": kind,
        "ms": 100.0,
        "ok": True,
        "timeout": False,
        "rank": rank,
        "scores": scores,
        "rises": run.rises(scores),
        **extra,
    }


def _raw() -> dict[str, object]:
    after = [
        _search("k1", "keyword", 1, [0.9, 0.5]),
        _search("p1", "paraphrase", 3, [0.7, 0.6, 0.5]),
        _search("n1", "no-answer", None, [0.1, 0.05]),
        _search("n2", "no-answer", None, [0.4, 0.2]),
    ]
    during = [
        _search("k1", "keyword", 2, [0.9, 0.95], indexing=True),
        _search("p1", "paraphrase", None, [0.2], indexing=True),
        {**_search("n1", "no-answer", None, []), "ok": False, "timeout": True, "ms": 60_000.0},
    ]
    theirs = [
        _search("k1", "keyword", 2, [1.0, 0.5]),
        _search("p1", "paraphrase", 1, [1.0]),
        _search("n1", "no-answer", None, [1.0]),
        _search("n2", "no-answer", None, [1.0]),
    ]
    return {
        "store": "s",
        "repo": "o/s",
        "commit": "c" * 40,
        "agent": "codex",
        "files": 2,
        "bytes": 10,
        "entries": 3,
        "queries": {"keyword": 1, "paraphrase": 1, "question": 0, "no-answer": 2},
        "first_cold": _search("k1", "keyword", 1, [0.9]) | {"ms": 2_000.0},
        "first_warm": _search("k1", "keyword", 1, [0.9]) | {"ms": 800.0},
        "index": {"returncode": 0, "returned_s": 3.0, "settled_s": 4.0},
        "during": during,
        "after": after,
        "pimem_index": {
            "ms": 12_000.0,
            "settled_s": 13.0,
            "chunks": 3,
            "peak_rss_mb": 450.0,
            "rss_at_return_mb": 400.0,
            "rss_settled_mb": 350.0,
        },
        "memsearch_index": {"ms": 10_000.0, "chunks": 3, "peak_rss_mb": 380.0},
        "memsearch": theirs,
    }


def test_the_summary_scores_each_phase_and_counts_rising_lists() -> None:
    raw = _raw()
    summary = summarize([raw])
    store = summary["stores"][0]
    assert store["after"]["quality"]["r1"] == 0.5
    assert store["after"]["quality"]["mrr"] == pytest.approx((1 + 1 / 3) / 2)
    # n1 below the threshold, n2 above it.
    assert store["after"]["quality"]["no_answer_below"] == 0.5
    assert store["memsearch"]["quality"]["no_answer_below"] is None
    assert store["during"]["speed"]["timeouts"] == 1
    assert store["during"]["quality"]["no_answer_below"] == 0.0
    assert store["r5_during_over_after"] == pytest.approx(0.5)
    assert store["lists"]["pimem"] == {"lists": 8, "rising": 1}  # the timed-out one is none
    assert store["index"]["settled_ratio"] == pytest.approx(1.3)

    checks = {check["target"]: check for check in report.targets(summary)}
    assert checks["realstores s: first search <= 1.5 s warm, <= 3 s cold"]["met"]
    assert not checks["realstores: no best-first list has a relevance rising down the list"]["met"]
    assert not checks["realstores s: cold index <= 1.2 x memsearch index"]["met"]
    page = report.render({"summary": summary, "stores": [raw], "pimem": "1", "memsearch": "2"})
    assert "| s | o/s @ cccccccccc | codex | 2 | 3 | 1 / 1 / 0 / 2 |" in page
    assert "1.30 x" in page


def test_an_answer_is_read_as_a_list_or_an_object_holding_it() -> None:
    hits = [{"source": "/p/2026-01-01.md", "content": "x", "score": 0.5}]
    assert run._hits(hits) == (hits, {})
    found, meta = run._hits({"hits": hits, "ranked_by_meaning": 120, "entries": 677, "x": [1]})
    assert found == hits
    assert meta == {"ranked_by_meaning": 120, "entries": 677}


PUBLISHED = REPO_ROOT / "docs" / "benchmarks" / "realstores"


@pytest.mark.skipif(
    not (PUBLISHED / "realstores.json").is_file(), reason="the realstores part is not published"
)
def test_no_published_best_first_list_has_a_relevance_rising_down_it() -> None:
    results = json.loads((PUBLISHED / "realstores.json").read_text())
    rising = [
        (raw["store"], phase, search["id"])
        for raw in results["stores"]
        for phase in ("during", "after")
        for search in raw[phase]
        if run.rises(search["scores"])
    ]
    assert rising == []


def test_any_chunk_of_the_right_entry_is_right(tmp_path: Path) -> None:
    """memsearch cuts a long entry in several chunks: the one without the substring still finds
    the entry (its other lines are the entry's), and a chunk of another entry does not."""
    day = tmp_path / "2026-01-02.md"
    day.write_text(
        "### 10:00\n<!-- session:a -->\n- the cache is Redis\n- its TTL is five minutes\n\n"
        "### 11:00\n<!-- session:a -->\n- the queue is NATS\n"
    )
    relevant = dataset.Relevant(file=day.name, contains="the cache is Redis")
    assert relevant.matches(str(day), "### 10:00\n- its TTL is five minutes\n")
    assert not relevant.matches(str(day), "### 11:00\n- the queue is NATS\n")
    assert not relevant.matches(str(day), "### 10:00\n")
