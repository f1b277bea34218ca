"""The read model's pure parts: facts and words, the overlay and its folding, the cache on
disk, and the ranking (unit vectors stand in for the embedding model)."""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import cast

import attrs
import numpy as np
import numpy.typing as npt
import pytest

from pimem_core.types import Scope
from pimem_plugins.memsearch.recall import cache, store_files
from pimem_plugins.memsearch.recall.dense import FactIndex
from pimem_plugins.memsearch.recall.generation import ChunkRecord, Generation
from pimem_plugins.memsearch.recall.ranking import RELEVANCE, coverage, rank
from pimem_plugins.memsearch.recall.read_model import ReadModel
from pimem_plugins.memsearch.recall.service import Collection, Recall
from pimem_plugins.memsearch.recall.text import clean_text, facts, tokens

ENTRY = (
    "### 10:12\n"
    "<!-- session:abc turn:def transcript:/home/user/sessions/abc.jsonl -->\n"
    "- pinned httpx to 0.19.0 in services/billing/client.py\n"
    "- chose Redis for the hot cache\n"
    "  with 5 minute TTLs\n"
)


def test_clean_text_leaves_out_the_anchor_and_headings() -> None:
    assert clean_text(ENTRY) == (
        "- pinned httpx to 0.19.0 in services/billing/client.py\n"
        "- chose Redis for the hot cache\n  with 5 minute TTLs"
    )


def test_each_bullet_is_a_fact_and_continuations_stay_with_it() -> None:
    assert facts(ENTRY) == (
        "pinned httpx to 0.19.0 in services/billing/client.py",
        "chose Redis for the hot cache with 5 minute TTLs",
    )
    assert facts("## Memory Compact 09:30\nThe team ships on Fridays.\n") == (
        "The team ships on Fridays.",
    )


def test_tokens_keep_versions_paths_and_identifiers_whole() -> None:
    # A path is also each of its parts: a question names the file, not where it lives.
    assert tokens("Pinned httpx to 0.19.0 in services/billing/client.py (test_login_flow)") == [
        "pin", "httpx", "0.19.0", "services/billing/client.py", "servic", "billing", "client.py",
        "test_login_flow",
    ]  # fmt: skip


def unit(*values: float) -> npt.NDArray[np.float32]:
    vector = np.zeros(8, np.float32)
    vector[: len(values)] = values
    return (vector / np.linalg.norm(vector)).reshape(1, -1)


def record(key: str, content: str) -> ChunkRecord:
    return ChunkRecord(
        chunk_hash=key, content=content, source="/m/2026-08-13.md", heading="10:00",
        heading_level=3, start_line=1, end_line=2, facts_ready=True,
    )  # fmt: skip


@pytest.fixture
def model() -> ReadModel:
    return ReadModel(
        Generation.build(
            [
                (record("a" * 16, "- chose Redis for the hot cache"), unit(1, 0)),
                (record("b" * 16, "- fixed the login redirect loop"), unit(0, 1)),
                (record("c" * 16, "- deploys use blue-green releases"), unit(0, 0, 1)),
            ]
        )
    )


def keys(model: ReadModel, vector: npt.NDArray[np.float32], words: str) -> list[str]:
    found, _ = model.candidates(vector[0], tokens(words), 10)
    return [hit.chunk_hash[0] for hit in rank(found, tokens(words), 3, model.idf)]


def test_both_legs_find_and_the_overlay_adds_and_removes(model: ReadModel) -> None:
    assert keys(model, unit(1, 0), "redis cache")[0] == "a"
    model.apply([(record("d" * 16, "- moved the export job to 02:00"), unit(0, 0, 0, 1))])
    assert keys(model, unit(0, 0, 0, 1), "export job")[0] == "d"
    model.apply(removals=["a" * 16])
    assert "a" not in keys(model, unit(1, 0), "redis cache")
    assert len(model) == 3


def test_chunks_taken_in_by_their_words_are_found_by_them_and_fold_with_the_rest() -> None:
    """A store met before it is embedded: chunks with no vector sit beside embedded ones (the
    neighbours of one another in one day file), are found by their words, and a fold measures
    the context share on the embedded ones only."""
    bare = np.zeros((0, 8), np.float32)
    entries = [
        (attrs.evolve(record(f"{n:016x}", f"- note {n} about the cache"), start_line=n), bare)
        for n in range(40)
    ]
    entries[3] = (record("a" * 16, "- chose Redis for the hot cache"), unit(1, 0))
    entries[4] = (record("b" * 16, "- fixed the login redirect loop"), unit(0, 1))
    model = ReadModel(Generation.build(entries))
    assert model.without_vectors() == 38
    found, _ = model.candidates(unit(0, 0, 1)[0], tokens("note 17"), 10)
    best = max((c for c in found if not c.embedded), key=lambda c: c.lexical)
    assert best.record.chunk_hash == f"{17:016x}"
    assert keys(model, unit(0, 1), "login redirect")[0] == "b"
    model.apply([(record("c" * 16, "- deploys use blue-green releases"), unit(0, 0, 1))])
    model.fold()
    assert model.without_vectors() == 38
    assert model.generation().context_share == 0.0


