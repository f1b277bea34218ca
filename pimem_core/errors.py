"""Errors pimem raises on purpose.

Every :class:`PimemError` message is written for the person who has to act on it: it says what
was wrong and what to do next. The CLI prints it as one line and exits 1; adapters relay it to
the agent. Anything that is not a ``PimemError`` is a bug and keeps its traceback.
"""

from __future__ import annotations


class PimemError(Exception):
    """A failure the user can act on."""


class SettingsError(PimemError):
    """An environment variable holds a value pimem cannot use."""


class ScopeError(PimemError):
    """The memory store for a directory could not be resolved (for example a failing store command)."""


class StoreError(PimemError):
    """A memory entry could not be written, found or forgotten."""


class CollectionMissing(PimemError):
    """A store's collection was never indexed on this machine (raised by search and expand).

    Cross-repo recall lists such a project as skipped instead of failing the whole search.
    """


class NoMemoryYet(CollectionMissing):
    """A store has no memory files yet: nothing was written or captured there.

    Not a failure for a search, which answers no hits (the CLI and the host protocol say that
    the store is empty); expand fails with it, as there is no chunk to expand. Cross-repo
    recall counts such a project as searched, with no hits.
    """


class TranscriptNotHere(PimemError):
    """The transcript an anchor names is not on this machine: the session was recorded on
    another one (its entries came with the store, through git), or the file moved since.

    Not a failure for L3 recall: ``pimem transcript`` and ``memory.transcript`` answer that the
    entry is all that was kept of that session. Capture, which needs the file, fails with it.
    """


class QueryError(PimemError):
    """A search query pimem cannot run: empty, or only whitespace."""


class PluginError(PimemError):
    """A plugin could not be loaded or no plugin answered a hook that needs an answer."""


class PluginLoadError(PluginError):
    """A plugin failed to import or does not fit the hook specifications."""


class NoProviderError(PluginError):
    """No registered plugin answered a single-answer hook."""
