"""The pimem hook specifications: the contract between the framework and its plugins.

Nine concerns, one section each, in four themed classes that :class:`PimemSpecs` joins:
settings, scope resolution and storage (:class:`ScopeSpecs`); transcripts and distillation
(:class:`CaptureSpecs`); indexing and injection (:class:`RecallSpecs`); maintenance and commands
(:class:`UpkeepSpecs`). A hook that needs exactly one answer is ``firstresult``: the first
non-``None`` result wins, and the bundled default is marked ``trylast`` so any plugin that
answers replaces it. Collecting hooks gather every plugin's contribution.

A backend (store, index, transcript reader, skill catalog) is one service, opened by one
factory hook (``pimem_open_*``) and typed by its protocol in :mod:`pimem_core.services`.

Call hooks through :class:`pimem_core.api.Pimem`, never through ``pm.hook`` directly. Every
hook is documented with a complete example plugin in ``docs/plugin-hooks.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from pimem_core.command_table import Command
    from pimem_core.services import MemoryIndex, MemoryStore, SkillCatalog, TranscriptReader
    from pimem_core.settings import Settings, SettingSpec
    from pimem_core.types import (
        BackendCall,
        BranchEntry,
        CrossRepoResult,
        DayAddress,
        Distillation,
        DistillRequest,
        HostModel,
        Injection,
        MaintenanceTask,
        PromptContext,
        Scope,
        SearchHit,
        SearchQuery,
        SecretPattern,
        StatusSection,
        StoreChange,
    )
    from pimem_core.usage_events import UsageEvent

PROJECT = "pimem"
_hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


class ScopeSpecs:
    """Where memory lives: the plugins' settings, the scope of a session or project, and the
    store that holds its day files."""

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

    # -- storage -------------------------------------------------------------------------------

    @_hookspec(firstresult=True)
    def pimem_open_store(self, scope: Scope, settings: Settings) -> MemoryStore | None:
        """Open the memory store of *scope*: a :class:`~pimem_core.services.MemoryStore`.

        Stops at the first non-``None`` result; the bundled ``markdown-store`` answers last.
        The facade opens a store once per scope and announces every change it makes (append,
        forget, compaction) through :meth:`pimem_observe_change`, so a store never does.

        Example::

            @hookimpl
            def pimem_open_store(scope, settings):
                return SqliteMirroredStore(scope) if scope.collection.endswith("_lab") else None
        """

    @_hookspec
    def pimem_start_session(
        self, scope: Scope, settings: Settings, index: MemoryIndex | None
    ) -> None:
        """Notification: a host session started on *scope*.

        Every implementation is called, on the host's start-up path: start background work
        here (warm a model, schedule maintenance) and return at once.

        :param index: the session scope's opened index, for plugins that search it; ``None``
            when no plugin opens one.
        """

    @_hookspec
    def pimem_observe_change(
        self, scope: Scope, change: StoreChange, settings: Settings
    ) -> str | None:
        """Notification: the memory store of *scope* changed (an append, a forget, a compaction).

        Every implementation is called. Indexers schedule a re-index here. Keep it quick:
        it runs on the writer's path.

        :return: ``None``, or one line for whoever made the change when the plugin did
            something beside it they should know of (``git-merge``: a line it added to the
            repository's ``.gitattributes``); ``memory_write`` and ``pimem write`` show it.
        """

    @_hookspec(firstresult=True)
    def pimem_merge_day_file(self, base: str, ours: str, theirs: str) -> str | None:
        """Merge two sides' versions of one daily memory file: git's merge driver for the
        store's day files (``pimem git merge-day-files``, registered by ``pimem git
        merge-driver``).

        Stops at the first non-``None`` result; the bundled ``markdown-store`` answers last, block
        by block (ADR 0016). Raise :class:`~pimem_core.errors.StoreError` when the versions
        cannot be merged: git then writes conflict markers instead.

        :param base: the common ancestor's text (``""`` when both sides created the file).
        :param ours: this side's text; the answer replaces it.
        :param theirs: the other side's text.
        """


class CaptureSpecs:
    """How an exchange becomes an entry: the transcript it is read from, the gates and
    secret patterns it passes, and the distiller."""

    # -- transcripts ---------------------------------------------------------------------------

    @_hookspec(firstresult=True)
    def pimem_open_transcript(self, path: Path, settings: Settings) -> TranscriptReader | None:
        """Open the agent transcript *path*: a :class:`~pimem_core.services.TranscriptReader`.

        Stops at the first non-``None`` result: return ``None`` for a format you do not read
        (the bundled ``pi-transcript`` reads pi's session files). Capture reads each settled
        exchange through it; ``memory_transcript`` (L3) reads the turns around an anchor.

        Example::

            @hookimpl
            def pimem_open_transcript(path, settings):
                return CodexTranscript(path) if path.suffix == ".jsonl" else None
        """

    # -- distillation --------------------------------------------------------------------------

    @_hookspec(firstresult=True)
    def pimem_distill_exchange(self, request: DistillRequest) -> Distillation | None:
        """Distil one settled exchange into third-person markdown bullets.

        Stops at the first non-``None`` result: return ``None`` when this distiller does not
        apply (no model configured, or ``request.models_allowed`` is false for a model-based
        one). Raise to report a failure: the caller then writes a diagnostic marker entry, so
        the exchange is never lost. Answer ``Distillation(nothing_to_keep=True)`` when the
        exchange holds nothing worth recalling: no entry is written, and the exchange is
        counted as skipped (ADR 0021). The extractive distiller answers last, always.

        :param request: the exchange (already scrubbed of secrets), the settings, the host's
            model if it lends one, and whether models may be used.
        """

    @_hookspec
    def pimem_collect_secret_patterns(self) -> Iterable[SecretPattern] | None:
        """Contribute shapes of secrets to scrub before anything is distilled or written.

        Every implementation is called; all patterns apply. Scrubbing replaces the value with
        ``[REDACTED:<name>]``.
        """

    @_hookspec
    def pimem_gate_exchange(
        self, window: tuple[BranchEntry, ...], settings: Settings
    ) -> str | None:
        """Say why a settled exchange is not captured, or return ``None`` to let it through.

        Every gate is asked about every exchange that passed the hard gates (someone asked,
        the agent answered in words, the run was not aborted). An exchange any gate stops is
        not distilled, and the first reason is counted in status (``skipped: 2 about
        memory``). Gates are deterministic rules about what was said and done, never a
        model's judgement. The bundled ``capture-gates`` stop exchanges about memory itself,
        an explicit ``memory_write`` and a request to forget (ADR 0014), a question the agent
        answered without any tool call and small talk (ADR 0021).

        Example, a gate that skips exchanges whose only work was running the tests::

            @hookimpl
            def pimem_gate_exchange(window, settings):
                calls = [call for entry in window for call in entry.tool_calls]
                if calls and all(call.startswith("bash(command=pytest") for call in calls):
                    return "only tests"
                return None

        :param window: the exchange's entries, oldest first: the user's prompt, the
            messages the host injected with it (``kind="custom_message"``: the pi adapter's
            ``/recall`` instruction, auto-context), the assistant's messages (their text and
            tool calls) and the tool results.
        :returns: a reason of a few words, counted as given, or ``None``.
        """


class RecallSpecs:
    """How memory comes back: the index and search, the ranking, the snapshot and per-prompt
    injections, and status."""

    # -- indexing ------------------------------------------------------------------------------

    @_hookspec(firstresult=True)
    def pimem_open_index(
        self, scope: Scope, settings: Settings, store: MemoryStore
    ) -> MemoryIndex | None:
        """Open the search index of *scope*'s store: a :class:`~pimem_core.services.MemoryIndex`.

        Stops at the first non-``None`` result; the bundled ``memsearch-index`` answers last.
        Everything that searches (the memory tools, auto-context, compaction, status) goes
        through the index opened here, so replacing it replaces search everywhere.

        :param store: the scope's opened store, for an index that reads the markdown itself.

        Example::

            @hookimpl
            def pimem_open_index(scope, settings, store):
                return GrepIndex(scope, store)
        """

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

        Stops at the first non-``None`` result. *resolve_project* names a discovered project
        (``pimem_resolve_project``) and *search_project* searches one scope's opened index,
        read-only for every scope but the session's; it raises
        :class:`~pimem_core.errors.CollectionMissing` for a collection never indexed. Nothing
        may be written.

        :param scope: the session's scope: the current project, searched in its own collection.
        :param query: the query and how many merged hits to return.
        :param call: the settings (the bundled ``cross-repo`` declares its scan roots,
            ``PI_MEMSEARCH_SCAN_ROOTS``), and ``progress`` to tell ``(done, total)`` projects.
        """

    @_hookspec(firstresult=True)
    def pimem_rerank_hits(
        self, query: SearchQuery, hits: tuple[SearchHit, ...], settings: Settings
    ) -> tuple[SearchHit, ...] | None:
        """Rerank L1 candidates: a second stage after the index's own ranking.

        Stops at the first non-``None`` result; ``None`` means no opinion, and the index's
        order stands. When any plugin implements this hook, the facade asks the index for
        ``max(query.top_k, RERANK_DEPTH)`` candidates (``pimem_core.api.RERANK_DEPTH``, 30)
        instead of ``query.top_k``, passes them here best first, and keeps the first
        ``query.top_k`` of the answer. Answer with hits from *hits* only, best first; re-score
        them with ``attrs.evolve`` (``score_kind="reranker"``) and append a
        :class:`~pimem_core.types.LegScore` of your own to ``legs``, so ``pimem search
        --explain`` shows what you did. No bundled plugin implements it; auto-context's
        similarity search is not reranked (it has a deadline of its own).

        :param query: what was asked; ``query.top_k`` hits are kept.
        :param hits: the index's candidates, best first (fewer when the store has fewer).
        :param settings: the parsed environment.

        Example, wrapping a cross-encoder::

            @hookimpl
            def pimem_rerank_hits(query, hits, settings):
                logits = cross_encoder.predict([(query.text, hit.content) for hit in hits])
                ranked = sorted(zip(hits, logits), key=lambda pair: -pair[1])
                return tuple(
                    attrs.evolve(hit, legs=(*hit.legs, LegScore(name="ce", rank=n, score=logit)))
                    for n, (hit, logit) in enumerate(ranked, 1)
                )
        """

    @_hookspec
    def pimem_collect_status(
        self, scope: Scope, settings: Settings, index: MemoryIndex | None
    ) -> Iterable[StatusSection] | None:
        """Contribute sections to ``pimem status`` (backend, index health, counters...).

        Every implementation is called. Report problems as lines rather than raising: status
        is what a user reads when something is wrong.

        :param index: *scope*'s opened index, to report what it can and cannot do; ``None``
            when none could be opened (the backend's section says why).
        """

    @_hookspec
    def pimem_observe_usage(self, scope: Scope, event: UsageEvent) -> None:
        """Notification: a host session's memory did something (*event*): a snapshot shown, a
        search or expand the agent made, an injection, a capture, a write, or an exchange
        settled with what memory gave it (``event.kind``; docs/usage.md).

        Every implementation is called, off the agent's path (the session's usage worker), one
        event at a time in the order they happened. The bundled ``usage`` plugin appends them
        to the usage record; a failure is logged and costs the session nothing.
        """

    @_hookspec
    def pimem_collect_unrecalled_entries(
        self, scope: Scope, settings: Settings, store: MemoryStore, days: int
    ) -> Iterable[DayAddress] | None:
        """The entries of *scope*'s store that memory did not give the agent (no search, expand,
        injection or use of them) in the last *days* days, though they were in the store all
        that time: what ``pimem compact --never-recalled DAYS`` condenses. ``None``: no record
        here; raise :class:`~pimem_core.errors.PimemError` when it does not reach back so far.
        The bundled ``usage`` plugin answers from its usage record::

            @hookimpl
            def pimem_collect_unrecalled_entries(scope, settings, store, days):
                return [DayAddress(day=date(2026, 11, 2), time="09:12")]
        """

    @_hookspec
    def pimem_collect_used_entries(
        self, scope: Scope, settings: Settings, days: int
    ) -> Iterable[DayAddress] | None:
        """The entries the agent used (``used`` in the usage record) in the last *days* days,
        which the snapshot may keep first (``PIMEM_SNAPSHOT_PREFER_USED``); ``None``: no record
        here. ``return [DayAddress(day=date(2026, 12, 5), time="16:40")]``
        """

    # -- injection -----------------------------------------------------------------------------

    @_hookspec(firstresult=True)
    def pimem_build_snapshot(
        self,
        scope: Scope,
        settings: Settings,
        now: datetime,
        store: MemoryStore,
        used_entries: Callable[[int], frozenset[DayAddress]],
    ) -> str | None:
        """Build the stable snapshot: the block appended to the agent's system prompt.

        Stops at the first non-``None`` result. The caller keeps the result byte-identical
        until the next checkpoint (session start, day rollover, compaction, redaction), so
        provider prefix caches survive.

        :param now: the local time the snapshot is built for (its date picks "today").
        :param store: *scope*'s opened store, to read its daily memory files.
        :param used_entries: the entries the agent used in the last N days
            (``pimem_collect_used_entries``), asked only when called.
        """

    @_hookspec
    def pimem_collect_injections(
        self, context: PromptContext, index: MemoryIndex | None
    ) -> Iterable[Injection] | None:
        """Contribute per-prompt context (for example auto-context hits) for one prompt.

        Every implementation is called; results are placed after the cached prefix. The host
        waits on this hook, so an implementation must bound its own time.

        :param index: the prompt scope's opened index; ``None`` when no plugin opens one.
        """


