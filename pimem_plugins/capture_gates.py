"""The ``capture-gates`` plugin: memory keeps new knowledge, not exchanges about memory itself.

These are hard rules on what the user said and what the agent did, never a model's judgement
(ADRs 0014 and 0021):

* **asked to forget**: the agent forgot an entry (``memory_forget``): capturing the exchange
  would write the forgotten subject straight back;
* **about memory**: the user asked to recall (the ``/recall`` prompt, ``/skill:recall``), or
  the agent's only work was reading memory (search, expand, transcript, status, skills, or
  reading one of pimem's skills) and the user stated nothing new. Captured, such an exchange
  comes back as the next search's hit and fills the next snapshot with questions;
* **already written**: the agent wrote memory itself (``memory_write``) and did nothing else:
  the entry is in the store already;
* **answered from memory**: the user only asked, and the agent answered in words without any
  tool call. It did no work, so its answer came from what it already had: the snapshot, an
  auto-context injection, the conversation so far (captured already) or its own knowledge;
* **small talk**: the user's words are only greetings, thanks and pleasantries, and the agent
  did no work.

"Only asked" and "stated nothing new" are read sentence by sentence from the user's words
(:func:`said`): a sentence *asks* when it opens with a question word, with a request to recall
("remind me", "search", ...) or, ending in ``?``, with a verb of fact ("did", "is", ...). Any
other sentence *states*, and one stating sentence keeps the exchange: "we pick Redis, ok?",
"can we use tabs from now on?" and "We moved to MySQL. What did we use before?" are captured.
English only; words in another language state, and are captured.

The tool names are those the pi adapter gives pimem's tools (``adapters/pi/src``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Literal

import attrs

from pimem_core.plugin import BranchEntry, Settings, hookimpl

ABOUT_MEMORY = "about memory"
ALREADY_WRITTEN = "already written"
ASKED_TO_FORGET = "asked to forget"
ANSWERED_FROM_MEMORY = "answered from memory"
SMALL_TALK = "small talk"

#: pimem's tools that only read memory.
READING_TOOLS = frozenset(
    {"memory_search", "memory_expand", "memory_transcript", "memory_status", "memory_skills"}
)
WRITING_TOOL = "memory_write"
FORGETTING_TOOL = "memory_forget"
#: How the ``/recall`` instruction begins (the message the pi adapter injects beside the user's
#: query, and the prompt template ``adapters/pi/prompts/recall.md`` it falls back to), and how
#: pi sends ``/skill:recall``: the skill's text in a ``<skill>`` block before the user's words.
RECALL_PROMPTS = ("Use the recall skill to answer from memory:", '<skill name="recall" ')
#: pimem's skills about memory itself; reading one is memory work.
MEMORY_SKILLS = ("/skills/recall/SKILL.md", "/skills/memory-diagnosis/SKILL.md")

# -- reading the user's words ---------------------------------------------------------------

#: Words that open a question.
QUESTION_WORDS = frozenset(
    {
        "what", "which", "who", "whom", "whose", "where", "when", "why", "how",
        "what's", "whats", "who's", "where's", "when's", "why's", "how's",
    }
)  # fmt: skip
#: Verbs of fact that open a yes-or-no question when the sentence ends in ``?``. Modal verbs
#: ("can", "should", "shall", "could", "would", "will") are left out: "can we use tabs?" and
#: "should we pick Redis?" propose as often as they ask.
FACT_VERBS = frozenset(
    {
        "do", "does", "did", "is", "are", "was", "were", "am", "has", "have", "had",
        "don't", "doesn't", "didn't", "isn't", "aren't", "wasn't", "weren't", "hasn't",
        "haven't", "hadn't",
    }
)  # fmt: skip
#: Requests to recall: the agent is asked to look something up, not told anything.
RECALL_REQUESTS = (
    ("remind",), ("recall",), ("search",), ("look", "up"), ("look", "for"), ("find",),
    ("check",), ("list",), ("summarize",), ("summarise",), ("tell", "me"), ("show", "me"),
)  # fmt: skip
#: Words before the opener that change nothing: "please remind me", "ok, which one?".
PREFIXES = (
    ("please",), ("pls",), ("ok",), ("okay",), ("so",), ("and",), ("also",), ("hey",),
    ("hi",), ("can", "you"), ("could", "you"), ("would", "you"), ("will", "you"),
)  # fmt: skip
#: Phrases that state a standing choice or a proposal, even inside a question.
STATING_PHRASES = (
    "from now on", "going forward", "moving forward", "from today on", "let's", "let us",
    "how about", "what if", "why not", "why don't we", "should we", "we should", "if we",
    "if i",
)  # fmt: skip
#: Small talk: greetings, thanks, pleasantries and the little words between them. A sentence
#: made only of these holds no fact. "yes", "no", "ok" and "sure" are left out: they may
#: confirm a choice the agent proposed.
SMALL_TALK_WORDS = frozenset(
    {
        "hi", "hello", "hey", "heya", "hiya", "howdy", "yo", "there", "morning", "afternoon",
        "evening", "night", "good", "gm", "thanks", "thank", "thx", "ty", "cheers", "appreciate",
        "appreciated", "how", "are", "is", "was", "you", "your", "you're", "u", "doing", "going",
        "today", "day", "week", "weekend", "been", "things", "it", "it's", "that", "that's", "this",
        "all", "everything", "life", "what's", "whats", "up", "sup", "new", "nice", "great", "cool",
        "awesome", "perfect", "wonderful", "excellent", "amazing", "lovely", "fine", "well", "glad",
        "happy", "helpful", "fantastic", "brilliant", "neat", "so", "much", "a", "lot", "very",
        "really", "too", "and", "the", "again", "for", "help", "helping", "work", "job", "done", "me",
        "i", "i'm", "am", "bye", "goodbye", "later", "see", "ya", "care", "take", "have", "lol",
        "haha", "hehe", "wow", "oh", "ah", "please", "welcome", "sorry", "looks", "sounds", "to",
    }
)  # fmt: skip

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
#: Markdown quote, list and heading marks at a line's start, and a checkbox or a short tag
#: ("[ ]", "[x]", "[WIP]") after them: none of them says anything.
_LINE_MARKS = re.compile(
    r"^\s*(?:>\s*)*(?:[-*+]\s+|\d{1,3}[.)]\s+|#{1,6}\s+)?(?:\[[^\]\n]{0,12}\]\s*)?"
)
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")

Act = Literal["asks", "states", "talk"]


@attrs.frozen
class Said:
    """What the user's words did, sentence by sentence."""

    asks: int = 0
    states: int = 0
    talk: int = 0

    @property
    def only_asked(self) -> bool:
        return self.asks > 0 and self.states == 0

    @property
    def only_talk(self) -> bool:
        return self.talk > 0 and self.asks == 0 and self.states == 0


