"""The memory service's edges, probed as a careless or hostile process of the same user would:
connections that never send, lines that are not requests, a large write beside other clients,
a burst of clients, secrets in ``pimem service status``, command lines the client never routes.

Real service processes in each test's own runtime directory (``service_env``), stopped at the
end. The only timed assertions are the two the service promises: a silent connection is closed
within 10 s, and a ``status`` during a 6 MB write answers within 1 s.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pytest
from service_helpers import PATIENCE_S, WARNING, hello, wait_until

from pimem_core.doors import service_client, service_limits, service_wire
from pimem_core.scrub import APART_CHARS, Scrubber
from pimem_core.types import SecretPattern

from conftest import alive, make_distribution, run_cli

#: The promise for a connection that sends nothing (the service's own bound is 5 s).
CLOSED_WITHIN_S = 10.0
#: The promise for a request beside a large write.
ANSWERED_WITHIN_S = 1.0
ANCHOR = ("--session", "s1", "--turn", "t1", "--transcript", "/home/user/s1.jsonl")


def started(env: dict[str, str], repo: Path) -> int:
    """The pid of the service a ``pimem status`` started."""
    result = run_cli("status", "--cwd", str(repo), env=env)
    assert result.code == 0, result.stderr
    assert WARNING not in result.stderr
    return hello(env).pid


@contextlib.contextmanager
def raw_connection(env: dict[str, str]) -> Iterator[tuple[socket.socket, BinaryIO]]:
    """A connection to the service with its handshake read, as a client other than pimem's
    would make it."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(PATIENCE_S)
    sock.connect(str(service_wire.socket_path(env)))
    stream = sock.makefile("rb")
    try:
        assert json.loads(stream.readline())["service"] == "pimem"
        yield sock, stream
    finally:
        stream.close()
        sock.close()


def closed_after(sock: socket.socket, stream: BinaryIO, *, within: float) -> float:
    """How long until the service closed the connection (it must, within *within* seconds)."""
    begun = time.monotonic()
    sock.settimeout(within)
    try:
        assert stream.read() == b"", "the service sent something to a connection that asked nothing"
    except TimeoutError:
        pytest.fail(f"the service kept a silent connection open for {within:.0f} s")
    return time.monotonic() - begun


def log_text(env: dict[str, str]) -> str:
    return service_wire.log_path(env).read_text(errors="replace")


# -- connections that never send ----------------------------------------------------------------


def test_a_silent_connection_is_closed_within_10_s(service_env: dict[str, str], repo: Path) -> None:
    assert service_limits.REQUEST_S < CLOSED_WITHIN_S
    pid = started(service_env, repo)
    with raw_connection(service_env) as (sock, stream):
        closed_after(sock, stream, within=CLOSED_WITHIN_S)
    assert hello(service_env).pid == pid  # and the service goes on
    assert "Traceback" not in log_text(service_env)


def test_a_silent_connection_holds_no_idle_exit(service_env: dict[str, str], repo: Path) -> None:
    env = {**service_env, "PIMEM_SERVICE_IDLE_S": "2"}
    pid = started(env, repo)
    with raw_connection(env) as (sock, _):
        # Kept open at this end: the service exits on its idle time all the same.
        wait_until(lambda: not alive(pid), "the idle service to exit beside a silent connection")
        sock.settimeout(PATIENCE_S)
        assert sock.recv(1) == b""
    assert not service_wire.socket_path(env).exists()


def test_a_trickling_connection_is_closed_as_a_silent_one(
    service_env: dict[str, str], repo: Path
) -> None:
    """A byte now and then is no request: the bound is for the whole of it."""
    started(service_env, repo)
    with raw_connection(service_env) as (sock, stream):
        done = threading.Event()

        def trickle() -> None:
            with contextlib.suppress(OSError):
                sock.sendall(b'{"op": ')
                while not done.wait(0.5):
                    sock.sendall(b" ")

        sender = threading.Thread(target=trickle, daemon=True)
        sender.start()
        try:
            closed_after(sock, stream, within=CLOSED_WITHIN_S)
        finally:
            done.set()
            sender.join()
    assert run_cli("status", "--cwd", str(repo), env=service_env).code == 0


def test_service_stop_does_not_wait_for_a_silent_connection(
    service_env: dict[str, str], repo: Path
) -> None:
    pid = started(service_env, repo)
    with raw_connection(service_env) as (sock, _):
        stopped = run_cli("service", "stop", env=service_env)
        assert stopped.stdout.strip() == f"stopped the memory service (pid {pid})"
        wait_until(lambda: not alive(pid), "the stopped service to exit")
        sock.settimeout(PATIENCE_S)
        assert sock.recv(1) == b""


