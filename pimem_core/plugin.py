"""The plugin API: everything a pimem plugin may import, bundled or third-party alike.

A plugin imports from this module only (``from pimem_core.plugin import hookimpl, Scope``); the
architecture test holds pimem's own plugins to it exactly as it holds a third party's, so what
is here is the contract and what is not may change in any release. It stands on the contract
floor: nothing of the runtime, the front doors or the facade is named here. By section:

- **hooks**: :data:`hookimpl`, the marker of a hook implementation;
- **services**: the protocols a factory hook returns (:class:`MemoryStore`,
  :class:`MemoryIndex`, :class:`TranscriptReader`, :class:`SkillCatalog`) and the optional
  capabilities an index may add (:class:`SimilaritySearch`, :class:`Warming`,
  :class:`PendingWork`; an index may also catch up and compact, see docs/plugin-hooks.md);
- **values**: what hooks and services take and return (:class:`Scope`, whose constructors lay
  a project out as memsearch does, :class:`Entry`, :class:`SearchHit`, :class:`StatusSection`,
  :class:`MaintenanceTask`, the :class:`UsageEvent` the usage record hears...);
- **errors**: :class:`PimemError` and the subclasses whose meaning pimem acts on;
- **settings**: :class:`Settings`, and a plugin's declared :class:`SettingSpec` (its
  constructors ``switch``, ``milliseconds``, ``fraction`` and ``text`` bring pimem's parsers);
- **commands**: the command table a plugin adds to (``pimem_collect_commands``):
  :class:`Command`, :class:`Param` and the kinds a plugin's parameters take (:class:`Flag`,
  :class:`FilePath`; text by default), :class:`Outcome`, the :class:`Door` a handler receives,
  :data:`Args`, :class:`UsageError`;
- **day files**: :class:`DayText`, the grammar and reader every mesh agent shares (its entries
  and compaction blocks, anchors, git's conflict markers), :class:`ConflictScans` for the
  conflicted files of a store, and what recall renders and keeps (:func:`render_hit_blocks`,
  :func:`never_rising`);
- **files and places**: atomic and private writes, pimem's per-user directories
  (:class:`PimemPaths`) and where a store sits in git (:class:`StorePlace`, whose methods run
  git and keep the attribute lines team memory needs).
"""

from __future__ import annotations

from pimem_core.allocator import give_back_memory
from pimem_core.atomic_files import write_atomically
from pimem_core.command_table import (
    Args,
    Command,
    Door,
    FilePath,
    Flag,
    Outcome,
    Param,
    UsageError,
)
from pimem_core.conflicts import ConflictScans
from pimem_core.day_file import DayText
from pimem_core.errors import (
    CollectionMissing,
    NoMemoryYet,
    PimemError,
    ScopeError,
    SettingsError,
    StoreError,
    TranscriptNotHere,
)
from pimem_core.gitrepo import (
    StorePlace,
)
from pimem_core.hookspecs import hookimpl
from pimem_core.paths import PimemPaths
from pimem_core.private_dir import private_runtime_dir
from pimem_core.private_files import private_dir, tighten, write_private
from pimem_core.render import render_hit_blocks
from pimem_core.scope import Scope
from pimem_core.scores import never_rising
from pimem_core.service_values import (
    CompactResult,
    FailedFile,
    IndexReport,
    Redaction,
    SkillCandidate,
    Transcript,
    TranscriptRequest,
    TranscriptTurn,
)
from pimem_core.services import (
    MemoryIndex,
    MemoryStore,
    PendingWork,
    SimilaritySearch,
    SkillCatalog,
    TranscriptReader,
    Warming,
)
from pimem_core.settings import Settings, SettingSpec
from pimem_core.types import (
    Anchor,
    BackendCall,
    BranchEntry,
    ChunkAddress,
    CrossRepoResult,
    DayAddress,
    Distillation,
    DistillRequest,
    Entry,
    Exchange,
    HostModel,
    Injection,
    LegScore,
    MaintenanceOutcome,
    MaintenanceRun,
    MaintenanceTask,
    PromptContext,
    SearchHit,
    SearchQuery,
    SecretPattern,
    Section,
    StatusSection,
    StoreChange,
)
from pimem_core.usage_events import UsageEvent

__all__ = [  # noqa: RUF022 - by section, in the order the docstring gives them
    # -- hooks
    "hookimpl",
    # -- services
    "MemoryStore",
    "MemoryIndex",
    "TranscriptReader",
    "SkillCatalog",
    "SimilaritySearch",
    "Warming",
    "PendingWork",
    # -- values
    "Scope",
    "Entry",
    "Anchor",
    "DayAddress",
    "ChunkAddress",
    "Redaction",
    "Section",
    "StoreChange",
    "SearchQuery",
    "SearchHit",
    "LegScore",
    "BackendCall",
    "CrossRepoResult",
    "IndexReport",
    "FailedFile",
    "CompactResult",
    "StatusSection",
    "UsageEvent",
    "PromptContext",
    "Injection",
    "DistillRequest",
    "Distillation",
    "Exchange",
    "SecretPattern",
    "BranchEntry",
    "Transcript",
    "TranscriptRequest",
    "TranscriptTurn",
    "MaintenanceTask",
    "MaintenanceRun",
    "MaintenanceOutcome",
    "HostModel",
    "SkillCandidate",
    # -- errors
    "PimemError",
    "ScopeError",
    "StoreError",
    "SettingsError",
    "NoMemoryYet",
    "CollectionMissing",
    "TranscriptNotHere",
    # -- settings
    "Settings",
    "SettingSpec",
    # -- commands
    "Command",
    "Param",
    "Flag",
    "FilePath",
    "Outcome",
    "Door",
    "Args",
    "UsageError",
    # -- day files
    "DayText",
    "ConflictScans",
    "render_hit_blocks",
    "never_rising",
    # -- files and places
    "write_atomically",
    "write_private",
    "private_dir",
    "tighten",
    "PimemPaths",
    "private_runtime_dir",
    "give_back_memory",
    "StorePlace",
]
