"""The bundled secret shapes: provider keys, tokens, key blocks, URL and config credentials.

Each row of ``TABLE`` is one shape, applied in order, so specific prefixes come before the
broader ones that would also match them (``sk-ant-`` before ``sk-``) and the assignment rules
come last: by then a known key in ``API_KEY=...`` is already a placeholder, and they leave
placeholders alone. Only value-shaped text is matched; code that merely names a secret
(``token = None``, ``password=args.password``, ``get_api_key()``) stays as it is.
"""

from __future__ import annotations

import re

from pimem_core.plugin import SecretPattern, hookimpl

# Not already a placeholder, a variable reference, a template or a masked value.
_NOT_PLACEHOLDER = r"(?!\[REDACTED:|[$<{%*])"
# Token characters: nothing before a token may be one of these (else it is mid-word).
_START = r"(?<![A-Za-z0-9_-])"

# A key that names a secret: the word may have a prefix and suffix (DB_PASSWORD, clientSecret,
# "aws.secret-key") but not run on in lower case (tokenizer, secretary).
_WORDS = (
    r"SECRET|TOKEN|PASSW(?:OR)?D|PASSPHRASE|API[_-]?KEY|PRIVATE[_-]?KEY|ACCESS[_-]?KEY|AUTH[_-]?KEY"
    r"|CREDENTIAL"
)
_WORD = rf"(?i:(?:{_WORDS})S?)(?![a-z])"
# ... unless the key only names where or what kind the secret is (TOKEN_URL, secret_name).
_NOT_ABOUT = "".join(
    rf"(?<!(?i:{suffix}))"
    for suffix in (
        "url", "uri", "file", "path", "dir", "name", "type", "endpoint", "header", "field",
        "param", "len", "length", "size", "count", "limit", "ttl", "expiry", "expires", "hint",
        "prefix", "env", "var", "id", "arn", "kind", "mode", "format", "scope", "scopes",
    )
)  # fmt: skip
# The whole run is the key (possessive: a long run is scanned once, not once per word in it).
_KEY = rf"(?<![A-Za-z0-9_.$-])(?=[A-Za-z0-9_.-]*?{_WORD})[A-Za-z0-9_.-]++{_NOT_ABOUT}"
_UPPER_KEY = rf"(?<![A-Za-z0-9_.$-])(?=[A-Z0-9_]*?(?:{_WORDS}))[A-Z0-9_]++{_NOT_ABOUT}"
# ``=``, ``:``, ``:=`` or ``=>`` on the same line, after an optionally quoted key.
_ASSIGN = r"""["']?\]?[ \t]*(?::=|=>|[:=])[ \t]*"""
# A value that is not a URL or a file path (those name where a secret is, not the secret).
_NOT_LOCATION = r"(?![A-Za-z][A-Za-z0-9+.-]*://|[/~]|\.\.?/)"
_BARE = r"""[^\s"'`,;()\[\]{}<>]"""  # one character of an unquoted value
# Line breaks inside a key block: real ones, JSON-escaped ones, or spaces before more key.
_BREAK = r"(?:(?:[ \t]*(?:\r?\n|(?:\\r)?\\n))+[ \t]*|[ \t]+(?=[A-Za-z0-9+/=]{16}|-----END))"
_ARMOR = r"[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"

