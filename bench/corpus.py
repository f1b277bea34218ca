"""A deterministic corpus of coding-session memory: daily files, sessions, anchored entries.

``generate_corpus(size, seed)`` gives ``size`` entries spread over working days, a few
sessions a day, each entry one to three bullets about a bug, a fix, a decision, a rename, a
dependency upgrade, tests, a measurement or a user preference. Every entry is one ``### HH:MM``
section of at most a few hundred characters, so memsearch makes exactly one chunk of it.

Every bullet comes with a query that paraphrases it, so a query knows the entry it is about
(``Query.target``): the latency benchmark only needs distinct queries, quality metrics can
use the targets.
"""

from __future__ import annotations

import hashlib
import math
import random
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

import attrs

from pimem_core.types import Anchor, Entry
from pimem_plugins.shared.entry_format import day_file_name, format_entry

START_DAY = date(2025, 1, 6)
#: Sessions end by this minute of the day, so appends later that day keep the file in order.
LAST_MINUTE = 22 * 60 + 30

PACKAGES = (
    "api", "auth", "billing", "cli", "core", "ingest", "search", "storage", "sync", "ui",
    "worker", "notifications", "reports", "scheduler", "gateway", "exports",
)  # fmt: skip
MODULES = (
    "client", "config", "handlers", "models", "parser", "queue", "retry", "routes", "schema",
    "session", "cache", "serializer", "migrations", "tokens", "uploads", "webhooks", "metrics",
    "pagination", "permissions", "locks",
)  # fmt: skip
VERBS = (
    "load", "parse", "build", "fetch", "validate", "render", "resolve", "flush", "sync",
    "refresh", "encode", "decode", "merge", "retry", "schedule", "normalize", "apply", "export",
)  # fmt: skip
NOUNS = (
    "user", "invoice", "token", "session", "config", "payload", "batch", "cursor", "manifest",
    "snapshot", "webhook", "order", "report", "index", "upload", "event", "tenant", "quota",
)  # fmt: skip
SYMPTOMS = (
    "a race between the cache refresh and the writer",
    "an off-by-one in pagination on the last page",
    "a timezone bug around midnight UTC",
    "a deadlock when two workers take the same row lock",
    "a memory leak in the connection pool",
    "stale reads after a replica failover",
    "a flaky test that depended on dict ordering",
    "a 500 error on empty request bodies",
    "silent truncation of unicode filenames",
    "a login redirect loop behind the proxy",
    "duplicate webhook deliveries on retry",
    "a slow query missing an index on created_at",
    "an unhandled None from the settings loader",
    "a retry storm when the upstream answered 429",
    "a CSV export that dropped the header row",
    "an infinite loop when the cursor wrapped around",
    "a double charge when the payment callback raced the poller",
    "a crash on startup when the config directory was missing",
    "wrong totals after a currency rounding change",
    "a websocket that never reconnected after sleep",
)
CAUSES = (
    "a missing await on the refresh coroutine",
    "a mutable default argument shared between calls",
    "a naive datetime compared with an aware one",
    "the lock being taken in a different order in the two code paths",
    "a generator consumed twice",
    "an exception swallowed by a bare except",
    "the cache key ignoring the tenant id",
    "an integer division that truncated cents",
    "the retry decorator retrying non-idempotent POSTs",
    "a regex that was not anchored",
    "an environment variable read at import time",
    "a connection returned to the pool while a transaction was open",
)
FIX_ACTIONS = (
    "adding a lock around the refresh",
    "making the handler idempotent with a request key",
    "switching every timestamp to aware UTC datetimes",
    "taking the locks in one global order",
    "adding a partial index on (tenant_id, created_at)",
    "validating the body before parsing it",
    "capping the retries with jittered exponential backoff",
    "reading the setting lazily on first use",
    "closing the cursor in a finally block",
    "storing money as integer cents",
    "replacing the bare except with the two expected errors",
    "deduplicating deliveries by event id",
)
DECISIONS = (
    ("Redis", "Memcached", "the hot cache"),
    ("PostgreSQL advisory locks", "a Redis lock", "the scheduler leader election"),
    ("structlog", "the stdlib logging setup", "request logs"),
    ("pytest fixtures", "unittest setUp methods", "test setup"),
    ("attrs", "plain dataclasses", "value objects"),
    ("httpx", "requests", "the upstream client"),
    ("Alembic migrations", "hand-written SQL scripts", "schema changes"),
    ("uv", "pip-tools", "lock files"),
    ("OpenTelemetry", "statsd", "metrics"),
    ("feature flags", "long-lived branches", "the billing rollout"),
    ("server-sent events", "websockets", "live notifications"),
    ("a monorepo", "one repository per service", "the frontend packages"),
    ("SQLite", "a JSON file", "the local cache of the CLI"),
    ("Celery", "a cron job", "the nightly exports"),
)
REASONS = (
    "it keeps the p95 under 50 ms",
    "the team already runs it in production",
    "it needs no extra service",
    "its failure mode is easier to debug",
    "it halves the CI time",
    "it is what the other services use",
    "the migration path is reversible",
)
DEPENDENCIES = (
    "pydantic", "sqlalchemy", "fastapi", "pytest", "httpx", "numpy", "django", "celery",
    "redis", "boto3", "ruff", "mypy", "typescript", "react", "vite", "eslint", "grpcio",
    "protobuf", "uvicorn", "alembic",
)  # fmt: skip
CONSEQUENCES = (
    "two deprecation warnings fixed",
    "the lock file regenerated",
    "one breaking change in the validators",
    "CI is green again",
    "the type stubs had to be pinned",
    "a config key was renamed",
    "the build got 20 percent faster",
)
PREFERENCES = (
    ("small commits with a test each", "commit size"),
    ("type hints on every public function", "type hints"),
    ("f-strings over str.format", "string formatting"),
    ("early returns over nested ifs", "control flow"),
    ("integration tests against a real database", "database tests"),
    ("explicit imports over star imports", "imports"),
    ("short PR descriptions with a checklist", "pull requests"),
    ("logging at INFO only for state changes", "logging levels"),
)


