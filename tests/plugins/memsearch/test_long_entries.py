"""Long entries (a distilled session's write-up, thousands of characters): memsearch's vectors
kept bit for bit, pimem's own vectors in their texts' order, and batches that stay small."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench.corpus import generate_long_corpus
from pimem_plugins.memsearch.compat import onnx_provider_from_files
from pimem_plugins.memsearch.index import MemsearchMemoryIndex
from pimem_plugins.memsearch.offline_model import OfflineModel
from pimem_plugins.memsearch.recall.encoding import BATCH_CHARS, encoder_for, length_batches

from conftest import make_pimem

MEMSEARCH = str(Path(sys.executable).with_name("memsearch"))


def vectors(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    return {str(row["chunk_hash"]): np.asarray(row["embedding"], np.float32) for row in rows}


def test_the_collection_holds_the_vectors_the_memsearch_cli_computes_for_long_entries(
    memsearch_home: Path, offline_model: OfflineModel, repo: Path, tmp_path: Path
) -> None:
    pimem = make_pimem({"PIMEM_DB_LINGER_MS": "0"})
    scope = pimem.resolve_scope(repo)
    # The first entry is the longest (21,000 characters: many chunks of a whole batch); the
    # others mix chunks past the model's 256 word pieces with short ones in one batch. Two
    # index runs: the embedder's memory is given back after the first.
    files = generate_long_corpus(40).write(scope.memory_dir)
    first = pimem.index_memory(scope, "test", files=tuple(files[:2])).indexed_chunks
    assert first + pimem.index_memory(scope, "test").indexed_chunks > 40
    engine = MemsearchMemoryIndex.opened_by(pimem, scope).engine
    ours = vectors(engine.reads.rows(scope))

    # memsearch's own command, in a process of its own, on a database of its own.
    theirs_uri = tmp_path / "theirs.db"
    subprocess.run(
        [
            MEMSEARCH,
            "index",
            str(scope.memory_dir),
            "-c",
            scope.collection,
            "--milvus-uri",
            str(theirs_uri),
        ],
        capture_output=True,
        cwd=repo,
        env={**os.environ, "HOME": str(memsearch_home), **offline_model.environment()},
        check=True,
        timeout=600,
    )
    from memsearch.store import MilvusStore

    store = MilvusStore(str(theirs_uri), collection=scope.collection, dimension=None)
    try:
        rows = store._connected_client().query(
            scope.collection, filter="", output_fields=["chunk_hash", "embedding"], limit=16_384
        )
    finally:
        store.close()
    theirs = vectors(rows)
    assert ours.keys() == theirs.keys()
    # pimem's index runs embed memsearch's texts in batches of like length: the same vectors
    # to float32 rounding (2e-7 at most, measured), never another text or model.
    apart = {key: float(np.abs(ours[key] - theirs[key]).max()) for key in ours}
    assert max(apart.values()) < 1e-6


def test_pimems_own_vectors_come_back_in_their_texts_order(offline_model: OfflineModel) -> None:
    files = offline_model.files()
    assert files is not None
    embedder = onnx_provider_from_files(offline_model.model, *files, batch_size=0)
    corpus = generate_long_corpus(24)
    texts = [item.entry.content[: 300 * (1 + n % 6)] for n, item in enumerate(corpus.entries)]
    texts += ["which cache do we use", texts[0]]
    encoded = encoder_for(embedder, lambda: pytest.fail("the direct path needs no loop"))(texts)
    alone = np.asarray([embedder._encode([text])[0] for text in texts], np.float32)
    # Batched apart from memsearch's batches: the same vectors to float rounding.
    assert encoded.shape == alone.shape
    assert float(np.abs(encoded - alone).max()) < 1e-5


def test_length_batches_keep_every_text_once_and_long_ones_few_at_a_time() -> None:
    texts = ["x" * length for length in (5_000, 40, 1_500, 200, 30, 1_500, 12_000, 900) * 8]
    batches = length_batches(texts, 32, BATCH_CHARS)
    assert sorted(i for batch in batches for i in batch) == list(range(len(texts)))
    for batch in batches:
        longest = max(len(texts[i]) for i in batch)
        assert len(batch) <= 32
        assert len(batch) == 1 or len(batch) * longest <= BATCH_CHARS
    lengths = [len(texts[i]) for batch in batches for i in batch]
    assert lengths == sorted(lengths)
    assert len(batches[0]) == 24  # the short texts together, 200 characters at most
    assert len(batches[-1]) == 1  # 12,000 characters: alone
    assert length_batches([], 32, BATCH_CHARS) == []
