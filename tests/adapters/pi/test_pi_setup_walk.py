"""The newcomer walk: pimem for a pi user in two commands, as README's "Use pimem in pi" says.

pimem is installed from its wheel (not the checkout) into a fresh virtual environment outside
the checkout, once per test session. Each walk then starts from a fresh ``HOME`` where only pi
has been (its model list, pointing at the scripted model on 127.0.0.1), with nothing of pimem
exported and the ``pimem`` command not on PATH, and the real pi (0.73 and 1.x) on PATH:

1. ``pimem setup pi``: the offline model is installed, memsearch's configuration written, the
   wheel's pi package registered with ``pi install``, this pimem recorded for the adapter, a
   bridge checked; run again, it changes no file.
2. ``pi -p``: the exchange is captured to the day file; a second ``pi -p`` finds it with
   ``memory_search``.
3. ``pimem setup pi --remove``, then ``pi -p``: pi runs without the adapter and nothing of
   pimem runs.

The environment holds what the machine gives any user (pip's configuration and cache, the
locale) and pi's own switches that keep it off the network (``PI_OFFLINE``, ``PI_TELEMETRY``);
nothing else.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from bench.pi_host import (
    MODEL,
    PI_LINES,
    ModelServer,
    PiLine,
    Text,
    ToolCall,
    after_tool,
    anchors,
    bridges_in,
    missing_pi,
    on_distill,
    on_prompt,
    wait_for,
    write_agent_dir,
)
from pimem_core.doors import service_client
from pimem_plugins.snapshot import INSTRUCTIONS

from conftest import REPO_ROOT

MISSING = missing_pi()
pytestmark = pytest.mark.skipif(
    MISSING is not None,
    reason=f"the pi adapter's Node packages are not installed (`make node`): {MISSING}",
)

ROOT = REPO_ROOT
#: The user's own HOME, read at import: tests point HOME elsewhere, and pip's cache lives here.
REAL_HOME = Path.home()
#: What the machine's environment gives every user, and the walk keeps.
MACHINE = ("LANG", "LC_ALL", "TMPDIR", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
MACHINE_PREFIXES = ("PIP_", "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY")

PROMPT_1 = "[n1] We picked PostgreSQL 16 for the ledger."
FACT = "- the user chose PostgreSQL 16 for the ledger service"
PROMPT_2 = "[n2] Which database did we pick for the ledger?"


def build(target: str, out: Path) -> Path:
    """pimem's wheel or sdist, built from the checkout with the project's hatchling (offline)."""
    done = subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "--target", target, "--directory", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (built,) = out.glob("*.whl" if target == "wheel" else "*.tar.gz")
    return built


def pip_environment() -> dict[str, str]:
    """pip as the user runs it: their HOME (and so their cache), no pimem variables."""
    own = {k: v for k, v in os.environ.items() if not k.startswith(("PIMEM_", "PI_", "HF_"))}
    return {**own, "HOME": str(REAL_HOME)}


@pytest.fixture(scope="session")
def installed_pimem(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``pip install pimem-<version>.whl`` into a fresh virtual environment outside the
    checkout (dependencies from the package index, through pip's cache): its ``pimem``."""
    root = tmp_path_factory.mktemp("newcomer")
    wheel = build("wheel", root / "dist")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
        env=pip_environment(),
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return venv / "bin" / "pimem"


