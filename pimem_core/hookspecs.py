"""The pimem hook specifications: the contract between the framework and its plugins.

Eight concerns, one section each: settings, scope resolution, distillation, storage, indexing, injection,
transcripts and maintenance. A hook that needs exactly one answer is ``firstresult``: the
first non-``None`` result wins, and the bundled default is marked ``trylast`` so any plugin that
answers replaces it. Collecting hooks gather every plugin's contribution.

Call hooks through :class:`pimem_core.api.Pimem`, never through ``pm.hook`` directly. Every
hook is documented with a complete example plugin in ``docs/plugin-hooks.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from pimem_core.settings import Settings, SettingSpec
    from pimem_core.types import (
        BackendCall,
        BranchEntry,
        ChunkAddress,
        CompactResult,
        CrossRepoResult,
        DayAddress,
        Distillation,
        DistillRequest,
        Entry,
        HostModel,
        IndexHealth,
        IndexReport,
        Injection,
        MaintenanceTask,
        PromptContext,
        Redaction,
        Scope,
        SearchHit,
        SearchQuery,
        SecretPattern,
        Section,
        SkillCandidate,
        StatusSection,
        StoreChange,
        Transcript,
        TranscriptRequest,
    )

PROJECT = "pimem"
_hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


class PimemSpecs:
    """All pimem hook specifications."""

    # -- settings ------------------------------------------------------------------------------

    @_hookspec
    def pimem_declare_settings(self) -> Iterable[SettingSpec[Any]] | None:
        """Declare the plugin's own settings, each read from one environment variable.

        The manager calls it on the loaded plugin before ``is_active`` and validates every
        value at once: a bad value raises :class:`~pimem_core.errors.SettingsError`, so pimem
        stops with the setting's message (ADR 0004). The plugin reads a value with
        ``SPEC.read(settings)``, typed by the spec; ``pimem plugins`` and ``pimem status`` show
        them. On a class plugin, make it a ``@staticmethod``: it is called before the instance
        exists.
        """

    # -- scope resolution ----------------------------------------------------------------------

    @_hookspec(firstresult=True)
    def pimem_resolve_scope(self, cwd: Path, settings: Settings) -> Scope | None:
        """Name the memory store and collection of the session working in *cwd*.

        Stops at the first non-``None`` result. The default (``scope-default``) follows
        memsearch's order: ``MEMSEARCH_DIR``, else the git root, else *cwd*; the
        ``store-command`` plugin answers first when ``PI_MEMSEARCH_STORE_CMD`` is set.

        :param cwd: the session's directory (absolute).
        :param settings: the parsed environment.
        :returns: the scope, or ``None`` to let the next plugin answer.
        """

    @_hookspec(firstresult=True)
    def pimem_resolve_project(self, project_dir: Path, settings: Settings) -> Scope | None:
        """Name the store and collection of a project found by scanning, not a session directory.

        Stops at the first non-``None`` result. Unlike :meth:`pimem_resolve_scope` there is no
        git walk and the session's ``MEMSEARCH_DIR`` is never applied: *project_dir* is named
        from itself.

        :param project_dir: a directory holding ``.memsearch/memory/`` or ``memory/``.
        :param settings: the parsed environment.
        """

    # -- distillation --------------------------------------------------------------------------

    @_hookspec(firstresult=True)
    def pimem_distill_exchange(self, request: DistillRequest) -> Distillation | None:
        """Distil one settled exchange into third-person markdown bullets.

        Stops at the first non-``None`` result: return ``None`` when this distiller does not
        apply (no model configured, or ``request.models_allowed`` is false for a model-based
        one). Raise to report a failure: the caller then writes a diagnostic marker entry, so
        the exchange is never lost. The extractive distiller answers last, always.

        :param request: the exchange (already scrubbed of secrets), the settings, the host's
            model if it lends one, and whether models may be used.
        """

    @_hookspec
    def pimem_collect_secret_patterns(self) -> Iterable[SecretPattern] | None:
        """Contribute shapes of secrets to scrub before anything is distilled or written.

        Every implementation is called; all patterns apply. Scrubbing replaces the value with
        ``[REDACTED:<name>]``.
        """

    # -- storage -------------------------------------------------------------------------------

    @_hookspec(firstresult=True)
    def pimem_append_entry(self, scope: Scope, entry: Entry) -> Path | None:
        """Append *entry* to the memory store of *scope*.

        Stops at the first non-``None`` result.

        :returns: the file the entry was written to.
        """

    @_hookspec(firstresult=True)
    def pimem_forget_entry(
        self, scope: Scope, address: DayAddress | ChunkAddress
    ) -> Redaction | None:
        """Remove exactly one entry, leaving every other byte of the store as it was.

        Stops at the first non-``None`` result. An entry is addressed by its day and time, or
        through an indexed chunk (which may also name a ``## Memory Compact`` block). Raise
        :class:`~pimem_core.errors.StoreError` when the address matches nothing or more than
        one thing; nothing may change in that case.
        """

    @_hookspec(firstresult=True)
    def pimem_read_day(self, scope: Scope, day: date) -> str | None:
        """Return the text of *scope*'s daily memory file for *day*, or ``None`` if it has none."""

    @_hookspec(firstresult=True)
    def pimem_append_compaction(self, scope: Scope, summary: str, now: datetime) -> Path | None:
        """Append a memory compaction's *summary* to *scope*'s daily memory file for *now*.

        Stops at the first non-``None`` result. The block has memsearch's shape, written at
        once: a ``# YYYY-MM-DD`` title when the file is new, then ``## Memory Compact HH:MM``
        and the summary. The facade announces it through :meth:`pimem_observe_change` with
        kind ``"compact"``.

        :returns: the file written.
        """

    @_hookspec
    def pimem_start_session(self, scope: Scope, settings: Settings) -> None:
        """Notification: a host session started on *scope*.

        Every implementation is called, on the host's start-up path: start background work
        here (warm a model, schedule maintenance) and return at once.
        """

    @_hookspec
    def pimem_observe_change(self, scope: Scope, change: StoreChange) -> None:
        """Notification: the memory store of *scope* changed (an append, a forget, a compaction).

        Every implementation is called. Indexers schedule a re-index here. Keep it quick:
        it runs on the writer's path.
        """

    # -- indexing ------------------------------------------------------------------------------

    @_hookspec(firstresult=True)
    def pimem_index_memory(
        self, scope: Scope, reason: str, files: tuple[Path, ...], call: BackendCall
    ) -> IndexReport | None:
        """Bring *scope*'s collection up to date with its memory store.

        Stops at the first non-``None`` result.

        :param reason: why the index runs (``catch-up``, ``write``, ``shutdown``...), for logs.
        :param files: the daily memory files known to have changed; empty means the whole store
            (which also drops the chunks of files that no longer exist).
        :param call: timeouts, and callbacks for queueing and progress.
        """

    @_hookspec(firstresult=True)
    def pimem_search_memory(
        self, scope: Scope, query: SearchQuery, call: BackendCall
    ) -> tuple[SearchHit, ...] | None:
        """L1 recall: the best chunks for *query*, best first. An empty tuple means no hits."""

    @_hookspec(firstresult=True)
    def pimem_search_projects(
        self,
        scope: Scope,
        query: SearchQuery,
        call: BackendCall,
        resolve_project: Callable[[Path], Scope],
        search_project: Callable[[Scope], tuple[SearchHit, ...]],
    ) -> CrossRepoResult | None:
        """Cross-repo recall: L1 over every project under the scan roots, merged best first.

        Stops at the first non-``None`` result. Plugins cannot call hooks, so the facade
        passes them in: *resolve_project* names a discovered project (``pimem_resolve_project``)
        and *search_project* runs ``pimem_search_memory`` on one scope, read-only for every
        scope but the session's; it raises :class:`~pimem_core.errors.CollectionMissing` for a
        collection never indexed. Nothing may be written.

        :param scope: the session's scope: the current project, searched in its own collection.
        :param query: the query and how many merged hits to return.
        :param call: the settings (the bundled ``cross-repo`` declares its scan roots,
            ``PI_MEMSEARCH_SCAN_ROOTS``), and ``progress`` to tell ``(done, total)`` projects.
        """

    @_hookspec(firstresult=True)
    def pimem_expand_chunk(
        self, scope: Scope, chunk_hash: str, call: BackendCall
    ) -> Section | None:
        """L2 recall: the whole section behind *chunk_hash*, with its session anchor."""

    @_hookspec(firstresult=True)
    def pimem_compact_memory(self, scope: Scope, call: BackendCall) -> CompactResult | None:
        """Condense the whole memory store into a summary; the facade appends it to today's
        daily memory file through :meth:`pimem_append_compaction`, so every writer of the store
        is the store plugin and every change is announced."""

    @_hookspec(firstresult=True)
    def pimem_read_index_health(self, scope: Scope) -> IndexHealth | None:
        """Report what is known about *scope*'s index without opening the database."""

    @_hookspec
    def pimem_collect_status(
        self, scope: Scope, settings: Settings
    ) -> Iterable[StatusSection] | None:
        """Contribute sections to ``pimem status`` (backend, index health, counters...).

        Every implementation is called. Report problems as lines rather than raising: status
        is what a user reads when something is wrong.
        """

    # -- injection -----------------------------------------------------------------------------

    @_hookspec(firstresult=True)
    def pimem_build_snapshot(
        self,
        scope: Scope,
        settings: Settings,
        now: datetime,
        read_day: Callable[[date], str | None],
    ) -> str | None:
        """Build the stable snapshot: the block appended to the agent's system prompt.

        Stops at the first non-``None`` result. The caller keeps the result byte-identical
        until the next checkpoint (session start, day rollover, compaction, redaction), so
        provider prefix caches survive.

        :param now: the local time the snapshot is built for (its date picks "today").
        :param read_day: reads one daily memory file of *scope* through the storage hooks.
        """

    @_hookspec
    def pimem_collect_injections(self, context: PromptContext) -> Iterable[Injection] | None:
        """Contribute per-prompt context (for example auto-context hits) for one prompt.

        Every implementation is called; results are placed after the cached prefix. The host
        waits on this hook, so an implementation must bound its own time.
        """

    # -- transcripts ---------------------------------------------------------------------------

    @_hookspec(firstresult=True)
    def pimem_read_branch(self, path: Path, leaf: str | None) -> tuple[BranchEntry, ...] | None:
        """The branch of the session in transcript *path* that ends at entry *leaf*, root first.

        With ``leaf=None`` (or a leaf not in the file yet), the branch ends at the last entry
        of the file: the session's current leaf. Stops at the first non-``None`` result;
        return ``None`` for a format you do not read. Capture reads the exchange from it.
        """

    @_hookspec(firstresult=True)
    def pimem_read_transcript(self, request: TranscriptRequest) -> Transcript | None:
        """L3 recall: the turns around an anchored entry, read from the agent's transcript.

        Stops at the first non-``None`` result; return ``None`` for a format you do not read.
        """

    # -- maintenance ---------------------------------------------------------------------------

    @_hookspec
    def pimem_collect_maintenance_tasks(
        self, scope: Scope, settings: Settings
    ) -> Iterable[MaintenanceTask] | None:
        """Contribute background maintenance tasks for *scope* (a project review, a profile...).

        Every implementation is called. Describe the task only (cheap: this runs after every
        capture); the runner decides whether it is due, takes the project's lock, charges the
        budget and calls ``task.run`` in the background. A task named in ``PIMEM_MAINTENANCE``
        should say ``enabled=True``; every task is off otherwise.
        """

    @_hookspec(firstresult=True)
    def pimem_provide_model(self, scope: Scope, settings: Settings) -> HostModel | None:
        """A model for pimem's background work (maintenance) when the host lends none.

        Stops at the first non-``None`` result; return ``None`` when you have no model
        configured. The bundled ``memsearch-llm`` answers from memsearch's ``[llm]`` settings.
        """

    @_hookspec(firstresult=True)
    def pimem_list_skill_candidates(self, scope: Scope) -> tuple[SkillCandidate, ...] | None:
        """Every skill candidate drafted for *scope*, by name; an empty tuple when there are none.

        Stops at the first non-``None`` result. Candidates are drafts: listing never installs.
        """

    @_hookspec(firstresult=True)
    def pimem_install_skill_candidate(
        self, scope: Scope, name: str, destination: Path
    ) -> tuple[Path, ...] | None:
        """Copy candidate *name* into the skills directory *destination* (as
        ``<destination>/<name>/SKILL.md``) because someone asked for it; return what was written.

        Stops at the first non-``None`` result. Raise :class:`~pimem_core.errors.StoreError`
        when no candidate has that name.
        """
