"""The warm embedders: one per embedding configuration, loaded once (about a second) and kept
for the life of the engine, their memory given back between batches; and the one event loop
they and every memsearch call run on."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from pimem_core.plugin import PimemError, give_back_memory
from pimem_plugins.memsearch.compat import onnx_sessions_without_spinning, release_onnx_arena
from pimem_plugins.memsearch.config import global_config_path
from pimem_plugins.memsearch.configuration import Configurations
from pimem_plugins.memsearch.embedding_model import EmbeddingModelMissing, load_embedder
from pimem_plugins.memsearch.precedence import Precedence


class Embedders:
    """The engine's embedders, by embedding configuration."""

    def __init__(self, configurations: Configurations) -> None:
        self._configurations = configurations
        self.loaded: dict[tuple[object, ...], Any] = {}
        # Embedders are asked for off the queue too (the read model encodes on its own
        # threads): two loading at once would keep two copies of the model.
        self._lock = threading.Lock()
        self._event_loop: asyncio.AbstractEventLoop | None = None
        #: Searches embed before the background's next batch.
        self.precedence = Precedence()

    def event_loop(self) -> asyncio.AbstractEventLoop:
        """One event loop for every call: memsearch's HTTP-based providers break on a new one."""
        if self._event_loop is None:
            self._event_loop = asyncio.new_event_loop()
        return self._event_loop

    def get(self, config: Any) -> Any:
        """The warm embedder for *config*; a model that cannot be had fails at once."""
        embedding = config.embedding
        key = (
            embedding.provider,
            embedding.model,
            embedding.batch_size,
            embedding.base_url,
            embedding.api_key,
        )
        with self._lock:
            if key not in self.loaded:
                self.loaded[key] = self._load(config)
            return self.loaded[key]

    def _load(self, config: Any) -> Any:
        embedding = config.embedding
        options = {
            "batch_size": embedding.batch_size,
            "base_url": embedding.base_url or None,
            "api_key": embedding.api_key or None,
        }
        configured = self._configurations.configured(config)
        try:
            with onnx_sessions_without_spinning():
                return load_embedder(
                    embedding.provider, embedding.model, configured=configured, options=options
                )
        except EmbeddingModelMissing:
            raise
        except Exception as error:  # the provider's own failure, reported with the fix
            said = str(error).strip().rstrip(".")
            raise PimemError(
                f"memsearch could not load the embedding provider {embedding.provider} "
                f"with the model {embedding.model or 'it defaults to'} ({said}); check "
                f"`embedding` in {global_config_path()}"
            ) from error

    def rest(self) -> None:
        """Give back what the embedders keep between batches (ONNX Runtime's memory arena):
        after an index run that embedded, and when the read model's background work is done.
        Any thread: a run in flight keeps what it uses."""
        released = [release_onnx_arena(embedder) for embedder in list(self.loaded.values())]
        if any(released):  # every arena, then what they freed (the allocator keeps it else)
            give_back_memory()