def pip_cache_dir() -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "cache", "dir"],
        env=pip_environment(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.stdout.strip() or str(REAL_HOME / ".cache" / "pip")


def pi_on_path(line: PiLine, bin_dir: Path) -> Path:
    """``pi`` in *bin_dir*: the line's pi on its own Node, as a user's global install runs."""
    assert line.node is not None
    bin_dir.mkdir(parents=True, exist_ok=True)
    pi = bin_dir / "pi"
    pi.write_text(f'#!/bin/sh\nexec "{line.node}" "{line.cli}" "$@"\n')
    pi.chmod(0o755)
    return pi


def fresh_environment(home: Path, bin_dir: Path, runtime: Path) -> dict[str, str]:
    """A newcomer's environment: nothing of pimem, pi on PATH, ``pimem`` not on it."""
    kept = {
        name: value
        for name, value in os.environ.items()
        if name in MACHINE or name.startswith(MACHINE_PREFIXES)
    }
    return {
        **kept,
        "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        # This test's own runtime directory, so no other test's memory service is met.
        "XDG_RUNTIME_DIR": str(runtime),
        "PIP_CACHE_DIR": pip_cache_dir(),
        "PI_OFFLINE": "1",
        "PI_TELEMETRY": "0",
    }


def digest(*paths: Path) -> dict[str, str]:
    return {str(path): hashlib.sha256(path.read_bytes()).hexdigest() for path in paths}


def run(command: list[str], env: Mapping[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Path]:
    """The walk's runtime directory; any memory service started there is stopped afterwards."""
    directory = tmp_path / "newcomer-runtime"
    directory.mkdir(mode=0o700)
    yield directory
    for running in service_client.every_service({"XDG_RUNTIME_DIR": str(directory)}):
        found = service_client.probe(running.path)
        if found is not None:
            service_client.stop(found, running.path)


@pytest.mark.parametrize("line_name", sorted(PI_LINES))
def test_two_commands_then_remove(
    line_name: str, installed_pimem: Path, tmp_path: Path, runtime: Path, server: ModelServer
) -> None:
    line = PI_LINES[line_name]
    home, project = tmp_path / "newcomer-home", tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    # pi was here before pimem: its model list names the scripted model.
    agent_dir = write_agent_dir(home / ".pi" / "agent", server.url)
    pi = pi_on_path(line, tmp_path / "bin")
    env = fresh_environment(home, pi.parent, runtime)
    pimem = str(installed_pimem)
    package = installed_pimem.parents[1].glob("lib/python*/site-packages/pimem_plugins/pi/package")
    (package_dir,) = package

    # 1. pimem setup pi: everything a pi user needs, from the wheel.
    setup = run([pimem, "setup", "pi"], env, project)
    assert setup.returncode == 0, setup.stdout + setup.stderr
    assert f"offline model: installed local/all-MiniLM-L6-v2 in {home}/" in setup.stdout
    assert f"registered with `pi install {package_dir}`" in setup.stdout
    assert (
        f"the adapter runs: {pimem} (recorded in {package_dir}/pimem-command.json)" in setup.stdout
    )
    assert "started and answered ping" in setup.stdout
    settings, config = agent_dir / "settings.json", home / ".memsearch" / "config.toml"
    assert json.loads(settings.read_text())["packages"] == [os.path.relpath(package_dir, agent_dir)]
    assert 'model = "local/all-MiniLM-L6-v2"' in config.read_text()

    # Run again: nothing changes.
    before = digest(settings, config, package_dir / "pimem-command.json")
    again = run([pimem, "setup", "pi"], env, project)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "already registered" in again.stdout
    assert "offline model: already installed" in again.stdout
    assert digest(settings, config, package_dir / "pimem-command.json") == before

    # 2. pi -p: the exchange is captured, and the next pi finds it.
    server.rules = [
        on_prompt("[n1]", Text("Noted: PostgreSQL 16 for the ledger.")),
        on_distill(Text(FACT), marker="[n1]"),
        on_prompt("[n2]", ToolCall("memory_search", {"query": "ledger database"})),
        after_tool("memory_search", Text("PostgreSQL 16."), marker="[n2]"),
        on_distill(marker="[n2]"),
    ]
    first = run([str(pi), "--model", MODEL, "-p", PROMPT_1], env, project)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "pimem:" not in first.stderr, first.stderr
    (day_file,) = (project / ".memsearch" / "memory").glob("*.md")
    assert FACT in day_file.read_text()
    assert len(anchors(day_file.read_text())) == 1

    second = run([str(pi), "--model", MODEL, "-p", PROMPT_2], env, project)
    assert second.returncode == 0, second.stdout + second.stderr
    (searched,) = [
        result.content
        for request in server.agent_requests()
        if (result := request.last_tool_result) is not None and result.name == "memory_search"
    ]
    assert "PostgreSQL 16 for the ledger service" in searched, searched
    assert server.failures == []

    # 3. --remove, then pi runs without the adapter: no tool, no snapshot, no bridge.
    removed = run([pimem, "setup", "pi", "--remove"], env, project)
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert json.loads(settings.read_text())["packages"] == []
    assert not (package_dir / "pimem-command.json").exists()
    wait_for(lambda: not bridges_in(project), 30, "the last bridges to finish")
    day_text = day_file.read_text()
    server.rules = [on_prompt("[n3]", Text("Hello."))]
    third = run([str(pi), "--model", MODEL, "-p", "[n3] Hello there."], env, project)
    assert third.returncode == 0, third.stdout + third.stderr
    (request,) = [r for r in server.agent_requests() if "[n3]" in r.prompt]
    assert not any(tool.startswith("memory_") for tool in request.tools)
    assert INSTRUCTIONS not in request.system
    assert not bridges_in(project)
    assert day_file.read_text() == day_text
    assert server.failures == []


def test_the_wheel_and_sdist_carry_the_pi_package(tmp_path: Path) -> None:
    """The wheel holds the pi package as pi loads it (extension, sources, skills, prompt
    template, manifest), byte for byte as in ``adapters/pi``, and nothing of its development
    (tests, node_modules, a record of a developer's pimem); the sdist holds what builds it."""
    adapter = ROOT / "adapters" / "pi"
    wheel = build("wheel", tmp_path / "dist")
    prefix = "pimem_plugins/pi/package/"
    with zipfile.ZipFile(wheel) as archive:
        carried = {
            name.removeprefix(prefix): archive.read(name)
            for name in archive.namelist()
            if name.startswith(prefix)
        }
    manifest = json.loads(carried["package.json"])
    expected = {
        str(path.relative_to(adapter)): path.read_bytes()
        for part in ("extensions", "src", "skills", "prompts")
        for path in sorted((adapter / part).rglob("*"))
        if path.is_file()
    }
    assert carried == {**expected, "package.json": (adapter / "package.json").read_bytes()}
    for kind in ("extensions", "skills", "prompts"):
        (where,) = manifest["pi"][kind]
        assert any(name.startswith(where.removeprefix("./") + "/") for name in carried), kind

    sdist = build("sdist", tmp_path / "dist")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {f"adapters/pi/{name}" for name in carried} <= names
    assert not any("node_modules" in name or name.endswith("pimem-command.json") for name in names)
