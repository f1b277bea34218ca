"""The typed facade: the one place that calls ``pm.hook``.

pluggy's hook calls are untyped (``Any``); each method here gives one hook a typed signature and
turns "no plugin answered" into a :class:`~pimem_core.errors.NoProviderError` that says which
hook went unanswered and how to fix it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import date, datetime
from pathlib import Path
from typing import Any, TypeVar

import attrs

from pimem_core.errors import NoProviderError, PimemError, PluginError, StoreError
from pimem_core.manager import (
    PimemPluginManager,
    SettingValue,
    build_plugin_manager,
    culprit,
    shown_setting,
)
from pimem_core.scores import never_rising
from pimem_core.scrub import Scrubber
from pimem_core.services import (
    CatchingUp,
    Compacting,
    MemoryIndex,
    MemoryStore,
    SkillCatalog,
    TranscriptReader,
)
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
    IndexReport,
    Injection,
    MaintenanceTask,
    PromptContext,
    Redaction,
    Scope,
    SearchHit,
    SearchQuery,
    Section,
    SkillCandidate,
    StatusSection,
    StoreChange,
    Transcript,
    TranscriptRequest,
)

T = TypeVar("T")
log = logging.getLogger(__name__)

#: How many candidates the index is asked for when a plugin reranks them (``top_k`` when that
#: is more): deep enough for a second stage to lift a hit the index placed low, shallow enough
#: for a cross-encoder to score them all within one search.
RERANK_DEPTH = 30


@attrs.define
class Pimem:
    """pimem for one host or session: its settings and its own plugin manager."""

    settings: Settings
    pm: PimemPluginManager
    # Services opened for this host or session, one per scope (never shared between managers).
    _stores: dict[Scope, MemoryStore] = attrs.field(factory=dict, init=False, repr=False)
    _indexes: dict[Scope, MemoryIndex] = attrs.field(factory=dict, init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        # Every plugin has loaded before a facade is built (here, in the test kit, in a host):
        # the one point, still at the edge, where a plugin chosen by name can be checked.
        self.pm.check_choices()

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        entry_points: Iterable[importlib.metadata.EntryPoint] | None = None,
    ) -> Pimem:
        """Parse the environment and load the installed plugins (or *entry_points*)."""
        pm = build_plugin_manager(Settings.from_env(environ), entry_points=entry_points)
        # The manager's settings carry the plugins' declared settings, validated as it loaded them.
        return cls(pm.settings, pm)

    def for_session(self, settings: Settings) -> Pimem:
        """This pimem with *settings* for one session or command in a process that serves
        many: the same plugins and the services already opened, which settings that shape one
        session (:attr:`SettingSpec.per_session`) do not change."""
        view = Pimem(settings, self.pm)
        view._stores = self._stores
        view._indexes = self._indexes
        return view

    def _require(self, hook: str, answer: object, kind: type[T]) -> T:
        if answer is None:
            blocked = sorted(self.settings.disabled_plugins)
            hint = f" (blocked by PIMEM_DISABLE_PLUGINS: {', '.join(blocked)})" if blocked else ""
            choice = self.settings.choice(hook)
            if choice is not None:
                hint += (
                    f" ({choice.setting} chose {choice.plugin!r}, which passed or is not active)"
                )
            raise NoProviderError(
                f"no plugin answered {hook}{hint}; run `pimem plugins` to see which plugins "
                "are loaded and which are blocked or failed"
            )
        if not isinstance(answer, kind):
            raise PluginError(
                f"{hook} answered with a {type(answer).__name__}, not a {kind.__name__}; "
                "the plugin that answers it (see `pimem plugins`) is broken"
            )
        return answer

    def _open(self, hook: str, answer: object, protocol: Any) -> Any:
        """*answer* if it has every method of *protocol*, a service's whole interface."""
        self._require(hook, answer, object)
        methods = sorted(name for name in vars(protocol) if not name.startswith("_"))
        missing = [name for name in methods if not callable(getattr(answer, name, None))]
        if missing:
            raise PluginError(
                f"{hook} answered with a {type(answer).__name__}, which is not a whole "
                f"{protocol.__name__}: it lacks {', '.join(missing)}; the plugin that answers "
                "it (see `pimem plugins`) is broken"
            )
        return answer

    # -- scope resolution ----------------------------------------------------------------------

    def resolve_scope(self, cwd: Path) -> Scope:
        answer = self.pm.caller("pimem_resolve_scope")(cwd=cwd.absolute(), settings=self.settings)
        scope = self._require("pimem_resolve_scope", answer, Scope)
        log.info(
            "scope of %s: memory directory %s, collection %s",
            cwd,
            scope.memory_dir,
            scope.collection,
        )
        return scope

    def resolve_project(self, project_dir: Path) -> Scope:
        scope = self.pm.caller("pimem_resolve_project")(
            project_dir=project_dir.absolute(), settings=self.settings
        )
        return self._require("pimem_resolve_project", scope, Scope)

    # -- distillation --------------------------------------------------------------------------

    def distill_exchange(self, request: DistillRequest) -> Distillation:
        answer = self.pm.caller("pimem_distill_exchange")(request=request)
        return self._require("pimem_distill_exchange", answer, Distillation)

    def gate_exchange(self, window: Iterable[BranchEntry]) -> str | None:
        """The first reason a capture gate gives for not capturing *window*, or ``None``."""
        reasons = self.pm.caller("pimem_gate_exchange")(
            window=tuple(window), settings=self.settings
        )
        return next((str(reason) for reason in reasons if reason), None)

    @functools.cached_property
    def scrubber(self) -> Scrubber:
        """Every plugin's secret patterns (none when ``PIMEM_SCRUB_SECRETS=off``)."""
        if not self.settings.scrub_secrets:
            return Scrubber(())
        contributions = self.pm.caller("pimem_collect_secret_patterns")()
        return Scrubber(tuple(pattern for part in contributions if part for pattern in part))

    # -- services ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _service(self, where: str) -> Iterator[None]:
        """A call into an opened service: a plugin's bug in it names the plugin."""
        try:
            yield
        except Exception as error:
            self.pm.name_the_plugin(error, where)
            raise

    def store(self, scope: Scope) -> MemoryStore:
        """*scope*'s memory store, opened once (``pimem_open_store``)."""
        if scope not in self._stores:
            answer = self.pm.caller("pimem_open_store")(scope=scope, settings=self.settings)
            self._stores[scope] = self._open("pimem_open_store", answer, MemoryStore)
        return self._stores[scope]

    def index(self, scope: Scope) -> MemoryIndex:
        """*scope*'s search index, opened once (``pimem_open_index``)."""
        if scope not in self._indexes:
            answer = self.pm.caller("pimem_open_index")(
                scope=scope, settings=self.settings, store=self.store(scope)
            )
            self._indexes[scope] = self._open("pimem_open_index", answer, MemoryIndex)
        return self._indexes[scope]

    def _index_if_any(self, scope: Scope) -> MemoryIndex | None:
        """*scope*'s index, or ``None`` when no plugin opens one (memory without search)."""
        try:
            return self.index(scope)
        except NoProviderError:
            return None

    def transcript(self, path: Path) -> TranscriptReader:
        """A reader of the agent transcript *path* (``pimem_open_transcript``)."""
        answer = self.pm.caller("pimem_open_transcript")(path=path, settings=self.settings)
        reader: TranscriptReader = self._open("pimem_open_transcript", answer, TranscriptReader)
        return reader

    def skills(self, scope: Scope) -> SkillCatalog:
        """*scope*'s skill candidates (``pimem_open_skills``)."""
        answer = self.pm.caller("pimem_open_skills")(
            scope=scope, settings=self.settings, store=self.store(scope)
        )
        catalog: SkillCatalog = self._open("pimem_open_skills", answer, SkillCatalog)
        return catalog

    # -- storage -------------------------------------------------------------------------------

    def check_writable(self) -> None:
        """Refuse to change memory while a plugin that decides where memory goes failed to
        load: its writes would land in another store (the one the defaults choose)."""
        for record in self.pm.failed:
            if record.routes_memory:
                raise PluginError(record.failure)

    def append_entry(
        self, scope: Scope, entry: Entry, *, on_notice: Callable[[str], None] | None = None
    ) -> Path:
        """Scrub *entry* of secrets, write it and announce the change (indexers re-index).
        *on_notice* hears what an observer did beside the write that its writer should know
        (a line added to ``.gitattributes``)."""
        self.check_writable()
        entry = attrs.evolve(entry, content=self.scrubber.scrub(entry.content))
        with self._service("MemoryStore.append_entry"):
            file = self.store(scope).append_entry(entry)
        self.observe_change(scope, StoreChange(kind="append", file=file), on_notice=on_notice)
        return file

    def forget_entry(self, scope: Scope, address: DayAddress | ChunkAddress) -> Redaction:
        """Remove exactly one entry and announce the change."""
        self.check_writable()
        with self._service("MemoryStore.forget_entry"):
            redaction = self.store(scope).forget_entry(address)
        self.observe_change(scope, StoreChange(kind="forget", file=redaction.file))
        return redaction

    def read_day(self, scope: Scope, day: date) -> str | None:
        """The daily memory file's text, or ``None`` when there is none."""
        with self._service("MemoryStore.read_day"):
            return self.store(scope).read_day(day)

    def merge_day_file(self, base: str, ours: str, theirs: str) -> str:
        """Two sides' versions of one daily memory file merged (git's merge driver)."""
        answer = self.pm.caller("pimem_merge_day_file")(base=base, ours=ours, theirs=theirs)
        return self._require("pimem_merge_day_file", answer, str)

    def start_session(self, scope: Scope) -> None:
        """Tell plugins a host session started; like a change, a failure is logged, never
        raised: the session goes on without what that plugin would have started."""
        try:
            self.pm.caller("pimem_start_session")(
                scope=scope, settings=self.settings, index=self._index_if_any(scope)
            )
        except Exception:
            log.exception("a plugin failed to start with the session on %s", scope.scope_dir)

    def observe_change(
        self,
        scope: Scope,
        change: StoreChange,
        *,
        on_notice: Callable[[str], None] | None = None,
    ) -> None:
        """Announce *change*. The change is already on disk, so an observer's failure is logged
        rather than raised: it must not make a successful write look failed. The lines
        observers answer go to *on_notice* (else to the log)."""
        try:
            said = self.pm.caller("pimem_observe_change")(
                scope=scope, change=change, settings=self.settings
            )
        except Exception:
            log.exception("a plugin failed while observing a %s of %s", change.kind, change.file)
            return
        for line in said or ():
            if isinstance(line, str) and line:
                (on_notice or log.info)(line)

    # -- indexing ------------------------------------------------------------------------------

    def _call(
        self,
        on_wait: Callable[[str], None] | None = None,
        progress: Callable[[int, int], None] | None = None,
        *,
        read_only: bool = False,
        on_notice: Callable[[str], None] | None = None,
    ) -> BackendCall:
        return BackendCall(
            settings=self.settings,
            on_wait=on_wait,
            progress=progress,
            read_only=read_only,
            scrub=self.scrubber.scrub,
            on_notice=on_notice,
        )

    def index_memory(
        self,
        scope: Scope,
        reason: str,
        *,
        files: tuple[Path, ...] = (),
        on_wait: Callable[[str], None] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> IndexReport:
        """Index *scope*'s store: only *files* when given (after a write), else all of it."""
        with self._service("MemoryIndex.index"):
            return self.index(scope).index(reason, files, self._call(on_wait, progress))

    def catch_up_memory(self, scope: Scope, reason: str) -> IndexReport:
        """Bring *scope*'s index up to date with its store: only what changed since the index
        last took it in, when the index can tell (:class:`CatchingUp`), else all of it."""
        index = self.index(scope)
        call = self._call()
        with self._service("MemoryIndex.index"):
            if isinstance(index, CatchingUp):
                return index.catch_up(call)
            return index.index(reason, (), call)

    def search_memory(
        self,
        scope: Scope,
        query: SearchQuery,
        *,
        on_wait: Callable[[str], None] | None = None,
        read_only: bool = False,
        on_notice: Callable[[str], None] | None = None,
    ) -> tuple[SearchHit, ...]:
        """L1 recall in *scope*'s collection; *read_only* for another project's store.

        When a plugin reranks (``pimem_rerank_hits``), the index is asked for
        ``max(top_k, RERANK_DEPTH)`` candidates and the reranker's best ``top_k`` are kept;
        without one, the index is asked for ``top_k`` and its answer stands. Either way a
        relevance never rises down the answer (:func:`~pimem_core.scores.never_rising`).
        *on_notice* hears what the index did first that the person should know (indexing
        changed day files)."""
        reranking = bool(self.pm.implementing_plugins("pimem_rerank_hits"))
        asked = attrs.evolve(query, top_k=max(query.top_k, RERANK_DEPTH)) if reranking else query
        call = self._call(on_wait, read_only=read_only, on_notice=on_notice)
        with self._service("MemoryIndex.search"):
            hits = self.index(scope).search(asked, call)
        # Whoever ordered them, a relevance below never reads higher than one above.
        return never_rising(self.rerank_hits(query, hits) if reranking else hits)

    def rerank_hits(self, query: SearchQuery, hits: tuple[SearchHit, ...]) -> tuple[SearchHit, ...]:
        """The reranker's best ``query.top_k`` of *hits*, or the first of *hits* when no plugin
        has an opinion. A reranker's bug carries a note naming it (the manager's monitoring)."""
        if not hits:
            return hits  # nothing to reorder: a cross-encoder need not even load
        answer = self.pm.caller("pimem_rerank_hits")(query=query, hits=hits, settings=self.settings)
        if answer is None:
            return hits[: query.top_k]
        given = {hit.chunk_hash for hit in hits}
        wrong = None
        if not isinstance(answer, tuple | list) or not all(
            isinstance(hit, SearchHit) for hit in answer
        ):
            wrong = f"a {type(answer).__name__}, not a tuple of SearchHit"
        elif stray := [hit.chunk_hash for hit in answer if hit.chunk_hash not in given]:
            wrong = f"chunk {stray[0]}, which was not among the hits it was given"
        if wrong is not None:
            names = [repr(name) for name in self.pm.implementing_plugins("pimem_rerank_hits")]
            who = f"The reranker {names[0]}" if len(names) == 1 else "One of " + ", ".join(names)
            raise PluginError(
                f"pimem_rerank_hits answered with {wrong}: a reranker reorders the hits it is "
                f"given. {who} is broken; block it with PIMEM_DISABLE_PLUGINS"
            )
        return tuple(answer[: query.top_k])

    def search_everywhere(
        self,
        scope: Scope,
        query: SearchQuery,
        *,
        on_wait: Callable[[str], None] | None = None,
        progress: Callable[[int, int], None] | None = None,
        on_notice: Callable[[str], None] | None = None,
    ) -> CrossRepoResult:
        """Cross-repo recall: *query* over the session's project (*scope*) and every project
        under the scan roots. Only the session's own leg may bootstrap or index; the others
        write nothing."""
        waited = False

        def wait_once(holder: str) -> None:
            # One note for the whole fan-out, not one per project.
            nonlocal waited
            if on_wait is not None and not waited:
                waited = True
                on_wait(holder)

        def search_project(target: Scope) -> tuple[SearchHit, ...]:
            own = target == scope
            return self.search_memory(
                target,
                query,
                on_wait=wait_once,
                read_only=not own,
                on_notice=on_notice if own else None,
            )

        answer = self.pm.caller("pimem_search_projects")(
            scope=scope,
            query=query,
            call=self._call(on_wait, progress),
            resolve_project=self.resolve_project,
            search_project=search_project,
        )
        return self._require("pimem_search_projects", answer, CrossRepoResult)

    def expand_chunk(
        self,
        scope: Scope,
        chunk_hash: str,
        *,
        on_wait: Callable[[str], None] | None = None,
        read_only: bool = False,
        on_notice: Callable[[str], None] | None = None,
    ) -> Section:
        """L2 recall in *scope*'s collection; *read_only* for another project's store."""
        call = self._call(on_wait, read_only=read_only, on_notice=on_notice)
        with self._service("MemoryIndex.expand"):
            return self.index(scope).expand(chunk_hash, call)

    def forget_chunk(
        self, scope: Scope, chunk_hash: str, *, on_wait: Callable[[str], None] | None = None
    ) -> Redaction:
        """Forget the one entry (or compact block) an indexed chunk points at."""
        self.check_writable()
        section = self.expand_chunk(scope, chunk_hash, on_wait=on_wait)
        return self.forget_entry(scope, ChunkAddress(section=section))

    def compact_memory(
        self, scope: Scope, *, on_wait: Callable[[str], None] | None = None
    ) -> CompactResult:
        """Condense the store into a summary, append it through the store, announce the change
        (``kind="compact"``) and index the file, so the summary is searchable at once."""
        self.check_writable()
        index = self.index(scope)
        if not isinstance(index, Compacting):
            raise PimemError(
                f"the index ({type(index).__name__}, see `pimem plugins`) cannot compact memory: "
                "it offers no compact()"
            )
        with self._service("MemoryIndex.compact"):
            result = index.compact(self._call(on_wait))
        if result.summary is None:
            return result
        with self._service("MemoryStore.append_compaction"):
            file = self.store(scope).append_compaction(result.summary, self.settings.now())
        self.observe_change(scope, StoreChange(kind="compact", file=file))
        self.index_memory(scope, "compact", files=(file,), on_wait=on_wait)
        return attrs.evolve(result, file=file)

    def declared_settings(self) -> tuple[SettingSpec[Any], ...]:
        """The settings the registered plugins declare, by plugin, each in its declared order."""
        contributions = self.pm.caller("pimem_declare_settings")()
        specs = [spec for part in contributions if part for spec in part]
        return tuple(sorted(specs, key=lambda spec: spec.plugin))

    def settings_status(self) -> StatusSection:
        """``pimem status``'s section of the active plugins' settings, secrets masked."""
        by_plugin: dict[str, list[SettingValue]] = {}
        for spec in self.declared_settings():
            by_plugin.setdefault(spec.plugin, []).append(SettingValue.of(spec, self.settings))
        lines = ["plugin settings:" if by_plugin else "plugin settings: none declared"]
        lines += [
            f"  {plugin}: "
            + ", ".join(f"{value.env}={shown_setting(value.value)}" for value in values)
            for plugin, values in by_plugin.items()
        ]
        return StatusSection(
            name="plugin_settings",
            rank=90,
            lines=tuple(lines),
            data={
                plugin: [value.to_json() for value in values]
                for plugin, values in by_plugin.items()
            },
        )

    def collect_status(self, scope: Scope) -> tuple[StatusSection, ...]:
        """The index's and every plugin's status sections, in rank order."""
        index: MemoryIndex | None = None
        unavailable: PimemError | None = None
        try:
            index = self.index(scope)
        except PimemError as error:  # status answers whatever is broken
            unavailable = error
        sections = self._status_of_plugins(scope, index)
        if index is not None:
            try:
                with self._service("MemoryIndex.status"):
                    sections += index.status()
            except PimemError as error:
                unavailable = error
            except Exception as error:  # noqa: BLE001 - a bug costs the index's section only
                self.pm.name_the_plugin(error, "MemoryIndex.status")
                plugin = culprit(error)
                sections.append(
                    _failed_section("MemoryIndex.status", error, plugin[0] if plugin else None)
                )
        if unavailable is not None:
            sections.append(
                StatusSection(
                    name="backend",
                    rank=8,
                    lines=(f"backend: unavailable ({unavailable})",),
                    data={"available": False, "reason": str(unavailable)},
                )
            )
        return tuple(sorted(sections, key=lambda section: (section.rank, section.name)))

    def _status_of_plugins(self, scope: Scope, index: MemoryIndex | None) -> list[StatusSection]:
        """Every plugin's status sections; a plugin whose hook raises costs its own sections
        only (one line saying so), not the report."""
        kwargs: dict[str, object] = {"scope": scope, "settings": self.settings, "index": index}
        hook = self.pm.caller("pimem_collect_status")
        try:
            contributions = hook(**kwargs)
        except Exception:  # noqa: BLE001 - asked again one plugin at a time, below
            contributions = []
            for impl in reversed(hook.get_hookimpls()):
                if impl.hookwrapper or impl.wrapper:
                    continue
                try:
                    contributions.append(impl.function(*(kwargs[n] for n in impl.argnames)))
                except Exception as error:  # noqa: BLE001 - reported in its place
                    failed = _failed_section("pimem_collect_status", error, impl.plugin_name)
                    contributions.append([failed])
        return [section for part in contributions if part for section in part]

    # -- injection -----------------------------------------------------------------------------

    def build_snapshot(self, scope: Scope, now: datetime | None = None) -> str | None:
        """The stable snapshot for *now*, or ``None`` when the snapshot is off."""
        snapshot: str | None = self.pm.caller("pimem_build_snapshot")(
            scope=scope,
            settings=self.settings,
            now=now or self.settings.now(),
            store=self.store(scope),
        )
        return snapshot

    def collect_injections(self, context: PromptContext) -> tuple[Injection, ...]:
        contributions = self.pm.caller("pimem_collect_injections")(
            context=context, index=self._index_if_any(context.scope)
        )
        return tuple(
            injection
            for contribution in contributions
            if contribution
            for injection in contribution
        )

    # -- transcripts ---------------------------------------------------------------------------

    def read_branch(self, path: Path, *, leaf: str | None = None) -> tuple[BranchEntry, ...]:
        """The branch ending at *leaf* (default: the current leaf) of the session whose
        transcript is *path*, root first."""
        with self._service("TranscriptReader.read_branch"):
            return self.transcript(path).read_branch(leaf)

    def read_transcript(self, request: TranscriptRequest) -> Transcript:
        with self._service("TranscriptReader.read_transcript"):
            return self.transcript(request.path).read_transcript(request)

    # -- maintenance ---------------------------------------------------------------------------

    def collect_maintenance_tasks(self, scope: Scope) -> tuple[MaintenanceTask, ...]:
        """Every plugin's maintenance tasks for *scope*, by name."""
        contributions = self.pm.caller("pimem_collect_maintenance_tasks")(
            scope=scope, settings=self.settings
        )
        tasks: dict[str, MaintenanceTask] = {}
        for part in contributions:
            for task in part or ():
                if not isinstance(task, MaintenanceTask):
                    raise PluginError(
                        "pimem_collect_maintenance_tasks gave a "
                        f"{type(task).__name__}, not a MaintenanceTask"
                    )
                if task.name in tasks:
                    # Two tasks of one name would share one state entry and one output.
                    raise PluginError(
                        f"two plugins contribute the maintenance task {task.name!r}; block one "
                        "with PIMEM_DISABLE_PLUGINS"
                    )
                tasks[task.name] = task
        return tuple(tasks[name] for name in sorted(tasks))

    # -- commands ------------------------------------------------------------------------------

    def collect_commands(self) -> tuple[tuple[str, object], ...]:
        """Every plugin's commands, each with the name of the plugin that adds it, in the order
        plugins are asked; the command table (:func:`pimem_core.doors.commands.plugin_commands`)
        checks that each is a command."""
        found: list[tuple[str, object]] = []
        for impl in self.pm.hook.pimem_collect_commands.get_hookimpls()[::-1]:
            try:
                answer: Any = impl.function()
                found += [(impl.plugin_name, command) for command in answer or ()]
            except Exception as error:
                raise PluginError(
                    f"pimem_collect_commands of {impl.plugin_name} failed: "
                    f"{type(error).__name__}: {error}"
                ) from error
        return tuple(found)

    def collect_loaded_files(self) -> tuple[Path, ...]:
        """The files outside Python packages that plugins load (a model's directory)."""
        parts = self.pm.caller("pimem_collect_loaded_files")(settings=self.settings)
        return tuple(dict.fromkeys(Path(path) for part in parts if part for path in part))

    def provide_model(self, scope: Scope) -> HostModel | None:
        """A model for background work when the host lends none, or ``None``."""
        model = self.pm.caller("pimem_provide_model")(scope=scope, settings=self.settings)
        return None if model is None else self._require("pimem_provide_model", model, HostModel)

    def list_skill_candidates(self, scope: Scope) -> tuple[SkillCandidate, ...]:
        with self._service("SkillCatalog.list_candidates"):
            return self.skills(scope).list_candidates()

    def read_skill_candidate(self, scope: Scope, name: str) -> SkillCandidate:
        """One candidate with its ``SKILL.md`` text."""
        found = [c for c in self.list_skill_candidates(scope) if c.name == name]
        if not found:
            raise StoreError(f"no skill candidate named {name!r}; `pimem skills list` shows them")
        try:
            text = found[0].path.read_text(encoding="utf-8")
        except OSError as error:
            raise StoreError(f"cannot read the skill candidate {name!r}: {error}") from None
        return attrs.evolve(found[0], text=text)

    def install_skill_candidate(
        self, scope: Scope, name: str, destination: Path
    ) -> tuple[Path, ...]:
        """Install candidate *name* into the skills directory *destination*, on request only."""
        with self._service("SkillCatalog.install_candidate"):
            return self.skills(scope).install_candidate(name, destination)


def _failed_section(where: str, error: BaseException, plugin: str | None = None) -> StatusSection:
    """A status section in place of one that raised: who raised what, and the way out."""
    who = f"plugin {plugin!r} raised" if plugin else "raised"
    fix = f" (fix the plugin, or set PIMEM_DISABLE_PLUGINS={plugin})" if plugin else ""
    return StatusSection(
        name=f"failed {plugin or where}",
        rank=1,
        lines=(f"warning: {who} {error!r} in {where}; its section is left out{fix}",),
        data={"failed": where, "plugin": plugin, "error": repr(error)},
    )
