"""The docs' example index (plugin-hooks.md, ``pimem_open_index``) reads its writes through the
memory service, where one index serves many commands, as it does in process.

The example is taken from the docs as they are and installed as a real distribution (a
``dist-info`` on ``PYTHONPATH``); the commands are the real ``pimem``, through a real service.
A change the service never hears of (a write run in another process) is found too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import REPO_ROOT, Result, make_distribution, run_cli

ROOT = REPO_ROOT
(EXAMPLE,) = [
    block
    for block in re.findall(
        r"```python\n(.*?)```", (ROOT / "docs" / "plugin-hooks.md").read_text(), re.DOTALL
    )
    if "class KeywordIndex" in block
]
FIRST = "- the team picked PostgreSQL for the ledger"
SECOND = "- the session cache moved to redis"
THIRD = "- the deploy runs from the tagged commit only"


def install_example(site: Path) -> dict[str, str]:
    """The docs' example as an installed distribution: the environment that finds it."""
    make_distribution(
        site,
        "pimem-keyword-index",
        {"keyword-index": "pimem_keyword_index"},
        {"pimem_keyword_index": EXAMPLE},
    )
    return {"PYTHONPATH": str(site)}


def ok(result: Result) -> str:
    assert result.code == 0, result.stderr
    return result.stdout


def write(content: str, repo: Path, env: dict[str, str], *more: str) -> None:
    turn = f"t{[FIRST, SECOND, THIRD].index(content) + 1}"
    ok(run_cli("write", "-", "--cwd", str(repo), "--session", "s1", "--turn", turn,
               "--transcript", "/t/s1.jsonl", *more, stdin=content, env=env))  # fmt: skip


def search(query: str, repo: Path, env: dict[str, str]) -> str:
    return ok(run_cli("search", query, "--cwd", str(repo), env=env))


def begin(repo: Path, env: dict[str, str]) -> None:
    """Opt in to the example, write, and search: the index is opened, and read, here."""
    (repo / ".keyword-index").touch()
    write(FIRST, repo, env)
    assert FIRST in search("PostgreSQL ledger", repo, env)


def go_on(repo: Path, env: dict[str, str]) -> None:
    """Write again and search for the new entry, expand it, forget it and search again; then
    a write by another process (in process: a service never hears of it) and a search for it."""
    write(SECOND, repo, env)
    found = search("redis session cache", repo, env)
    assert SECOND in found, found
    (hit,) = json.loads(ok(run_cli("search", "redis", "--json", "--cwd", str(repo), env=env)))
    shown = ok(run_cli("expand", hit["chunk_hash"], "--cwd", str(repo), env=env))
    assert SECOND in shown
    ok(run_cli("forget", "--chunk", hit["chunk_hash"], "--cwd", str(repo), env=env))
    assert search("redis", repo, env).startswith('No memories found for "redis".')
    assert FIRST in search("PostgreSQL", repo, env)
    write(THIRD, repo, env, "--in-process")
    assert THIRD in search("deploy tagged commit", repo, env)


def service_pid(env: dict[str, str]) -> int:
    running = json.loads(ok(run_cli("service", "status", "--json", env=env)))
    assert running["running"], "the commands were answered in process, not by the service"
    return int(running["pid"])


def test_the_docs_example_index_reads_its_writes_through_the_service(
    tmp_path: Path, repo: Path, service_env: dict[str, str]
) -> None:
    env = {**service_env, **install_example(tmp_path / "site")}
    begin(repo, env)
    pid = service_pid(env)
    go_on(repo, env)
    # One service answered them all: the index it opened at the first search served the rest.
    assert service_pid(env) == pid
    assert "backend: keyword index" in ok(run_cli("status", "--cwd", str(repo), env=env))


def test_the_docs_example_index_reads_its_writes_in_process(tmp_path: Path, repo: Path) -> None:
    env = {"PIMEM_SERVICE": "off", **install_example(tmp_path / "site")}
    begin(repo, env)
    go_on(repo, env)