def test_the_counts_follow_the_overlay_as_the_chunks_do(model: ReadModel) -> None:
    def counted() -> tuple[int, int]:
        records = model.records()
        return len(records), sum(1 for found in records.values() if not found.facts_ready)

    waiting = attrs.evolve(record("b" * 16, "- fixed the login redirect loop"), facts_ready=False)
    model.apply([(waiting, unit(0, 1))])  # a chunk back to its chunk vector
    model.apply([(attrs.evolve(record("d" * 16, "- new"), facts_ready=False), unit(0, 1))])
    model.apply(removals=["a" * 16, "x" * 16])
    assert (len(model), model.without_facts()) == counted() == (3, 2)
    model.fold()
    assert (len(model), model.without_facts()) == counted() == (3, 2)
    model.apply([(record("d" * 16, "- new"), unit(0, 1))])  # its facts embedded
    assert (len(model), model.without_facts()) == counted() == (3, 1)


def test_folding_keeps_what_the_overlay_said(model: ReadModel) -> None:
    model.apply([(record("d" * 16, "- moved the export job to 02:00"), unit(0, 0, 0, 1))])
    model.apply(removals=["b" * 16])
    model.fold()
    assert model.overlay_size() == 0
    assert sorted(model.records()) == ["a" * 16, "c" * 16, "d" * 16]
    assert keys(model, unit(0, 0, 0, 1), "export job")[0] == "d"


def test_the_same_text_is_shown_once(model: ReadModel) -> None:
    model.apply([(record("e" * 16, "### 11:00\n- chose Redis for the hot cache"), unit(1, 0))])
    assert (
        keys(model, unit(1, 0), "redis").count("a") + keys(model, unit(1, 0), "redis").count("e")
        == 1
    )


def test_relevance_is_low_for_unrelated_queries_and_high_for_answers() -> None:
    assert RELEVANCE(cosine=0.1, coverage=0.0) < 0.01
    assert RELEVANCE(cosine=0.7, coverage=1.0) > 0.99
    assert coverage(tokens("redis cache"), "- chose Redis for the hot cache", lambda t: 1.0) == 1.0


def test_the_cache_round_trips_with_its_overlay(model: ReadModel, tmp_path: Path) -> None:
    directory = tmp_path / "read-model" / "c"
    base = cache.save(directory, model.generation(), {"/m/2026-08-13.md": (1, 2)})
    model.apply([(record("d" * 16, "- moved the export job"), unit(0, 0, 0, 1))], ["a" * 16])
    added, removed = model.overlay()
    cache.save_overlay(directory, base, added, removed, {"/m/2026-08-14.md": (3, 4)})
    saved = cache.load(directory)
    assert saved is not None
    loaded = ReadModel(saved.generation)
    loaded.apply(saved.added, saved.removed)
    assert sorted(loaded.records()) == sorted(model.records())
    assert saved.stamps == {"/m/2026-08-13.md": (1, 2), "/m/2026-08-14.md": (3, 4)}


def test_an_overlay_of_another_base_is_ignored(model: ReadModel, tmp_path: Path) -> None:
    directory = tmp_path / "read-model" / "c"
    cache.save(directory, model.generation(), {})
    model.apply(removals=["a" * 16])
    cache.save_overlay(directory, "another-base", *model.overlay(), {})
    saved = cache.load(directory)
    assert saved is not None
    assert saved.removed == []


def test_a_damaged_cache_reads_as_none(model: ReadModel, tmp_path: Path) -> None:
    directory = tmp_path / "read-model" / "c"
    cache.save(directory, model.generation(), {})
    (directory / "chunks.json").write_text("[{", encoding="utf-8")
    assert cache.load(directory) is None
    assert cache.load(tmp_path / "nothing") is None


def test_asking_for_fewer_hits_gives_the_first_of_more(model: ReadModel) -> None:
    found, _ = model.candidates(unit(1, 1, 1)[0], tokens("redis login deploys"), 100)
    words = tokens("redis login deploys")
    assert rank(found, words, 2, model.idf) == rank(found, words, 3, model.idf)[:2]


