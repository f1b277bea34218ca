"""The benchmark corpus: deterministic, in pimem's format, one chunk per entry (no timing here)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from memsearch.chunker import chunk_markdown

from bench.corpus import LONGEST, generate_corpus, generate_long_corpus
from bench.latency import _identity, prepare_store, summarize
from pimem_core.day_file import list_entries
from pimem_plugins.memsearch.offline_model import OfflineModel


def test_the_same_seed_gives_the_same_bytes() -> None:
    assert generate_corpus(300, seed=7).digest() == generate_corpus(300, seed=7).digest()
    assert generate_corpus(300, seed=7).digest() != generate_corpus(300, seed=8).digest()


def test_long_entries_have_the_lengths_of_distilled_ones(tmp_path: Path) -> None:
    corpus = generate_long_corpus(1_000)
    lengths = sorted(len(item.entry.content) for item in corpus.entries)
    assert 850 <= lengths[len(lengths) // 2] <= 950
    assert 0.08 <= sum(length > 1_400 for length in lengths) / len(lengths) <= 0.12
    assert 15_000 < lengths[-1] <= LONGEST
    assert corpus.digest() == generate_long_corpus(1_000).digest()
    files = corpus.write(tmp_path / "memory")
    assert sum(len(list_entries(file.read_text())) for file in files) == 1_000
    assert [item.facts for item in corpus.entries[:50]] == [
        item.facts for item in generate_corpus(50).entries
    ]


def test_every_entry_is_one_chunk_of_a_day_file(tmp_path: Path) -> None:
    corpus = generate_corpus(500)
    files = corpus.write(tmp_path / "memory")
    texts = [file.read_text() for file in files]
    assert sum(len(list_entries(text)) for text in texts) == 500
    chunks = [chunk for text in texts for chunk in chunk_markdown(text)]
    assert len(chunks) == 500
    assert all(chunk.heading_level == 3 for chunk in chunks)
    assert len(files) == len(corpus.days) > 1


def test_sessions_open_with_one_heading_each() -> None:
    corpus = generate_corpus(400)
    sessions = {item.entry.anchor.session for item in corpus.entries}
    headings = sum(text.count("\n## Session ") for text in corpus.day_files().values())
    assert headings == len(sessions) > 1


def test_queries_are_distinct_and_point_at_an_entry() -> None:
    corpus = generate_corpus(300)
    queries = corpus.queries(50)
    assert len({query.text for query in queries}) == 50
    assert all(0 <= query.target < 300 for query in queries)


def test_summary_interpolates_the_95th_percentile() -> None:
    stats = summarize([float(value) for value in range(1, 101)])
    assert stats["p50"] == 50.5
    assert stats["p95"] == pytest.approx(95.05)
    assert (stats["min"], stats["max"], stats["n"]) == (1.0, 100.0, 100)


def test_a_kept_store_gets_its_project_files_back_without_indexing(tmp_path: Path) -> None:
    corpus = generate_corpus(200)
    model = OfflineModel(hf_home=tmp_path / "hf", provider="onnx", model="local/minilm")
    store, reused = prepare_store(tmp_path / "store", corpus, model)
    assert not reused
    # What indexing leaves: a marker, and a database that must survive.
    store.marker.write_text(json.dumps({"identity": _identity(store, model), "index": {}}))
    store.database.mkdir()
    shutil.rmtree(store.project)
    store.home.joinpath(".memsearch", "config.toml").unlink()

    again, reused = prepare_store(tmp_path / "store", corpus, model)
    assert reused
    assert again.database.is_dir()
    assert (again.project / ".git").is_dir()
    written = {path.name: path.read_text() for path in again.memory_dir.iterdir()}
    assert written == corpus.day_files()
    assert str(again.database) in (again.home / ".memsearch" / "config.toml").read_text()