@dataclass(frozen=True)
class Fact:
    """One bullet of an entry and a query that paraphrases it."""

    kind: str
    bullet: str
    query: str


@dataclass(frozen=True)
class CorpusEntry:
    entry: Entry
    facts: tuple[Fact, ...]


@dataclass(frozen=True)
class Query:
    text: str
    #: Index in ``Corpus.entries`` of the entry the query paraphrases.
    target: int


@dataclass(frozen=True)
class Corpus:
    seed: int
    entries: tuple[CorpusEntry, ...]

    @property
    def days(self) -> tuple[date, ...]:
        return tuple(sorted({item.entry.written_at.date() for item in self.entries}))

    def day_files(self) -> dict[str, str]:
        """Each daily memory file's text, exactly as pimem's store would have appended it."""
        files: dict[str, list[str]] = {}
        headed: set[tuple[str, str]] = set()
        for item in self.entries:
            name = day_file_name(item.entry)
            key = (name, item.entry.anchor.session)
            files.setdefault(name, []).append(
                format_entry(item.entry, session_heading=key not in headed)
            )
            headed.add(key)
        return {name: "".join(parts) for name, parts in files.items()}

    def digest(self) -> str:
        """A fingerprint of the files' bytes: a kept store is reused only for the same corpus."""
        hashed = hashlib.sha256()
        for name, text in sorted(self.day_files().items()):
            hashed.update(f"{name}\0{text}\0".encode())
        return hashed.hexdigest()[:16]

    def write(self, memory_dir: Path) -> list[Path]:
        memory_dir.mkdir(parents=True, exist_ok=True)
        written = []
        for name, text in self.day_files().items():
            path = memory_dir / name
            path.write_text(text, encoding="utf-8")
            written.append(path)
        return written

    def queries(self, count: int, *, seed: int | None = None) -> tuple[Query, ...]:
        """*count* distinct queries, each paraphrasing one bullet of a random entry."""
        rng = random.Random(self.seed + 1 if seed is None else seed)
        seen: dict[str, Query] = {}
        for _ in range(count * 50):
            if len(seen) == count:
                break
            target = rng.randrange(len(self.entries))
            fact = rng.choice(self.entries[target].facts)
            seen.setdefault(fact.query, Query(text=fact.query, target=target))
        if len(seen) < count:
            raise ValueError(f"the corpus has fewer than {count} distinct queries")
        return tuple(seen.values())


def generate_corpus(size: int, *, seed: int = 0, start: date = START_DAY) -> Corpus:
    """*size* entries of coding-session memory; the same *seed* gives the same bytes."""
    rng = random.Random(seed)
    entries: list[CorpusEntry] = []
    for day in _working_days(rng, start):
        for session_start in _session_starts(rng):
            session = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            transcript = (
                f"/home/dev/.pi/agent/sessions/--work-app--/"
                f"{day.isoformat()}T{session_start // 60:02d}-{session_start % 60:02d}_"
                f"{session}.jsonl"
            )
            for minute in _entry_minutes(rng, session_start):
                facts = tuple(_fact(rng) for _ in range(rng.choice((1, 1, 2, 2, 3))))
                anchor = Anchor(
                    session=session, turn=f"{rng.getrandbits(32):08x}", transcript=transcript
                )
                written_at = datetime.combine(day, datetime.min.time()) + timedelta(minutes=minute)
                content = "\n".join(fact.bullet for fact in facts)
                entries.append(
                    CorpusEntry(Entry(anchor=anchor, content=content, written_at=written_at), facts)
                )
                if len(entries) == size:
                    return Corpus(seed=seed, entries=tuple(entries))
    raise AssertionError("unreachable: the day generator never ends")