class UpkeepSpecs:
    """Work over the whole store and the command line: maintenance tasks, the model they use,
    skill candidates, plugin commands and the files a plugin loads."""

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
    def pimem_open_skills(
        self, scope: Scope, settings: Settings, store: MemoryStore
    ) -> SkillCatalog | None:
        """Open the skill candidates drafted for *scope*: a
        :class:`~pimem_core.services.SkillCatalog`.

        Stops at the first non-``None`` result. Candidates are drafts: they are installed only
        when someone asks (``pimem skills install``).
        """

    # -- commands ------------------------------------------------------------------------------

    @_hookspec
    def pimem_collect_commands(self) -> Iterable[Command] | None:
        """Add commands to pimem's one command table: ``pimem <path>`` on the command line
        (shown by ``pimem --help`` and ``pimem plugins``), and the host-protocol method named
        by the command's ``method`` under ``pimem serve`` and the memory service.

        Every implementation is called. A command whose words or method are already taken
        (by pimem or another plugin) is left out and named in ``pimem plugins``. On the
        command line a plugin's command runs in process: the thin client that hands the core's
        commands to the memory service knows only those.

        Example::

            def _hello(door, args):
                name = args["name"]
                return Outcome(text=f"hello, {name}", data={"greeted": name})

            @hookimpl
            def pimem_collect_commands():
                return [
                    Command(
                        path=("hello",),
                        help="greet someone",
                        handler=_hello,
                        params=(Param(name="name", required=True),),
                        method="hello.greet",
                        project=False,
                    )
                ]
        """

    @_hookspec
    def pimem_collect_loaded_files(self, settings: Settings) -> Iterable[Path] | None:
        """Files outside Python packages that the plugin loads (a model's directory, say).

        Every implementation is called. A long-lived process (the memory service) watches
        them with pimem's own code and steps down for a successor when one changes, so it
        never answers with what a fresh process would no longer load.
        """


class PimemSpecs(ScopeSpecs, CaptureSpecs, RecallSpecs, UpkeepSpecs):
    """All pimem hook specifications: the four themed classes' hooks in one, as the manager
    adds them (``add_hookspecs`` finds inherited hooks too)."""


def _is_single_answer(value: object) -> bool:
    opts = getattr(value, f"{PROJECT}_spec", None)
    return isinstance(opts, dict) and bool(opts.get("firstresult"))


#: Every hook's name.
HOOK_NAMES = tuple(sorted(name for name in dir(PimemSpecs) if name.startswith("pimem_")))
#: The hooks that decide where memory goes: a plugin implementing one that failed makes
#: writes and forgets refuse, rather than land in another store.
ROUTING_HOOKS = ("pimem_open_store", "pimem_resolve_project", "pimem_resolve_scope")
#: The single-answer hooks (``firstresult``): the ones a plugin can be chosen by name to answer.
SINGLE_ANSWER_HOOKS = tuple(
    name for name in HOOK_NAMES if _is_single_answer(getattr(PimemSpecs, name))
)