def sentences(text: str) -> Iterable[str]:
    """*text* cut into sentences: at line ends and after ``.``, ``!`` or ``?``."""
    for line in text.splitlines():
        line = _LINE_MARKS.sub("", line)
        yield from (part.strip() for part in _SENTENCE_END.split(line) if part.strip())


def words_of(sentence: str) -> list[str]:
    return _WORD.findall(sentence.replace("\u2019", "'").casefold())


def _opens(words: Sequence[str], phrase: Sequence[str]) -> bool:
    return tuple(words[: len(phrase)]) == tuple(phrase)


def act(sentence: str) -> Act | None:
    """Whether *sentence* asks, states or is small talk; ``None`` when it holds no word."""
    words = words_of(_LINE_MARKS.sub("", sentence))
    if not words:
        return None  # "?", "👍": neither asks nor states
    if all(word in SMALL_TALK_WORDS for word in words):
        return "talk"
    joined = f" {' '.join(words)} "
    if any(f" {phrase} " in joined for phrase in STATING_PHRASES):
        return "states"
    while prefix := next((p for p in PREFIXES if _opens(words, p) and len(words) > len(p)), ()):
        words = words[len(prefix) :]
    if words[0] in QUESTION_WORDS or any(_opens(words, r) for r in RECALL_REQUESTS):
        return "asks"
    if words[0] in FACT_VERBS and sentence.rstrip(" \t)\"'*_`").endswith("?"):
        return "asks"
    return "states"


def said(texts: Iterable[str]) -> Said:
    """How the user's messages of an exchange read: how many sentences ask, state or talk."""
    acts = [act(sentence) for text in texts for sentence in sentences(text)]
    return Said(asks=acts.count("asks"), states=acts.count("states"), talk=acts.count("talk"))


# -- the gate --------------------------------------------------------------------------------


def tool_name(call: str) -> str:
    """The tool of a call one-liner such as ``memory_search(query=redis, …)``."""
    return call.split("(", 1)[0].strip()


def _memory_work(call: str) -> bool:
    name = tool_name(call)
    if name == "read":
        return any(skill in call for skill in MEMORY_SKILLS)
    return name in READING_TOOLS or name == WRITING_TOOL


def gate(window: Sequence[BranchEntry]) -> str | None:
    """Why *window* is not captured, or ``None``."""
    calls = [call for entry in window if entry.role == "assistant" for call in entry.tool_calls]
    if any(tool_name(call) == FORGETTING_TOOL for call in calls):
        return ASKED_TO_FORGET
    asked = [entry.text for entry in window if entry.role == "user"]
    # The adapter's /recall sends the user's words alone, with its instruction injected.
    injected = [entry.text for entry in window if entry.kind == "custom_message"]
    if any(text.lstrip().startswith(RECALL_PROMPTS) for text in (*asked, *injected)):
        return ABOUT_MEMORY
    words = said(asked)
    if calls and all(_memory_work(call) for call in calls):
        if any(tool_name(call) == WRITING_TOOL for call in calls):
            return ALREADY_WRITTEN
        # The agent read memory; what the user stated alongside is new and is kept.
        return None if words.states else ABOUT_MEMORY
    if calls:
        return None  # the agent worked: what it found or changed is new
    if words.only_talk:
        return SMALL_TALK
    if words.only_asked:
        return ANSWERED_FROM_MEMORY
    return None


@hookimpl
def pimem_gate_exchange(window: tuple[BranchEntry, ...], settings: Settings) -> str | None:
    return gate(window)
