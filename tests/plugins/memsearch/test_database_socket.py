"""memsearch's database, served by pimem on a Unix socket in the user's private runtime
directory: while the memory service indexes and searches, nothing it started listens on a TCP
port, and another local user reaches neither the service's socket nor the database's.

Real processes, real Milvus Lite and the offline model. Every wait is bounded and nothing is
timed: the checks sample ``/proc`` for as long as the work runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from another_user import needs_another_user, run_as_nobody
from service_helpers import hello, wait_until

from bench.corpus import generate_corpus
from pimem_core.doors import service_wire

from conftest import alive
from proc_sockets import family, holds_database, tcp_listeners, unix_listeners

ENTRIES = 2_000
#: Bounds the index run of :data:`ENTRIES` entries; never a measured assertion.
PATIENCE_S = 600.0


def database_sockets(pids: set[int], runtime: Path) -> set[str]:
    return {
        path
        for path in unix_listeners(pids)
        if Path(path).parent == runtime and Path(path).name.startswith("milvus-")
    }


def start(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pimem_core", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_indexing_and_searching_the_service_listens_on_no_tcp_port(
    service_env: dict[str, str], repo: Path, tmp_path: Path
) -> None:
    corpus = generate_corpus(ENTRIES)
    corpus.write(repo / ".memsearch" / "memory")
    started = start(service_env, "status", "--cwd", str(repo))
    assert started.communicate(timeout=PATIENCE_S)[1] == ""
    assert started.returncode == 0
    service = hello(service_env).pid
    database, runtime = tmp_path / "milvus.db", service_wire.runtime_dir(service_env)

    indexing = start(service_env, "index", "--cwd", str(repo))
    answers: list[tuple[int, str, str]] = []

    def search_meanwhile() -> None:
        for query in corpus.queries(4):
            searching = start(service_env, "search", query.text, "--cwd", str(repo))
            out, err = searching.communicate(timeout=PATIENCE_S)
            answers.append((searching.returncode, out, err))

    searches = threading.Thread(target=search_meanwhile)
    searches.start()
    tcp: set[str] = set()
    served: set[str] = set()
    samples = held = 0
    deadline = time.monotonic() + PATIENCE_S
    while indexing.poll() is None or searches.is_alive():
        assert time.monotonic() < deadline, "gave up waiting for the index run and searches"
        pids = family(service)
        tcp |= tcp_listeners(pids)
        samples += 1
        if holds_database(pids, database):
            held += 1
            served |= database_sockets(pids, runtime)
        time.sleep(0.05)
    searches.join()
    out, err = indexing.communicate()
    assert indexing.returncode == 0, err
    assert "the collection matches the files" in out, out
    assert [code for code, _, _ in answers] == [0] * 4, answers
    assert all("best first" in out for _, out, _ in answers), answers

    assert held, f"the database was never seen open in {samples} looks: nothing was checked"
    assert tcp == set(), f"the memory service or a child of it listened on TCP: {tcp}"
    assert served, "the open database was served on no Unix socket in the runtime directory"


def as_nobody(path: str) -> str:
    """What user ``nobody`` (no supplementary groups) gets when it connects to *path*."""
    probe = (
        "import socket\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        f"    s.connect({path!r})\n"
        "except OSError as e:\n"
        "    print('refused:', e.errno)\n"
        "else:\n"
        "    print('connected')\n"
    )
    return run_as_nobody(probe)


@needs_another_user
def test_another_user_reaches_neither_the_service_nor_its_database(
    service_env: dict[str, str], repo: Path, tmp_path: Path
) -> None:
    # The database stays open after a call for as long as the test looks at it. Set in the
    # fixture's own mapping, so the service it stops afterwards is this one.
    service_env["PIMEM_DB_LINGER_MS"] = "600000"
    env = service_env
    generate_corpus(20).write(repo / ".memsearch" / "memory")
    searched = start(env, "search", "which cache", "--cwd", str(repo))
    assert "best first" in searched.communicate(timeout=PATIENCE_S)[0]
    service = hello(env).pid
    database, runtime = tmp_path / "milvus.db", service_wire.runtime_dir(env)
    wait_until(lambda: holds_database(family(service), database), "the database to be open")

    (served,) = database_sockets(family(service), runtime)
    assert os.stat(served).st_mode & 0o777 == 0o600
    assert runtime.stat().st_mode & 0o777 == 0o700
    outside = as_nobody(str(service_wire.socket_path(env))), as_nobody(served)
    assert outside == ("refused: 13", "refused: 13")  # EACCES: the directory's mode
    runtime.chmod(0o711)  # opened up by mistake: the socket's own mode still keeps them out
    try:
        assert as_nobody(served) == "refused: 13"
    finally:
        runtime.chmod(0o700)
    assert tcp_listeners(family(service)) == set(), "no TCP port to try"
    assert alive(service)
