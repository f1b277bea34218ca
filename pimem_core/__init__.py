"""pimem: persistent, shared, markdown-first memory for coding agents.

``pimem_core`` defines the framework (hook specifications, plugin manager, value objects,
settings, the typed facade and the CLI); ``pimem_plugins`` implements it.

The library surface for an agent that embeds pimem (docs/library.md): :class:`Memory` (open the
memory of a directory: search, expand, write, forget, status) and :class:`MemorySession` (one
conversation: its snapshot, the exchanges it settles, its end), with their answers
:class:`Found`, :class:`Expanded`, :class:`Written`, :class:`MemoryStatus` and the
:class:`Message` an exchange is settled in.
"""

from __future__ import annotations

# Not imported from typing: an agent host waits for `pimem serve`'s ready line, written after
# this package is imported and before anything else of pimem (typing costs milliseconds).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pimem_core.api import Pimem
    from pimem_core.doors.library import (
        Expanded,
        Found,
        Memory,
        MemorySession,
        MemoryStatus,
        Message,
        Written,
    )
    from pimem_core.doors.service_client import ask_memory_service
    from pimem_core.errors import PimemError
    from pimem_core.hookspecs import hookimpl
    from pimem_core.settings import Settings, SettingSpec

__all__ = [
    "Expanded",
    "Found",
    "Memory",
    "MemorySession",
    "MemoryStatus",
    "Message",
    "Pimem",
    "PimemError",
    "SettingSpec",
    "Settings",
    "Written",
    "ask_memory_service",
    "hookimpl",
]

_HOMES = {
    "Pimem": "pimem_core.api",
    "PimemError": "pimem_core.errors",
    "Settings": "pimem_core.settings",
    "SettingSpec": "pimem_core.settings",
    "hookimpl": "pimem_core.hookspecs",
    "ask_memory_service": "pimem_core.doors.service_client",
    **dict.fromkeys(
        ("Memory", "MemorySession", "Message", "Found", "Expanded", "Written", "MemoryStatus"),
        "pimem_core.doors.library",
    ),
}


def __getattr__(name: str) -> Any:
    """The package's names, imported on first use: importing a light module of the package
    (``pimem_core.doors.launcher``) must not import all of pimem."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'pimem_core' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
