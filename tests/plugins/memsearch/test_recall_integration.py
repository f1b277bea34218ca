"""pimem's ranker on real memsearch, Milvus Lite and the offline model: read-your-writes,
forget, other agents' writes, the cache, and memsearch's ranker as the selectable baseline."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import pytest

from pimem_core import Pimem
from pimem_core.types import Anchor, ChunkAddress, Entry, Scope, SearchQuery
from pimem_plugins.memsearch.index import MemsearchMemoryIndex
from pimem_plugins.memsearch.offline_model import OfflineModel
from pimem_plugins.memsearch.recall import cache
from pimem_plugins.memsearch.recall.service import Recall

from conftest import make_pimem

ENTRIES = [
    "- the user and the agent chose Redis for the hot cache with 5 minute TTLs",
    "- the agent fixed the login redirect loop by escaping the return URL",
    "- the user prefers pytest fixtures over unittest setUp methods\n"
    "- the agent pinned httpx to 0.27.2 in services/billing/client.py",
]


def entry(number: int, content: str, stamp: str = "2026-08-13T10:00") -> Entry:
    anchor = Anchor(session="s1", turn=f"t{number}", transcript=f"/t/s1-{number}.jsonl")
    return Entry(anchor=anchor, content=content, written_at=datetime.fromisoformat(stamp))


@pytest.fixture
def indexed(memsearch_home: Path, repo: Path) -> tuple[Pimem, Scope]:
    pimem = make_pimem({"PIMEM_DB_LINGER_MS": "0"})
    scope = pimem.resolve_scope(repo)
    for number, content in enumerate(ENTRIES):
        pimem.append_entry(scope, entry(number, content, f"2026-08-1{number}T10:00"))
    assert pimem.index_memory(scope, "test").indexed_chunks == 3
    return pimem, scope


def recall_of(pimem: Pimem, scope: Scope) -> Recall:
    recall = MemsearchMemoryIndex.opened_by(pimem, scope).recall
    assert recall is not None
    return recall


def search(pimem: Pimem, scope: Scope, text: str, k: int = 3) -> list[str]:
    return [hit.content for hit in pimem.search_memory(scope, SearchQuery(text=text, top_k=k))]


def test_hits_carry_a_relevance_and_each_legs_rank(indexed: tuple[Pimem, Scope]) -> None:
    pimem, scope = indexed
    hits = pimem.search_memory(scope, SearchQuery(text="which cache did we choose", top_k=3))
    assert "Redis" in hits[0].content
    assert hits[0].score_kind == "relevance"
    assert 0.0 <= hits[-1].score <= hits[0].score <= 1.0
    assert [leg.name for leg in hits[0].legs] == ["dense", "lexical", "fused"]
    assert hits[0].legs[2].rank == 1


def test_an_unrelated_query_scores_low(indexed: tuple[Pimem, Scope]) -> None:
    pimem, scope = indexed
    for text in ("banana bread recipe with walnuts", "x"):
        hits = pimem.search_memory(scope, SearchQuery(text=text, top_k=3))
        assert all(hit.score < 0.3 for hit in hits), (text, [hit.score for hit in hits])


def test_a_fresh_write_is_found_by_the_next_search_before_any_index_run(
    indexed: tuple[Pimem, Scope],
) -> None:
    pimem, scope = indexed
    search(pimem, scope, "warm up")  # the read model is loaded
    fresh = "- the agent moved the nightly export job to 02:00 UTC to avoid the backup window"
    pimem.append_entry(scope, entry(7, fresh, "2026-08-14T11:00"))
    hits = pimem.search_memory(scope, SearchQuery(text="when does the nightly export run", top_k=1))
    assert fresh in hits[0].content
    # It chains into expand although the collection does not have it yet.
    section = pimem.expand_chunk(scope, hits[0].chunk_hash)
    assert fresh in section.content
    # memsearch's own index run gives the chunk the hash the read model already used.
    pimem.index_memory(scope, "test", files=(scope.memory_dir / "2026-08-14.md",))
    assert (
        pimem.search_memory(scope, SearchQuery(text="nightly export", top_k=1))[0].chunk_hash
        == hits[0].chunk_hash
    )


def test_a_write_leaves_its_embedding_to_the_background_and_the_next_search_waits_for_it(
    indexed: tuple[Pimem, Scope],
) -> None:
    pimem, scope = indexed
    search(pimem, scope, "warm up")
    recall = recall_of(pimem, scope)
    fresh = "- the agent moved the nightly export job to 02:00 UTC to avoid the backup window"
    with ThreadPoolExecutor(1) as pool:
        with recall._refresh_lock:  # the read model busy (the worker, another search)
            # The writer returns without taking the lock: a capture at exit does not wait.
            pool.submit(pimem.append_entry, scope, entry(7, fresh, "2026-08-14T11:00")).result(
                timeout=30
            )
            searching = pool.submit(search, pimem, scope, "when does the nightly export run", 1)
        # The search waited for the write to be taken in rather than serving what it had.
        assert fresh in searching.result(timeout=60)[0]


def test_a_write_is_saved_in_the_overlay_without_saving_the_whole_read_model_again(
    indexed: tuple[Pimem, Scope], memsearch_home: Path
) -> None:
    pimem, scope = indexed
    recall = recall_of(pimem, scope)
    search(pimem, scope, "warm up")
    assert recall.idle(60)  # the read model saved whole once
    (directory,) = (memsearch_home / ".cache" / "pimem" / "read-model").glob("*/manifest.json")
    before = cache.load(directory.parent)
    assert before is not None
    fresh = "- the agent moved the nightly export job to 02:00 UTC to avoid the backup window"
    pimem.append_entry(scope, entry(7, fresh, "2026-08-14T11:00"))
    assert recall.idle(60)
    after = cache.load(directory.parent)
    assert after is not None
    # The same base, the write in the overlay beside it: what a new process loads.
    assert after.base == before.base
    assert any(fresh in record.content for record, _ in after.added)


def test_a_forgotten_entry_is_never_returned_after_forget_returns(
    indexed: tuple[Pimem, Scope],
) -> None:
    pimem, scope = indexed
    hits = pimem.search_memory(scope, SearchQuery(text="login redirect loop", top_k=1))
    assert "login redirect" in hits[0].content
    section = pimem.expand_chunk(scope, hits[0].chunk_hash)
    pimem.forget_entry(scope, ChunkAddress(section=section))
    assert not any("login redirect" in text for text in search(pimem, scope, "login redirect", 5))


def test_another_agents_append_is_seen_by_the_next_search(indexed: tuple[Pimem, Scope]) -> None:
    pimem, scope = indexed
    search(pimem, scope, "warm up")
    day = scope.memory_dir / "2026-08-12.md"
    with day.open("a", encoding="utf-8") as stream:  # as memsearch's other agent plugins do
        stream.write(
            "\n### 12:00\n<!-- session:other turn:o1 transcript:/elsewhere/o.jsonl -->\n"
            "- the agent switched the queue from RabbitMQ to NATS JetStream\n"
        )
    assert "NATS" in search(pimem, scope, "which message queue do we use", 1)[0]


def test_each_fact_of_an_entry_is_found_on_its_own(indexed: tuple[Pimem, Scope]) -> None:
    pimem, scope = indexed
    assert "httpx" in search(pimem, scope, "what version of httpx is pinned", 1)[0]
    assert "pytest fixtures" in search(pimem, scope, "unittest or pytest style", 1)[0]


def test_a_new_process_loads_the_read_model_from_its_cache(
    indexed: tuple[Pimem, Scope], memsearch_home: Path, offline_model: OfflineModel, repo: Path
) -> None:
    pimem, scope = indexed
    recall = recall_of(pimem, scope)
    search(pimem, scope, "warm up")
    assert recall.origin == "day files"  # the index run read them, and embedded their facts
    assert recall.idle(60)  # facts embedded and the read model saved
    assert recall.pending_facts() == 0
    script = (
        "import json, sys\n"
        "from pimem_core import Pimem\n"
        "from pimem_core.types import SearchQuery\n"
        "from pimem_plugins.memsearch.index import MemsearchMemoryIndex\n"
        "from pathlib import Path\n"
        "p = Pimem.from_env(); s = p.resolve_scope(Path(sys.argv[1]))\n"
        "hits = p.search_memory(s, SearchQuery(text='hot cache', top_k=1))\n"
        "print(json.dumps([MemsearchMemoryIndex.opened_by(p, s).recall.origin,"
        " hits[0].content]))\n"
    )
    env = {"HOME": str(memsearch_home), "PATH": "/usr/bin:/bin", **offline_model.environment()}
    out = subprocess.run(
        [sys.executable, "-c", script, str(repo)], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    origin, content = json.loads(out.stdout)
    assert origin == "cache"
    assert "Redis" in content


def test_a_cached_read_model_does_not_wait_for_the_database(
    indexed: tuple[Pimem, Scope], repo: Path
) -> None:
    """A session's catch-up index run holds the backend queue for a minute at 20k chunks; a
    read model in its cache needs no database, so the first search does not wait for it."""
    pimem, scope = indexed
    recall = recall_of(pimem, scope)
    search(pimem, scope, "warm up")
    assert recall.idle(60)
    later = make_pimem({"PIMEM_DB_LINGER_MS": "0"})  # another process, as it were
    index = MemsearchMemoryIndex.opened_by(later, scope)
    release = threading.Event()
    holding = threading.Thread(target=index.queue.run, args=("index", release.wait))
    holding.start()
    pool = ThreadPoolExecutor(1)
    try:
        found = pool.submit(search, later, scope, "hot cache", 1).result(timeout=60)
        assert "Redis" in found[0]
        assert index.recall is not None
        assert index.recall.origin == "cache"
    finally:  # a search stuck behind the held queue is let go, and the test fails above
        release.set()
        holding.join()
        pool.shutdown()


def test_memsearch_ranker_stays_selectable(
    indexed: tuple[Pimem, Scope], monkeypatch: pytest.MonkeyPatch, repo: Path
) -> None:
    monkeypatch.setenv("PIMEM_RANKER", "memsearch")
    pimem = make_pimem({"PIMEM_DB_LINGER_MS": "0"})
    scope = pimem.resolve_scope(repo)
    hits = pimem.search_memory(scope, SearchQuery(text="hot cache", top_k=2))
    assert hits[0].score_kind == "rank_fusion"
    assert hits[0].legs == ()
    assert MemsearchMemoryIndex.opened_by(pimem, scope).recall is None


@pytest.fixture
def milvus_server(
    tmp_path: Path, offline_model: OfflineModel, memsearch_home: Path
) -> Iterator[str]:
    """A Milvus endpoint on 127.0.0.1 (Milvus Lite's own server), and memsearch pointed at it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "milvus_lite", "server", "--data-dir", str(tmp_path / "server"),
         "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as client:
                if client.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert server.poll() is None, "the Milvus Lite server exited"
            assert time.monotonic() < deadline, "the Milvus Lite server never listened"
            time.sleep(0.1)
        uri = f"http://127.0.0.1:{port}"
        (memsearch_home / ".memsearch" / "config.toml").write_text(
            f'[embedding]\nprovider = "{offline_model.provider}"\n'
            f'model = "{offline_model.model}"\n\n[milvus]\nuri = "{uri}"\n'
        )
        yield uri
    finally:
        server.terminate()
        server.wait(10)


def test_read_your_writes_and_forget_against_a_milvus_server(
    milvus_server: str, repo: Path
) -> None:
    pimem = make_pimem()
    scope = pimem.resolve_scope(repo)
    for number, content in enumerate(ENTRIES):
        pimem.append_entry(scope, entry(number, content, f"2026-08-1{number}T10:00"))
    assert pimem.index_memory(scope, "test").indexed_chunks == 3
    assert "Redis" in search(pimem, scope, "which cache did we choose", 1)[0]
    assert recall_of(pimem, scope).origin == "day files"

    fresh = "- the agent moved the nightly export job to 02:00 UTC"
    pimem.append_entry(scope, entry(9, fresh, "2026-08-14T11:00"))
    hit = pimem.search_memory(scope, SearchQuery(text="nightly export job", top_k=1))[0]
    assert fresh in hit.content
    pimem.forget_entry(scope, ChunkAddress(section=pimem.expand_chunk(scope, hit.chunk_hash)))
    assert not any("nightly export" in text for text in search(pimem, scope, "nightly export"))


def test_the_first_search_after_an_index_run_ranks_by_every_fact(
    memsearch_home: Path, repo: Path
) -> None:
    """Day files that arrived as a pull or a clone does (nothing of pimem's saw them): the index
    run leaves the read model complete, in this process and in the cache the next one loads."""
    memory = repo / ".memsearch" / "memory"
    memory.mkdir(parents=True)
    (memory / "2026-08-12.md").write_text(
        "\n## Session 10:00\n\n### 10:00\n"
        "<!-- session:s1 turn:t1 transcript:/t/s1.jsonl -->\n"
        "- chose Redis for the hot cache\n- the ledger lives in Postgres\n\n"
    )
    pimem = make_pimem({"PIMEM_DB_LINGER_MS": "0"})
    scope = pimem.resolve_scope(repo)
    assert pimem.index_memory(scope, "test").indexed_chunks == 1
    recall = recall_of(pimem, scope)
    assert recall.loaded
    assert recall.pending_facts() == 0
    hits = pimem.search_memory(scope, SearchQuery(text="where does the ledger live", top_k=1))
    assert hits[0].legs[0].name == "dense"
    # The best fact's cosine, not the whole chunk's: the ledger bullet alone answers.
    dense = hits[0].legs[0].score
    assert dense is not None
    assert dense > 0.6
    directory = recall._collection.cache_dir()
    assert directory is not None
    saved = cache.load(directory)
    assert saved is not None
    assert saved.generation.without_facts == 0
