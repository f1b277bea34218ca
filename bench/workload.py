"""A workload: several pi sessions in one project, and what memory holds at the end of them.

The latency and quality parts measure single operations; this one measures what memory becomes
when it is used. A seeded script of RPC sessions (real pi, the real adapter and ``pimem
serve``, a scripted model on 127.0.0.1) mixes the exchanges a coding agent sees:

* **decisions**: the user states a choice ("We decided to use Redis for the billing queue");
  each names a subject no other decision names, so the bullet it becomes is known. Some are
  put with a question mark ("Can we use Redis for ... from now on?"), and for some the model
  first searches memory for what held before;
* **chatter**: ordinary requests the model answers in words;
* **recall questions** and **/recall** prompts (the text the ``/recall`` template expands to),
  answered with ``memory_search`` and ``memory_expand`` only, some about subjects forgotten
  earlier;
* **questions answered from memory**: "Which option did we go with for ...?", answered in words
  at once, as from the snapshot or an auto-context injection, without any tool call;
* **small talk**: "How is your day going?", answered in words;
* **explicit writes**: "Remember that ..."; the model calls ``memory_write`` with the fact;
* **forgets**: the model searches for a decision of an earlier session and calls
  ``memory_forget`` on the chunk hash the search gave;
* **status checks**: ``memory_status``;
* and in the middle of every session the bridge (``pimem serve``) is killed with SIGKILL,
  between two prompts, once it is idle: a crash while the user types. A run of its own kills
  it the moment the prompt settled instead, before capture may have taken the exchange.

The scripted distiller restates each exchange the way a model would: the user's words as
bullets. A captured recall question becomes "the user asked what we decided about ...", a
captured forget request names the forgotten decision again, a captured "remember" becomes the
very bullet ``memory_write`` wrote. So the day files say what capture let through, and the
system prompts the model server received say whether the snapshot held its bytes.

The same script runs on this checkout ("after") and on the code before the capture gates
(``BEFORE_COMMIT``, extracted with ``git archive``; "before"), on each pi line.
:func:`measure` turns a run's day files and request records into the counts reported per 100
exchanges; it is pure, and tested on its own. Each run of this checkout also sets pimem's
usage record beside what the scripted model knows it did with memory
(:mod:`bench.workload_usage`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import random
import re
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import workload_usage
from bench.pi_host import (
    ADAPTER_DIR,
    MODEL,
    PI_LINES,
    REPO_ROOT,
    ChatRequest,
    ModelServer,
    PiLine,
    PiWorld,
    Reply,
    RpcSession,
    Rule,
    Text,
    ToolCall,
    bridge_pids,
    bridges_in,
    cpu_ticks,
    gone,
    isolated_environment,
    on_distill,
    text_of,
    wait_for,
    write_memsearch_config,
)
from pimem_core.day_file import list_entries
from pimem_core.testing import read_hits
from pimem_plugins.memsearch.offline_model import OfflineModel

#: The code before the capture gates: the parent of their first commit (c5e01e0).
BEFORE_COMMIT = "70d29a5"
#: The clock every run works at (``PIMEM_NOW``): one day file, no new day mid-session.
NOW = "2026-09-01T10:00"
FORMAT = 1

DECISION = "decision"
CHATTER = "chatter"
RECALL = "recall"
RECALL_COMMAND = "/recall"
WRITE = "write"
FORGET = "forget"
STATUS = "status"
#: A question answered from memory in words, without a tool call (ADR 0021).
QUESTION = "question"
SMALL_TALK = "small talk"
KINDS = (DECISION, CHATTER, RECALL, RECALL_COMMAND, WRITE, FORGET, STATUS, QUESTION, SMALL_TALK)
#: Exchanges whose entry, if one is captured, is memory about memory.
MEMORY_KINDS = frozenset({RECALL, RECALL_COMMAND, STATUS, FORGET})
#: The share of each kind in a session (forgets from the second session on; the rest chatter).
MIX = {
    DECISION: 0.30,
    RECALL: 0.12,
    RECALL_COMMAND: 0.08,
    WRITE: 0.12,
    FORGET: 0.08,
    STATUS: 0.08,
    QUESTION: 0.08,
    SMALL_TALK: 0.08,
}
#: A recall asks about a decision at least this many exchanges old (its capture is written).
RECALL_DISTANCE = 3
#: How often a recall asks about a subject forgotten earlier, when there is one.
FORGOTTEN_RECALL_SHARE = 0.3
#: How the ``/recall`` template begins (``adapters/pi/prompts/recall.md``).
RECALL_PREFIX = "Use the recall skill to answer from memory:"
RECALL_TEMPLATE = ADAPTER_DIR / "prompts" / "recall.md"
#: What the adapter says when a tool call met a killed bridge; the model calls again.
RESTARTS = "Memory restarts on the next memory call"
KILLED = "the pimem bridge was killed"

AREAS = (
    "billing", "ledger", "search", "auth", "export", "import", "notification", "reporting",
    "checkout", "inventory", "shipping", "analytics", "audit", "gateway", "scheduler", "upload",
)  # fmt: skip
COMPONENTS = (
    "queue", "cache", "retry policy", "schema migrations", "rate limiter", "session store",
    "job runner", "feature flags", "log pipeline", "test fixtures", "connection pool",
    "build cache",
)  # fmt: skip
CHOICES = (
    "Redis", "PostgreSQL 16", "SQLite in WAL mode", "Kafka", "RabbitMQ", "Alembic",
    "exponential backoff capped at 30 seconds", "a token bucket of 100 requests a minute",
    "LaunchDarkly", "OpenTelemetry", "pytest factories", "pgbouncer in transaction mode",
    "a content-addressed S3 bucket", "Celery beat", "structured JSON logs",
)  # fmt: skip
TEAMS = ("payments", "platform", "data", "growth", "infra", "security", "mobile", "search")
DECISION_PROMPTS = (
    "We decided to use {choice} for {subject}.",
    "Let's go with {choice} for {subject} from now on.",
    "Decision made: {choice} for {subject}; please keep that in mind.",
    "After the review we settled on {choice} for {subject}.",
    # A decision with a question mark is still a decision (ADR 0021).
    "We pick {choice} for {subject}; can you note that?",
    "Can we use {choice} for {subject} from now on?",
)
#: A decision the model checks against memory first (``memory_search``, then its answer): the
#: user stated something new, so the exchange is not memory about memory.
CHECKED_DECISION_PROMPT = "We are moving {subject} to {choice}. What did we use for it before?"
#: How often a decision is the checked one.
CHECKED_DECISION_SHARE = 0.15
QUESTION_PROMPTS = (
    "Which option did we go with for {subject}?",
    "What do we use for {subject} these days?",
    "Did we settle on something for {subject}?",
)
SMALL_TALK_PROMPTS = (
    "How is your day going?",
    "Good morning!",
    "Thanks, that was helpful!",
    "Hi there, how are you?",
    "Great work, thank you!",
)
SMALL_TALK_ANSWER = "Doing well, thanks! What shall we work on?"
RECALL_PROMPTS = (
    "What did we decide about {subject}?",
    "Remind me what we chose for {subject}.",
    "Which option did we pick for {subject} again?",
)
TASKS = (
    ("Add a test for", "add a test for"),
    ("Fix the flaky assertion in", "fix the flaky assertion in"),
    ("Explain the control flow of", "have the control flow of {file} explained"),
    ("Add type hints to", "add type hints to"),
    ("Speed up the hot loop in", "speed up the hot loop in"),
    ("Add debug logging to", "add debug logging to"),
    ("Write a docstring for the main class in", "get a docstring for the main class in"),
    ("Remove the dead code in", "remove the dead code in"),
)
FILES = ("client", "models", "handlers", "worker", "views", "serializers", "tasks", "utils")
STATUS_PROMPTS = (
    "Is memory healthy?",
    "Check memory's status for me.",
    "How much is in memory today?",
    "Is the memory index up to date?",
)
STATUS_BULLET = "- the user asked about the state of memory"


# -- the script ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Exchange:
    """One prompt of the script and what the model and the distiller make of it."""

    kind: str
    prompt: str
    #: What the scripted distiller writes for this exchange, were it captured.
    bullets: tuple[str, ...]
    #: The subject a decision, a write, a recall or a forget is about ("the billing queue").
    subject: str = ""
    #: A decision's choice ("Redis"); for a recall or forget, that of the decision asked about.
    choice: str = ""
    #: For a write: the bullet ``memory_write`` writes.
    written: str = ""
    #: For a recall: whether its subject was forgotten before it was asked.
    forgotten: bool = False
    #: For a decision: the model searches memory before it answers.
    checks_memory: bool = False

    @property
    def needle(self) -> str:
        """What a search hit must hold to be the decision asked about."""
        return f"use {self.choice} for {self.subject}"


@dataclass(frozen=True)
class ScriptSession:
    exchanges: tuple[Exchange, ...]
    #: The bridge is killed after this exchange (its index in the session).
    kill_after: int


@dataclass(frozen=True)
class Script:
    seed: int
    sessions: tuple[ScriptSession, ...]

    @property
    def exchanges(self) -> list[Exchange]:
        return [exchange for session in self.sessions for exchange in session.exchanges]

    def kinds(self) -> dict[str, int]:
        counts = Counter(exchange.kind for exchange in self.exchanges)
        return {kind: counts.get(kind, 0) for kind in KINDS}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Script:
        return cls(
            seed=int(data["seed"]),
            sessions=tuple(
                ScriptSession(
                    exchanges=tuple(Exchange(**exchange) for exchange in session["exchanges"]),
                    kill_after=int(session["kill_after"]),
                )
                for session in data["sessions"]
            ),
        )


def recall_template() -> str:
    """The body of the ``/recall`` prompt template, ``$@`` where the query goes."""
    try:
        text = RECALL_TEMPLATE.read_text(encoding="utf-8")
    except OSError:  # the template may become an extension command; its first words stay
        return f"{RECALL_PREFIX} $@"
    if text.startswith("---\n"):
        text = text.split("\n---\n", 1)[1]
    return text.strip()


def decision_bullet(subject: str, choice: str) -> str:
    return f"- the team decided to use {choice} for {subject}"


def _counts(exchanges: int, first: bool) -> list[str]:
    kinds = []
    for kind, share in MIX.items():
        if kind == FORGET and first:
            kind = DECISION
        kinds += [kind] * round(share * exchanges)
    return (kinds + [CHATTER] * exchanges)[:exchanges]


def generate(seed: int, sessions: int, exchanges: int) -> Script:
    """A script of *sessions* sessions of *exchanges* prompts each; a seed always gives the
    same one."""
    if exchanges < 8:
        raise ValueError("a session needs at least 8 exchanges for its mix and its kill")
    rng = random.Random(seed)
    subjects = [f"the {area} {component}" for area in AREAS for component in COMPONENTS]
    rng.shuffle(subjects)
    files = [f"src/{area}/{name}.py" for area in AREAS for name in FILES]
    rng.shuffle(files)
    template = recall_template()
    # Decisions made so far: (session, index in session, exchange); forgotten subjects.
    decided: list[tuple[int, int, Exchange]] = []
    forgotten: list[Exchange] = []
    made = []
    for number in range(sessions):
        kinds = _counts(exchanges, first=number == 0)
        rng.shuffle(kinds)
        kill_after = exchanges // 2 - 1
        # The exchange before the kill is no forget: its checkpoint would hide the kill's change.
        if kinds[kill_after] == FORGET:
            swap = next(i for i, kind in enumerate(kinds) if kind != FORGET)
            kinds[kill_after], kinds[swap] = kinds[swap], kinds[kill_after]
        script: list[Exchange] = []
        for index, kind in enumerate(kinds):
            exchange = _exchange(
                kind, rng, subjects, files, template, decided, forgotten, number, index
            )
            if exchange.kind == DECISION:
                decided.append((number, index, exchange))
            elif exchange.kind == FORGET:
                forgotten.append(exchange)
            script.append(exchange)
        made.append(ScriptSession(exchanges=tuple(script), kill_after=kill_after))
    return Script(seed=seed, sessions=tuple(made))


def _exchange(
    kind: str,
    rng: random.Random,
    subjects: list[str],
    files: list[str],
    template: str,
    decided: list[tuple[int, int, Exchange]],
    forgotten: list[Exchange],
    session: int,
    index: int,
) -> Exchange:
    gone_subjects = {exchange.subject for exchange in forgotten}
    if kind == SMALL_TALK:
        prompt = rng.choice(SMALL_TALK_PROMPTS)
        return Exchange(
            kind=SMALL_TALK, prompt=prompt, bullets=(f"- the user said: {prompt.casefold()}",)
        )
    if kind == QUESTION:
        known = [
            exchange
            for at, where, exchange in decided
            if (at < session or where <= index - RECALL_DISTANCE)
            and exchange.subject not in gone_subjects
        ]
        if known:
            about = rng.choice(known)
            return Exchange(
                kind=QUESTION,
                prompt=rng.choice(QUESTION_PROMPTS).format(subject=about.subject),
                bullets=(f"- the user asked which option we use for {about.subject}",),
                subject=about.subject,
                choice=about.choice,
            )
        kind = DECISION
    if kind in (RECALL, RECALL_COMMAND):
        old = [
            exchange
            for at, where, exchange in decided
            if (at < session or where <= index - RECALL_DISTANCE)
            and exchange.subject not in gone_subjects
        ]
        asked: Exchange | None = None
        if forgotten and rng.random() < FORGOTTEN_RECALL_SHARE:
            asked = rng.choice(forgotten)
        elif old:
            asked = rng.choice(old)
        if asked is not None:
            subject = asked.subject
            if kind == RECALL:
                prompt = rng.choice(RECALL_PROMPTS).format(subject=subject)
                bullet = f"- the user asked what we decided about {subject}"
            else:
                query = f"what we chose for {subject}"
                prompt = template.replace("$@", query)
                bullet = f"- the user asked to recall {query}"
            return Exchange(
                kind=kind,
                prompt=prompt,
                bullets=(bullet,),
                subject=subject,
                choice=asked.choice,
                forgotten=asked.kind == FORGET,
            )
        kind = DECISION
    if kind == FORGET:
        earlier = [
            exchange
            for at, _, exchange in decided
            if at < session and exchange.subject not in gone_subjects
        ]
        if earlier:
            target = rng.choice(earlier)
            return Exchange(
                kind=FORGET,
                prompt=f"Forget what we decided about {target.subject}; it no longer holds.",
                bullets=(
                    "- the user asked to forget the decision to use "
                    f"{target.choice} for {target.subject}",
                ),
                subject=target.subject,
                choice=target.choice,
            )
        kind = DECISION
    if kind == DECISION:
        subject, choice = subjects.pop(), rng.choice(CHOICES)
        checks = rng.random() < CHECKED_DECISION_SHARE
        template = CHECKED_DECISION_PROMPT if checks else rng.choice(DECISION_PROMPTS)
        prompt = template.format(subject=subject, choice=choice)
        return Exchange(
            kind=DECISION,
            prompt=prompt[0].upper() + prompt[1:],
            bullets=(decision_bullet(subject, choice),),
            subject=subject,
            choice=choice,
            checks_memory=checks,
        )
    if kind == WRITE:
        subject, team = subjects.pop(), rng.choice(TEAMS)
        fact = f"the {team} team owns {subject}"
        return Exchange(
            kind=WRITE,
            prompt=f"Remember that {fact}.",
            bullets=(f"- {fact}",),
            subject=subject,
            written=f"- {fact}",
        )
    if kind == STATUS:
        return Exchange(kind=STATUS, prompt=rng.choice(STATUS_PROMPTS), bullets=(STATUS_BULLET,))
    task, restated = rng.choice(TASKS)
    file = files.pop()
    said = restated.format(file=file) if "{file}" in restated else f"{restated} {file}"
    return Exchange(
        kind=CHATTER, prompt=f"{task} {file}.", bullets=(f"- the user asked to {said}",)
    )


# -- the scripted model ----------------------------------------------------------------------


def normal(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True)
class Called:
    """A tool call of the current exchange and what it returned."""

    name: str
    arguments: Mapping[str, Any]
    content: str

    @property
    def failed(self) -> bool:
        return failed(self.name, self.content)


def failed(tool: str, content: str) -> bool:
    """Whether a tool's text says it failed (the adapter's words, or pimem's own)."""
    return bool(re.match(rf"(?:{re.escape(tool)}|memory \w+) (?:failed|timed out)", content))


