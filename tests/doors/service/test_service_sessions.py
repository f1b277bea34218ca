"""Host sessions through the memory service: ``pimem serve`` with ``PIMEM_SERVICE=on`` relays
its host to a session the service serves. Real processes, a real socket, and real memsearch
where search is asserted."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from another_user import needs_another_user, run_as_nobody
from bridge import Bridge
from service_helpers import hello, wait_until

from pimem_core.doors import service_client, service_wire

from conftest import alive, run_cli
from pi_sessions import assistant, session_file, user

SESSION_MODEL = {"provider": "anthropic", "id": "small", "input_cost": 1, "output_cost": 5}
EXCHANGE = [
    {"id": "u1", "kind": "message", "role": "user", "text": "cache with Redis, 5 minute TTLs"},
    {"id": "a1", "kind": "message", "role": "assistant", "text": "Redis, with a 5 minute TTL"},
]
NOTE = "- the cache is Redis with a five minute TTL"


@pytest.fixture
def sessions(service_env: dict[str, str]) -> Iterator[list[Bridge]]:
    """Bridges opened by a test, closed after it (before its service is stopped)."""
    opened: list[Bridge] = []
    yield opened
    for bridge in opened:
        if bridge.process.stdin is not None and not bridge.process.stdin.closed:
            bridge.close()


def open_session(
    sessions: list[Bridge], env: dict[str, str], project: Path, session_id: str = "s1"
) -> Bridge:
    bridge = Bridge(env, cwd=project)
    sessions.append(bridge)
    bridge.model_answer = NOTE
    # pi's session file, which a new service reads an exchange back from.
    session_file(
        project / f"{session_id}.jsonl",
        [
            user("u1", None, 1, EXCHANGE[0]["text"]),
            assistant("a1", "u1", 2, EXCHANGE[1]["text"]),
        ],
    )
    started = bridge.call(
        "session.start",
        session_id=session_id,
        cwd=str(project),
        transcript=str(project / f"{session_id}.jsonl"),
        model=SESSION_MODEL,
        models=[SESSION_MODEL],
    )
    assert "result" in started, started
    return bridge


def status_of(bridge: Bridge) -> str:
    text: str = bridge.call("memory.status")["result"]["text"]
    return text


def day_files(project: Path) -> list[Path]:
    return sorted((project / ".memsearch" / "memory").glob("????-??-??.md"))


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def project(root: Path, name: str) -> Path:
    directory = root / name
    (directory / ".git").mkdir(parents=True)
    return directory


@pytest.mark.parametrize("service", ["on", "off"])
def test_the_snapshot_is_the_memory_as_the_session_opened_it_with_the_service_or_without(
    service: str, service_env: dict[str, str], tmp_path: Path
) -> None:
    """The snapshot is built as the host opens memory (attaches, or starts its bridge), while
    it is still starting up; ``session.start`` takes it. Both ways give the same snapshot."""
    repo = project(tmp_path, "repo")
    memory = repo / ".memsearch" / "memory"
    memory.mkdir(parents=True)
    (memory / "2026-08-13.md").write_text("- decided before pi started\n")
    bridge = Bridge({**service_env, "PIMEM_SERVICE": service}, cwd=repo)
    try:
        assert bridge.call("ping")["result"] == {"pong": True}  # served: memory is open
        (memory / "2026-08-13.md").write_text("- decided before\n- and while pi started\n")
        bridge.call("session.start", session_id="s1", cwd=str(repo), transcript=None)
        snapshot = bridge.call("session.before_prompt", prompt="hi")["result"]["snapshot"]
    finally:
        bridge.close()
    assert "- decided before pi started" in snapshot
    assert "while pi started" not in snapshot


def test_sessions_in_two_projects_share_one_service_and_keep_their_own_capture(
    service_env: dict[str, str], sessions: list[Bridge], tmp_path: Path
) -> None:
    alpha, beta = project(tmp_path, "alpha"), project(tmp_path, "beta")
    first = open_session(sessions, service_env, alpha)
    service = hello(service_env)
    second = open_session(sessions, service_env, beta, "s2")
    assert hello(service_env).pid == service.pid, "one service for both sessions"

    third = open_session(sessions, service_env, alpha, "s3")
    assert first.call("session.settled", leaf="a1", branch=EXCHANGE)["result"] == {"queued": True}
    wait_until(lambda: "1 captured" in status_of(first), "the capture")
    # Sessions share the service's plugin manager; each one's status tells its own capture.
    assert status_of(third).count("capture (this session): 0 captured") == 1
    assert "capture (this session): 1 captured" not in status_of(third)
    assert "capture (this session): 0 captured" in status_of(second)
    assert first.call("session.shutdown", wait_for_index=True)["result"]["indexed_in_time"]
    (alpha_day,) = day_files(alpha)
    assert alpha_day.read_text().count(NOTE) == 1
    assert day_files(beta) == [], "a capture lands in its own session's project only"
    found = third.call("memory.search", query="which cache do we use")["result"]
    assert any("Redis" in hit["content"] for hit in found["hits"]), found

    # The bridges are thin: the model and the read models live in the service.
    for bridge in (first, second, third):
        assert rss_kib(bridge.process.pid) < 64 * 1024
    assert [bridge.close() for bridge in (first, second, third)] == [0, 0, 0]
    assert alive(service.pid), "the service outlives the sessions"


def test_a_session_with_auto_context_and_a_shell_without_share_one_service(
    service_env: dict[str, str], sessions: list[Bridge], tmp_path: Path
) -> None:
    """Settings that shape one session travel with it: pi's auto-context does not split the
    service from the shell's, and the shell's status reports the session's recall."""
    alpha = project(tmp_path, "alpha")
    pi_env = {**service_env, "PI_MEMSEARCH_AUTO_CONTEXT": "on"}
    bridge = open_session(sessions, pi_env, alpha)
    assert "auto-context: on (" in status_of(bridge)
    shell = run_cli("status", env=service_env, cwd=alpha)
    assert shell.code == 0, shell.stderr
    assert "memory service is unavailable" not in shell.stderr
    assert "auto-context: on in an agent session (" in shell.stdout
    assert service_wire.socket_path(pi_env) == service_wire.socket_path(service_env)
    assert [running.hello.pid for running in service_client.every_service(service_env)] == [
        hello(service_env).pid
    ]
    # A shell that asks for it itself sees its own setting, not "in an agent session".
    own = run_cli("status", env=pi_env, cwd=alpha)
    assert "auto-context: on (" in own.stdout
    assert bridge.close() == 0


