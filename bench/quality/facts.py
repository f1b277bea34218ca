"""Facts: one thing that happened in a session, as the memory bullet, the exchange, the queries.

A fact knows how the user asked for it (``prompt``), how the assistant answered (``report``,
which may carry a raw secret: transcripts keep what was said), the bullet pimem keeps (before
scrubbing) and three queries that look for it: ``keyword`` (the terms someone would type),
``paraphrase`` (the same meaning in other words) and ``question`` (a natural question that
mixes the code's own names with other words). ``key`` is everything the queries mention: a
query is fair only for a fact whose key no other fact of the searched store shares.

The makers draw from one random stream, so a seed gives the same facts; storylines (a bug
found, then fixed; a decision, then reversed; a dependency's versions going up) live in
:class:`ProjectState`.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from dataclasses import dataclass, field

from bench.corpus import DEPENDENCIES
from bench.quality.vocabulary import (
    ACTIONS,
    CAUSES,
    CONSEQUENCES,
    ENVIRONMENTS,
    FAILURES,
    FLAKE_CAUSES,
    FLAKE_FIXES,
    MODULES,
    NOUNS,
    PREFERENCES,
    REASONS,
    REVERSAL_REASONS,
    SERVICES,
    SETTINGS,
    SITUATIONS,
    SUFFIXES,
    TOPICS,
    VERBS,
    Project,
    Term,
)

STYLES = ("keyword", "paraphrase", "question")


@dataclass(frozen=True)
class Fact:
    kind: str
    key: tuple[str, ...]
    bullet: str
    prompt: str
    report: str
    keyword: str
    paraphrase: str
    question: str
    #: The raw secret the exchange carried; it must never reach memory.
    secret: str | None = None

    def query(self, style: str) -> str:
        if style not in STYLES:
            raise ValueError(f"unknown query style {style!r}")
        text: str = getattr(self, style)
        return text


@dataclass
class ProjectState:
    """What a project's later facts build on."""

    project: Project
    open_bugs: list[tuple[Term, Term, Term, Term]] = field(default_factory=list)
    decisions: list[tuple[Term, Term, Term, str, str]] = field(default_factory=list)
    versions: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    #: The component the current session works on: most of its facts are about it.
    focus: Term | None = None


def _component(rng: random.Random, state: ProjectState) -> Term:
    if state.focus is not None and rng.random() < 0.7:
        return state.focus
    return rng.choice(state.project.components)


def _identifier(rng: random.Random) -> str:
    noun = rng.choice(NOUNS).keywords.replace(" ", "_").lower()
    return f"{rng.choice(VERBS).keywords}_{noun}{rng.choice(SUFFIXES)}"


def _module(rng: random.Random, component: Term) -> str:
    return f"src/{component.text}/{rng.choice(MODULES)}.py"


def bug(rng: random.Random, state: ProjectState) -> Fact:
    failure, verb, noun = rng.choice(FAILURES), rng.choice(VERBS), rng.choice(NOUNS)
    component, cause = _component(rng, state), rng.choice(CAUSES)
    path = _module(rng, component)
    state.open_bugs.append((failure, verb, noun, component))
    return Fact(
        kind="bug",
        key=("bug", failure.text, verb.text, noun.text, component.text),
        bullet=f"- the agent traced {failure.text} when {verb.text} {noun.text} in "
        f"{component.text} to {cause} (`{path}`)",
        prompt=f"We see {failure.text} when {verb.text} {noun.text} in {component.text}. "
        "Can you find the cause?",
        report=f"Found it: {failure.text} when {verb.text} {noun.text} comes from {cause}, "
        f"in {path}.",
        keyword=f"{failure.keywords} {verb.keywords} {noun.keywords} {component.keywords} cause",
        paraphrase=f"what was behind {failure.other} while {verb.other} {noun.other} in "
        f"{component.other}",
        question=f"why did {verb.text} {noun.text} in {component.text} end up with "
        f"{failure.other}?",
    )


