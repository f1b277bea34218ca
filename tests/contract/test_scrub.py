"""Secret scrubbing: the bundled shapes, the day file, the distiller, the switch, team patterns.

Two corpora. The secrets corpus is generated here from a fixed seed with each format's prefix,
alphabet and length, so no key-shaped string is committed for secret scanners to flag. The
clean corpus is this repository's own code and docs plus hand-written lines that merely *name*
secrets; it must come through (almost) untouched.
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

import pytest

from pimem_core import hookimpl
from pimem_core.runtime.budget import DistillBudget
from pimem_core.runtime.capture import Capture
from pimem_core.scrub import Scrubber, placeholder
from pimem_core.types import (
    Anchor,
    BranchEntry,
    Distillation,
    DistillRequest,
    Entry,
    SecretPattern,
)
from pimem_plugins.secret_patterns import PATTERNS

from conftest import REPO_ROOT, make_pimem

ROOT = REPO_ROOT
AT = datetime(2026, 8, 13, 22, 41)
DAY = "2026-08-13.md"

LOWER = string.ascii_lowercase
UPPER = string.ascii_uppercase
DIGITS = string.digits
HEX = DIGITS + "abcdef"
ALNUM = LOWER + UPPER + DIGITS
B64URL = ALNUM + "_-"
B64 = ALNUM + "+/"


class Shape(NamedTuple):
    """One secret as it shows up in a conversation, and the placeholder it must become."""

    name: str
    text: str
    #: The secret values: no 8-character window of any of them may survive.
    values: tuple[str, ...]


def secret_shapes() -> list[Shape]:
    rng = random.Random(20260813)

    def fake(alphabet: str, length: int) -> str:
        chars = [rng.choice(alphabet) for _ in range(length)]
        # Random keys mix letters and digits; make sure a short one does too.
        if set(alphabet) & set(DIGITS) and not set(chars) & set(DIGITS):
            chars[1] = rng.choice(DIGITS)
        if set(alphabet) & set(LOWER + UPPER) and not set(chars) & set(LOWER + UPPER):
            chars[2] = rng.choice(LOWER)
        return "".join(chars)

    def b64url(data: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    def jwt() -> str:
        header = b64url({"alg": "HS256", "typ": "JWT"})
        payload = b64url({"sub": fake(DIGITS, 10), "name": "Ada", "iat": 1786661660})
        return f"{header}.{payload}.{fake(B64URL, 43)}"

    def pem(kind: str, lines: int = 8) -> tuple[str, tuple[str, ...]]:
        body = (*(fake(B64, 64) for _ in range(lines)), fake(B64, 20) + "==")
        block = "\n".join(
            (f"-----BEGIN {kind}PRIVATE KEY-----", *body, f"-----END {kind}PRIVATE KEY-----")
        )
        return block, body

    shapes: list[Shape] = []

    def add(name: str, template: str, *values: str) -> None:
        shapes.append(Shape(name, template.format(*values), values))

    # Provider API keys.
    add(
        "openai-api-key",
        "export OPENAI_API_KEY={}",
        f"sk-proj-{fake(B64URL, 64)}T3BlbkFJ{fake(B64URL, 64)}",
    )
    add(
        "openai-api-key",
        'client = OpenAI(api_key="{}")',
        f"sk-{fake(ALNUM, 20)}T3BlbkFJ{fake(ALNUM, 20)}",
    )
    add(
        "openai-api-key",
        "the service account key is {} (rotate it)",
        "sk-svcacct-" + fake(B64URL, 80),
    )
    add(
        "anthropic-api-key",
        "ANTHROPIC_API_KEY={}",
        f"sk-ant-api03-{fake(B64URL, 93)}AA",
    )
    add(
        "anthropic-api-key",
        "curl https://api.anthropic.com/v1/messages -H 'x-api-key: {}'",
        f"sk-ant-admin01-{fake(B64URL, 93)}AA",
    )
    add("openrouter-api-key", "OPENROUTER_API_KEY = '{}'", "sk-or-v1-" + fake(HEX, 64))
    add(
        "google-api-key",
        "GET https://maps.googleapis.com/maps/api/geocode/json?address=Paris&key={}",
        "AIza" + fake(B64URL, 35),
    )
    add("google-api-key", "  GOOGLE_API_KEY: {}", "AIza" + fake(B64URL, 35))
    add("google-oauth-token", "$ gcloud auth print-access-token\n{}", "ya29." + fake(B64URL, 150))
    add("google-oauth-token", '{{"refresh_token": "{}"}}', "1//0" + fake(B64URL, 100))
    add(
        "google-oauth-secret",
        '{{"installed": {{"client_secret": "{}"}}}}',
        "GOCSPX-" + fake(B64URL, 28),
    )
    add("groq-api-key", "GROQ_API_KEY={}", "gsk_" + fake(ALNUM, 52))
    add("xai-api-key", "use the key {} for grok", "xai-" + fake(ALNUM, 80))
    add("perplexity-api-key", "pplx key: {}", "pplx-" + fake(ALNUM, 48))
    add("replicate-token", "REPLICATE_API_TOKEN={}", "r8_" + fake(ALNUM, 37))
    add(
        "huggingface-token",
        "huggingface-cli login --token {}",
        "hf_" + fake(LOWER + UPPER, 34),
    )
    # Code hosting and chat.
    add("github-token", "GITHUB_TOKEN={}", "ghp_" + fake(ALNUM, 36))
    add("github-token", "git clone https://{}@github.com/acme/app.git", "gho_" + fake(ALNUM, 36))
    add(
        "github-token",
        "git remote set-url origin https://x-access-token:{}@github.com/acme/app",
        "ghs_" + fake(ALNUM, 36),
    )
    add("github-token", "gh auth login --with-token <<< {}", "ghu_" + fake(ALNUM, 36))
    add("github-token", "refresh token {}", "ghr_" + fake(ALNUM, 76))
    add(
        "github-token",
        "token: {}",
        f"github_pat_{fake(ALNUM, 22)}_{fake(ALNUM, 59)}",
    )
    add("gitlab-token", "PRIVATE-TOKEN: {}", "glpat-" + fake(B64URL, 20))
    add("gitlab-token", "deploy token {} for the registry", "gldt-" + fake(B64URL, 20))
    add("gitlab-token", "runner: {}", "glrt-" + fake(B64URL, 20))
    add(
        "slack-token",
        'SLACK_BOT_TOKEN="{}"',
        f"xoxb-{fake(DIGITS, 12)}-{fake(DIGITS, 13)}-{fake(ALNUM, 24)}",
    )
    add(
        "slack-token",
        "the user token {} still works",
        f"xoxp-{fake(DIGITS, 12)}-{fake(DIGITS, 12)}-{fake(DIGITS, 13)}-{fake(HEX, 32)}",
    )
    add(
        "slack-token",
        "socket mode: {}",
        f"xapp-1-A{fake(UPPER + DIGITS, 10)}-{fake(DIGITS, 13)}-{fake(HEX, 64)}",
    )
    add(
        "slack-webhook",
        'curl -X POST -d \'{{"text":"hi"}}\' https://hooks.slack.com/services/{}',
        f"T{fake(UPPER + DIGITS, 8)}/B{fake(UPPER + DIGITS, 10)}/{fake(ALNUM, 24)}",
    )
    # AWS.
    add("aws-access-key", "aws_access_key_id = {}", "AKIA" + fake(UPPER + DIGITS, 16))
    add("aws-secret-key", "aws_secret_access_key = {}", fake(B64, 40))
    add("aws-access-key", '"AccessKeyId": "{}",', "ASIA" + fake(UPPER + DIGITS, 16))
    add("aws-secret-key", '"SecretAccessKey": "{}",', fake(B64, 40))
    add("aws-secret-key", "export AWS_SECRET_ACCESS_KEY={}", fake(B64, 40))
    add("env-secret", "export AWS_SESSION_TOKEN={}", "IQoJb3JpZ2luX2Vj" + fake(B64, 300))
    # Payments, registries, infrastructure.
    add("stripe-key", "stripe.api_key = '{}'", "sk_live_" + fake(ALNUM, 99))
    add("stripe-key", "restricted key {}", "rk_live_" + fake(ALNUM, 99))
    add("stripe-key", "STRIPE_WEBHOOK_SECRET={}", "whsec_" + fake(ALNUM, 32))
    add("npm-token", "//registry.npmjs.org/:_authToken={}", "npm_" + fake(ALNUM, 36))
    add("pypi-token", "password = {}", "pypi-AgEIcHlwaS5vcmc" + fake(B64URL, 120))
    add("sendgrid-key", "SENDGRID_API_KEY='{}'", f"SG.{fake(B64URL, 22)}.{fake(B64URL, 43)}")
    add("digitalocean-token", "doctl auth init -t {}", "dop_v1_" + fake(HEX, 64))
    add("shopify-token", "X-Shopify-Access-Token: {}", "shpat_" + fake(HEX, 32))
    add("vault-token", "VAULT_TOKEN={}", "hvs." + fake(B64URL, 90))
    add("databricks-token", "databricks token {}", "dapi" + fake(HEX, 32))
    add("atlassian-token", "jira token {}", "ATATT3" + fake(B64URL, 180))
    add("telegram-bot-token", "bot = Bot('{}')", f"{fake(DIGITS, 10)}:AA{fake(B64URL, 33)}")
    # JWTs and authorization headers.
    add("jwt", 'curl -H "Authorization: Bearer {}" https://api.example.com/me', jwt())
    add("jwt", "redirected to /callback?id_token={}&state=xyz", jwt())
    add(
        "bearer-token",
        "Authorization: Bearer {}",
        fake(ALNUM, 40),
    )
    add(
        "bearer-token",
        'headers = {{"Authorization": "Bearer {}"}}',
        fake(LOWER + UPPER, 32),
    )
    add("bearer-token", "Authorization: Token {}", fake(HEX, 40))
    add(
        "basic-auth",
        "Authorization: Basic {}",
        base64.b64encode(f"deploy:{fake(ALNUM, 16)}".encode()).decode(),
    )
    add("basic-auth", "curl -u admin:{} https://jenkins.internal/api/json", fake(ALNUM, 14))
    # Private key blocks.
    for kind in ("RSA ", "", "EC ", "OPENSSH ", "ENCRYPTED "):
        block, body = pem(kind)
        shapes.append(Shape("private-key", f"here is the key:\n{block}\nuse it wisely", body))
    block, body = pem("", 6)
    escaped = block.replace("\n", "\\n")
    shapes.append(
        Shape("private-key", f'  "private_key": "{escaped}\\n",\n  "client_email": "x"', body)
    )
    block, body = pem("RSA ", 5)
    cut = block.rsplit("\n", 3)[0]
    shapes.append(Shape("private-key", f"the file starts with\n{cut}", body[:-2]))
    # Credentials in URLs.
    add("url-credentials", "DATABASE_URL=postgres://app:{}@db:5432/app", fake(ALNUM, 16))
    add("url-credentials", "redis://:{}@cache.internal:6379/0", fake(ALNUM, 24))
    add("url-credentials", "amqp://guest:{}@rabbit/vhost", fake(ALNUM + "!*", 12))
    add(
        "url-credentials",
        'client = MongoClient("mongodb+srv://admin:{}@cluster0.abcde.mongodb.net/")',
        fake(ALNUM, 20),
    )
    add(
        "url-credentials", "pip install -i https://build:{}@pypi.internal/simple x", fake(ALNUM, 18)
    )
    # Secret assignments: .env, shell, YAML, JSON, TOML, properties, code.
    add("env-secret", "DB_PASSWORD={}", fake(ALNUM + "!#%", 20))
    add("env-secret", "  password: {}", fake(ALNUM, 14))
    add("env-secret", '{{"client_secret": "{}", "client_id": "app"}}', fake(B64URL, 40))
    add("env-secret", "export SECRET_KEY='django-insecure-{}'", fake(ALNUM + "@#%^&*(-_=+)", 50))
    add("env-secret", 'api_key = "{}"', fake(HEX, 32))
    add("env-secret", 'connect(host="db", user="app", password="{}")', fake(ALNUM + "!?.", 16))
    add("env-secret", "spring.datasource.password={}", fake(ALNUM, 16))
    add("env-secret", "const config = {{ apiKey: '{}' }};", fake(ALNUM, 39))
    add("env-secret", "      MYSQL_ROOT_PASSWORD: {}", fake(ALNUM, 18))
    add("env-secret", "PGPASSWORD={} psql -h db app", fake(LOWER, 12))
    add("env-secret", "passphrase = {}", fake(LOWER + DIGITS, 24))
    add("env-secret", "SLACK_SIGNING_SECRET={}", fake(HEX, 32))
    add("env-secret", 'ENCRYPTION_KEY_PASSWD = "{}"', fake(ALNUM, 24))
    add("env-secret", "mistral_api_key: {}", fake(ALNUM, 32))
    add("env-secret", "AZURE_OPENAI_API_KEY={}", fake(HEX, 32))
    return shapes


SHAPES = secret_shapes()
SCRUBBER = Scrubber(PATTERNS)


def windows(value: str, size: int = 8) -> Iterator[str]:
    for start in range(max(1, len(value) - size + 1)):
        yield value[start : start + size]


def leaks(text: str, shapes: list[Shape] = SHAPES) -> list[str]:
    """Every secret of which some 8-character window is still in *text*."""
    return [
        value
        for shape in shapes
        for value in shape.values
        if any(window in text for window in windows(value))
    ]


def test_the_corpus_covers_every_family() -> None:
    assert len(SHAPES) >= 40
    assert {shape.name for shape in SHAPES} == {pattern.name for pattern in PATTERNS}


@pytest.mark.parametrize("shape", SHAPES, ids=[f"{s.name}-{i}" for i, s in enumerate(SHAPES)])
def test_each_secret_becomes_its_placeholder(shape: Shape) -> None:
    scrubbed = SCRUBBER.scrub(shape.text)
    assert not leaks(scrubbed, [shape]), scrubbed
    assert placeholder(shape.name) in scrubbed, scrubbed
    assert re.findall(r"\[REDACTED:([a-z0-9-]+)\]", scrubbed) == [shape.name] * len(
        re.findall(r"\[REDACTED:", scrubbed)
    )


def test_only_the_value_of_an_assignment_goes() -> None:
    assert SCRUBBER.scrub('"client_secret": "' + "a1" * 10 + '"') == (
        '"client_secret": "[REDACTED:env-secret]"'
    )
    assert SCRUBBER.scrub("postgres://app:" + "p4ss" * 4 + "@db:5432/app") == (
        "postgres://app:[REDACTED:url-credentials]@db:5432/app"
    )


def test_scrubbing_twice_changes_nothing_more() -> None:
    """Capture scrubs the exchange and the store scrubs the entry: placeholders must hold."""
    once = SCRUBBER.scrub("\n".join(shape.text for shape in SHAPES))
    assert SCRUBBER.scrub(once) == once


def test_scrubbed_counts_what_it_took_out_by_kind_and_never_keeps_a_secret() -> None:
    """A write tells its writer how many secrets of which kinds went: the counts, in the
    patterns' order, and nothing of the values."""
    shapes = [shape for shape in SHAPES if shape.name in ("aws-access-key", "openai-api-key")]
    text = "\n".join([*(shape.text for shape in shapes), shapes[0].text, "- nothing secret"])
    scrubbed = SCRUBBER.scrubbed(text)
    assert scrubbed.text == SCRUBBER.scrub(text)
    order = [pattern.name for pattern in PATTERNS]
    expected: dict[str, int] = {}
    for shape in [*shapes, shapes[0]]:
        expected[shape.name] = expected.get(shape.name, 0) + 1
    assert scrubbed.found == tuple(sorted(expected.items(), key=lambda item: order.index(item[0])))
    assert scrubbed.count == len(shapes) + 1
    assert not any(value in repr(scrubbed.found) for shape in shapes for value in shape.values)
    assert SCRUBBER.scrubbed("- nothing secret").found == ()