def _working_days(rng: random.Random, start: date) -> Iterator[date]:
    day = start
    while True:
        if day.weekday() < 5 or rng.random() < 0.15:  # the odd weekend session
            yield day
        day += timedelta(days=1)


def _session_starts(rng: random.Random) -> list[int]:
    """Session start minutes of one day: one to four sessions between 08:00 and 20:00."""
    starts, minute = [], rng.randint(8 * 60, 10 * 60)
    for _ in range(rng.randint(1, 4)):
        if minute > 20 * 60:
            break
        starts.append(minute)
        minute += rng.randint(90, 240)
    return starts


def _entry_minutes(rng: random.Random, start: int) -> list[int]:
    """Minutes of a session's entries: three to fourteen, a few minutes apart."""
    minutes, minute = [], start + rng.randint(2, 10)
    for _ in range(rng.randint(3, 14)):
        if minute > LAST_MINUTE:
            break
        minutes.append(minute)
        minute += rng.randint(2, 20)
    return minutes


def _identifier(rng: random.Random) -> str:
    return f"{rng.choice(VERBS)}_{rng.choice(NOUNS)}"


def _path(rng: random.Random) -> str:
    return f"src/{rng.choice(PACKAGES)}/{rng.choice(MODULES)}.py"


def _version(rng: random.Random) -> tuple[str, str]:
    major, minor = rng.randint(0, 5), rng.randint(0, 30)
    new = f"{major + 1}.0.0" if rng.random() < 0.3 else f"{major}.{minor + 1}.0"
    return f"{major}.{minor}.{rng.randint(0, 9)}", new


def _bug(rng: random.Random) -> Fact:
    symptom, cause, path = rng.choice(SYMPTOMS), rng.choice(CAUSES), _path(rng)
    return Fact(
        "bug",
        f"- the agent traced {symptom} in `{path}` to {cause}",
        f"what caused {symptom}",
    )


def _fix(rng: random.Random) -> Fact:
    symptom, action, issue = rng.choice(SYMPTOMS), rng.choice(FIX_ACTIONS), rng.randint(100, 4999)
    return Fact(
        "fix",
        f"- the agent fixed {symptom} (#{issue}) by {action}; the regression test is in "
        f"tests/test_{rng.choice(MODULES)}.py",
        f"how did we fix issue {issue}",
    )


def _decision(rng: random.Random) -> Fact:
    chosen, rejected, purpose = rng.choice(DECISIONS)
    return Fact(
        "decision",
        f"- the user and the agent chose {chosen} over {rejected} for {purpose} in "
        f"{rng.choice(PACKAGES)} because {rng.choice(REASONS)}",
        f"what did we pick for {purpose} in {rng.choice(PACKAGES)}",
    )


def _rename(rng: random.Random) -> Fact:
    old, new, path = _identifier(rng), _identifier(rng), _path(rng)
    return Fact(
        "rename",
        f"- the agent renamed `{old}` to `{new}` in `{path}` and updated "
        f"{rng.randint(2, 40)} call sites",
        f"what is `{old}` called now",
    )


def _upgrade(rng: random.Random) -> Fact:
    dependency = rng.choice(DEPENDENCIES)
    old, new = _version(rng)
    return Fact(
        "upgrade",
        f"- the agent upgraded {dependency} from {old} to {new}; {rng.choice(CONSEQUENCES)}",
        f"when did we upgrade {dependency} to {new}",
    )


def _tests(rng: random.Random) -> Fact:
    function, module = _identifier(rng), rng.choice(MODULES)
    outcome = rng.choice(
        (
            "all pass",
            f"two are marked xfail until the {rng.choice(PACKAGES)} fix lands",
            f"they caught a regression in `{_identifier(rng)}`",
        )
    )
    return Fact(
        "tests",
        f"- the agent added {rng.randint(2, 12)} tests for `{function}` in "
        f"tests/test_{module}.py; {outcome}",
        f"which tests cover `{function}`",
    )