def this_exchange(request: ChatRequest) -> list[Called]:
    """The tool calls since the request's last user message, oldest first."""
    messages = request.messages
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    calls: dict[str, Mapping[str, Any]] = {}
    done = []
    for message in messages[last_user + 1 :]:
        for call in message.get("tool_calls") or []:
            calls[call["id"]] = call["function"]
        if message.get("role") == "tool":
            function = calls.get(str(message.get("tool_call_id", "")), {})
            done.append(
                Called(
                    name=str(function.get("name", "")),
                    arguments=json.loads(function.get("arguments") or "{}"),
                    content=text_of(message.get("content")),
                )
            )
    return done


def act(exchange: Exchange, request: ChatRequest) -> Reply:
    """The scripted model's next step in *exchange*."""
    done = this_exchange(request)
    last = done[-1] if done else None
    if last is not None and last.failed:
        # A killed bridge fails one call and says the next starts a new one: a model calls again.
        if RESTARTS in last.content and sum(call.failed for call in done) < 2:
            return ToolCall(last.name, dict(last.arguments))
        return Text(f"The memory call failed: {last.content[:200]}")
    if exchange.kind == DECISION:
        if exchange.checks_memory and last is None:
            return ToolCall("memory_search", {"query": f"{exchange.subject} decision"})
        return Text(f"Noted: {exchange.needle}.")
    if exchange.kind == CHATTER:
        return Text("Done.")
    if exchange.kind == QUESTION:  # from the snapshot or an injection: no tool call
        answer = from_memory(exchange, request)
        return Text(answer[0] if answer else f"Memory holds nothing about {exchange.subject}.")
    if exchange.kind == SMALL_TALK:
        return Text(SMALL_TALK_ANSWER)
    if exchange.kind == WRITE:
        if last is None:
            return ToolCall("memory_write", {"content": exchange.written})
        return Text("Saved to memory.")
    if exchange.kind == STATUS:
        if last is None:
            return ToolCall("memory_status")
        return Text("Memory is healthy.")
    if exchange.kind in (RECALL, RECALL_COMMAND, FORGET):
        if last is None:
            return ToolCall("memory_search", {"query": f"{exchange.subject} decision"})
        if last.name == "memory_search":
            hit = next(
                (
                    h
                    for h in read_hits(last.content)
                    if exchange.needle.casefold() in h.content.casefold()
                ),
                None,
            )
            if hit is None:
                return Text("Memory holds nothing about it.")
            tool = "memory_forget" if exchange.kind == FORGET else "memory_expand"
            return ToolCall(tool, {"chunk_hash": hit.chunk_hash})
        if last.name == "memory_forget":
            return Text("Forgotten.")
        answer = from_memory(exchange, request)
        return Text(answer[0] if answer else "Memory holds nothing about it.")
    raise ValueError(f"no behaviour for {exchange.kind!r}")