def conversation() -> str:
    return "\n".join(f"- {shape.text}" for shape in SHAPES)


def test_no_secret_reaches_the_day_file(repo: Path) -> None:
    pimem = make_pimem()
    scope = pimem.resolve_scope(repo)
    anchor = Anchor(session="s1", turn="t1", transcript="t.jsonl")
    file = pimem.append_entry(scope, Entry(anchor=anchor, content=conversation(), written_at=AT))
    written = file.read_bytes().decode()
    assert file.name == DAY
    assert leaks(written) == []
    for name in {shape.name for shape in SHAPES}:
        assert placeholder(name) in written


def test_scrubbing_can_be_switched_off(repo: Path) -> None:
    pimem = make_pimem({"PIMEM_SCRUB_SECRETS": "off"})
    scope = pimem.resolve_scope(repo)
    anchor = Anchor(session="s1", turn="t1", transcript="t.jsonl")
    file = pimem.append_entry(scope, Entry(anchor=anchor, content=conversation(), written_at=AT))
    written = file.read_text()
    assert "[REDACTED:" not in written
    assert all(value in written for shape in SHAPES for value in shape.values)


TOOL_PASSWORD = "tool" + "P4ss" * 3


class EchoDistiller:
    """Keeps what it was given and answers with the exchange, line by line, as bullets."""

    def __init__(self) -> None:
        self.requests: list[DistillRequest] = []

    @hookimpl(tryfirst=True)
    def pimem_distill_exchange(self, request: DistillRequest) -> Distillation:
        self.requests.append(request)
        lines = request.exchange.transcript.splitlines()
        return Distillation(
            text="\n".join(f"- {line}" for line in lines if line.strip()), distiller="echo"
        )