# -- lines that are not requests ----------------------------------------------------------------


def refusal(env: dict[str, str], line: bytes) -> str:
    """The service's one reply to *line* (sent whole, whatever happens to the sending), after
    which it closes the connection."""
    with raw_connection(env) as (sock, stream):

        def send() -> None:
            with contextlib.suppress(OSError):  # the service closes before the end of a long one
                sock.sendall(line)

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        reply = json.loads(stream.readline())
        with contextlib.suppress(ConnectionResetError):  # the rest unread, at the service's end
            assert stream.readline() == b"", "one reply, then the connection is closed"
        sender.join(PATIENCE_S)
    assert set(reply) == {"refused"}, reply
    refused = reply["refused"]
    assert isinstance(refused, str)
    return refused


def test_lines_that_are_not_requests_get_one_refusal_and_no_traceback(
    service_env: dict[str, str], repo: Path
) -> None:
    started(service_env, repo)
    deep = b"[" * 100_000 + b"]" * 100_000 + b"\n"
    assert refusal(service_env, deep) == "a bad request: not JSON: nested too deeply"
    assert refusal(service_env, b"{not json\n").startswith("a bad request: not JSON: ")
    assert (
        refusal(service_env, b"[1, 2]\n") == "a bad request: a service line must be a JSON object"
    )
    assert refusal(service_env, b"\xff\xfe\n").startswith("a bad request: not JSON: ")
    huge = b'{"op": "run", "stdin": "' + b"x" * (100 * 1024 * 1024) + b'"}\n'
    assert refusal(service_env, huge) == (
        f"a bad request: a line is at most {service_wire.MAX_LINE} bytes"
    )
    with raw_connection(service_env) as (sock, stream):  # well-formed, but no op it knows
        assert ask(sock, stream, {"op": "exec"}) == {"refused": "unknown op 'exec'"}
    # The service goes on serving, and logged a line for each, never a traceback.
    search = run_cli("search", "redis", "--cwd", str(repo), env=service_env)
    assert search.code == 0, search.stderr
    assert WARNING not in search.stderr
    text = log_text(service_env)
    assert "Traceback" not in text
    assert "RecursionError" not in text
    assert text.count("a client sent a bad request") == 5


def test_an_attached_session_answers_bad_lines_and_goes_on(
    service_env: dict[str, str], repo: Path
) -> None:
    """Past ``attach`` the host protocol's own rules hold: an error reply for each bad line,
    and the session goes on."""
    started(service_env, repo)
    with raw_connection(service_env) as (sock, stream):
        attach: dict[str, object] = {
            "op": "attach",
            "cwd": str(Path.cwd()),
            "python": sys.prefix,
            "env": service_env,
        }
        assert ask(sock, stream, attach) == {"attached": True}
        for line, said in (
            (b"[" * 100_000 + b"]" * 100_000 + b"\n", "not JSON: nested too deeply"),
            (b'{"id": 1, "method": "' + b"x" * (100 * 1024 * 1024) + b'"}\n', "line too long"),
        ):
            sock.sendall(line)
            reply = json.loads(stream.readline())
            assert reply["error"]["type"] == "request", reply
            assert said in reply["error"]["message"]
        sock.sendall(b'{"id": 2, "method": "ping"}\n')
        assert json.loads(stream.readline())["id"] == 2
    assert "Traceback" not in log_text(service_env)


