"""pimem's own vectors (facts, queries) through the collection's embedding model: an encoder
over memsearch's embedder that batches texts of like length, and the vectors of each chunk's
facts."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from pimem_plugins.memsearch.recall.generation import ChunkRecord
from pimem_plugins.memsearch.recall.text import facts

#: Characters a batch may hold, each text counted as long as the batch's longest: 32 facts of
#: a line each, or 3 of a chunk's whole length (1,500). Smaller batches keep ONNX Runtime's
#: working memory down (peak +209 MB against +252 at 10,000, on 140 real chunks) and are no
#: slower.
BATCH_CHARS = 5_000


def embed_facts(
    encode: Callable[[list[str]], npt.NDArray[np.float32]], records: Sequence[ChunkRecord]
) -> list[npt.NDArray[np.float32]]:
    """The vectors of each of *records*' facts, one array a record, in one call to *encode*."""
    texts = [facts(record.content) for record in records]
    # Each text once: chunks overlap by a line or two, and entries repeat (a tenth of the
    # facts of a real store).
    unique = {fact: i for i, fact in enumerate(dict.fromkeys(f for group in texts for f in group))}
    if not unique:
        return []
    vectors = encode(list(unique))
    return [vectors[[unique[fact] for fact in group]] for group in texts]


def length_batches(texts: Sequence[str], rows: int, budget: int) -> list[list[int]]:
    """The positions of *texts* in batches of like length, shortest first: at most *rows* a
    batch, and no more than *budget* characters once each is padded to the batch's longest
    (one text at least)."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    batches: list[list[int]] = []
    for i in order:
        if batches and len(batches[-1]) < rows and (len(batches[-1]) + 1) * len(texts[i]) <= budget:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def encoder_for(
    embedder: Any,
    loop: Callable[[], asyncio.AbstractEventLoop],
    before_batch: Callable[[], None] | None = None,
) -> Callable[[list[str]], npt.NDArray[np.float32]]:
    """A synchronous encoder over memsearch's embedder. memsearch's ONNX provider encodes in
    its ``_encode`` (thread-safe: ONNX Runtime sessions are), in batches of like length
    (:func:`length_batches`): a batch pads every text to its longest, and the model's working
    memory grows with the rows times the square of that length. Other providers go through
    their async ``embed`` on the engine's loop. These are pimem's own vectors (facts, queries):
    the collection's are memsearch's, embedded by memsearch in its own batches.
    *before_batch* is called before each batch (background work steps aside there)."""
    direct = getattr(embedder, "_encode", None)

    def encode(texts: list[str]) -> npt.NDArray[np.float32]:
        if direct is not None:
            rows = max(1, int(getattr(embedder, "batch_size", 0) or 32))
            found: list[Any] = [None] * len(texts)
            for batch in length_batches(texts, rows, BATCH_CHARS):
                if before_batch is not None:
                    before_batch()
                for position, vector in zip(batch, direct([texts[i] for i in batch]), strict=True):
                    found[position] = vector
            return np.asarray(found, np.float32)
        return np.asarray(loop().run_until_complete(embedder.embed(texts)), np.float32)

    return encode