def test_no_secret_reaches_the_distiller_or_the_day_file(repo: Path, tmp_path: Path) -> None:
    pimem = make_pimem()
    distiller = EchoDistiller()
    pimem.pm.add_plugin(distiller, "echo-distiller")
    scope = pimem.resolve_scope(repo)
    capture = Capture(
        pimem,
        scope,
        session_id="s1",
        transcript=tmp_path / "s.jsonl",
        host_model=None,
        budget=DistillBudget(limit=0, path=tmp_path / "budget.json"),
    )
    half = len(SHAPES) // 2
    branch = [
        BranchEntry(
            id="u1",
            kind="message",
            role="user",
            text="\n".join(s.text for s in SHAPES[:half]),
        ),
        BranchEntry(
            id="a1",
            kind="message",
            role="assistant",
            text="\n".join(s.text for s in SHAPES[half:]),
            tool_calls=(f"bash(command=curl -u ci:{TOOL_PASSWORD} https://ci.internal/)",),
        ),
    ]
    capture.submit("a1", branch)
    assert capture.drain(time.monotonic() + 30)
    capture.close()

    [request] = distiller.requests
    received = request.exchange.transcript
    assert leaks(received) == []
    assert TOOL_PASSWORD[:8] not in received
    assert placeholder("private-key") in received
    written = (scope.memory_dir / DAY).read_text()
    assert leaks(written) == []
    assert placeholder("jwt") in written