def fix(rng: random.Random, state: ProjectState) -> Fact:
    if state.open_bugs and rng.random() < 0.6:  # most fixes close a bug found earlier
        failure, verb, noun, component = state.open_bugs.pop(rng.randrange(len(state.open_bugs)))
    else:
        failure, verb, noun = rng.choice(FAILURES), rng.choice(VERBS), rng.choice(NOUNS)
        component = _component(rng, state)
    issue, action = rng.randint(100, 9999), rng.choice(ACTIONS)
    test = f"tests/{component.text}/test_{rng.choice(MODULES)}.py"
    return Fact(
        kind="fix",
        key=("fix", failure.text, verb.text, noun.text, component.text),
        bullet=f"- the agent fixed {failure.text} when {verb.text} {noun.text} in "
        f"{component.text} (#{issue}) by {action}; the regression test is in {test}",
        prompt=f"Please fix {failure.text} when {verb.text} {noun.text} in {component.text} "
        f"(issue #{issue}).",
        report=f"Fixed #{issue} by {action}; added a regression test in {test}.",
        keyword=f"fix {failure.keywords} {verb.keywords} {noun.keywords} {component.keywords}",
        paraphrase=f"how {failure.other} while {verb.other} {noun.other} in {component.other} "
        "got resolved",
        question=f"how did we stop {failure.other} when {verb.text} {noun.text} in "
        f"{component.text}?",
    )


def decision(rng: random.Random, state: ProjectState) -> Fact:
    topic = rng.choice(TOPICS)
    chosen, rejected = rng.sample(topic.options, 2)
    noun, component, reason = rng.choice(NOUNS), _component(rng, state), rng.choice(REASONS)
    term = topic.term
    state.decisions.append((term, noun, component, chosen, rejected))
    return Fact(
        kind="decision",
        key=("decision", term.text, noun.text, component.text, chosen),
        bullet=f"- the user and the agent chose {chosen} over {rejected} as the {term.text} "
        f"for {noun.text} in {component.text} because {reason}",
        prompt=f"Should we use {chosen} or {rejected} as the {term.text} for {noun.text} in "
        f"{component.text}?",
        report=f"I would go with {chosen}: {reason}. {component.text} uses it now.",
        keyword=f"{chosen} {term.keywords} {noun.keywords} {component.keywords}",
        paraphrase=f"the reasoning for picking {chosen} as the {term.other} for {noun.other} "
        f"in {component.other}",
        question=f"why did we go with {chosen} for the {term.text} of {noun.text} in "
        f"{component.text}?",
    )


def reversal(rng: random.Random, state: ProjectState) -> Fact:
    if not state.decisions:
        return decision(rng, state)
    term, noun, component, chosen, rejected = state.decisions.pop(
        rng.randrange(len(state.decisions))
    )
    why = rng.choice(REVERSAL_REASONS)
    return Fact(
        kind="reversal",
        key=("reversal", term.text, noun.text, component.text, chosen),
        bullet=f"- the agent switched the {term.text} for {noun.text} in {component.text} back "
        f"from {chosen} to {rejected} because {why}",
        prompt=f"{chosen} keeps causing trouble for {noun.text} in {component.text}; let us go "
        f"back to {rejected}.",
        report=f"Reverted the {term.text} for {noun.text} to {rejected}: {why}.",
        keyword=f"revert {chosen} {term.keywords} {noun.keywords} {component.keywords}",
        paraphrase=f"why {chosen} was abandoned as the {term.other} for {noun.other} in "
        f"{component.other}",
        question=f"why did we drop {chosen} for the {term.text} of {noun.text} in "
        f"{component.text}?",
    )


