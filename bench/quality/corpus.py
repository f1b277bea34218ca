"""A generated world of coding sessions: several projects, their memory, their pi transcripts.

``generate_world(size, seed=..., root=...)`` gives the first project (``atlas-api``) *size*
memory entries and each other project a tenth of that. Every project is a repository under
``root/projects/`` with daily memory files in ``.memsearch/memory/``, written in pimem's own
entry format (``## Session HH:MM`` once per session and day, one ``### HH:MM`` entry per
captured exchange, anchored to its transcript); the transcripts are pi session files under
``root/sessions/``, with in-file branches and forks. Entries were scrubbed of secrets by
pimem's own patterns, as capture does; the transcripts keep them, as pi does.

The same seed and root give the same bytes.
"""

from __future__ import annotations

import functools
import hashlib
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

from bench.quality.facts import Fact, ProjectState, make_fact
from bench.quality.sessions import SessionFile, SessionWriter, new_session_id, transcript_path
from bench.quality.vocabulary import ACTIONS, PROJECTS, Project
from pimem_core.scrub import Scrubber
from pimem_core.types import Anchor, Entry
from pimem_plugins.secret_patterns import pimem_collect_secret_patterns
from pimem_plugins.shared.entry_format import day_file_name, format_entry

START_DAY = date(2024, 3, 4)
FIRST_MINUTE, LAST_MINUTE = 8 * 60, 22 * 60 + 30
#: How often a session goes back to an earlier turn (/tree) before an exchange, and how often
#: a session is a /fork of the one before it.
BRANCH_RATE = 0.04
FORK_RATE = 0.08


@dataclass(frozen=True)
class MemoryEntry:
    """One captured exchange: the entry pimem wrote and what it came from."""

    entry: Entry
    facts: tuple[Fact, ...]
    #: The anchored turn's body, as the transcript reader renders it.
    turn_body: str

    @property
    def anchor(self) -> Anchor:
        return self.entry.anchor


@dataclass(frozen=True)
class ProjectCorpus:
    project: Project
    directory: Path
    entries: tuple[MemoryEntry, ...]
    sessions: tuple[SessionFile, ...]

    @property
    def memory_dir(self) -> Path:
        return self.directory / ".memsearch" / "memory"

    def day_files(self) -> dict[str, str]:
        """Each daily memory file's text, exactly as pimem's store would have appended it."""
        files: dict[str, list[str]] = {}
        headed: set[tuple[str, str]] = set()
        for item in self.entries:
            name = day_file_name(item.entry)
            key = (name, item.anchor.session)
            files.setdefault(name, []).append(
                format_entry(item.entry, session_heading=key not in headed)
            )
            headed.add(key)
        return {name: "".join(parts) for name, parts in files.items()}


@dataclass(frozen=True)
class World:
    seed: int
    size: int
    root: Path
    projects: tuple[ProjectCorpus, ...]

    @property
    def projects_dir(self) -> Path:
        return self.root / "projects"

    @property
    def primary(self) -> ProjectCorpus:
        return self.projects[0]

    @property
    def entries(self) -> int:
        return sum(len(project.entries) for project in self.projects)

    def sessions(self) -> dict[Path, SessionFile]:
        return {item.path: item for project in self.projects for item in project.sessions}

    def secrets(self) -> tuple[str, ...]:
        return tuple(
            fact.secret
            for project in self.projects
            for item in project.entries
            for fact in item.facts
            if fact.secret is not None
        )

    def digest(self) -> str:
        """A fingerprint of every file's bytes: a kept store is reused only for the same world."""
        hashed = hashlib.sha256()
        for project in self.projects:
            for name, text in sorted(project.day_files().items()):
                hashed.update(f"{project.project.name}/{name}\0{text}\0".encode())
            for session in project.sessions:
                hashed.update(f"{session.path}\0{session.text()}\0".encode())
        return hashed.hexdigest()[:16]

    def write(self) -> None:
        for project in self.projects:
            (project.directory / ".git").mkdir(parents=True, exist_ok=True)
            project.memory_dir.mkdir(parents=True, exist_ok=True)
            for name, text in project.day_files().items():
                (project.memory_dir / name).write_text(text, encoding="utf-8")
            for session in project.sessions:
                session.path.parent.mkdir(parents=True, exist_ok=True)
                session.path.write_text(session.text(), encoding="utf-8")


@functools.cache
def scrubber() -> Scrubber:
    """pimem's bundled secret patterns, as capture applies them."""
    return Scrubber(pimem_collect_secret_patterns())


