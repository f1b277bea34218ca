"""memsearch's embedder as memsearch's own index runs get it: a day file's chunks in one call,
encoded in batches of like length.

memsearch cuts a file's chunks into batches of 32 in file order, and its ONNX provider pads
every text of a batch to the batch's longest: a batch holding one chunk of 1,500 characters
and 31 of a line costs 32 long ones, and ONNX Runtime's working memory grows with the rows
times the square of that length (about 550 MB for 32 long chunks). Sorted into batches of like
length under a character budget, the same texts give the same vectors in a fraction of the
time and memory. Only the order of the work changes: the collection gets what memsearch would
have stored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pimem_plugins.memsearch.recall.encoding import encoder_for

#: Texts memsearch hands over per call: a whole day file's new chunks, so that they can be
#: sorted by length together.
CALL_ROWS = 4_096


class LikeLengthEmbedder:
    """*embedder* (memsearch's ONNX provider) with its texts batched by length, calling
    *before_batch* before each batch."""

    def __init__(self, embedder: Any, before_batch: Callable[[], None] | None = None) -> None:
        self._embedder = embedder
        self._encode = encoder_for(embedder, _no_loop, before_batch)

    @property
    def model_name(self) -> str:
        return str(self._embedder.model_name)

    @property
    def dimension(self) -> int:
        return int(self._embedder.dimension)

    @property
    def batch_size(self) -> int:
        return CALL_ROWS

    async def embed(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = self._encode(texts).tolist()
        return vectors

    def __getattr__(self, name: str) -> Any:
        return getattr(self._embedder, name)


def like_length(embedder: Any, before_batch: Callable[[], None] | None = None) -> Any:
    """*embedder* batched by length when it is memsearch's ONNX provider, else as it is."""
    if getattr(embedder, "_encode", None) is None:
        return embedder
    return LikeLengthEmbedder(embedder, before_batch)


def _no_loop() -> Any:
    raise AssertionError("an ONNX provider encodes without the event loop")