def test_fact_vectors_are_kept_as_codes_within_a_few_thousandths_of_their_cosine() -> None:
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((300, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    owners = np.repeat(np.arange(100, dtype=np.int32), 3)
    index = FactIndex.of(vectors, owners)
    query = vectors[7] + 0.3 * vectors[200]
    query /= np.linalg.norm(query)
    exact = (vectors @ query).reshape(100, 3).max(axis=1)
    found = index.search(query, 10)
    assert found.positions[:2].tolist() == [2, 66]  # the chunks of facts 7 and 200
    assert np.abs(found.scores - exact[found.positions]).max() < 0.005
    assert np.abs(index.vectors(0, 300) - vectors).max() < 0.005


def test_a_cache_of_float16_vectors_is_read_and_worth_saving_again(
    model: ReadModel, tmp_path: Path
) -> None:
    directory = tmp_path / "read-model" / "c"
    cache.save(directory, model.generation(), {})
    # What the first format wrote: float16 vectors, no scale, one object per chunk.
    generation = model.generation()
    np.save(directory / "facts.npy", generation.dense.vectors(0, 3).astype(np.float16))
    (directory / "scale.npy").unlink()
    records = [attrs.asdict(record) for record in generation.records]
    (directory / "chunks.json").write_text(json.dumps(records), encoding="utf-8")
    manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    (directory / "manifest.json").write_text(json.dumps(manifest | {"format": 1}), "utf-8")
    saved = cache.load(directory)
    assert saved is not None
    assert saved.outdated
    assert saved.generation.records == generation.records
    assert keys(ReadModel(saved.generation), unit(0, 1), "login redirect")[0] == "b"


class _CachedOnly:
    """A collection with a cache directory and nothing to embed."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def cache_dir(self) -> Path:
        return self.directory

    def rest(self) -> None:
        pass

    def index_behind(self) -> bool:
        return False

    def encode_behind(self, texts: list[str]) -> object:
        raise AssertionError("nothing to embed")


def test_a_cache_in_an_older_format_is_saved_again_by_the_next_background_step(
    model: ReadModel, tmp_path: Path
) -> None:
    directory = tmp_path / "read-model" / "c"
    cache.save(directory, model.generation(), {})
    manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    np.save(directory / "facts.npy", model.generation().dense.vectors(0, 3).astype(np.float16))
    (directory / "scale.npy").unlink()
    (directory / "manifest.json").write_text(json.dumps(manifest | {"format": 1}), "utf-8")
    memory = tmp_path / "memory"
    memory.mkdir()
    recall = _recall(memory, _CachedOnly(directory))
    assert recall.load(cache_only=True)
    recall.note_written([])  # any step of the background worker
    assert recall.idle(30)
    saved = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    assert saved["format"] == cache.FORMAT


def _recall(memory_dir: Path, collection: object = None) -> Recall:
    scope = Scope(
        repository_dir=memory_dir.parent, scope_dir=memory_dir.parent, memory_dir=memory_dir,
        collection="ms_test_0123456789ab", index_state_path=None,
    )  # fmt: skip
    return Recall(scope, cast(Collection, collection))


def test_recent_day_files_are_checked_on_every_search_and_all_of_them_once_a_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = tmp_path / "memory"
    memory.mkdir()
    old, today = memory / "2026-01-05.md", memory / "2026-12-02.md"
    for path, days_ago in ((old, 300), (today, 0)):
        path.write_text("- an entry\n", encoding="utf-8")
        stamp = time.time() - days_ago * 86_400
        os.utime(path, (stamp, stamp))
    recall = _recall(memory)
    assert recall.files.changed() == [str(old), str(today)]  # nothing seen yet
    recall.files.stamps = recall.files.found()
    monkeypatch.setattr(store_files, "FULL_CHECK_SECONDS", 3_600.0)
    assert recall.files.changed() == []
    with today.open("a", encoding="utf-8") as stream:
        stream.write("- another agent's entry\n")
    with old.open("a", encoding="utf-8") as stream:
        stream.write("- an edit of an old file\n")
    assert recall.files.changed() == [str(today)]  # the old file waits for a full check
    (memory / "2026-12-03.md").write_text("- a new day\n", encoding="utf-8")
    assert len(recall.files.changed()) == 3  # a new file changes the directory: all checked
    monkeypatch.setattr(store_files, "FULL_CHECK_SECONDS", 0.0)
    assert str(old) in recall.files.changed()


class _Chunking(_CachedOnly):
    """A cached collection that chunks day files as memsearch does, and embeds to unit x."""

    def chunking(self) -> tuple[int, int]:
        return 1500, 2

    def model_name(self) -> str:
        return "test-model"

    def encode(self, texts: list[str]) -> npt.NDArray[np.float32]:
        return np.tile(unit(1, 0), (len(texts), 1))

    def searching(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()


def test_a_cache_is_not_trusted_for_the_files_written_last(
    model: ReadModel, tmp_path: Path
) -> None:
    """Found by the reliability suite: with processes saving the cache while others write, a
    cache could claim a day file's stat without all of its chunks, and no search read the file
    again. The files written last are compared with the cache's chunks once on load."""
    memory = tmp_path / "memory"
    memory.mkdir()
    old, today = memory / "2026-01-05.md", memory / "2026-12-02.md"
    for path, days_ago, text in ((old, 300, "- an old zq1 entry"), (today, 0, "- a new zq2 entry")):
        path.write_text(f"### 10:00\n{text}\n", encoding="utf-8")
        stamp = time.time() - days_ago * 86_400
        os.utime(path, (stamp, stamp))
    directory = tmp_path / "read-model" / "c"
    recall = _recall(memory, _Chunking(directory))
    cache.save(directory, model.generation(), recall.files.found())  # every stat "seen"
    assert recall.load(cache_only=True)
    sources = {record.source for record in recall.model.records().values()}
    assert str(today) in sources  # read again, and its entry taken in
    assert str(old) not in sources  # trusted: a full check compares it by its stat
