"""The reliability and security suite: scenarios that try to lose or corrupt memory, and the report.

``python -m reliability [--quick]`` runs every scenario and writes a table of what was tried and
what survived (``docs/reliability.md`` and ``docs/reliability.json`` for a full run). Each
scenario is a module of its own; the heavy ones start real processes on real memsearch, Milvus
Lite and the offline embedding model, always under a throw-away ``HOME``.
"""