class AcmeSecrets:
    """A team's own token format."""

    @hookimpl
    def pimem_collect_secret_patterns(self) -> list[SecretPattern]:
        return [SecretPattern(name="acme-token", pattern=re.compile(r"\bacme_[0-9a-f]{32}\b"))]


def test_a_team_plugin_adds_its_own_shapes(repo: Path) -> None:
    pimem = make_pimem()
    pimem.pm.add_plugin(AcmeSecrets(), "acme-secrets")  # before the scrubber is first built
    acme = "acme_" + "0123456789abcdef" * 2
    github = "ghp_" + "aB3dE6gH9" * 4
    scrubbed = pimem.scrubber.scrub(f"ACME={acme} and GH={github}")
    assert scrubbed == "ACME=[REDACTED:acme-token] and GH=[REDACTED:github-token]"

    anchor = Anchor(session="s1", turn="t1", transcript="t.jsonl")
    entry = Entry(anchor=anchor, content=f"- the CI token is {acme}", written_at=AT)
    written = pimem.append_entry(pimem.resolve_scope(repo), entry).read_text()
    assert acme not in written
    assert "- the CI token is [REDACTED:acme-token]" in written


def test_the_bundled_shapes_come_from_the_secret_patterns_plugin() -> None:
    pimem = make_pimem()
    [record] = [record for record in pimem.pm.records if record.name == "secret-patterns"]
    assert record.status == "active"
    assert record.hooks == ("pimem_collect_secret_patterns",)
    assert pimem.scrubber.patterns == PATTERNS