def rename(rng: random.Random, state: ProjectState) -> Fact:
    old = _identifier(rng)
    new = _identifier(rng)
    while new == old:
        new = _identifier(rng)
    path, sites = _module(rng, _component(rng, state)), rng.randint(2, 40)
    return Fact(
        kind="rename",
        key=("rename", old),
        bullet=f"- the agent renamed `{old}` to `{new}` in `{path}` and updated {sites} call sites",
        prompt=f"Rename {old} to {new}, it reads better.",
        report=f"Renamed {old} to {new} in {path}; {sites} call sites updated.",
        keyword=f"{old} rename",
        paraphrase=f"the new name given to the function formerly known as {old}",
        question=f"what is `{old}` called now?",
    )


def _bump(rng: random.Random, version: tuple[int, int, int]) -> tuple[int, int, int]:
    major, minor, patch = version
    roll = rng.random()
    if roll < 0.1:
        return major + 1, 0, 0
    if roll < 0.7:
        return major, minor + 1, 0
    return major, minor, patch + 1


def upgrade(rng: random.Random, state: ProjectState) -> Fact:
    dependency = rng.choice(DEPENDENCIES)
    old = state.versions.get(dependency) or (rng.randint(0, 4), rng.randint(0, 20), 0)
    new = _bump(rng, old)
    state.versions[dependency] = new
    before, after = ".".join(map(str, old)), ".".join(map(str, new))
    component, consequence = _component(rng, state), rng.choice(CONSEQUENCES)
    return Fact(
        kind="upgrade",
        key=("upgrade", dependency, after),
        bullet=f"- the agent upgraded {dependency} from {before} to {after} in "
        f"{component.text}; {consequence}",
        prompt=f"Can you upgrade {dependency} to {after}?",
        report=f"{dependency} is on {after} now (was {before}); {consequence}.",
        keyword=f"{dependency} {after} upgrade",
        paraphrase=f"bumping {dependency} to version {after} and the fallout",
        question=f"what happened when we upgraded {dependency} to {after}?",
    )


def flaky(rng: random.Random, state: ProjectState) -> Fact:
    verb, noun = rng.choice(VERBS), rng.choice(NOUNS)
    test = f"test_{verb.keywords}_{noun.keywords.replace(' ', '_')}_{rng.choice(SITUATIONS)}"
    component = _component(rng, state)
    where = f"tests/{component.text}/test_{rng.choice(MODULES)}.py::{test}"
    cause, remedy = rng.choice(FLAKE_CAUSES), rng.choice(FLAKE_FIXES)
    return Fact(
        kind="flaky",
        key=("flaky", test),
        bullet=f"- the agent found that `{where}` was flaky because {cause}; the test now {remedy}",
        prompt=f"{test} failed again on CI but passes locally. What is going on?",
        report=f"{test} is flaky: {cause}. It now {remedy}.",
        keyword=f"{test} flaky",
        paraphrase=f"why {test} passed only some of the time",
        question=f"what made {test} fail intermittently?",
    )


