"""A small chat agent that embeds pimem through its library surface (``pimem_core``'s
:class:`~pimem_core.Memory` and :class:`~pimem_core.MemorySession`): the snapshot in its
system prompt, memory tools its model calls, and capture of each exchange it settles,
distilled by its own model."""

from pimem_embed_agent.agent import MAX_STEPS, TOOLS, Agent
from pimem_embed_agent.model import ChatModel, ModelError

__all__ = ["MAX_STEPS", "TOOLS", "Agent", "ChatModel", "ModelError"]