def from_memory(exchange: Exchange, request: ChatRequest) -> tuple[str, str] | None:
    """The scripted model's answer to *request* when it comes from what memory gave it, with
    the memory text it restates; ``None`` when the answer takes nothing from memory.

    A question is answered from the snapshot line holding its decision, in the decision's words
    (its choice is what the user did not say). A recall question is answered from the entry
    ``memory_expand`` returned; a ``/recall`` also cites the hit's day and time, as the recall
    skill asks. Anything else (a decision, a forget, a failed call) takes nothing from memory.
    """
    needle = exchange.needle.casefold()
    if exchange.kind == QUESTION:
        line = next(
            (
                line
                for line in snapshot_of(request.system).splitlines()
                if needle in line.casefold()
            ),
            None,
        )
        return None if line is None else (f"We decided to {exchange.needle}.", line.strip())
    if exchange.kind not in (RECALL, RECALL_COMMAND):
        return None
    done = this_exchange(request)
    if not done or done[-1].name != "memory_expand" or done[-1].failed:
        return None
    search = next((c for c in reversed(done) if c.name == "memory_search" and not c.failed), None)
    hits = read_hits(search.content) if search is not None else ()
    hit = next((h for h in hits if needle in h.content.casefold()), None)
    if hit is None:
        return None
    answer = f"We decided to {exchange.needle}."
    if exchange.kind == RECALL_COMMAND:
        answer = f"We decided to {exchange.needle} ({hit.day} {hit.heading})."
    return answer, hit.content.strip()


