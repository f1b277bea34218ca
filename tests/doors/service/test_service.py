"""The memory service: real ``pimem`` processes and a real Unix socket in a per-test runtime
directory (``PIMEM_HOME``), never the user's own.

A different user cannot be made to connect here, so the peer check is tested as a function with
a foreign user id; every connection below comes from the test's own user and is served.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from service_helpers import PATIENCE_S, WARNING, hello, wait_until

from pimem_core.doors import service as service_module
from pimem_core.doors import service_client, service_wire
from pimem_core.doors.command_line import ARGV_CONTENT_WARNING
from pimem_core.doors.service import MemoryTrim, Peer, peer_allowed

from conftest import CLOCK, Result, alive, run_cli


def pimem(env: dict[str, str], *args: str, cwd: Path | None = None) -> Result:
    return run_cli(*args, env=env, cwd=cwd)


def test_the_wire_version_is_the_distributions() -> None:
    assert importlib.metadata.version("pimem") == service_wire.VERSION


def test_the_peer_check_refuses_another_user() -> None:
    own = os.getuid()
    assert peer_allowed(Peer(pid=1, uid=own), own)
    assert not peer_allowed(Peer(pid=1, uid=own + 1), own)
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        peer = Peer.of(left)
        assert peer.uid in (own, None)
        assert peer.pid in (os.getpid(), None)
        assert peer.cwd() in (Path.cwd(), None)


def test_memory_is_given_back_once_it_moved_and_not_more_often(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    resident = [400_000]
    trims: list[float] = []

    def trim() -> None:
        trims.append(resident[0])
        resident[0] -= 20_000  # what the allocator had kept

    monkeypatch.setattr(service_module, "resident_kb", lambda: resident[0])
    monkeypatch.setattr(service_module, "give_back_memory", trim)
    keeper = MemoryTrim(change_kb=8_000, every_s=10.0)
    assert keeper.tick(0.0)  # the first look
    assert not keeper.tick(5.0)  # too soon
    resident[0] = 384_000
    assert not keeper.tick(20.0)  # moved by less than asked since
    resident[0] = 500_000  # an index run, facts embedded in the background
    assert keeper.tick(25.0)
    resident[0] = 600_000
    assert not keeper.tick(30.0)  # too soon after the last
    assert keeper.tick(35.0)
    assert trims == [400_000, 500_000, 600_000]
    resident[0] = 575_000
    assert not keeper.tick(50.0)  # nothing worth a look moved since
    resident[0] = 560_000  # the database closed: freed, and kept by the allocator
    assert keeper.tick(60.0)
    assert len(trims) == 4


def test_only_the_read_commands_are_routed_and_their_paths_made_absolute(tmp_path: Path) -> None:
    on = {"PIMEM_SERVICE": "on"}
    assert service_client.routed(["--cwd", "search", "search", "redis"], on)
    assert service_client.routed(["status", "--json"], on)
    assert service_client.routed(["write", "x", "--session", "s"], on)
    assert service_client.routed(["write", "-", "--session", "s"], on)
    assert not service_client.routed(["scope"], on)
    assert not service_client.routed(["search", "redis", "--in-process"], on)
    assert not service_client.routed(["search", "--help"], on)
    assert not service_client.routed(["-vv", "search", "redis"], on)
    assert service_client.routed(["search", "redis"], {})  # on by default
    assert not service_client.routed(["search", "redis"], {"PIMEM_SERVICE": "off"})
    assert service_client.absolute_paths(
        ["--cwd", "a", "expand", "h", "--project=b", "--json"], tmp_path
    ) == ["--cwd", str(tmp_path / "a"), "expand", "h", f"--project={tmp_path / 'b'}", "--json"]


def test_status_starts_the_service_and_says_so(service_env: dict[str, str], repo: Path) -> None:
    result = pimem(service_env, "status", "--cwd", str(repo))
    assert result.code == 0, result.stderr
    assert WARNING not in result.stderr
    found = hello(service_env)
    assert found.current
    assert f"service: running, pid {found.pid}, up " in result.stdout
    runtime = service_wire.runtime_dir(service_env)
    assert runtime.stat().st_mode & 0o777 == 0o700
    assert (service_wire.socket_path(service_env)).stat().st_mode & 0o777 == 0o600

    status = pimem(service_env, "service", "status", "--json")
    assert json.loads(status.stdout)["pid"] == found.pid
    stopped = pimem(service_env, "service", "stop")
    assert stopped.stdout.strip() == f"stopped the memory service (pid {found.pid})"
    wait_until(lambda: not alive(found.pid), "the stopped service to exit")
    assert pimem(service_env, "service", "status").stdout.startswith("not running")


def test_the_service_keeps_only_the_environment_its_answers_depend_on(
    service_env: dict[str, str], repo: Path
) -> None:
    """An agent's API key stays out of a process that lives for hours; what memsearch's
    configuration names stays in, and splits services as any setting does."""
    config = Path(service_env["HOME"]) / ".memsearch" / "config.toml"
    config.write_text(config.read_text() + "# the key: ${EMBEDDING_TEAM_KEY}\n")
    env = {**service_env, "ANTHROPIC_API_KEY": "sk-agent", "EMBEDDING_TEAM_KEY": "team-1"}
    assert pimem(env, "status", "--cwd", str(repo)).code == 0
    pid = hello(env).pid
    kept = dict(
        line.split("=", 1)
        for line in Path(f"/proc/{pid}/environ").read_text().split("\0")
        if "=" in line
    )
    assert "ANTHROPIC_API_KEY" not in kept
    assert kept["EMBEDDING_TEAM_KEY"] == "team-1"
    assert kept["PATH"] == os.environ["PATH"]
    assert kept["HOME"] == service_env["HOME"]
    other = {**env, "EMBEDDING_TEAM_KEY": "team-2"}
    assert service_wire.socket_path(other) != service_wire.socket_path(env)


def test_in_process_runs_without_the_service(service_env: dict[str, str], repo: Path) -> None:
    result = pimem(service_env, "status", "--in-process", "--cwd", str(repo))
    assert result.code == 0, result.stderr
    assert "service: not running" in result.stdout
    assert service_client.probe(service_wire.socket_path(service_env)) is None


OLD_SERVICE = """
import json, os, socket, sys
path = sys.argv[1]
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(path)
listener.listen(8)
print("listening", flush=True)
while True:
    conn, _ = listener.accept()
    stream = conn.makefile("rb")
    hello = {"service": "pimem", "version": "0.0.1-old", "protocol": 1, "pid": os.getpid(),
             "started": 0.0}
    conn.sendall((json.dumps(hello) + "\\n").encode())
    line = stream.readline()
    if line and json.loads(line).get("op") == "stop":
        conn.sendall(b'{"stopping": true}\\n')
        os.unlink(path)
        sys.exit(0)
    conn.close()
