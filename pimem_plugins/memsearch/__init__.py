"""Everything pimem runs on memsearch: the engine (configuration, warm embedders, the database
lease), the offline embedding model's loader, the ``memsearch-index`` plugin that opens a
:class:`~pimem_core.services.MemoryIndex` on it, and ``memsearch-llm``.

The engine and its queue belong to one ``memsearch-index`` plugin instance, so to one plugin
manager (one host or session), never to the process.
"""