# -- the clean corpus: code and prose that only names secrets ---------------------------------

# Lines a secret scrubber is tempted by: they must come through untouched.
TRICKY = """\
def get_token(self) -> str:
    token = None
    password = get_password()
    api_key = args.api_key
    client = Client(api_key=args.api_key, password=args.password, token=token)
    if secret:
        return self._token
    api_key = os.environ["OPENAI_API_KEY"]
    api_key = os.environ.get("OPENAI_API_KEY", "")
    token = request.headers.get("Authorization", "").removeprefix("Bearer ")
    headers = {"Authorization": f"Bearer {token}"}
    password: str | None = None
    api_key: SecretStr = Field(default=None)
    self._token = token
    secret_name = "prod/db/password"
    TOKEN_URL = "https://oauth2.googleapis.com/token"
    token_url: https://gitlab.example.com/oauth/token
    max_tokens = 4096
    MAX_TOKENS=8192
    tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
    tokenizer_name: sentence-transformers/all-MiniLM-L6-v2
    password_hash = bcrypt.hashpw(password.encode(), bcrypt.gensalt())
    secret_key = settings.SECRET_KEY
    credentials = service_account.Credentials.from_service_account_file(path)
    token_type: bearer
    password_file: /run/secrets/db_password
    GOOGLE_APPLICATION_CREDENTIALS=/home/me/keys/service-account.json
    SECRET_KEY_FILE=./secrets/django.key
    secret: ${{ secrets.GITHUB_TOKEN }}
    token: ${{ github.token }}
    PASSWORD=${DB_PASSWORD}
    password: "<your password here>"
    api_key: "********"
    const apiKey = process.env.OPENAI_API_KEY;
    apiKey: config.apiKey,
    private_key_path = Path.home() / ".ssh" / "id_ed25519"
    jwt.decode(token, key, algorithms=["HS256"])
    if token == expected_token:
    return tokens[:limit]
    for token in tokenize(text):
    assert check_password(password2) is True
commit 3f2c9b1e8d4a4f6b9c0d1a2b3c4d5e6f7a8b9c0d
Merge: 68aed5f 698fde3
chunk_hash: 9f86d081884c7d65
chunk 9f86d081884c7d65 in 2026-08-13.md, lines 12-30
session:3f2c9b1e-8d4a-4f6b-9c0d-1a2b3c4d5e6f turn:ab12cd34
image: python@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
<img src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJ">
echo aGVsbG8gd29ybGQ= | base64 -d
See https://github.com/zilliztech/memsearch/blob/main/README.md#configuration for details.
git clone git@github.com:acme/app.git
docker run --rm -u 1000:1000 -v "$PWD":/src ghcr.io/acme/builder:2026.08
docker exec -u www-data:www-data app php artisan migrate
Token: see the team vault, entry "CI deploy"
git clone ssh://git@github.com:22/acme/app.git
curl http://localhost:8080/api/v1/items?page=2&per_page=50
DATABASE_URL=postgres://localhost:5432/app
DATABASE_URL=postgres://app@db:5432/app
The bearer token goes in the Authorization header; never log it.
Set OPENAI_API_KEY in your shell before running the integration tests.
Rotate the GitHub token every 90 days and store it in the password manager.
AWS_REGION=us-east-1
aws s3 cp s3://acme-artifacts/builds/2026-08-13/app.tar.gz .
kubectl get secret db-password -o jsonpath='{.data.password}'
ssh-keygen -t ed25519 -C "dev@example.com" -f ~/.ssh/id_ed25519
-----BEGIN CERTIFICATE-----
-----BEGIN PUBLIC KEY-----
The risk-assessment-2024-q3-report-final is due; see task-1234567890abcdefghijklmnop.
scikit-learn==1.5.2 and sk-learn-style estimators
released v1.2.3 on 2026-08-13T22:41:00+02:00
the hf_hub_download helper and the gh_pages branch
token budget: 12000 tokens per exchange
password reset links expire after 30 minutes
"""


def clean_corpus() -> list[str]:
    """This repository's own code and docs (not this file: it holds the fake secrets)."""
    files = [
        *sorted((ROOT / "pimem_core").glob("*.py")),
        *sorted((ROOT / "pimem_plugins").glob("*.py")),
        *sorted(p for p in (ROOT / "tests").rglob("*.py") if p.name != Path(__file__).name),
        *sorted((ROOT / "docs").rglob("*.md")),
        ROOT / "README.md",
    ]
    lines = [line for file in files for line in file.read_text(encoding="utf-8").splitlines()]
    return lines + TRICKY.splitlines()


def test_lines_that_only_name_secrets_are_left_alone() -> None:
    changed = [line for line in TRICKY.splitlines() if SCRUBBER.scrub(line) != line]
    assert changed == []


def test_ordinary_code_and_prose_come_through(capsys: pytest.CaptureFixture[str]) -> None:
    lines = clean_corpus()
    changed = [(line, out) for line in lines if (out := SCRUBBER.scrub(line)) != line]
    rate = len(changed) / len(lines)
    with capsys.disabled():
        print(f"\nclean corpus: {len(changed)} of {len(lines)} lines changed ({rate:.3%})")
    assert len(lines) >= 2000
    assert rate <= 0.01, changed