_USER = re.compile(r"(?:^|\n\n)\[User\]: (.*?)(?=\n\n\[(?:User|Assistant)\]: |\Z)", re.S)


def distil(script: Script) -> Callable[[ChatRequest], Reply]:
    """The distiller: every user message of the exchange restated as its bullets."""
    by_prompt = {normal(exchange.prompt): exchange for exchange in script.exchanges}

    def reply(request: ChatRequest) -> Reply:
        bullets: list[str] = []
        for said in _USER.findall(request.prompt):
            exchange = by_prompt.get(normal(said))
            found = exchange.bullets if exchange else (f"- the user asked: {normal(said)}",)
            bullets += [bullet for bullet in found if bullet not in bullets]
        return Text("\n".join(bullets) or "- the user said nothing")

    return reply


def rules(script: Script) -> list[Rule]:
    by_prompt = {normal(exchange.prompt): exchange for exchange in script.exchanges}

    def scripted(request: ChatRequest) -> bool:
        return not request.is_distillation and normal(request.prompt) in by_prompt

    return [
        Rule("the script", scripted, lambda r: act(by_prompt[normal(r.prompt)], r)),
        on_distill(distil(script)),
    ]


# -- measuring -------------------------------------------------------------------------------

_BULLET = re.compile(r"^\s{0,3}[-*+]\s+")
_SNAPSHOT_START = "## Project memory\n"


def entries(day_text: str) -> list[list[str]]:
    """The bullets of each ``### HH:MM`` entry of a daily memory file, in file order."""
    return [
        [fact(line) for line in entry.text.split("\n")[1:] if _BULLET.match(line)]
        for entry in list_entries(day_text)
    ]


def fact(bullet: str) -> str:
    """A bullet as capture's duplicate check compares it: no marker, case, space or final dot."""
    return " ".join(_BULLET.sub("", bullet, count=1).split()).casefold().rstrip(".")