"""


def test_an_outdated_service_is_replaced(
    service_env: dict[str, str], repo: Path, tmp_path: Path
) -> None:
    runtime = service_wire.runtime_dir(service_env)
    runtime.mkdir(mode=0o700, parents=True)
    script = tmp_path / "old_service.py"
    script.write_text(textwrap.dedent(OLD_SERVICE))
    old = subprocess.Popen(
        [sys.executable, str(script), str(service_wire.socket_path(service_env))],
        stdout=subprocess.PIPE,
    )
    try:
        assert old.stdout is not None
        assert old.stdout.readline() == b"listening\n"
        assert hello(service_env).version == "0.0.1-old"

        result = pimem(service_env, "status", "--cwd", str(repo))
        assert result.code == 0, result.stderr
        assert WARNING not in result.stderr
        assert old.wait(timeout=PATIENCE_S) == 0, "the old service was asked to stop"
        new = hello(service_env)
        assert new.current
        assert new.pid != old.pid
    finally:
        if old.poll() is None:
            old.kill()
            old.wait()
        if old.stdout is not None:
            old.stdout.close()


def test_a_stale_socket_is_replaced(service_env: dict[str, str], repo: Path) -> None:
    runtime = service_wire.runtime_dir(service_env)
    runtime.mkdir(mode=0o700, parents=True)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(service_wire.socket_path(service_env)))
    stale.close()  # the file stays; connecting to it is refused

    result = pimem(service_env, "status", "--cwd", str(repo))
    assert result.code == 0, result.stderr
    assert WARNING not in result.stderr
    assert hello(service_env).current


def test_ten_clients_at_once_make_one_service(service_env: dict[str, str], repo: Path) -> None:
    clients = [
        subprocess.Popen(
            [sys.executable, "-m", "pimem_core", "status", "--json", "--cwd", str(repo)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PIMEM_NOW": CLOCK, **service_env},
        )
        for _ in range(10)
    ]
    answers = [client.communicate(timeout=PATIENCE_S) for client in clients]
    assert [client.returncode for client in clients] == [0] * 10, answers
    assert not [err for _, err in answers if WARNING.encode() in err]
    services = {json.loads(out)["service"] for out, _ in answers}
    pids = {line.split(",")[1] for line in services}
    assert pids == {f" pid {hello(service_env).pid}"}


def test_the_service_exits_when_idle(service_env: dict[str, str], repo: Path) -> None:
    env = {**service_env, "PIMEM_SERVICE_IDLE_S": "1"}
    assert pimem(env, "status", "--cwd", str(repo)).code == 0
    pid = hello(env).pid
    wait_until(lambda: not alive(pid), "the idle service to exit")
    assert not service_wire.socket_path(env).exists()


def test_search_through_the_service_answers_as_in_process(
    service_env: dict[str, str], repo: Path
) -> None:
    local = {**service_env, "PIMEM_SERVICE": "off"}
    for turn, content in (
        ("t1", "- the user and the agent chose Redis for the hot cache with 5 minute TTLs"),
        ("t2", "- the agent fixed the login redirect loop by escaping the return URL"),
    ):
        session = ("--session", "s1", "--turn", turn, "--transcript", "/home/user/s1.jsonl")
        written = pimem(local, "write", content, *session, "--cwd", str(repo))
        assert written.code == 0, written.stderr
    assert pimem(local, "index", "--cwd", str(repo)).code == 0

    served = pimem(service_env, "search", "which cache did we choose", "--cwd", str(repo))
    assert served.code == 0, served.stderr
    assert WARNING not in served.stderr
    assert hello(service_env).current
    in_process = pimem(local, "search", "which cache did we choose", "--cwd", str(repo))
    assert in_process.code == 0, in_process.stderr
    assert served.stdout == in_process.stdout
    assert "Redis" in served.stdout

    as_json = pimem(service_env, "search", "redis", "--json", "--cwd", str(repo))
    local_json = pimem(local, "search", "redis", "--json", "--cwd", str(repo))
    assert json.loads(as_json.stdout) == json.loads(local_json.stdout)

    # The client answers without loading pimem's plugins, memsearch or numpy.
    traced = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "pimem_core", "search", "redis"],
        capture_output=True,
        text=True,
        cwd=repo,
        env={**os.environ, "PIMEM_NOW": CLOCK, **service_env},
        check=True,
    )
    imported = {
        line.split("|")[-1].strip()
        for line in traced.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "pimem_core.doors.service_client" in imported
    heavy = {"attrs", "pluggy", "numpy", "memsearch", "pimem_core.api", "pimem_core.doors.cli"}
    assert imported.isdisjoint(heavy)
    assert "Redis" in traced.stdout

    # A usage error is the service's to report, as the command line reports it.
    wrong = pimem(service_env, "search", "redis", "-k", "zero", "--cwd", str(repo))
    assert wrong.code == 2
    assert "must be a whole number" in wrong.stderr


def test_an_unusable_runtime_dir_falls_back_with_one_warning(
    service_env: dict[str, str], repo: Path
) -> None:
    home = Path(service_env["PIMEM_HOME"])
    home.mkdir(parents=True)
    (home / "run").write_text("not a directory")  # so the runtime directory cannot be made

    result = pimem(service_env, "status", "--cwd", str(repo))
    assert result.code == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if WARNING in line]
    assert len(warnings) == 1
    assert "PIMEM_SERVICE=off or --in-process silences this" in warnings[0]
    assert result.stderr.count("pimem:") == 1
    assert "service: not running" in result.stdout


def test_write_and_forget_through_the_service(service_env: dict[str, str], repo: Path) -> None:
    session = ("--session", "s1", "--turn", "t1", "--transcript", "/home/user/s1.jsonl")
    written = pimem(
        service_env, "write", "- the team moved the queue to NATS", *session, "--json", cwd=repo
    )
    assert written.code == 0, written.stderr
    assert WARNING not in written.stderr
    # Said by the service, relayed once: the client does not run the command again.
    assert written.stderr.count(ARGV_CONTENT_WARNING) == 1
    day_file = Path(json.loads(written.stdout)["file"])
    assert "moved the queue to NATS" in day_file.read_text()
    assert hello(service_env).current

    entry_time = CLOCK.split("T")[1]
    forgotten = pimem(
        service_env, "forget", "--date", CLOCK.split("T")[0], "--time", entry_time, cwd=repo
    )
    assert forgotten.code == 0, forgotten.stderr
    assert WARNING not in forgotten.stderr
    assert not day_file.exists(), "its only entry forgotten, the day file goes"

    # Content from stdin is read by the client and sent with the request.
    second = ("--session", "s1", "--turn", "t2", "--transcript", "/home/user/s1.jsonl")
    piped = run_cli("write", "-", *second, env=service_env, cwd=repo, stdin="- a piped entry")
    assert piped.code == 0, piped.stderr
    assert WARNING not in piped.stderr
    assert ARGV_CONTENT_WARNING not in piped.stderr
    assert "a piped entry" in day_file.read_text()
    # The service the first write started took no memory text in its own command line.
    cmdline = Path(f"/proc/{hello(service_env).pid}/cmdline")
    if cmdline.exists():
        words = cmdline.read_bytes().split(b"\0")[1:-1]
        assert words == [b"-m", b"pimem_core", b"service", b"run"]


def test_a_service_that_cannot_start_says_why(service_env: dict[str, str], repo: Path) -> None:
    result = pimem({**service_env, "PIMEM_DISTILLER": "bogus"}, "status", "--cwd", str(repo))
    assert result.code == 1
    warning, error = result.stderr.splitlines()
    assert WARNING in warning
    assert "`pimem service run` exited: pimem: error: PIMEM_DISTILLER must be" in warning
    assert error.startswith("pimem: error: PIMEM_DISTILLER must be")


def test_a_client_that_says_nothing_does_not_hold_up_the_others(
    service_env: dict[str, str], repo: Path
) -> None:
    assert pimem(service_env, "status", "--cwd", str(repo)).code == 0
    silent = service_client.connect(service_wire.socket_path(service_env))
    try:
        # Each connection has its own thread: this one waits for a request that never comes
        # (until its bound, tests/doors/service/test_service_edges.py).
        result = pimem(service_env, "search", "redis", "--cwd", str(repo))
        assert result.code == 0, result.stderr
        assert WARNING not in result.stderr
        assert hello(service_env).pid == silent.hello.pid
    finally:
        silent.close()


def test_a_client_with_another_environment_gets_a_service_of_its_own(
    service_env: dict[str, str], repo: Path
) -> None:
    """A service answers for the configuration it was started with: a client configured apart
    gets its own, and a request carrying another environment is refused by the wrong one."""
    assert pimem(service_env, "status", "--cwd", str(repo)).code == 0
    running = hello(service_env).pid

    other_env = {**service_env, "PIMEM_RANKER": "memsearch"}
    try:
        other = pimem(other_env, "status", "--cwd", str(repo))
        assert other.code == 0, other.stderr
        assert WARNING not in other.stderr
        assert "PIMEM_RANKER=memsearch" in other.stdout
        assert hello(other_env).pid != running
        assert hello(service_env).pid == running, "the first service is left as it is"

        connection = service_client.probe(service_wire.socket_path(service_env))
        assert connection is not None
        try:
            reply = connection.ask(
                {
                    "op": "run",
                    "argv": ["status"],
                    "cwd": os.getcwd(),
                    "python": sys.prefix,
                    "env": {**os.environ, **other_env},
                }
            )
        finally:
            connection.close()
        assert "settings differ from the memory service's (PIMEM_RANKER)" in str(reply["refused"])

        # Each environment sees the other's service, and what sets it apart.
        listed = pimem(service_env, "service", "status").stdout.splitlines()
        assert listed[0].startswith(f"running, pid {running}, up ")
        other_pid = hello(other_env).pid
        assert f"also running, for other settings: pid {other_pid}, up " in listed[1]
        assert listed[1].endswith("(PIMEM_RANKER=memsearch)")
        stopped = pimem(service_env, "service", "stop", "--all")
        assert stopped.stdout.startswith("stopped 2 memory service(s)"), stopped.stdout
        assert "no memory service is running" in pimem(other_env, "service", "stop").stdout
    finally:
        found = service_client.probe(service_wire.socket_path(other_env))
        if found is not None:
            service_client.stop(found, service_wire.socket_path(other_env))


SESSION = ("--session", "s1", "--turn", "t1", "--transcript", "/home/user/s1.jsonl")


def test_piped_content_that_is_not_text_is_refused_in_process(
    service_env: dict[str, str], repo: Path
) -> None:
    """The client cannot send bytes that are not UTF-8 as text: the write runs in process,
    which reads the same bytes again and refuses them with its own message; nothing is written."""
    done = subprocess.run(
        [sys.executable, "-m", "pimem_core", "write", "-", *SESSION],
        input=b"- caf\xe9",
        capture_output=True,
        cwd=repo,
        env={**os.environ, "PIMEM_NOW": CLOCK, **service_env},
        check=False,
        timeout=60,
    )
    stderr = done.stderr.decode()
    assert done.returncode == 1
    assert "the content read from stdin is not UTF-8 text" in stderr
    assert not list((repo / ".memsearch" / "memory").glob("*.md"))


def test_a_wedged_service_is_left_for_in_process_after_its_silence(
    service_env: dict[str, str], repo: Path
) -> None:
    """A service that greets and then says nothing (no answer, no heartbeat) is taken for
    wedged after :data:`~service_wire.SILENCE_S`, and the read is answered all the same."""
    directory = service_wire.runtime_dir(service_env)
    service_client.prepare_dir(directory)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(service_wire.socket_path(service_env)))
    listener.listen(4)
    held: list[socket.socket] = []

    def greet_and_hang() -> None:
        conn, _ = listener.accept()
        held.append(conn)
        hello = {
            "service": "pimem",
            "version": service_wire.VERSION,
            "protocol": service_wire.PROTOCOL,
            "pid": os.getpid(),
            "started": time.time(),
        }
        conn.sendall(json.dumps(hello).encode() + b"\n")

    greeter = threading.Thread(target=greet_and_hang, daemon=True)
    greeter.start()
    started = time.monotonic()
    client = subprocess.Popen(
        [sys.executable, "-m", "pimem_core", "search", "anything"],
        cwd=repo,
        env=service_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert client.stderr is not None
    # The user is told while it waits, not after: the first line comes during the silence.
    said = client.stderr.readline()
    said_after = time.monotonic() - started
    stdout, rest = client.communicate(timeout=PATIENCE_S)
    result = Result(client.returncode, stdout, said + rest)
    waited = time.monotonic() - started
    listener.close()
    for conn in held:
        conn.close()
    # The silent one is given up on: the search is answered all the same (by a new service,
    # which took the socket over, or in process).
    assert result.code == 0, result.stderr
    assert result.stdout.startswith("no memory yet in "), result.stdout  # the search's answer
    assert waited >= service_wire.SILENCE_S  # it did wait for the silence, not fail at once
    assert said.startswith(f"pimem: waiting for the memory service (pid {os.getpid()}), silent")
    assert "at 10 s it asks a new memory service" in said
    assert said_after < service_wire.SILENCE_S, "said while waiting"


def test_a_second_service_leaves_the_running_one_alone(
    service_env: dict[str, str], repo: Path
) -> None:
    """The socket's claim lets one service bind it: another started beside it (by hand, or by
    two clients at once) exits at once and removes nothing."""
    assert pimem(service_env, "status", "--cwd", str(repo)).code == 0
    running = hello(service_env).pid
    second = pimem(service_env, "service", "run")
    assert second.code == 0
    assert "another memory service holds" in second.stderr
    assert hello(service_env).pid == running
    claim = service_wire.socket_path(service_env).with_suffix(".pid")
    assert claim.read_text() == f"{running}\n"


def test_a_program_asks_the_memory_service_for_a_command_line(
    service_env: dict[str, str], repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program embedding pimem shares the warm engine with ``pimem.ask_memory_service``: the
    command line's answer, from the service it started."""
    import pimem_core

    monkeypatch.chdir(repo)
    for name, value in service_env.items():
        monkeypatch.setenv(name, value)
    session = ("--session", "s1", "--turn", "t1", "--transcript", "/home/user/s1.jsonl")
    written = pimem_core.ask_memory_service(["write", "-", *session], stdin="- we use uv")
    assert written.exit_code == 0, written.stderr
    status = pimem_core.ask_memory_service(["status", "--json"])
    assert status.exit_code == 0
    assert json.loads(status.stdout)["scope"]["repository_dir"] == str(repo)
    assert hello(service_env).current
    assert "- we use uv" in next((repo / ".memsearch" / "memory").glob("*.md")).read_text()


def test_the_pi_adapters_own_settings_do_not_split_the_service() -> None:
    """pi's bridges carry the adapter's `PIMEM_BIN`; a shell does not: both share one service."""
    shell = {"HOME": "/home/u", "PIMEM_RANKER": "pimem"}
    bridge = {**shell, "PIMEM_BIN": "/opt/pimem/bin/pimem", "PIMEM_PI_TIMINGS": "1"}
    assert service_wire.socket_path(shell) == service_wire.socket_path(bridge)
    assert service_wire.socket_path(shell) != service_wire.socket_path(
        {**shell, "PIMEM_RANKER": "memsearch"}
    )
