"""Secret scrubbing: value-shaped secrets become typed placeholders before memory keeps them.

Memory is plain markdown that agents share, commit and index, so a key pasted into a
conversation must never reach a daily memory file or a distiller. The shapes come from plugins
(``pimem_collect_secret_patterns``); this module only applies them.
"""

from __future__ import annotations

import functools
import re

import attrs

from pimem_core.types import SecretPattern


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
        """*text* scrubbed, with what was found: a write tells its writer (never the secret)."""
        found: dict[str, int] = {}
        for secret in self.patterns:
            text, count = secret.pattern.subn(functools.partial(_redact, secret.name), text)
            if count:
                found[secret.name] = found.get(secret.name, 0) + count
        return Scrubbed(text=text, found=tuple(found.items()))