def generate_world(size: int, *, seed: int = 0, root: Path) -> World:
    """*size* entries in the first project, a tenth of it (at least 100) in each other one."""
    projects = []
    for project in PROJECTS:
        count = size if project.share >= 1 else max(100, int(size * project.share))
        projects.append(_project(project, count, seed, root.absolute()))
    return World(seed=seed, size=size, root=root.absolute(), projects=tuple(projects))


def _working_days(rng: random.Random) -> Iterator[date]:
    day = START_DAY
    while True:
        if day.weekday() < 5 or rng.random() < 0.1:  # the odd weekend session
            yield day
        day += timedelta(days=1)


def _sessions_today(rng: random.Random, project: Project) -> int:
    if project.share >= 1:
        return rng.randint(1, 4)
    return 1 if rng.random() < 0.35 else 0


class _ProjectBuilder:
    """Writes one project's sessions, day by day, until it holds *count* entries."""

    def __init__(self, project: Project, count: int, seed: int, root: Path) -> None:
        self.project = project
        self.count = count
        self.rng = random.Random(f"{seed}:{project.name}")
        self.state = ProjectState(project)
        self.directory = root / "projects" / project.name
        self.sessions_dir = root / "sessions" / f"--work-{project.name}--"
        self.entries: list[MemoryEntry] = []
        self.sessions: list[SessionFile] = []

    def build(self) -> ProjectCorpus:
        for day in _working_days(self.rng):
            minute = self.rng.randint(FIRST_MINUTE, 10 * 60)
            previous: tuple[SessionWriter, list[str]] | None = None
            for _ in range(_sessions_today(self.rng, self.project)):
                if minute > LAST_MINUTE - 30 or len(self.entries) >= self.count:
                    break
                previous, minute = self._session(day, minute, previous)
                minute += self.rng.randint(20, 120)
            if len(self.entries) >= self.count:
                break
        return ProjectCorpus(
            self.project, self.directory, tuple(self.entries), tuple(self.sessions)
        )

    def _session(
        self, day: date, minute: int, previous: tuple[SessionWriter, list[str]] | None
    ) -> tuple[tuple[SessionWriter, list[str]] | None, int]:
        """One session starting at *minute*: a fresh one, or a fork of the one before it."""
        rng = self.rng
        started = datetime.combine(day, datetime.min.time()) + timedelta(minutes=minute)
        session = new_session_id(rng)
        path = transcript_path(self.sessions_dir, started, session)
        cwd = str(self.directory)
        left_behind: frozenset[str] = frozenset()
        if previous is not None and len(previous[1]) >= 2 and rng.random() < FORK_RATE:
            parent, parent_finals = previous
            # Fork before the parent's last exchange, so the two branches really diverge.
            point = parent_finals[rng.randrange(len(parent_finals) - 1)]
            writer = parent.fork(rng, path, session, cwd, started, point)
            left_behind = parent.bodies_after(point)
        else:
            writer = SessionWriter(rng, path, session, cwd, started)
        self.state.focus = rng.choice(self.project.components)
        finals: list[str] = []
        for number in range(rng.randint(3, 14)):
            minute += rng.randint(3, 20)
            if minute > LAST_MINUTE or len(self.entries) >= self.count:
                break
            at = datetime.combine(day, datetime.min.time()) + timedelta(minutes=minute)
            if number > 0 and rng.random() < BRANCH_RATE:
                writer.abandon(at - timedelta(seconds=30), rng.choice(ACTIONS))
            finals.append(self._exchange(writer, at))
        if not finals:  # pi writes no file for a session nobody prompted
            return previous, minute
        self.sessions.append(writer.finish(left_behind))
        return (writer, finals), minute

    def _exchange(self, writer: SessionWriter, at: datetime) -> str:
        rng = self.rng
        facts = tuple(make_fact(rng, self.state) for _ in range(rng.choice((1, 1, 2, 2, 3))))
        prompt = " Also: ".join(fact.prompt for fact in facts)
        report = " ".join(fact.report for fact in facts)
        target = f"src/{self.state.focus.text if self.state.focus else 'app'}"
        turn, body = writer.exchange(at, prompt, report, target)
        # Capture scrubs every entry; only secret facts carry secret shapes (a test checks the
        # others come out unchanged), and scrubbing them alone keeps generation fast.
        content = "\n".join(scrubber().scrub(f.bullet) if f.secret else f.bullet for f in facts)
        anchor = Anchor(session=writer.session, turn=turn, transcript=str(writer.path))
        self.entries.append(
            MemoryEntry(Entry(anchor=anchor, content=content, written_at=at), facts, body)
        )
        return turn


def _project(project: Project, count: int, seed: int, root: Path) -> ProjectCorpus:
    return _ProjectBuilder(project, count, seed, root).build()
