"""Secret scrubbing: value-shaped secrets become typed placeholders before memory keeps them.

Memory is plain markdown that agents share, commit and index, so a key pasted into a
conversation must never reach a daily memory file or a distiller. The shapes come from plugins
(``pimem_collect_secret_patterns``); this module only applies them.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import subprocess
import sys

import attrs

from pimem_core.types import SecretPattern

log = logging.getLogger(__name__)

#: Texts longer than this are scrubbed in a child process. A pattern's pass over a text holds
#: the interpreter's lock for its whole length (about 0.07 s a megabyte for the slowest of some
#: forty patterns), so a multi-megabyte ``pimem write -`` would hold every other request of
#: the memory service, or of a host session, for seconds; a child costs some 0.07 s instead,
#: which below this length is more than the scrub itself.
APART_CHARS = 256 * 1024


def placeholder(name: str) -> str:
    return f"[REDACTED:{name}]"


def _redact(name: str, match: re.Match[str]) -> str:
    whole = match.group(0)
    if "secret" not in match.re.groupindex or match.start("secret") < 0:
        return placeholder(name)
    start = match.start("secret") - match.start()
    end = match.end("secret") - match.start()
    return whole[:start] + placeholder(name) + whole[end:]


@attrs.frozen(kw_only=True)
class Scrubbed:
    """A text with its secrets replaced, and how many of each kind were."""

    text: str
    #: ``(pattern name, count)`` for each kind found, in the patterns' order.
    found: tuple[tuple[str, int], ...] = ()

    @property
    def count(self) -> int:
        return sum(count for _, count in self.found)


@attrs.frozen
class Scrubber:
    """Applies every secret pattern, in order, to a text."""

    patterns: tuple[SecretPattern, ...]

    def scrub(self, text: str) -> str:
        return self.scrubbed(text).text

    def scrubbed(self, text: str) -> Scrubbed:
        """*text* scrubbed, with what was found: a write tells its writer (never the secret).
        A long text is scrubbed in a child process (:data:`APART_CHARS`), the same way."""
        if len(text) > APART_CHARS and self.patterns:
            apart = _scrubbed_apart(self.patterns, text)
            if apart is not None:
                return apart
        return self.scrubbed_here(text)

    def scrubbed_here(self, text: str) -> Scrubbed:
        """:meth:`scrubbed`, in this process."""
        found: dict[str, int] = {}
        for secret in self.patterns:
            text, count = secret.pattern.subn(functools.partial(_redact, secret.name), text)
            if count:
                found[secret.name] = found.get(secret.name, 0) + count
        return Scrubbed(text=text, found=tuple(found.items()))


def _scrubbed_apart(patterns: tuple[SecretPattern, ...], text: str) -> Scrubbed | None:
    """*text* scrubbed by a child process (``python -m pimem_core.scrub``), or ``None`` when
    that failed: the caller scrubs it here then, slower for others but never skipped."""
    request = {
        "patterns": [
            [secret.name, secret.pattern.pattern, secret.pattern.flags] for secret in patterns
        ],
        "text": text,
    }
    try:
        done = subprocess.run(
            # -P: no module of the directory it runs in (a project's) before the library's.
            [sys.executable, "-P", "-m", "pimem_core.scrub"],
            input=json.dumps(request).encode("ascii"),
            capture_output=True,
            check=True,
        )
        answer = json.loads(done.stdout)
        return Scrubbed(
            text=str(answer["text"]),
            found=tuple((str(name), int(count)) for name, count in answer["found"]),
        )
    except (OSError, ValueError, KeyError, TypeError, subprocess.CalledProcessError) as error:
        log.warning("scrubbing a long text in a child process failed (%s): scrubbed here", error)
        return None


def _scrub_stdin() -> None:
    """The child's side: the patterns and the text as JSON on stdin, the result on stdout."""
    request = json.loads(sys.stdin.buffer.read())
    scrubber = Scrubber(
        tuple(
            SecretPattern(name=name, pattern=re.compile(source, flags))
            for name, source, flags in request["patterns"]
        )
    )
    scrubbed = scrubber.scrubbed_here(request["text"])
    # ASCII: a lone surrogate in the text (it came from JSON) travels back escaped, unchanged.
    sys.stdout.buffer.write(
        json.dumps({"text": scrubbed.text, "found": scrubbed.found}).encode("ascii")
    )


if __name__ == "__main__":
    _scrub_stdin()