def test_a_request_longer_than_the_service_takes_runs_in_process(
    service_env: dict[str, str], repo: Path
) -> None:
    """The client does not send what the service would refuse: the write runs in process,
    after the one warning line, and is applied once."""
    content = "- a long entry\n" + "- filler\n" * (service_wire.MAX_LINE // 10 + 1)
    written = run_cli("write", "-", *ANCHOR, "--json", env=service_env, cwd=repo, stdin=content)
    assert written.code == 0, written.stderr
    (warning,) = [line for line in written.stderr.splitlines() if WARNING in line]
    assert "the request is longer than the memory service takes" in warning
    day_file = Path(json.loads(written.stdout)["file"])
    assert day_file.read_text().count("- a long entry\n") == 1


def test_only_the_routed_command_lines_are_run(service_env: dict[str, str], repo: Path) -> None:
    started(service_env, repo)
    on = {"PIMEM_SERVICE": "on"}
    with raw_connection(service_env) as (sock, stream):
        introduction = {"cwd": str(Path.cwd()), **service_client.introduction()}
        for argv in (
            ["service", "stop"],
            ["serve"],
            ["scope"],
            ["search", "redis", "--help"],
            ["--version"],
            # An abbreviation the parser would take as --cwd: `serve` would be the command.
            ["--cw", "search", "serve"],
            [],
        ):
            assert not service_client.routed(argv, on)
            wire_reply = ask(sock, stream, {"op": "run", "argv": argv, **introduction})
            assert set(wire_reply) == {"refused"}, (argv, wire_reply)
            assert str(wire_reply["refused"]).startswith(
                "the memory service runs only `pimem expand`, `pimem forget`, `pimem index`, "
                "`pimem search`, `pimem status`, `pimem write`"
            )
    assert hello(service_env).current  # `service stop` was not run
    assert service_client.routable(["--cwd", "search", "--json", "search", "redis"])
    assert service_client.routable(["--cwd=a", "--json", "status"])


def ask(sock: socket.socket, stream: BinaryIO, message: dict[str, object]) -> dict[str, object]:
    """The reply to *message*, past the service's heartbeats."""
    sock.sendall(service_wire.encode(message))
    while True:
        reply = json.loads(stream.readline())
        assert isinstance(reply, dict)
        if "working" not in reply:
            return reply


# -- a large write beside other clients ---------------------------------------------------------


def scrubbing(pid: int) -> bool:
    """Whether a child of *pid* is scrubbing a long text (``python -m pimem_core.scrub``)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            if parent == pid and b"pimem_core.scrub" in (stat.parent / "cmdline").read_bytes():
                return True
    return False


def test_a_status_during_a_6_mb_write_answers_within_a_second(
    service_env: dict[str, str], repo: Path
) -> None:
    pid = started(service_env, repo)
    key = "sk-ant-api03-" + "Zq7" * 30
    lines = (f"- step {n}: the cache warms from postgres replica {n % 7}\n" for n in range(120_000))
    content = "".join(lines) + f"- the deploy key was {key}\n"
    assert len(content) > 6_000_000
    writer = subprocess.Popen(
        [sys.executable, "-m", "pimem_core", "write", "-", *ANCHOR, "--json"],
        cwd=repo,
        env=service_env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    answer: list[tuple[bytes, bytes]] = []
    feeding = threading.Thread(
        target=lambda: answer.append(writer.communicate(content.encode(), timeout=PATIENCE_S)),
        daemon=True,
    )
    feeding.start()
    wait_until(lambda: scrubbing(pid) or writer.poll() is not None, "the write's scrubbing")
    assert writer.poll() is None, "the write was over before the status could be asked"
    begun = time.monotonic()
    status = run_cli("status", "--cwd", str(repo), env=service_env)
    took = time.monotonic() - begun
    assert status.code == 0, status.stderr
    assert WARNING not in status.stderr
    assert took < ANSWERED_WITHIN_S, f"status took {took:.2f} s during the write"
    feeding.join(PATIENCE_S)
    assert writer.returncode == 0, answer
    stdout, stderr = answer[0]
    assert WARNING.encode() not in stderr
    data = json.loads(stdout)
    assert data["redacted"] == {"anthropic-api-key": 1}
    text = Path(data["file"]).read_text()
    assert key not in text
    assert "- step 119999: the cache warms from postgres replica 5\n" in text


def test_a_long_text_is_scrubbed_apart_exactly_as_here(monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    patterns = (
        SecretPattern(name="token", pattern=re.compile(r"tok_[a-z0-9]{12}")),
        SecretPattern(name="env", pattern=re.compile(r"(?i)password\s*=\s*(?P<secret>\S+)")),
    )
    scrubber = Scrubber(patterns)
    text = ("- plain words é \ud800 and more\n" * (APART_CHARS // 20)) + (
        "- PASSWORD = hunter2hunter2 and tok_abcdef012345\n"
    )
    here = scrubber.scrubbed_here(text)
    assert here.found == (("token", 1), ("env", 1))
    assert scrubber.scrubbed(text) == here
    # A child that cannot run: the text is scrubbed here, never kept as it was.
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    assert scrubber.scrubbed(text) == here


# -- a burst of clients -------------------------------------------------------------------------


def test_the_backlog_queues_a_burst_of_256_connections(
    service_env: dict[str, str], repo: Path
) -> None:
    """While the service cannot accept (stopped), the kernel queues 256 connections, and
    each gets its handshake once it runs again."""
    assert service_limits.BACKLOG >= 256
    pid = started(service_env, repo)
    path = str(service_wire.socket_path(service_env))
    waiting: list[socket.socket] = []
    os.kill(pid, signal.SIGSTOP)
    try:
        for _ in range(256):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            waiting.append(sock)
            sock.setblocking(False)
            sock.connect(path)  # BlockingIOError once the queue is full
    finally:
        os.kill(pid, signal.SIGCONT)
    try:
        for sock in waiting:
            sock.settimeout(PATIENCE_S)
            assert json.loads(sock.makefile("rb").readline())["pid"] == pid
    finally:
        for sock in waiting:
            sock.close()


#: Simultaneous `pimem search` processes: the acceptance's 256.
BURST = 256


def test_a_burst_of_search_processes_is_answered_by_the_service(
    service_env: dict[str, str], repo: Path
) -> None:
    pid = started(service_env, repo)
    assert run_cli("write", "-", *ANCHOR, env=service_env, cwd=repo, stdin="- redis").code == 0

    def found() -> bool:
        searched = run_cli("search", "redis", "--json", "--cwd", str(repo), env=service_env)
        return searched.code == 0 and bool(json.loads(searched.stdout))

    # Every search of the burst finds what is indexed, not what is being indexed.
    wait_until(found, "the entry to be indexed")
    clients = [
        subprocess.Popen(
            [sys.executable, "-m", "pimem_core", "search", "redis", "--json"],
            cwd=repo,
            env=service_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(BURST)
    ]
    answers = [client.communicate(timeout=10 * PATIENCE_S) for client in clients]
    failed = [
        (client.returncode, err.decode(errors="replace"))
        for client, (_, err) in zip(clients, answers, strict=True)
        if client.returncode != 0 or WARNING.encode() in err
    ]
    assert failed == []
    assert all(json.loads(out)[0]["content"].endswith("\n- redis") for out, _ in answers)
    assert hello(service_env).pid == pid


# -- secrets in `pimem service status` ----------------------------------------------------------

VAULT = textwrap.dedent(
    """
    from pimem_core.plugin import SettingSpec, hookimpl

    PHRASE = SettingSpec.text(
        plugin="vault", name="phrase", env="VAULT_PHRASE", help="the vault's pass phrase",
        secret=True,
    )

    @hookimpl
    def pimem_declare_settings():
        return (PHRASE,)
    """
)


def test_service_status_masks_the_settings_that_hold_secrets(
    service_env: dict[str, str], repo: Path, tmp_path: Path
) -> None:
    site = make_distribution(tmp_path / "site", "pimem-vault", {"vault": "vault"}, {"vault": VAULT})
    base = {**service_env, "PYTHONPATH": str(site)}
    secrets = {
        "VAULT_PHRASE": "correct-horse-battery",  # declared secret by its plugin
        "PIMEM_DISTILL_API_KEY": "sk-distill-0123456789",  # declared, and named like one
        "HF_TOKEN": "hf_0123456789abcdef",  # named like one
    }
    other = {**base, **secrets, "PIMEM_DB_LINGER_MS": "1500"}
    assert run_cli("status", "--cwd", str(repo), env=other).code == 0
    for args in (("service", "status"), ("service", "status", "--json")):
        shown = run_cli(*args, env=base)
        assert shown.code == 0, shown.stderr
        for value in secrets.values():
            assert value not in shown.stdout
    text = run_cli("service", "status", env=base).stdout
    for name in secrets:
        assert f"{name}=****" in text
    assert "PIMEM_DB_LINGER_MS=1500" in text  # what is no secret is shown as it is
    record = json.loads(service_wire.socket_path(other).with_suffix(".json").read_text())
    assert {"VAULT_PHRASE", "PIMEM_DISTILL_API_KEY"} <= set(record["secret"])


def test_secret_names() -> None:
    for name in ("OPENAI_API_KEY", "GITHUB_TOKEN", "CLIENT_SECRET", "DB_PASSWORD", "x_token"):
        assert service_client.is_secret(name)
    for name in ("PIMEM_RANKER", "HF_HOME", "KEYBOARD", "TOKENIZERS_PARALLELISM"):
        assert not service_client.is_secret(name)
    assert service_client.is_secret("VAULT_PHRASE", {"VAULT_PHRASE"})
