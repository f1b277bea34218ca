"""What the generated sessions talk about, each thing in three wordings.

A :class:`Term` is written into memory entries as ``text``; a keyword search types
``keywords``; a paraphrase says the same thing as ``other``, in words the entry does not use
(names of libraries, identifiers and versions have no other words, and stay as they are).
The lists were written before any retrieval number was looked at and are not tuned to them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    text: str
    keywords: str
    other: str


def _terms(*rows: tuple[str, str, str]) -> tuple[Term, ...]:
    return tuple(Term(*row) for row in rows)


@dataclass(frozen=True)
class Project:
    """One generated repository: its name, what it is, and its parts (source directories)."""

    name: str
    about: str
    components: tuple[Term, ...]
    #: Relative amount of memory: the first project holds the corpus size, others a share.
    share: float


PROJECTS = (
    Project(
        "atlas-api",
        "the web API of a subscription billing product",
        _terms(
            ("billing", "billing", "the payments code"),
            ("auth", "auth", "the login layer"),
            ("catalog", "catalog", "the product listing service"),
            ("notifications", "notifications", "the alerting code"),
            ("exports", "exports", "the data download jobs"),
            ("gateway", "gateway", "the edge proxy"),
            ("scheduler", "scheduler", "the job runner"),
            ("reporting", "reporting", "the analytics pages"),
            ("storage", "storage", "the persistence layer"),
            ("admin", "admin", "the back office"),
        ),
        1.0,
    ),
    Project(
        "harbor-mobile",
        "a React Native app for field technicians",
        _terms(
            ("onboarding", "onboarding", "the signup screens"),
            ("offline", "offline", "the no-network mode"),
            ("camera", "camera", "the photo capture screen"),
            ("checkout", "checkout", "the purchase flow"),
            ("preferences", "preferences", "the user options page"),
            ("timeline", "timeline", "the home activity stream"),
        ),
        0.1,
    ),
    Project(
        "lumen-etl",
        "a nightly data pipeline into the analytics warehouse",
        _terms(
            ("ingest", "ingest", "the intake stage"),
            ("dedupe", "dedupe", "the duplicate removal step"),
            ("warehouse", "warehouse", "the analytics database"),
            ("backfill", "backfill", "the historical reload"),
            ("transforms", "transforms", "the reshaping step"),
            ("loader", "loader", "the final write step"),
        ),
        0.1,
    ),
    Project(
        "quill-cli",
        "a command-line tool developers install",
        _terms(
            ("commands", "commands", "the subcommand layer"),
            ("plugins", "plugins", "the extension system"),
            ("installer", "installer", "the setup script"),
            ("completion", "completion", "the shell tab expansion"),
            ("telemetry", "telemetry", "the usage reporting"),
            ("updater", "updater", "the self-update code"),
        ),
        0.1,
    ),
)

FAILURES = _terms(
    ("a race condition", "race condition", "two writers clobbering each other"),
    ("a deadlock", "deadlock", "everything hanging while waiting on locks"),
    ("a memory leak", "memory leak", "memory use climbing until the process died"),
    ("an off-by-one error", "off-by-one", "the last item going missing"),
    ("a timezone bug", "timezone bug", "wrong times around midnight"),
    ("duplicate processing", "duplicate processing", "the same work done twice"),
    ("stale reads", "stale reads", "outdated data being served"),
    ("a crash on empty input", "crash empty input", "the process dying when nothing was sent"),
    ("silent truncation", "silent truncation", "values cut short without any error"),
    ("an infinite retry loop", "infinite retry loop", "endless re-attempts that never gave up"),
    ("a slow full table scan", "slow full table scan", "queries reading every row for seconds"),
    ("unicode corruption", "unicode corruption", "accented characters turning into garbage"),
    ("an unhandled None", "unhandled None", "a missing value blowing up the code"),
    ("wrong rounding of amounts", "rounding amounts", "totals off by a cent"),
    ("connection pool exhaustion", "connection pool exhaustion", "running out of database links"),
    (
        "a permission check bypass",
        "permission check bypass",
        "people reaching what they may not see",
    ),
    ("out-of-order events", "out-of-order events", "things arriving in the wrong sequence"),
    ("a stuck lock after a crash", "stuck lock crash", "a lock still held once its worker died"),
    ("an N+1 query storm", "N+1 queries", "one database round trip per row"),
    (
        "a cache stampede",
        "cache stampede",
        "every request rebuilding the same cached value at once",
    ),
)

#: Operations as gerunds; ``keywords`` is the stem identifiers are made of.
VERBS = _terms(
    ("refreshing", "refresh", "reloading"),
    ("parsing", "parse", "reading in"),
    ("validating", "validate", "checking"),
    ("exporting", "export", "dumping out"),
    ("importing", "import", "bringing in"),
    ("merging", "merge", "combining"),
    ("retrying", "retry", "re-sending"),
    ("scheduling", "schedule", "queueing up"),
    ("renewing", "renew", "extending"),
    ("deleting", "delete", "removing"),
    ("uploading", "upload", "sending up"),
    ("syncing", "sync", "mirroring"),
    ("archiving", "archive", "putting away"),
    ("paginating", "paginate", "paging through"),
)

NOUNS = _terms(
    ("invoices", "invoices", "bills"),
    ("webhooks", "webhooks", "outgoing callbacks"),
    ("user sessions", "sessions", "logins"),
    ("reports", "reports", "summaries"),
    ("attachments", "attachments", "uploaded files"),
    ("tenants", "tenants", "customer accounts"),
    ("orders", "orders", "purchases"),
    ("refunds", "refunds", "money returned to customers"),
    ("subscriptions", "subscriptions", "recurring plans"),
    ("audit logs", "audit logs", "the record of who did what"),
    ("thumbnails", "thumbnails", "preview images"),
    ("coupons", "coupons", "discount codes"),
    ("feature flags", "feature flags", "on/off toggles"),
    ("email digests", "email digests", "summary mails"),
    ("price lists", "price lists", "rate cards"),
    ("user profiles", "profiles", "account details"),
)

#: Identifier suffixes: ``refresh_invoices_batch`` and the like.
SUFFIXES = ("", "_batch", "_async", "_for_tenant", "_cached", "_v2", "_safe", "_all")

CAUSES = (
    "a missing await on the refresh coroutine",
    "a mutable default argument shared between calls",
    "a naive datetime compared with an aware one",
    "the lock being taken in a different order in two code paths",
    "a generator consumed twice",
    "an exception swallowed by a bare except",
    "the cache key ignoring the tenant id",
    "an integer division that truncated cents",
    "the retry decorator wrapping a non-idempotent POST",
    "a regex that was not anchored",
    "an environment variable read at import time",
    "a connection returned to the pool with a transaction open",
    "a missing index on created_at",
    "a loop that reused the last element's variable",
)

ACTIONS = (
    "adding a lock around the update",
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
    "deduplicating by event id",
    "batching the lookups into one query",
    "expiring the lock with a heartbeat",
)


@dataclass(frozen=True)
class Topic:
    """A decision topic and the options a team picks between."""

    term: Term
    options: tuple[str, ...]


TOPICS = (
    Topic(
        Term("cache backend", "cache backend", "store for hot copies"),
        ("Redis", "Memcached", "an in-process LRU"),
    ),
    Topic(Term("job queue", "job queue", "background task runner"), ("Celery", "RQ", "a cron job")),
    Topic(
        Term("HTTP client", "HTTP client", "library for outgoing requests"),
        ("httpx", "requests", "aiohttp"),
    ),
    Topic(
        Term("wire format", "wire format", "encoding sent over the network"),
        ("JSON", "MessagePack", "protobuf"),
    ),
    Topic(
        Term("locking scheme", "locking scheme", "way of keeping two workers apart"),
        ("PostgreSQL advisory locks", "a Redis lock", "a lock file"),
    ),
    Topic(
        Term("logging library", "logging library", "tool that writes the log lines"),
        ("structlog", "the stdlib logging module", "loguru"),
    ),
    Topic(
        Term("migration tool", "migration tool", "way schema changes get applied"),
        ("Alembic", "hand-written SQL scripts", "yoyo"),
    ),
    Topic(
        Term("ID scheme", "ID scheme", "numbering of new records"),
        ("UUIDv7", "ULIDs", "bigint sequences"),
    ),
    Topic(
        Term("retry policy", "retry policy", "rule for attempting failed calls again"),
        ("exponential backoff with jitter", "a fixed five second delay", "no retries"),
    ),
    Topic(
        Term("pagination style", "pagination style", "way long lists are split up"),
        ("cursor pagination", "offset pagination", "keyset pagination"),
    ),
    Topic(
        Term("file format", "file format", "layout of the files on disk"),
        ("Parquet", "CSV", "SQLite"),
    ),
    Topic(
        Term("test database", "test database", "thing the tests run against"),
        ("a real PostgreSQL in Docker", "SQLite in memory", "mocks"),
    ),
)

REASONS = (
    "it keeps the p95 under 50 ms",
    "the team already runs it in production",
    "it needs no extra service",
    "its failure mode is easier to debug",
    "it halves the CI time",
    "the other services use it",
    "the migration path is reversible",
)

REVERSAL_REASONS = (
    "it could not keep up under load",
    "its failures were hard to debug",
    "the operations team refused to run another service",
    "it doubled the CI time",
    "its licence changed",
    "it lost writes during a failover",
)

CONSEQUENCES = (
    "two deprecation warnings fixed",
    "the lock file regenerated",
    "one breaking change in the validators",
    "a config key was renamed",
    "the type stubs had to be pinned",
    "the build got 20 percent faster",
    "one test needed a new fixture",
)

MODULES = (
    "client", "config", "handlers", "models", "parser", "queue", "retry", "routes", "schema",
    "session", "cache", "serializer", "migrations", "tokens", "uploads", "hooks", "metrics",
    "pagination", "permissions", "locks",
)  # fmt: skip

SITUATIONS = (
    "after_failover", "on_retry", "with_empty_body", "across_midnight", "under_load",
    "for_new_tenant", "when_cache_cold", "with_unicode_names", "after_timeout", "in_parallel",
)  # fmt: skip

FLAKE_CAUSES = (
    "it depended on dict ordering",
    "it read the wall clock",
    "two tests shared one temporary directory",
    "it raced a background thread",
    "it needed network access",
    "a fixture leaked state between tests",
    "it assumed a fixed random seed",
    "it slept 100 ms instead of waiting for the event",
)

FLAKE_FIXES = (
    "pins the clock",
    "waits on an event instead of sleeping",
    "gets its own tmp_path",
    "seeds the generator",
    "mocks the network",
    "resets the fixture after each test",
)

#: Preference topics and what the user asked for.
PREFERENCES = (
    (
        Term("commit size", "commit size", "how big each change set should be"),
        "small commits with a test each",
    ),
    (
        Term("type hints", "type hints", "annotating function signatures"),
        "type hints on every public function",
    ),
    (
        Term("string formatting", "string formatting", "building text from values"),
        "f-strings over str.format",
    ),
    (
        Term("control flow", "control flow", "structuring branches in functions"),
        "early returns over nested ifs",
    ),
    (
        Term("database tests", "database tests", "checks that touch SQL"),
        "integration tests against a real database",
    ),
    (
        Term("imports", "imports", "pulling names from other modules"),
        "explicit imports over star imports",
    ),
    (
        Term(
            "pull request descriptions", "pull request descriptions", "the text on a review request"
        ),
        "short descriptions with a checklist",
    ),
    (
        Term("log levels", "log levels", "how noisy logging should be"),
        "INFO only for state changes",
    ),
    (
        Term("error messages", "error messages", "what failures tell the reader"),
        "messages that say how to fix the problem",
    ),
    (
        Term("docstrings", "docstrings", "comments on top of functions"),
        "one-line docstrings that say why",
    ),
    (
        Term("dependency pinning", "dependency pinning", "fixing library versions"),
        "exact pins in the lock file only",
    ),
    (
        Term("function length", "function length", "how long a routine may get"),
        "functions under 40 lines",
    ),
)

SETTINGS = (
    (Term("TIMEOUT_MS", "timeout", "how long a call may take"), ("500", "2000", "15000")),
    (Term("RETRY_LIMIT", "retry limit", "how many attempts are allowed"), ("3", "5", "8")),
    (Term("BATCH_SIZE", "batch size", "how many items go in one chunk"), ("100", "500", "1000")),
    (Term("POOL_SIZE", "pool size", "how many database links stay open"), ("5", "10", "20")),
    (Term("CACHE_TTL_S", "cache ttl", "how long cached data stays valid"), ("60", "300", "3600")),
    (Term("RATE_LIMIT_RPS", "rate limit", "requests allowed each second"), ("20", "50", "200")),
    (Term("MAX_UPLOAD_MB", "max upload", "the largest file accepted"), ("10", "25", "100")),
    (Term("WORKER_CONCURRENCY", "worker concurrency", "parallel workers"), ("2", "4", "8")),
    (Term("LOG_LEVEL", "log level", "logging verbosity"), ("INFO", "WARNING", "DEBUG")),
    (Term("QUEUE_DEPTH", "queue depth", "how many jobs may wait"), ("100", "1000", "5000")),
)

ENVIRONMENTS = _terms(
    ("staging", "staging", "the pre-release environment"),
    ("production", "production", "the live site"),
    ("CI", "CI", "the build pipeline"),
)

#: Services whose credentials get rotated: the credential's name, and a value-shaped secret
#: (prefix, alphabet, length) that pimem's bundled secret patterns recognise.
SERVICES = (
    ("Stripe", "restricted key", "rk_live_", "alnum", 24),
    ("GitHub", "deploy token", "ghp_", "alnum", 36),
    ("Slack", "bot token", "xoxb-", "digits-alnum", 40),
    ("AWS", "access key", "AKIA", "upper", 16),
    ("GitLab", "runner token", "glpat-", "alnum", 20),
    ("OpenAI", "API key", "sk-proj-", "alnum", 40),
    ("SendGrid", "mail key", "SG.", "sendgrid", 0),
)

#: Subjects nobody ever worked on in the generated projects: a search should come back empty.
#: Each is asked as keywords, as a paraphrase and as a question.
ABSENT = (
    (
        "kubernetes helm chart values",
        "templating the container orchestration charts",
        "which Helm chart values did we override for Kubernetes?",
    ),
    (
        "graphql schema stitching",
        "combining several typed query APIs behind one endpoint",
        "how did we stitch the GraphQL schemas together?",
    ),
    (
        "terraform state locked",
        "the infrastructure code state being held by someone else",
        "why was the Terraform state locked?",
    ),
    (
        "kafka consumer lag",
        "stream readers falling behind the producers",
        "how did we fix the Kafka consumer lag?",
    ),
    (
        "ios widget crash",
        "the home screen gadget on iPhones crashing",
        "why did the iOS widget crash?",
    ),
    (
        "elasticsearch reindex duration",
        "rebuilding the full-text cluster from scratch",
        "how long did the Elasticsearch reindex take?",
    ),
    (
        "dark mode contrast",
        "colours being hard to read with the night theme",
        "what did we change for dark mode contrast?",
    ),
    (
        "german translations i18n",
        "translating the interface into German",
        "who did the German translations?",
    ),
    (
        "pdf fonts missing",
        "typefaces absent from printable documents",
        "why were fonts missing in the PDFs?",
    ),
    (
        "saml sso okta",
        "single sign-on through an enterprise identity provider",
        "did we ever set up SAML with Okta?",
    ),
    (
        "rust rewrite",
        "porting the hot path to a systems language",
        "why did we rewrite the tokenizer in Rust?",
    ),
    (
        "webassembly sandbox",
        "running untrusted extensions in a bytecode sandbox",
        "how does the WebAssembly sandbox work?",
    ),
    (
        "android gradle build",
        "the phone app build for Google's platform",
        "why did the Android Gradle build fail?",
    ),
    ("bluetooth pairing", "connecting to nearby wireless devices", "what broke Bluetooth pairing?"),
    (
        "ffmpeg transcoding flags",
        "converting uploaded movies into other formats",
        "which ffmpeg flags do we use for transcoding?",
    ),
    (
        "model drift detection",
        "predictions degrading as the input data shifts",
        "how do we detect drift in the ML model?",
    ),
    (
        "screen reader accessibility",
        "making the pages usable for blind people",
        "what did we fix for screen readers?",
    ),
    (
        "cloudflare purge",
        "clearing the edge network's stored copies",
        "how do we purge the Cloudflare CDN?",
    ),
    (
        "blockchain wallet",
        "a cryptocurrency wallet integration",
        "which blockchain wallet did we integrate?",
    ),
    (
        "physics engine jitter",
        "objects shaking in the game collision simulation",
        "why does the physics engine jitter?",
    ),
    ("printer driver", "getting office printers to work", "which printer driver did we install?"),
    ("alexa skill", "an app for a smart speaker", "how did we publish the Alexa skill?"),
    (
        "vat filing deadline",
        "sending the sales tax return to the authorities",
        "when is the VAT filing due?",
    ),
    ("gpu cuda kernels", "code running on the graphics card", "why were the CUDA kernels slow?"),
)