def perf(rng: random.Random, state: ProjectState) -> Fact:
    function, before = _identifier(rng), rng.randint(40, 900)
    after, action = max(1, before * rng.randint(10, 70) // 100), rng.choice(ACTIONS)
    return Fact(
        kind="perf",
        key=("perf", function),
        bullet=f"- the agent measured `{function}` at {after} ms p50 on the 10k fixture, down "
        f"from {before} ms after {action}",
        prompt=f"How fast is {function} after the change?",
        report=f"{function} now takes {after} ms at p50 (was {before} ms).",
        keyword=f"{function} latency ms",
        paraphrase=f"the latest timing numbers for {function}",
        question=f"how fast is `{function}` now?",
    )


def preference(rng: random.Random, state: ProjectState) -> Fact:
    topic, wanted = rng.choice(PREFERENCES)
    component = _component(rng, state)
    return Fact(
        kind="preference",
        key=("preference", topic.text, component.text),
        bullet=f"- the user prefers {wanted} for {topic.text} in {component.text}",
        prompt=f"For {topic.text} in {component.text}, please use {wanted} from now on.",
        report=f"Noted: {wanted} for {topic.text} in {component.text}.",
        keyword=f"{topic.keywords} {component.keywords} preference",
        paraphrase=f"how the user likes {topic.other} handled in {component.other}",
        question=f"what does the user want for {topic.text} in {component.text}?",
    )


def config(rng: random.Random, state: ProjectState) -> Fact:
    setting, values = rng.choice(SETTINGS)
    component, environment = _component(rng, state), rng.choice(ENVIRONMENTS)
    variable = f"{component.keywords.upper()}_{setting.text}"
    value, reason = rng.choice(values), rng.choice(REASONS)
    return Fact(
        kind="config",
        key=("config", variable, environment.text),
        bullet=f"- the agent set `{variable}={value}` for {environment.text} because {reason}",
        prompt=f"What should {variable} be in {environment.text}?",
        report=f"Set {variable}={value} in {environment.text}: {reason}.",
        keyword=f"{variable} {environment.keywords}",
        paraphrase=f"the value chosen for {setting.other} in {component.other} on "
        f"{environment.other}",
        question=f"what is {variable} set to in {environment.text}?",
    )


def _secret(rng: random.Random, prefix: str, alphabet: str, length: int) -> str:
    """A value in the shape of a real credential (random, so it matches no real one)."""
    alnum = string.ascii_letters + string.digits
    if alphabet == "upper":
        tail = "".join(rng.choices(string.ascii_uppercase + string.digits, k=length))
    elif alphabet == "digits-alnum":  # Slack: xoxb-<team>-<bot>-<secret>
        team, bot = rng.randrange(10**11, 10**12), rng.randrange(10**11, 10**12)
        tail = f"{team}-{bot}-" + "".join(rng.choices(alnum, k=24))
    elif alphabet == "sendgrid":  # SG.<22>.<43>
        tail = "".join(rng.choices(alnum, k=22)) + "." + "".join(rng.choices(alnum, k=43))
    else:
        # A digit in the tail: the OpenAI shape requires one.
        tail = "".join(rng.choices(alnum, k=length - 1)) + rng.choice(string.digits)
    return prefix + tail


def secret(rng: random.Random, state: ProjectState) -> Fact:
    service, credential, prefix, alphabet, length = rng.choice(SERVICES)
    component, environment = _component(rng, state), rng.choice(ENVIRONMENTS)
    value = _secret(rng, prefix, alphabet, length)
    return Fact(
        kind="secret",
        key=("secret", service, component.text, environment.text),
        bullet=f"- the agent rotated the {service} {credential} that {component.text} uses in "
        f"{environment.text}: {value}; the old one is revoked",
        prompt=f"The {service} {credential} of {component.text} in {environment.text} leaked. "
        f"Here is the new one: {value}",
        report=f"Rotated the {service} {credential} for {component.text} in "
        f"{environment.text} to {value} and revoked the old one.",
        keyword=f"{service} {credential} {component.keywords} {environment.keywords}",
        paraphrase=f"the fresh {service} credentials for {component.other} on {environment.other}",
        question=f"which {service} {credential} does {component.text} use in {environment.text}?",
        secret=value,
    )


Maker = Callable[[random.Random, ProjectState], Fact]

#: How often each kind of fact comes up.
KINDS: tuple[tuple[Maker, float], ...] = (
    (bug, 4),
    (fix, 4),
    (decision, 2),
    (reversal, 1),
    (rename, 2),
    (upgrade, 2),
    (flaky, 2),
    (perf, 1),
    (preference, 1),
    (config, 2),
    (secret, 0.5),
)
_MAKERS = [maker for maker, _ in KINDS]
_WEIGHTS = [weight for _, weight in KINDS]


def make_fact(rng: random.Random, state: ProjectState) -> Fact:
    return rng.choices(_MAKERS, weights=_WEIGHTS)[0](rng, state)
