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


@attrs.frozen
class Scrubber:
    """Applies every secret pattern, in order, to a text."""

    patterns: tuple[SecretPattern, ...]

    def scrub(self, text: str) -> str:
        for secret in self.patterns:
            text = secret.pattern.sub(functools.partial(_redact, secret.name), text)
        return text