def _perf(rng: random.Random) -> Fact:
    function, before = _identifier(rng), rng.randint(40, 900)
    after = max(1, before * rng.randint(10, 70) // 100)
    return Fact(
        "perf",
        f"- the agent measured `{function}` at {after} ms p50 on the 10k fixture, down from "
        f"{before} ms after {rng.choice(FIX_ACTIONS)}",
        f"how fast is `{function}` now",
    )


def _preference(rng: random.Random) -> Fact:
    preference, topic = rng.choice(PREFERENCES)
    return Fact(
        "preference",
        f"- the user prefers {preference} in {rng.choice(PACKAGES)}",
        f"what does the user want for {topic}",
    )


_KINDS: Sequence[tuple[Callable[[random.Random], Fact], int]] = (
    (_bug, 4),
    (_fix, 4),
    (_decision, 2),
    (_rename, 2),
    (_upgrade, 2),
    (_tests, 3),
    (_perf, 1),
    (_preference, 1),
)


def _fact(rng: random.Random) -> Fact:
    maker = rng.choices([maker for maker, _ in _KINDS], weights=[weight for _, weight in _KINDS])
    return maker[0](rng)


#: Long entries as distilled sessions write them: their length in characters has a median of
#: about 900, a tenth is over 1,400, and one in :data:`VERY_LONG_EVERY` is a long write-up of
#: several thousand (the longest :data:`LONGEST`). Measured on a real store of 677 entries.
LONG_MEDIAN = 780
LONG_SIGMA = 0.38
VERY_LONG_EVERY = 150
LONGEST = 21_000
PROSE = (
    "The root cause took a while to find because the failure only showed up under load.",
    "We kept the old code path behind a flag until the next release so it can be rolled back.",
    "The user asked for the change to stay small and reviewable, so it landed in two commits.",
    "Nothing else in the package depends on this behaviour, the tests say as much.",
    "A follow-up is open to remove the workaround once the upstream release is out.",
    "The benchmark numbers moved by less than the noise on this machine, so no regression.",
    "The migration is idempotent and was run twice on the staging copy to make sure of it.",
    "Both code paths now log the request id, which made the second bug obvious in minutes.",
    "The design doc was updated with the decision and the alternatives that were rejected.",
    "CI needed a new cache key because the lock file moved to the repository root.",
)
CODE = (
    "```python\nasync def {name}(session, key):\n    async with session.lock(key):\n"
    "        value = await session.get(key)\n        return value or await session.refresh(key)\n```",
    "```sh\nuv run pytest tests/test_{module}.py -k {name} -x\n```",
    "```python\n@retry(attempts=5, backoff=jittered(0.2, 5.0))\ndef {name}(client, payload):\n"
    "    return client.post('/v1/{module}', json=payload, timeout=10)\n```",
)


def _long_length(rng: random.Random, number: int) -> int:
    if number == 0:
        return LONGEST
    if number % VERY_LONG_EVERY == VERY_LONG_EVERY // 2:
        return rng.randint(4_000, LONGEST)
    return max(160, int(LONG_MEDIAN * math.exp(rng.gauss(0.0, LONG_SIGMA))))


def _paragraph(rng: random.Random) -> str:
    part = rng.random()
    if part < 0.5:  # bullets, some of them wrapped onto a second line
        lines = []
        for _ in range(rng.randint(2, 5)):
            bullet = _fact(rng).bullet
            if rng.random() < 0.3:
                bullet += f"\n  {rng.choice(PROSE)}"
            lines.append(bullet)
        return "\n".join(lines)
    if part < 0.85:
        return " ".join(rng.choice(PROSE) for _ in range(rng.randint(2, 6)))
    template = rng.choice(CODE)
    return template.format(name=_identifier(rng), module=rng.choice(MODULES))


def _long_content(rng: random.Random, facts: tuple[Fact, ...], length: int) -> str:
    """The entry's own bullets, then paragraphs until it is about *length* characters long."""
    parts = ["\n".join(fact.bullet for fact in facts)]
    size = len(parts[0])
    while size < length:
        paragraph = _paragraph(rng)
        if size + len(paragraph) > length + 200 and size > length * 0.8:
            break
        parts.append(paragraph)
        size += len(paragraph) + 2
    return "\n\n".join(parts)


def generate_long_corpus(size: int, *, seed: int = 0) -> Corpus:
    """The entries of :func:`generate_corpus` grown to the lengths of distilled sessions'
    (:data:`LONG_MEDIAN`): bullets, prose and code, in paragraphs a chunker can split."""
    short = generate_corpus(size, seed=seed)
    rng = random.Random(seed + 7919)
    entries = []
    for number, item in enumerate(short.entries):
        content = _long_content(rng, item.facts, _long_length(rng, number))
        entries.append(CorpusEntry(attrs.evolve(item.entry, content=content), item.facts))
    return Corpus(seed=seed, entries=tuple(entries))