def snapshot_of(system_prompt: str) -> str:
    """The snapshot pimem appended to a system prompt (``""`` when there is none)."""
    at = system_prompt.rfind(_SNAPSHOT_START)
    return system_prompt[at:] if at >= 0 else ""


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def record(
    session: int, exchange: int, request: ChatRequest, script: Exchange | None = None
) -> dict[str, Any]:
    """What the counts need of one agent request: where it was, the snapshot it carried, the
    tool result it answered, the per-prompt context it carried and, when the scripted model's
    reply to it (*script*'s) restates memory, the memory text it restates."""
    snapshot = snapshot_of(request.system)
    result = request.last_tool_result
    broke = result is not None and failed(result.name, result.content)
    used = from_memory(script, request) if script is not None else None
    return {
        "session": session,
        "exchange": exchange,
        "snapshot": digest(snapshot),
        "snapshot_bytes": len(snapshot.encode()),
        "tool": result.name if result else None,
        "failed": broke,
        "injected": injected(request),
        **({"used": used[1]} if used is not None else {}),
        **({"error": result.content[:300]} if result is not None and broke else {}),
    }


_CONTEXT_HIT = re.compile(r"^\d+\.\s+\d{4}-\d{2}-\d{2}\b", re.M)


def injected(request: ChatRequest) -> bool:
    """Whether *request* carries a per-prompt context message of memory hits (auto-context's
    numbered blocks, as pi passes an extension's hidden message on): one starts an exchange,
    so only the messages after the last assistant message are looked at."""
    messages = request.messages
    last_assistant = max(
        (i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=0
    )
    return any(
        m.get("role") == "user" and _CONTEXT_HIT.search(text_of(m.get("content")))
        for m in messages[last_assistant + 1 :]
    )


def _first_sentence(text: str) -> str:
    """An error's gist, the same in every run (collection names are per project)."""
    gist = text.split(". ", 1)[0].split("\n", 1)[0]
    return re.sub(r"\bms_\w+", "<collection>", gist)


def per_100(count: int, exchanges: int) -> float:
    return 100.0 * count / exchanges if exchanges else 0.0


def _mentions(subject: str) -> re.Pattern[str]:
    return re.compile(rf"\b{re.escape(subject.casefold())}\b")


def measure(
    script: Script,
    day_texts: Sequence[str],
    records: Sequence[Mapping[str, Any]],
    kills: Iterable[int] = (),
) -> dict[str, Any]:
    """The workload's counts from what a run left: the day files at the end, one record per
    agent request (:func:`record`) and the sessions whose bridge was killed."""
    flat = [(s, e, x) for s, ses in enumerate(script.sessions) for e, x in enumerate(ses.exchanges)]
    exchanges = len(flat)
    by_fact: dict[str, set[str]] = {}
    for _, _, exchange in flat:
        for bullet in exchange.bullets:
            by_fact.setdefault(fact(bullet), set()).add(exchange.kind)
    found = [entry for text in day_texts for entry in entries(text)]

    def kinds_of(entry: list[str]) -> set[str]:
        return {kind for bullet in entry for kind in by_fact.get(bullet, ())}

    about_memory = sum(1 for entry in found if kinds_of(entry) & MEMORY_KINDS)
    answered_from_memory = sum(1 for entry in found if QUESTION in kinds_of(entry))
    small_talk = sum(1 for entry in found if SMALL_TALK in kinds_of(entry))
    unknown = sum(1 for entry in found if not kinds_of(entry))
    seen: set[frozenset[str]] = set()
    duplicates = 0
    for entry in found:
        key = frozenset(entry)
        duplicates += key in seen
        seen.add(key)
    facts = Counter(bullet for entry in found for bullet in set(entry))

    tools: dict[tuple[int, int], list[Mapping[str, Any]]] = {}
    for item in records:
        tools.setdefault((int(item["session"]), int(item["exchange"])), []).append(item)

    def succeeded(session: int, index: int, tool: str) -> bool:
        return any(r["tool"] == tool and not r["failed"] for r in tools.get((session, index), ()))

    writes = [x for _, _, x in flat if x.kind == WRITE]
    write_copies = [facts.get(fact(x.written), 0) for x in writes]
    forgets = [(s, e, x) for s, e, x in flat if x.kind == FORGET]
    forgotten = [x for s, e, x in forgets if succeeded(s, e, "memory_forget")]
    texts = [" ".join(entry) for entry in found]
    back = [x.subject for x in forgotten if any(_mentions(x.subject).search(t) for t in texts)]
    decisions = [x for _, _, x in flat if x.kind == DECISION]
    gone_subjects = {x.subject for x in forgotten}
    captured = [x for x in decisions if facts.get(fact(x.bullets[0])) or x.subject in gone_subjects]
    recalls = [(s, e, x) for s, e, x in flat if x.kind in (RECALL, RECALL_COMMAND)]
    found_again = [x for s, e, x in recalls if x.forgotten and succeeded(s, e, "memory_expand")]
    answered = [x for s, e, x in recalls if not x.forgotten and succeeded(s, e, "memory_expand")]
    snapshots = snapshot_changes(script, records, set(kills))
    # A call that met the killed bridge is expected to fail once; any other failure is news.
    errors = Counter(
        _first_sentence(str(r.get("error", "")))
        for r in records
        if r["failed"] and KILLED not in str(r.get("error", ""))
    )
    written = len(found) + len(forgotten)
    write_duplicates = sum(copies - 1 for copies in write_copies if copies > 1)
    return {
        "exchanges": exchanges,
        "kinds": script.kinds(),
        "entries_at_end": len(found),
        "entries_written": written,
        "entries_about_memory": about_memory,
        "entries_answered_from_memory": answered_from_memory,
        "entries_small_talk": small_talk,
        "entries_unknown": unknown,
        "duplicate_entries": duplicates,
        "explicit_writes": len(writes),
        "explicit_writes_missing": sum(1 for copies in write_copies if copies == 0),
        "explicit_write_duplicates": write_duplicates,
        "forgets": len(forgets),
        "forgets_done": len(forgotten),
        "forgotten_back": len(back),
        "forgotten_back_subjects": back,
        "forgotten_found_by_recall": len(found_again),
        "recalls": len(recalls),
        "recalls_of_forgotten": sum(1 for _, _, x in recalls if x.forgotten),
        "recalls_answered": len(answered),
        "decisions": len(decisions),
        "decisions_captured": len(captured),
        "decisions_missed": [x.bullets[0] for x in decisions if x not in captured],
        "decisions_asked": sum(1 for x in decisions if x.prompt.endswith("?")),
        "decisions_checked": sum(1 for x in decisions if x.checks_memory),
        "kills": len(set(kills)),
        "calls_failed_after_kill": sum(
            1 for r in records if r["failed"] and KILLED in str(r.get("error", ""))
        ),
        "calls_failed_otherwise": dict(errors),
        "per_100": {
            name: per_100(count, exchanges)
            for name, count in (
                ("entries_written", written),
                ("entries_about_memory", about_memory),
                ("entries_answered_from_memory", answered_from_memory),
                ("entries_small_talk", small_talk),
                ("duplicate_entries", duplicates),
                ("explicit_write_duplicates", write_duplicates),
                ("forgotten_back", len(back)),
                ("snapshot_changes", snapshots["total"]),
                ("snapshot_changes_across_kills", snapshots["across_kills"]),
            )
        },
        "snapshots": snapshots,
    }


def snapshot_changes(
    script: Script, records: Sequence[Mapping[str, Any]], kills: set[int]
) -> dict[str, Any]:
    """Within each session, every change of the snapshot from one agent request to the next:
    after a forget (a checkpoint: the snapshot is rebuilt), across the bridge's kill (from the
    kill up to the next checkpoint), or elsewhere."""
    at_checkpoints = across_kills = other = 0
    distinct: list[int] = []
    for number, session in enumerate(script.sessions):
        mine = [r for r in records if int(r["session"]) == number]
        distinct.append(len({r["snapshot"] for r in mine}))
        checkpoint_since_kill = False
        for before, after in itertools.pairwise(mine):
            start, end = int(before["exchange"]), int(after["exchange"])
            forgot = start != end and any(
                r["tool"] == "memory_forget" and not r["failed"]
                for r in mine
                if int(r["exchange"]) == start
            )
            killed = number in kills and end > session.kill_after
            if forgot and start > session.kill_after:
                checkpoint_since_kill = True
            if before["snapshot"] == after["snapshot"]:
                continue
            if forgot:
                at_checkpoints += 1
            elif killed and not checkpoint_since_kill:
                across_kills += 1
            else:
                other += 1
    return {
        "total": at_checkpoints + across_kills + other,
        "at_checkpoints": at_checkpoints,
        "across_kills": across_kills,
        "other": other,
        "distinct_per_session": distinct,
    }


# -- targets ---------------------------------------------------------------------------------


def targets(run: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets, on one measured run of this checkout."""
    m = run["metrics"]
    name = f"workload, pi {run['line']}"
    n = m["exchanges"]

    def check(target: str, met: bool, measured: str) -> dict[str, Any]:
        return {"target": f"{name}: {target}", "chunks": None, "measured": measured, "met": met}

    def rate(count: int, of: str) -> str:
        return f"{per_100(count, n):.1f} per 100 exchanges ({count} {of})"

    write_dups, missing = m["explicit_write_duplicates"], m["explicit_writes_missing"]
    undone = m["forgets"] - m["forgets_done"]
    kills, sessions = m["kills"], len(m["snapshots"]["distinct_per_session"])
    copies = rate(write_dups, f"extra copies of {m['explicit_writes']} writes")
    back = rate(m["forgotten_back"], f"of {m['forgets_done']} forgotten")
    share = 100 * m["decisions_captured"] / max(1, m["decisions"])
    return [
        check(
            "0 entries about memory",
            m["entries_about_memory"] == 0,
            rate(m["entries_about_memory"], f"of {m['entries_at_end']} entries"),
        ),
        check(
            "0 entries of questions answered from memory",
            m["entries_answered_from_memory"] == 0 and m["kinds"].get(QUESTION, 0) > 0,
            rate(m["entries_answered_from_memory"], f"of {m['kinds'].get(QUESTION, 0)} questions"),
        ),
        check(
            "0 entries of small talk",
            m["entries_small_talk"] == 0 and m["kinds"].get(SMALL_TALK, 0) > 0,
            rate(m["entries_small_talk"], f"of {m['kinds'].get(SMALL_TALK, 0)} small talk"),
        ),
        check(
            "0 duplicates of an explicit write",
            write_dups == 0 and missing == 0,
            copies + (f", {missing} writes missing" if missing else ""),
        ),
        # Vacuous without forgets: each one planned must have been done.
        check(
            "0 forgotten subjects back",
            m["forgotten_back"] == 0 and undone == 0 and m["forgets"] > 0,
            back + (f"; {undone} forgets not done" if undone else ""),
        ),
        check(
            "100% of decisions captured",
            m["decisions_captured"] == m["decisions"] > 0,
            f"{share:.0f}% ({m['decisions_captured']} of {m['decisions']})",
        ),
        check(
            "0 snapshot changes within a session across a bridge kill",
            m["snapshots"]["across_kills"] == 0 and kills == sessions,
            rate(m["snapshots"]["across_kills"], f"over {kills} kills in {sessions} sessions"),
        ),
    ]


# -- running ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkloadPlan:
    sessions: int = 8
    exchanges: int = 30
    seed: int = 0
    lines: tuple[str, ...] = ("1.6", "0.73")
    #: Also run the code before the capture gates (``BEFORE_COMMIT``).
    before: bool = True
    #: Lines also run with the bridge killed the moment a prompt settles (no targets).
    at_once: tuple[str, ...] = ("1.6",)


WORKLOAD_FULL = WorkloadPlan()
WORKLOAD_QUICK = WorkloadPlan(sessions=3, exchanges=16, lines=("1.6",), before=False, at_once=())


@dataclass
class Variant:
    """The code a run uses: this checkout, or another tree of pimem."""

    name: str
    label: str
    adapter: Path = ADAPTER_DIR
    env: dict[str, str] = field(default_factory=dict)
    note: str = ""
    #: Kill the bridge as soon as the prompt settles, not once it is idle.
    kill_at_once: bool = False
    #: The code keeps a usage record (the code before the capture gates has none).
    records_usage: bool = True


def after_variant() -> Variant:
    return Variant(name="after", label="after (this checkout)")


def at_once_variant() -> Variant:
    return Variant(
        name="after-at-once",
        label="after, bridge killed at once",
        kill_at_once=True,
        note="this checkout, with each bridge killed the moment its prompt settled instead "
        "of once idle: capture may still hold the exchange, and the capture journal hands it "
        "to the next bridge",
    )


def before_variant(root: Path, log: Callable[[str], None]) -> Variant:
    """pimem as of ``BEFORE_COMMIT``: its tree from git, run by this virtual environment with
    the tree first on ``sys.path``. When that cannot be made, this checkout with the capture
    gates off, which says so."""
    try:
        return _before_tree(root)
    except (OSError, subprocess.SubprocessError, RuntimeError) as error:
        log(f"workload: no tree of {BEFORE_COMMIT} ({error}); before is the gates switched off")
        return Variant(
            name="before",
            label="before (gates off)",
            env={"PIMEM_DISABLE_PLUGINS": "capture-gates"},
            note=f"the tree of {BEFORE_COMMIT} could not be made ({error}): this checkout "
            "with PIMEM_DISABLE_PLUGINS=capture-gates instead",
        )


def _before_tree(root: Path) -> Variant:
    tree = root / f"pimem-{BEFORE_COMMIT}"
    tree.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", BEFORE_COMMIT],
        capture_output=True,
        check=True,
        timeout=120,
    )
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True, timeout=120)
    # The old adapter resolves its packages (typebox) from its own directory.
    (tree / "adapters" / "pi" / "node_modules").symlink_to(ADAPTER_DIR / "node_modules")
    command = root / "pimem-before"
    command.write_text(
        "#!/bin/sh\n"
        f"PYTHONPATH={shlex.quote(str(tree))} exec {shlex.quote(sys.executable)} "
        '-m pimem_core "$@"\n'
    )
    command.chmod(0o755)
    # capture-gates is in this distribution's entry points, not in the old tree.
    env = {"PIMEM_BIN": str(command), "PIMEM_DISABLE_PLUGINS": "capture-gates"}
    probe = subprocess.run(
        [str(command), "plugins", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
        check=False,
    )
    if probe.returncode != 0:
        raise RuntimeError(f"pimem plugins failed in the old tree: {probe.stderr[-500:]}")
    listed = json.loads(probe.stdout)["plugins"]
    failed_plugins = [p["name"] for p in listed if p["status"] == "failed"]
    if failed_plugins:
        raise RuntimeError(f"plugins failed to load in the old tree: {failed_plugins}")
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "import pimem_core, pimem_plugins; print(pimem_core.__file__, pimem_plugins.__file__)",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tree)},
        cwd=root,  # not this checkout: the current directory comes first on sys.path
        check=True,
        timeout=60,
    ).stdout.split()
    if not all(Path(path).is_relative_to(tree) for path in where):
        raise RuntimeError(f"the old tree is not what Python imports: {where}")
    return Variant(
        name="before",
        label=f"before ({BEFORE_COMMIT})",
        records_usage=False,
        adapter=tree / "adapters" / "pi",
        env=env,
        note=f"pimem and its pi adapter as of {BEFORE_COMMIT}, before the capture gates",
    )


def _wait_quiet(pid: int, quiet: float = 1.0, timeout: float = 30.0) -> None:
    """Until *pid* used no CPU for *quiet* seconds: its capture and index work are done."""
    started = since = time.monotonic()
    last = cpu_ticks(pid)
    while time.monotonic() - started < timeout:
        time.sleep(0.1)
        ticks = cpu_ticks(pid)
        if ticks != last:
            last, since = ticks, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return


def run_variant(
    line: PiLine,
    variant: Variant,
    script: Script,
    root: Path,
    model: OfflineModel,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """The script on *line* with *variant*'s code, in a fresh project, home and agent dir."""
    repo = root / "project"
    (repo / ".git").mkdir(parents=True)
    home = root / "home"
    write_memsearch_config(
        home, provider=model.provider, model=model.model, milvus_uri=root / "milvus.db"
    )
    # Bridges in process: the workload kills them, and compares with code of before the service.
    base = isolated_environment(home, {**model.environment(), "PIMEM_SERVICE": "off"})
    limit = 8 * len(script.exchanges) + 50
    records: list[dict[str, Any]] = []
    kills: list[int] = []
    seconds: list[float] = []
    started = time.perf_counter()
    with ModelServer(rules(script), max_requests=limit) as server:
        world = PiWorld.create(
            line,
            repo=repo,
            agent_dir=root / "agent",
            server=server,
            base_env=base,
            extra_env={"PIMEM_NOW": NOW, **variant.env},
        )
        command = [
            *line.command()[:2],
            "-e",
            str(variant.adapter),
            "--model",
            MODEL,
            "--mode",
            "rpc",
        ]
        for number, session in enumerate(script.sessions):
            began = time.perf_counter()
            pi = RpcSession(command, cwd=repo, env=world.env, settled_event=line.settled_event)
            with pi:
                for index, exchange in enumerate(session.exchanges):
                    seen = len(server.requests)
                    pi.prompt(exchange.prompt, timeout=180)
                    records += [
                        record(number, index, request, exchange)
                        for request in server.agent_requests()
                        if request.index >= seen
                    ]
                    at_kill = index == session.kill_after
                    if at_kill and _kill_bridge(pi, wait=not variant.kill_at_once):
                        kills.append(number)
                code = pi.close(timeout=90)
            if code != 0:
                raise RuntimeError(f"pi {line.name} exited with {code}: {pi.stderr[-5:]}")
            seconds.append(time.perf_counter() - began)
            log(
                f"workload {variant.name}, pi {line.name}: session {number + 1} of "
                f"{len(script.sessions)} took {seconds[-1]:.0f} s"
            )
        sessions = world.session_files()
        _take_in_the_last_exchange(command, repo, home, world, line)
        failures = list(server.failures)
        distillations = len(server.distillations())
    if failures:
        raise RuntimeError(f"workload on pi {line.name}: the model server saw {failures[:5]}")
    memory = repo / ".memsearch" / "memory"
    # Anchors name the run's transcripts: kept relative to the run, not to this machine.
    day_files = {
        path.name: path.read_text().replace(str(root), "<run>")
        for path in sorted(memory.glob("*.md"))
    }
    for item in records:
        if "error" in item:
            item["error"] = item["error"].replace(str(root), "<run>")
    metrics = measure(script, list(day_files.values()), records, kills)
    usage = None
    if variant.records_usage:
        usage = usage_of(script, records, sessions, home, world.env, repo, metrics)
    return {
        "line": line.name,
        "variant": variant.name,
        "label": variant.label,
        "note": variant.note,
        "seconds": time.perf_counter() - started,
        "session_seconds": seconds,
        "distillations": distillations,
        "metrics": metrics,
        "usage": usage,
        "records": records,
        "day_files": day_files,
    }


def usage_of(
    script: Script,
    records: Sequence[Mapping[str, Any]],
    sessions: Sequence[Path],
    home: Path,
    env: Mapping[str, str],
    repo: Path,
    metrics: Mapping[str, Any],
) -> dict[str, Any]:
    """The run's usage record beside what the scripted model knows
    (:func:`bench.workload_usage.compare`), with the record's lines counted by kind."""
    prompts = [[exchange.prompt for exchange in session.exchanges] for session in script.sessions]
    turns = workload_usage.exchange_turns(sessions, prompts)
    lines = workload_usage.read_record(home)
    report = workload_usage.pimem_usage(env, repo)
    seconds, chart = workload_usage.timed_usage_text(env, repo)
    used = [line for line in lines if line["kind"] == "used"]
    compared = workload_usage.compare(
        records, used, turns, report["counts"], metrics["entries_written"]
    )
    return compared | {
        "usage_seconds": seconds,
        "usage_chart": chart,
        "record_kinds": dict(Counter(str(line["kind"]) for line in lines)),
        "pimem_usage_counts": report["counts"],
        "record_used": [
            {key: line.get(key) for key in ("session", "turn", "via", "evidence", "term")}
            | {
                "exchange": turns.get(
                    workload_usage.turn_key(line["session"], str(line.get("turn")))
                )
            }
            for line in used
        ],
    }


def _take_in_the_last_exchange(
    command: Sequence[str], repo: Path, home: Path, world: PiWorld, line: PiLine
) -> None:
    """One more session in the project, with no prompt: pi's exit hands the exchange in flight
    to the next session (ADR 0028), which captures it as it starts. It starts once the last
    session's bridge, finishing alone, has journaled what it left, and is closed once no
    capture journal is left (the code before the service keeps none: at once)."""
    wait_for(lambda: not bridges_in(repo), 60, "the last session's bridge to finish")
    # pimem's state under the run's HOME (no XDG variable is set there).
    journals = home / ".local" / "state" / "pimem" / "capture-journal"
    pi = RpcSession(list(command), cwd=repo, env=world.env, settled_event=line.settled_event)
    with pi:
        wait_for(
            lambda: not any(journals.glob("*.json")), 120, "the handed-over exchange's capture"
        )
        code = pi.close(timeout=90)
    if code != 0:
        raise RuntimeError(f"pi {line.name} exited with {code}: {pi.stderr[-5:]}")


def _kill_bridge(pi: RpcSession, *, wait: bool) -> bool:
    """SIGKILL the session's bridge (once it is idle, with *wait*); ``False`` when there was
    none to kill."""
    bridges = bridge_pids(pi.pid)
    if len(bridges) != 1:
        return False
    (bridge,) = bridges
    if wait:
        _wait_quiet(bridge)
    os.kill(bridge, signal.SIGKILL)
    wait_for(lambda: gone(bridge), 10, "pi to reap the killed bridge")
    return True


def _version(line: PiLine) -> str:
    package = json.loads((line.cli.parent.parent / "package.json").read_text())
    return str(package["version"])


def run_workload(
    plan: WorkloadPlan, workdir: Path, model: OfflineModel, log: Callable[[str], None]
) -> dict[str, Any]:
    """The script on every pi line of the plan that is installed: this checkout, then (unless
    the plan says not) the code before the capture gates."""
    import shutil

    root = workdir / "workload"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    script = generate(plan.seed, plan.sessions, plan.exchanges)
    variants = [after_variant()]
    if plan.before:
        variants.append(before_variant(root / "before-code", log))
    runs, skipped = [], {}
    for name in plan.lines:
        line = PI_LINES[name]
        reason = line.missing()
        if reason is not None:
            log(f"workload, pi {name}: not measured ({reason})")
            skipped[name] = reason
            continue
        extra = [at_once_variant()] if name in plan.at_once else []
        for variant in [*variants, *extra]:
            log(
                f"workload {variant.name}, pi {name}: {plan.sessions} sessions of "
                f"{plan.exchanges} exchanges"
            )
            run = run_variant(line, variant, script, root / f"{variant.name}-{name}", model, log)
            runs.append(run | {"pi": _version(line)})
    checks = [check for run in runs if run["variant"] == "after" for check in targets(run)]
    checks += [
        check
        for run in runs
        if run["variant"] == "after" and run["usage"] is not None
        for check in workload_usage.targets(f"workload, pi {run['line']}", run["usage"])
    ]
    return {
        "plan": asdict(plan),
        "format": FORMAT,
        "script": script.to_json(),
        "runs": runs,
        "skipped": skipped,
        "targets": checks,
    }
