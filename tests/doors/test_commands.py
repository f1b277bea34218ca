"""The command table: every shared command gives the same result through both front doors
(``pimem CMD --json`` in a child process, ``pimem serve`` over JSON lines), the served methods
and the ready line derive from it, and the front doors import one another in no cycle."""

from __future__ import annotations

import argparse
import ast
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bridge import Bridge

from pimem_core.doors import protocol
from pimem_core.doors.cli import build_parser
from pimem_core.doors.table import CORE as COMMANDS
from pimem_core.doors.table import CORE as SHARED
from pimem_core.doors.table import served
from pimem_plugins.memsearch.offline_model import OfflineModel

from conftest import REPO_ROOT, run_cli
from pi_sessions import assistant, session_file, user

NO_INDEX = {"PIMEM_DISABLE_PLUGINS": "memsearch-index"}
SESSION = "s1"


def test_the_served_methods_are_the_tables() -> None:
    assert tuple(sorted(served(SHARED))) == protocol.MEMORY_METHODS
    assert set(protocol.SERVED_METHODS) == {
        *protocol.MEMORY_METHODS,
        *protocol.SESSION_METHODS,
        "ping",
    }


def test_every_command_of_the_table_has_a_parser() -> None:
    parser = build_parser()
    for command in COMMANDS:
        sub = parser
        for word in command.path:
            (action,) = (a for a in sub._actions if isinstance(a, argparse._SubParsersAction))
            sub = action.choices[word]
        assert sub.get_default("spec") is command


# -- no import cycle ---------------------------------------------------------------------------