def test_a_session_may_start_only_in_its_bridges_own_directory(
    service_env: dict[str, str], sessions: list[Bridge], tmp_path: Path
) -> None:
    alpha, beta = project(tmp_path, "alpha"), project(tmp_path, "beta")
    bridge = Bridge(service_env, cwd=alpha)
    sessions.append(bridge)
    answer = bridge.call("session.start", session_id="s1", cwd=str(beta))
    assert answer["error"]["type"] == "request"
    assert "must be the directory `pimem serve` runs in" in answer["error"]["message"]


def test_a_client_naming_another_directory_than_its_own_is_refused(
    service_env: dict[str, str], tmp_path: Path
) -> None:
    """The service serves a client for the scopes of where the client runs: a request that
    claims another working directory is refused before anything is read or written."""
    alpha, beta = project(tmp_path, "alpha"), project(tmp_path, "beta")
    connection = ensure_in(service_env)
    try:
        reply = connection.ask(
            {
                "op": "run",
                "argv": ["write", "planted"],
                "cwd": str(beta),
                "env": service_wire.env_fingerprint(service_env),
            }
        )
    finally:
        connection.close()
    assert reply == {"refused": "cwd must be the client's own working directory"}
    assert day_files(beta) == []
    assert day_files(alpha) == []


def ensure_in(env: dict[str, str]) -> service_client.Connection:
    """A connection from this test process to the service *env* describes (a routed command
    starts it, with *env*)."""
    started = subprocess.run(
        [sys.executable, "-m", "pimem_core", "status"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert started.returncode == 0, started.stderr
    connection = service_client.probe(service_wire.socket_path(env))
    assert connection is not None, "no service answers"
    return connection


def test_a_service_killed_mid_capture_loses_nothing(
    service_env: dict[str, str], sessions: list[Bridge], tmp_path: Path
) -> None:
    """The service dies while the host's model is distilling an exchange: the relay attaches
    to a new service, starts the session there again, and the capture journal brings the
    exchange back; the session goes on."""
    env = {**service_env, "PIMEM_DISABLE_PLUGINS": "memsearch-index"}
    alpha = project(tmp_path, "alpha")
    bridge = open_session(sessions, env, alpha)
    killed = hello(env).pid
    bridge.next_id += 1
    bridge.send(
        {
            "id": bridge.next_id,
            "method": "session.settled",
            "params": {"leaf": "a1", "branch": EXCHANGE},
        }
    )
    asked = read_until_asked(bridge)
    os.kill(killed, signal.SIGKILL)
    wait_until(lambda: not alive(killed), "the service to die")
    # The answer to a dead service's question is dropped; the new service asks again, under
    # an id the host has not seen, so the two answers can never be confused.
    bridge.send({"id": asked["id"], "result": {"text": NOTE}})
    again = read_until_asked(bridge)
    assert again["id"] != asked["id"]
    assert again["id"].startswith("pimem-")
    bridge.send({"id": again["id"], "result": {"text": NOTE}})
    answer = bridge.call("ping")
    assert answer["result"] == {"pong": True}
    assert hello(env).pid != killed, "a new service took over"
    shutdown = bridge.call("session.shutdown", wait_for_index=True)
    assert shutdown["result"]["captured_in_time"], shutdown
    (day,) = day_files(alpha)
    assert day.read_text().count(NOTE) == 1, day.read_text()
    assert bridge.close() == 0


def read_until_asked(bridge: Bridge) -> dict[str, Any]:
    """Read the bridge's lines until the service asks the host's model (the settled request's
    own answer may come first)."""
    while True:
        message = bridge.read()
        if message.get("method") == "complete":
            return message


def test_a_write_in_flight_when_the_service_dies_is_reported_not_repeated(
    service_env: dict[str, str], sessions: list[Bridge], tmp_path: Path
) -> None:
    env = {**service_env, "PIMEM_DISABLE_PLUGINS": "memsearch-index"}
    alpha = project(tmp_path, "alpha")
    bridge = open_session(sessions, env, alpha)
    pid = hello(env).pid
    os.kill(pid, signal.SIGSTOP)  # the request is handed over but never answered
    bridge.next_id += 1
    bridge.send(
        {
            "id": bridge.next_id,
            "method": "memory.write",
            "params": {"content": "We pin Node 22.", "turn": "a1"},
        }
    )
    # Time for the relay to hand it over. A write still with the relay when the service dies
    # goes to the next service and is answered, which is right, but not this test's case.
    time.sleep(1.0)
    os.kill(pid, signal.SIGKILL)
    answer = bridge.read()
    assert answer["id"] == bridge.next_id
    assert answer["error"]["type"] == "unavailable"
    assert "may or may not have been applied" in answer["error"]["message"]
    assert bridge.call("ping")["result"] == {"pong": True}


def test_with_no_service_to_be_had_the_session_is_served_in_process(
    service_env: dict[str, str], sessions: list[Bridge], tmp_path: Path
) -> None:
    home = Path(service_env["PIMEM_HOME"])
    home.mkdir(parents=True)
    (home / "run").write_text("not a directory")
    alpha = project(tmp_path, "alpha")
    bridge = Bridge(service_env, cwd=alpha)
    sessions.append(bridge)
    started = bridge.call("session.start", session_id="s1", cwd=str(alpha))
    assert "result" in started
    assert bridge.call("ping")["result"] == {"pong": True}
    assert bridge.close() == 0


@needs_another_user
def test_another_user_cannot_use_the_service(service_env: dict[str, str]) -> None:
    """A second local user (``nobody``) is kept out by the directory's mode, and still by the
    peer check where the directory is opened up by mistake; no TCP port is opened."""
    # A runtime directory that another user could reach, were it not for its own mode.
    reachable = Path(tempfile.mkdtemp(prefix="pimem-peer-", dir="/tmp"))
    env = {**service_env, "PIMEM_HOME": str(reachable)}
    try:
        reachable.chmod(0o711)
        ensure_in(env).close()
        path = service_wire.socket_path(env)
        assert path.stat().st_mode & 0o777 == 0o600
        assert path.parent.stat().st_mode & 0o777 == 0o700
        assert as_nobody(path).startswith("refused:")
        path.parent.chmod(0o711)
        path.chmod(0o666)
        assert as_nobody(path) == "hello: <closed>", "the service must not answer another user"
        assert not listening_on_tcp(hello(env).pid)
    finally:
        found = service_client.probe(service_wire.socket_path(env))
        if found is not None:
            service_client.stop(found, service_wire.socket_path(env))
        shutil.rmtree(reachable, ignore_errors=True)


def as_nobody(path: Path) -> str:
    """What user ``nobody`` gets when it connects to *path*."""
    probe = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        f"    s.connect({str(path)!r})\n"
        "except OSError as e:\n"
        "    print('refused:', e.errno); sys.exit(0)\n"
        "print('hello:', s.recv(4096).decode() or '<closed>')\n"
    )
    return run_as_nobody(probe)


def listening_on_tcp(pid: int) -> bool:
    """Whether *pid* holds a listening TCP socket (``/proc/net/tcp*`` state 0A)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:
                return True
    return False


def test_listening_on_tcp_sees_a_listener() -> None:
    """The check above can fail: a TCP listener of this process is found."""
    with socket.create_server(("127.0.0.1", 0)):
        assert listening_on_tcp(os.getpid())


def test_a_session_whose_service_cannot_come_back_goes_on_in_process(
    service_env: dict[str, str], sessions: list[Bridge], tmp_path: Path
) -> None:
    """The service dies and no new one can be started: the rest of the session is served in
    the bridge's own process, which starts the session again and captures what was pending."""
    env = {**service_env, "PIMEM_DISABLE_PLUGINS": "memsearch-index"}
    alpha = project(tmp_path, "alpha")
    bridge = open_session(sessions, env, alpha)
    killed = hello(env).pid
    # No client can take the start lock any more: a new service cannot be started.
    lock = service_wire.lock_path(env)
    lock.unlink(missing_ok=True)
    lock.mkdir()
    os.kill(killed, signal.SIGKILL)
    wait_until(lambda: not alive(killed), "the service to die")
    assert bridge.call("ping")["result"] == {"pong": True}
    assert bridge.call("session.settled", leaf="a1", branch=EXCHANGE)["result"] == {"queued": True}
    status = bridge.call("memory.status")["result"]["text"]
    assert f"scope: {alpha}" in status
    shutdown = bridge.call("session.shutdown", wait_for_index=True)
    assert shutdown["result"]["captured_in_time"], shutdown
    (day,) = day_files(alpha)
    assert day.read_text().count(NOTE) == 1
    assert bridge.close() == 0
    assert service_client.probe(service_wire.socket_path(env)) is None


def test_a_killed_bridge_leaves_its_session_to_the_next_one(
    service_env: dict[str, str], sessions: list[Bridge], tmp_path: Path
) -> None:
    """The bridge (the relay) is killed while the host's model distils: the service leaves the
    session as a killed bridge would (no marker, the exchange kept in the journal), and the next
    bridge of the session captures it, once, through the same service."""
    env = {**service_env, "PIMEM_DISABLE_PLUGINS": "memsearch-index"}
    alpha = project(tmp_path, "alpha")
    first = open_session(sessions, env, alpha)
    service = hello(env).pid
    first.next_id += 1
    first.send(
        {
            "id": first.next_id,
            "method": "session.settled",
            "params": {"leaf": "a1", "branch": EXCHANGE},
        }
    )
    read_until_asked(first)
    first.process.kill()
    first.process.wait(timeout=30)
    for pipe in (first.process.stdin, first.process.stdout):
        assert pipe is not None
        pipe.close()

    second = open_session(sessions, env, alpha)
    shutdown = second.call("session.shutdown", wait_for_index=True)
    assert shutdown["result"]["captured_in_time"], shutdown
    (day,) = day_files(alpha)
    text = day.read_text()
    assert text.count(NOTE) == 1, text
    assert "[pimem]" not in text, "no marker for the exchange the killed bridge left"
    assert hello(env).pid == service
    assert second.close() == 0


#: A host attaching to the service itself, as the pi adapter does once a relay named the
#: service: hello, attach, then the host protocol's lines on the socket.
DIRECT_HOST = r"""
import json, os, socket, sys
sock = socket.socket(socket.AF_UNIX)
sock.connect(sys.argv[1])
lines = sock.makefile("rb")
def send(message):
    sock.sendall((json.dumps(message) + "\n").encode())
def answer(request_id):
    while True:
        message = json.loads(lines.readline())
        if message.get("id") == request_id:
            return message
hello = json.loads(lines.readline())
send({"op": "attach", "cwd": os.getcwd(), "python": sys.argv[2], "env": dict(os.environ)})
attached = json.loads(lines.readline())
send({"id": 1, "method": "session.start",
      "params": {"session_id": "direct", "cwd": os.getcwd(), "transcript": None}})
started = answer(1)
send({"id": 2, "method": "memory.status", "params": {}})
print(json.dumps([hello, attached, started, answer(2)]))
"""


def test_a_relay_names_its_service_and_a_host_may_attach_there_itself(
    service_env: dict[str, str], sessions: list[Bridge], tmp_path: Path
) -> None:
    """The relay tells its host where the service listens (``{"event": "service"}``); a host
    that attaches there itself, with no relay, is served a session of its own."""
    alpha = project(tmp_path, "alpha")
    first = open_session(sessions, service_env, alpha)
    (event,) = [event for event in first.events if event.get("event") == "service"]
    assert event == {
        "event": "service",
        "socket": str(service_wire.socket_path(service_env)),
        "python": sys.prefix,
        "version": service_wire.VERSION,
        "protocol": service_wire.PROTOCOL,
    }
    direct = subprocess.run(
        [sys.executable, "-c", DIRECT_HOST, event["socket"], event["python"]],
        cwd=alpha,
        env=service_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    hello_line, attached, started, status = json.loads(direct.stdout)
    assert hello_line["pid"] == hello(service_env).pid, "the same service as the relay's"
    assert attached == {"attached": True}
    assert started["result"]["scope"]["scope_dir"] == str(alpha), started
    # Its own session: no transcript given, unlike the relay's.
    assert "no persisted transcript" in status["result"]["text"], status
    assert "no persisted transcript" not in status_of(first)
    assert first.close() == 0