TABLE: tuple[tuple[str, str], ...] = (
    # -----BEGIN ... PRIVATE KEY----- (PEM, OpenSSH, PGP), its header and base64 lines, and its
    # END line when there is one.
    (
        "private-key",
        rf"-----BEGIN{_ARMOR}(?:{_BREAK}(?:[A-Za-z0-9+/=]++|[A-Za-z-]+:[^\n\\]*+))*+"
        rf"(?:{_BREAK}-----END{_ARMOR})?",
    ),
    # JWT/JWS/JWE: a base64url JSON header (eyJ) and one to four more dot-separated segments.
    ("jwt", _START + r"eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+(?:\.[A-Za-z0-9_-]*+){1,3}"),
    # Anthropic: sk-ant-api03-..., sk-ant-admin01-..., sk-ant-oat01-...
    ("anthropic-api-key", _START + r"sk-ant-[A-Za-z0-9_-]{20,}"),
    # OpenRouter: sk-or-v1- and 64 hex.
    ("openrouter-api-key", _START + r"sk-or-v1-[0-9a-f]{32,}"),
    # OpenAI: sk-, sk-proj-, sk-svcacct-, sk-admin- and a long random tail (with a digit).
    ("openai-api-key", _START + r"sk-(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{20,}"),
    # Google API key: AIza and 35 more.
    ("google-api-key", _START + r"AIza[0-9A-Za-z_-]{30,}"),
    # Google OAuth access (ya29.) and refresh (1//0) tokens.
    ("google-oauth-token", r"(?<![A-Za-z0-9_/.-])(?:ya29\.|1//0)[0-9A-Za-z_-]{20,}"),
    # Google OAuth client secret: GOCSPX-.
    ("google-oauth-secret", _START + r"GOCSPX-[0-9A-Za-z_-]{20,}"),
    # Groq (gsk_), xAI (xai-), Perplexity (pplx-), Replicate (r8_).
    ("groq-api-key", _START + r"gsk_[A-Za-z0-9]{40,}"),
    ("xai-api-key", _START + r"xai-[A-Za-z0-9]{60,}"),
    ("perplexity-api-key", _START + r"pplx-[A-Za-z0-9]{40,}"),
    ("replicate-token", _START + r"r8_[A-Za-z0-9]{30,}"),
    # Hugging Face: hf_ and 34 letters.
    ("huggingface-token", _START + r"hf_[A-Za-z0-9]{30,}(?![A-Za-z0-9_])"),
    # GitHub: ghp_/gho_/ghu_/ghs_/ghr_ and 36+; fine-grained github_pat_ and 82.
    ("github-token", _START + r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})"),
    # GitLab: glpat-, gldt-, glptt-, glrt-, ... (routable ones carry .01.-style parts); GR1348941.
    (
        "gitlab-token",
        _START + r"(?:gl(?:pat|dt|ptt|rt|cbt|soat|ffct|imt|agent)-[A-Za-z0-9_-]{20,}"
        r"(?:\.[A-Za-z0-9_-]+)*|GR1348941[A-Za-z0-9_-]{20,})",
    ),
    # Slack incoming webhooks, workflow and trigger URLs.
    (
        "slack-webhook",
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+-]{16,}",
    ),
    # Slack: xoxb-/xoxp-/xoxa-/xoxo-/xoxr-/xoxs-, refresh xoxe(.xoxp)-, app-level xapp-.
    (
        "slack-token",
        _START + r"(?:xox(?:[abposr]|e(?:\.xox[bp])?)-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,})",
    ),
    # AWS access key id: AKIA (long-term), ASIA (temporary), ABIA, ACCA and 16 more.
    ("aws-access-key", r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
    # Stripe secret and restricted keys (live and test), webhook signing secrets.
    (
        "stripe-key",
        _START + r"(?:(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9+/=]{24,})",
    ),
    # npm: npm_ and 36. PyPI: pypi- and a macaroon for pypi.org.
    ("npm-token", _START + r"npm_[A-Za-z0-9]{36,}"),
    ("pypi-token", _START + r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{40,}"),
    # SendGrid: SG.<22>.<43>.
    ("sendgrid-key", _START + r"SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"),
    # DigitalOcean: dop_v1_/doo_v1_/dor_v1_ and 64 hex.
    ("digitalocean-token", _START + r"do[opr]_v1_[a-f0-9]{64}"),
    # Shopify: shpat_/shpca_/shppa_/shpss_ and 32 hex.
    ("shopify-token", _START + r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    # HashiCorp Vault service, batch and recovery tokens.
    ("vault-token", _START + r"hv[sbr]\.[A-Za-z0-9_-]{24,}"),
    # Databricks: dapi and 32 hex.
    ("databricks-token", _START + r"dapi[0-9a-f]{32}(?:-[0-9])?"),
    # Atlassian API tokens start with ATATT3.
    ("atlassian-token", _START + r"ATATT3[A-Za-z0-9_=-]{50,}"),
    # Telegram bot: <bot id>:AA<33>.
    ("telegram-bot-token", r"(?<![0-9])[0-9]{8,10}:AA[0-9A-Za-z_-]{30,}"),
    # scheme://user:password@host: only the password goes.
    (
        "url-credentials",
        r"(?i)\b[a-z][a-z0-9+.-]{1,20}://[^\s:/?#@'\"\[\]]*:(?P<secret>"
        + _NOT_PLACEHOLDER
        + r"[^\s@/'\"]+)@(?=[A-Za-z0-9.\[-])",
    ),
    # Authorization: Bearer/Token/Bot <token>; a bare "Bearer <token>" needs a digit in it.
    (
        "bearer-token",
        r"(?i)\bauthorization[\"']?[ \t]*[:=][ \t]*[\"']?(?:bearer|token|bot)[ \t]+"
        r"(?P<secret>[A-Za-z0-9._~+/=-]{8,})",
    ),
    (
        "bearer-token",
        r"(?i)\bbearer[ \t]+(?=[A-Za-z0-9._~+/=-]*[0-9])(?P<secret>[A-Za-z0-9._~+/=-]{16,})",
    ),
    # Authorization: Basic <base64 of user:password>; curl's -u user:password (not docker's uid:gid).
    (
        "basic-auth",
        r"(?i)\bauthorization[\"']?[ \t]*[:=][ \t]*[\"']?basic[ \t]+(?P<secret>[A-Za-z0-9+/=]{8,})",
    ),
    (
        "basic-auth",
        r"\bcurl\b[^\n|;&]*?[ \t](?:-u|--user)(?:[ \t]+|=)[\"']?[^\s:'\"]+:(?P<secret>"
        + _NOT_PLACEHOLDER
        + r"[^\s'\"]{4,})",
    ),
    # AWS secret access key: 40 base64 characters after aws_secret_access_key, SecretAccessKey...
    (
        "aws-secret-key",
        r"(?i)(?<![A-Za-z0-9])(?:aws[_-]?secret[_-]?(?:access[_-]?)?key|secret[_-]?access[_-]?key)"
        + _ASSIGN
        + r"[\"']?(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
    ),
    # A secret-named key with a quoted literal: "client_secret": "...", password='...', TOKEN="..."
    (
        "env-secret",
        _KEY
        + _ASSIGN
        + r"[bBrRuU]?[\"'`](?P<secret>"
        + _NOT_PLACEHOLDER
        + _NOT_LOCATION
        + r"[^\s\"'`]{8,}+)[\"'`]",
    ),
    # .env and shell: UPPER_CASE_KEY=value (export or not); the value is always a literal there.
    (
        "env-secret",
        _UPPER_KEY
        + r"=(?P<secret>"
        + _NOT_PLACEHOLDER
        + _NOT_LOCATION
        + r"(?=[^\s\"'`;|&]{0,256}?[A-Za-z])[^\s\"'`;|&()]{8,}+)(?![(\[])",
    ),
    # YAML, INI, TOML, code: key: value / key = value with an unquoted value that mixes letters
    # and digits and is not an attribute chain or a call (self.token2, get_password2()).
    (
        "env-secret",
        _KEY
        + _ASSIGN
        + r"(?P<secret>"
        + _NOT_PLACEHOLDER
        + _NOT_LOCATION
        + rf"(?![:=!&@#?|\\])(?={_BARE}{{0,256}}?[0-9])(?={_BARE}{{0,256}}?[A-Za-z])"
        + rf"(?!(?>[A-Za-z_][A-Za-z0-9_]*+(?:\.[A-Za-z_][A-Za-z0-9_]*+)++)(?!{_BARE}))"
        + rf"{_BARE}{{8,}}+)(?![(\[])",
    ),
)

PATTERNS: tuple[SecretPattern, ...] = tuple(
    SecretPattern(name=name, pattern=re.compile(pattern)) for name, pattern in TABLE
)


@hookimpl
def pimem_collect_secret_patterns() -> tuple[SecretPattern, ...]:
    return PATTERNS