def _imports(package: Path) -> dict[str, set[str]]:
    """Each module of *package* and the package's modules it imports, at module level or
    inside a function (a late import is an edge of the graph too)."""
    files = {f"{package.name}.{file.stem}": file for file in package.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, file in files.items():
        names: set[str] = set()
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
            elif isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
        graph[module] = names & set(files)
    return graph


def _cycles(graph: dict[str, set[str]]) -> Iterator[list[str]]:
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> Iterator[list[str]]:
        if module in path:
            yield [*path[path.index(module) :], module]
            return
        if module in done:
            return
        for target in sorted(graph.get(module, ())):
            yield from visit(target, [*path, module])
        done.add(module)

    for module in sorted(graph):
        yield from visit(module, [])


def test_the_front_doors_import_each_other_in_no_cycle() -> None:
    """cli -> serve -> launcher -> cli was the only cycle (a module global told the server
    that the launcher had written the ready line); the launcher now tells the CLI."""
    package = REPO_ROOT / "pimem_core"
    assert list(_cycles(_imports(package))) == []


# -- both doors --------------------------------------------------------------------------------


def _cli(args: tuple[str, ...], env: dict[str, str]) -> tuple[str, Any]:
    """``("ok", the --json output)`` or ``("error", its one-line message)``; the text output
    must be the served ``text``, so it is returned beside the JSON."""
    result = run_cli(*args, "--json", env=env)
    if result.code == 1:
        return "error", result.stderr.removeprefix("pimem: error: ").rstrip("\n")
    assert result.code == 0, result.stderr
    return "ok", json.loads(result.stdout)


def _served(bridge: Bridge, method: str, key: str | None, **params: Any) -> tuple[str, Any]:
    reply = bridge.call(method, **params)
    if "error" in reply:
        assert reply["error"]["type"] in ("memory", "unavailable"), reply
        return "error", reply["error"]["message"]
    result = dict(reply["result"])
    text = result.pop("text")
    assert isinstance(text, str)
    return "ok", result.pop(key) if key else result


def _text(args: tuple[str, ...], env: dict[str, str]) -> str:
    return run_cli(*args, env=env).stdout.removesuffix("\n")


@pytest.fixture
def doors(tmp_path: Path, repo: Path) -> Iterator[tuple[Bridge, dict[str, str], Path]]:
    """A served session on *repo* (persisted, so it can write) and the CLI's environment; the
    session's transcript has one exchange."""
    transcript = tmp_path / "s1.jsonl"
    session_file(transcript, [user("u1", None, 1, "why?"), assistant("a1", "u1", 2, "because")])
    env = {"HOME": str(tmp_path / "home"), **NO_INDEX}
    bridge = Bridge(env)
    started = bridge.call(
        "session.start", session_id=SESSION, cwd=str(repo), transcript=str(transcript)
    )
    assert "result" in started, started
    yield bridge, {**env, "PIMEM_DB_LINGER_MS": "0"}, transcript
    bridge.close()


#: A step: the CLI's words, the served method, the served result's key for the JSON, params.
Step = tuple[tuple[str, ...], str, str | None, dict[str, Any]]


def _run(steps: list[Step], bridge: Bridge, env: dict[str, str]) -> None:
    """Run *steps* through the CLI (``--json``), through ``pimem serve``, then through the
    CLI again for its text, and compare. Each sequence leaves the store as it found it."""
    through_cli = [_cli(args, env) for args, *_ in steps]
    replies = [bridge.call(method, **params) for _, method, _, params in steps]
    texts = [_text(args, env) for args, *_ in steps]
    for (args, _, key, _), cli, reply, text in zip(steps, through_cli, replies, texts, strict=True):
        if "error" in reply:
            assert reply["error"]["type"] in ("memory", "unavailable"), reply
            assert cli == ("error", reply["error"]["message"]), args
            continue
        result = dict(reply["result"])
        assert result.pop("text") == text, args
        assert cli == ("ok", result.pop(key) if key else result), args


def test_every_shared_command_answers_alike_through_both_doors(
    doors: tuple[Bridge, dict[str, str], Path], repo: Path, tmp_path: Path
) -> None:
    bridge, env, transcript = doors
    cwd = ("--cwd", str(repo))
    anchor = ("--session", SESSION, "--turn", "t1", "--transcript", str(transcript))
    to = str(tmp_path / "skills")
    day = {"date": "2026-08-13", "time": "22:41"}
    write_then_forget: list[Step] = [
        (("write", "- a fact", *cwd, *anchor), "memory.write", None,
         {"content": "- a fact", "turn": "t1"}),
        (("forget", "--date", day["date"], "--time", day["time"], *cwd), "memory.forget", None,
         day),
    ]  # fmt: skip
    read_only: list[Step] = [
        (("forget", "--chunk", "0123456789abcdef", *cwd), "memory.forget", None,
         {"chunk_hash": "0123456789abcdef"}),
        (("search", "a fact", "-k", "3", *cwd), "memory.search", "hits",
         {"query": "a fact", "top_k": 3}),
        (("expand", "0123456789abcdef", *cwd), "memory.expand", "section",
         {"chunk_hash": "0123456789abcdef"}),
        (("compact", *cwd), "memory.compact", None, {}),
        (("transcript", str(transcript), "--turn", "a1", "--context", "1"),
         "memory.transcript", None,
         {"transcript_path": str(transcript), "turn": "a1", "context": 1}),
        (("skills", "list", *cwd), "memory.skills", "candidates", {}),
        (("skills", "show", "nothing-here", *cwd), "memory.skills", "candidate",
         {"action": "show", "name": "nothing-here"}),
        (("skills", "install", "nothing-here", "--to", to, *cwd), "memory.skills", None,
         {"action": "install", "name": "nothing-here", "to": to}),
    ]  # fmt: skip
    _run(write_then_forget, bridge, env)
    _run(read_only, bridge, env)
    methods = {method for _, method, *_ in write_then_forget + read_only}
    assert methods | {"memory.status"} == set(protocol.MEMORY_METHODS)


def test_status_is_assembled_alike_and_the_session_adds_its_capture(
    doors: tuple[Bridge, dict[str, str], Path], repo: Path
) -> None:
    bridge, env, _ = doors
    bridge.call("memory.write", content="- one", turn="t1")
    kind, through_serve = _served(bridge, "memory.status", None)
    assert kind == "ok"
    assert through_serve.pop("capture")["counters_of"] == "this session"
    assert _cli(("status", "--cwd", str(repo)), env) == ("ok", through_serve)
    served_text = bridge.call("memory.status")["result"]["text"].splitlines()
    cli_text = _text(("status", "--cwd", str(repo)), env).splitlines()
    session_lines = ("capture", "last index run")  # the session's capture section
    assert [line for line in served_text if not line.startswith(session_lines)] == cli_text
    assert "today in this store (all sessions): 1 entry from 1 session" in cli_text


def test_a_usage_error_is_one_through_both_doors(
    doors: tuple[Bridge, dict[str, str], Path], repo: Path
) -> None:
    bridge, env, _ = doors
    cli = run_cli("forget", "--chunk", "0123456789abcdef", "--date", "2026-08-13", env=env)
    reply = bridge.call("memory.forget", chunk_hash="0123456789abcdef", date="2026-08-13")
    assert cli.code == 2
    assert reply["error"]["type"] == "request"
    assert f"pimem: error: {reply['error']['message']}\n" in cli.stderr


@pytest.mark.usefixtures("memsearch_home")
def test_search_expand_and_forget_alike_with_the_real_index(
    offline_model: OfflineModel, repo: Path, tmp_path: Path
) -> None:
    """With memsearch: the same hits and section through both doors, and a forget through
    either door takes the text out of the index at once (the CLI's forget did; serve's only
    noted the file for the session's next index run)."""
    env = {**offline_model.environment(), "PIMEM_DB_LINGER_MS": "0"}
    cwd = ("--cwd", str(repo))
    anchor = ("--session", SESSION, "--turn", "t1", "--transcript", str(tmp_path / "s1.jsonl"))
    facts = ("- chose Redis for the hot cache", "- the ledger lives in Postgres")
    for minute, fact in enumerate(facts, 41):
        now = {**env, "PIMEM_NOW": f"2026-08-13T22:{minute}"}
        assert run_cli("write", fact, *cwd, *anchor, env=now).code == 0
    assert run_cli("index", *cwd, env=env).code == 0
    bridge = Bridge(env)
    try:
        bridge.call("session.start", session_id=SESSION, cwd=str(repo), transcript=None)
        search = ("search", "which cache", *cwd)
        kind, hits = _cli(search, env)
        assert kind == "ok"
        assert hits
        assert _served(bridge, "memory.search", "hits", query="which cache") == (kind, hits)
        chunk = hits[0]["chunk_hash"]
        assert _cli(("expand", chunk, *cwd), env) == _served(
            bridge, "memory.expand", "section", chunk_hash=chunk
        )
        # Forget one entry through serve, then another through the CLI: each door's search
        # right after no longer finds it.
        first = next(hit for hit in hits if "Redis" in hit["content"])["chunk_hash"]
        assert _served(bridge, "memory.forget", None, chunk_hash=first)[0] == "ok"
        assert all("Redis" not in hit["content"] for hit in _cli(search, env)[1])
        ledger = ("search", "ledger", *cwd)
        second = [hit for hit in _cli(ledger, env)[1] if "Postgres" in hit["content"]]
        assert _cli(("forget", "--chunk", second[0]["chunk_hash"], *cwd), env)[0] == "ok"
        left = _served(bridge, "memory.search", "hits", query="ledger")[1]
        assert second[0]["chunk_hash"] not in [hit["chunk_hash"] for hit in left]
    finally:
        bridge.close()
