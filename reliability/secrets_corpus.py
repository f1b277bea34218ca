"""Secret-shaped strings for the secrets scenario, made fresh from a seed on every run.

Each is one shape the bundled ``secret-patterns`` plugin claims (a provider key, a token, a key
block, a credential in a URL or an assignment). ``text`` is how it appears in a conversation;
``value`` is the part that must never be written or sent anywhere.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable

import attrs

ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
B64 = ALNUM + "+/"
#: A window this long of a secret's value surviving anywhere counts as a leak.
WINDOW = 12


@attrs.frozen
class Secret:
    kind: str
    text: str
    value: str

    def leaked_in(self, data: str) -> bool:
        return any(
            self.value[i : i + WINDOW] in data for i in range(0, len(self.value) - WINDOW + 1)
        )


def _pick(rng: random.Random, alphabet: str, length: int) -> str:
    # A digit in every value: some shapes (OpenAI's) require one to tell a key from a word.
    return rng.choice(string.digits) + "".join(rng.choice(alphabet) for _ in range(length - 1))


SHAPES: dict[str, Callable[[random.Random], tuple[str, str]]] = {
    "github": lambda r: (v := "ghp_" + _pick(r, ALNUM, 36), v),
    "openai": lambda r: (v := "sk-proj-" + _pick(r, ALNUM, 40), v),
    "anthropic": lambda r: (v := "sk-ant-api03-" + _pick(r, ALNUM, 48), v),
    "aws-key-id": lambda r: (v := "AKIA" + _pick(r, UPPER_DIGITS, 16), v),
    "aws-secret": lambda r: (f"aws_secret_access_key = {(v := _pick(r, B64, 40))}", v),
    "slack": lambda r: (v := "xoxb-" + _pick(r, string.digits, 12) + "-" + _pick(r, ALNUM, 24), v),
    "google": lambda r: (v := "AIza" + _pick(r, ALNUM, 35), v),
    "stripe": lambda r: (v := "sk_live_" + _pick(r, ALNUM, 28), v),
    "huggingface": lambda r: (v := "hf_" + _pick(r, ALNUM, 34), v),
    "jwt": lambda r: (
        v := "eyJ" + _pick(r, ALNUM, 30) + "." + _pick(r, ALNUM, 40) + "." + _pick(r, ALNUM, 30),
        v,
    ),
    "private-key": lambda r: (
        "-----BEGIN RSA PRIVATE KEY-----\n"
        + (v := _pick(r, B64, 64))
        + "\n"
        + _pick(r, B64, 64)
        + "\n-----END RSA PRIVATE KEY-----",
        v,
    ),
    "url-password": lambda r: (
        f"postgres://app:{(v := _pick(r, ALNUM, 20))}@db.internal:5432/app",
        v,
    ),
    "bearer": lambda r: (f"Authorization: Bearer {(v := _pick(r, ALNUM, 32))}", v),
    "env-password": lambda r: (f"DB_PASSWORD={(v := _pick(r, ALNUM, 18))}", v),
}


def secrets(seed: int) -> list[Secret]:
    rng = random.Random(seed)
    made = []
    for kind, make in SHAPES.items():
        text, value = make(rng)
        made.append(Secret(kind=kind, text=text, value=value))
    return made
