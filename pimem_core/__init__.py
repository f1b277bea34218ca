"""pimem: persistent, shared, markdown-first memory for coding agents.

``pimem_core`` defines the framework (hook specifications, plugin manager, value objects,
settings, the typed facade and the CLI); ``pimem_plugins`` implements it.
"""

from pimem_core.api import Pimem
from pimem_core.errors import PimemError
from pimem_core.hookspecs import hookimpl
from pimem_core.settings import Settings

__all__ = ["Pimem", "PimemError", "Settings", "hookimpl"]
