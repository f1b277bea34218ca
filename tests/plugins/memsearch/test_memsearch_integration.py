"""Index and recall on real memsearch, Milvus Lite and the offline MiniLM model, through the CLI."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar, cast

import pytest

from pimem_core import hookimpl
from pimem_core.paths import PimemPaths
from pimem_core.render import NO_LEGS, SCORE_NOTES
from pimem_core.service_values import CompactResult, IndexReport
from pimem_core.services import MemoryIndex
from pimem_core.testing import InMemoryIndex
from pimem_core.types import BackendCall, Scope, StoreChange
from pimem_plugins.memsearch.offline_model import OfflineModel

from conftest import CLOCK, Result, make_pimem, run_cli

MEMSEARCH = str(Path(sys.executable).with_name("memsearch"))
ENTRIES = [
    ("22:41", "t1", "- the user and the agent chose Redis for the hot cache with 5 minute TTLs"),
    ("22:50", "t2", "- the agent fixed the login redirect loop by escaping the return URL"),
    ("22:55", "t3", "- the user prefers pytest fixtures over unittest setUp methods"),
]


@pytest.fixture
def memsearch_env(memsearch_home: Path, offline_model: OfflineModel) -> dict[str, str]:
    """The environment of a child process using the isolated memsearch home."""
    return {"HOME": str(memsearch_home), **offline_model.environment()}


#: memsearch's ranker: its searches go through the collection (pimem's read the day files).
MEMSEARCH_RANKED = {"PIMEM_RANKER": "memsearch"}


def pimem(env: dict[str, str], *args: str, clock: str = CLOCK) -> Result:
    return run_cli(*args, env={**env, "PIMEM_NOW": clock})


def ok(result: Result) -> str:
    assert result.code == 0, result.stderr
    return result.stdout


def write_entries(env: dict[str, str], repo: Path) -> None:
    for time_, turn, content in ENTRIES:
        ok(
            pimem(
                env,
                "write",
                content,
                "--cwd",
                str(repo),
                "--session",
                "s1",
                "--turn",
                turn,
                "--transcript",
                "/home/user/s1.jsonl",
                clock=f"2026-08-13T{time_}",
            )
        )


def search(env: dict[str, str], repo: Path, query: str, k: int = 3) -> list[dict[str, object]]:
    hits: list[dict[str, object]] = json.loads(
        ok(pimem(env, "search", query, "-k", str(k), "--json", "--cwd", str(repo)))
    )
    return hits


def legs_of(hits: list[dict[str, object]]) -> list[dict[str, object]]:
    """Every leg of *hits*, as the JSON gives them."""
    return [leg for hit in hits for leg in cast(list[dict[str, object]], hit["legs"])]


def forget_read_model(env: dict[str, str]) -> None:
    """As on a machine where pimem never searched this store: the next search reads the
    collection (the index run left a complete read model in pimem's cache)."""
    shutil.rmtree(Path(env["HOME"]) / ".cache" / "pimem" / "read-model")


def test_write_index_search_expand_forget_round_trip(
    memsearch_env: dict[str, str], repo: Path
) -> None:
    write_entries(memsearch_env, repo)
    indexed = json.loads(ok(pimem(memsearch_env, "index", "--json", "--cwd", str(repo))))
    assert indexed["indexed_chunks"] == 3
    assert indexed["collection"] == Scope.derive_collection(repo)

    hits = search(memsearch_env, repo, "which cache did we pick for hot data")
    best = hits[0]
    assert "Redis for the hot cache" in str(best["content"])
    assert set(best) == {
        "chunk_hash",
        "score",
        "score_kind",
        "source",
        "start_line",
        "end_line",
        "heading",
        "heading_level",
        "content",
        "legs",
    }
    # Each retriever's say, when the ranker reports it (memsearch's does not).
    assert all(set(leg) == {"name", "rank", "score"} for leg in legs_of([best]))
    assert "<!-- session:s1 turn:t1 transcript:/home/user/s1.jsonl -->" in str(best["content"])
    assert best["source"] == str(repo / ".memsearch" / "memory" / "2026-08-13.md")

    section = json.loads(
        ok(pimem(memsearch_env, "expand", str(best["chunk_hash"]), "--json", "--cwd", str(repo)))
    )
    assert section["heading"] == "22:41"
    assert section["anchor"] == {"session": "s1", "turn": "t1", "transcript": "/home/user/s1.jsonl"}
    assert "Redis" in section["content"]
    # One chunk, one range, from every command: the entry's own lines.
    assert best["score_kind"] == "relevance"
    assert (section["start_line"], section["end_line"]) == (best["start_line"], best["end_line"])
    assert section["content"] == best["content"]
    text = ok(pimem(memsearch_env, "expand", str(best["chunk_hash"]), "--cwd", str(repo)))
    # The file is shown relative to the project; the JSON keeps the whole path.
    shown = Path(str(best["source"])).relative_to(repo)
    assert text.startswith(f"{shown}:{best['start_line']}-{best['end_line']} | 22:41\n")
    # The transcript is not on this machine: a line above the anchor says the entry is all,
    # and the anchor names the transcript by its file, written elsewhere.
    assert text.endswith(
        "the entry above is all that was kept of it.\n"
        "session: s1 | turn: t1\ntranscript: s1.jsonl (written elsewhere)\n"
    )
    assert section["transcript_on_this_machine"] is False

    forgotten = json.loads(
        ok(
            pimem(
                memsearch_env,
                "forget",
                "--chunk",
                str(best["chunk_hash"]),
                "--json",
                "--cwd",
                str(repo),
            )
        )
    )
    assert "Redis" in forgotten["removed"]
    day = (repo / ".memsearch" / "memory" / "2026-08-13.md").read_text()
    assert "Redis" not in day
    assert "login redirect loop" in day
    assert "pytest fixtures" in day

    # The forget re-indexed its file already: the next run checks and finds nothing to embed.
    assert ok(pimem(memsearch_env, "index", "--cwd", str(repo))) == (
        f"1 file(s) of {repo / '.memsearch' / 'memory'} checked, 0 new chunk(s) embedded into "
        f"{Scope.derive_collection(repo)}; the collection matches the files\n"
    )
    after = search(memsearch_env, repo, "which cache did we pick for hot data")
    assert all("Redis" not in str(hit["content"]) for hit in after)
    assert len(after) == 2


def test_search_text_is_the_block_format(memsearch_env: dict[str, str], repo: Path) -> None:
    write_entries(memsearch_env, repo)
    ok(pimem(memsearch_env, "index", "--cwd", str(repo)))
    text = ok(pimem(memsearch_env, "search", "login redirect", "-k", "2", "--cwd", str(repo)))
    heading, first = text.split("\n\n")[:2]
    assert heading in {f"2 memory chunk(s), best first ({note}):" for note in SCORE_NOTES.values()}
    # One line a hit, then its text: no anchor, no heading repeating the time.
    assert re.fullmatch(
        r"1\. 2026-08-13 22:50 \| (?:relevance|rank fusion) \d\.\d{2} \| chunk [0-9a-f]{16}\n"
        r"- the agent fixed the login redirect loop by escaping the return URL",
        first,
    )
    # --explain: a line for each leg the JSON names, or once that the ranker reports none.
    hits = search(memsearch_env, repo, "login redirect", k=2)
    args = ("search", "login redirect", "-k", "2", "--explain", "--cwd", str(repo))
    explained = ok(pimem(memsearch_env, *args))
    legs = legs_of(hits)
    assert all(f"\n   {leg['name']}: " in explained for leg in legs)
    assert (NO_LEGS in explained.splitlines()) == (not legs)
    # A query that looks like an option is still only a query: it never reaches an argv.
    dashed = ok(pimem(memsearch_env, "search", "--cwd", str(repo), "--", "-k weird query"))
    assert dashed.startswith(
        ('No memories found for "-k weird query".', "3 memory chunk(s)", "No hit reaches")
    )
    assert 'memory probably holds nothing about "-k weird query"' in dashed


def test_memory_indexed_by_pimem_is_found_by_the_memsearch_cli(
    memsearch_env: dict[str, str], repo: Path
) -> None:
    write_entries(memsearch_env, repo)
    ok(pimem(memsearch_env, "index", "--cwd", str(repo)))
    done = subprocess.run(
        [
            MEMSEARCH,
            "search",
            "login redirect loop",
            "-j",
            "-k",
            "1",
            "-c",
            Scope.derive_collection(repo),
        ],
        capture_output=True,
        text=True,
        cwd=repo,
        env={**os.environ, **memsearch_env},
        check=True,
    )
    assert "login redirect loop" in json.loads(done.stdout)[0]["content"]


def test_memory_indexed_by_the_memsearch_cli_is_found_by_pimem(
    memsearch_env: dict[str, str], repo: Path
) -> None:
    memory = repo / ".memsearch" / "memory"
    memory.mkdir(parents=True)
    (memory / "2026-08-12.md").write_text(
        "\n## Session 09:00\n\n### 09:00\n<!-- session:cc1 turn:u1 transcript:/home/user/cc.jsonl -->\n"
        "- Claude Code moved the nightly backup to a systemd timer\n\n"
    )
    subprocess.run(
        [MEMSEARCH, "index", str(memory), "-c", Scope.derive_collection(repo)],
        capture_output=True,
        cwd=repo,
        env={**os.environ, **memsearch_env},
        check=True,
    )
    hits = search(memsearch_env, repo, "nightly backup timer", k=1)
    assert "systemd timer" in str(hits[0]["content"])
    state = json.loads((repo / ".memsearch" / ".index-state.json").read_text())
    assert state["collection"] == Scope.derive_collection(repo)


HOLDER = """
import sys, time
from memsearch.store import MilvusStore
store = MilvusStore(uri=sys.argv[1], collection=sys.argv[2], dimension=None)
print("holding", flush=True)
time.sleep(float(sys.argv[3]))
store.close()
"""


def hold_database(
    env: dict[str, str], tmp_path: Path, repo: Path, seconds: float
) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            HOLDER,
            str(tmp_path / "milvus.db"),
            Scope.derive_collection(repo),
            str(seconds),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "holding"
    holder.stdout.close()
    return holder


def test_a_search_waits_out_another_process_holding_the_database(
    memsearch_env: dict[str, str], repo: Path, tmp_path: Path
) -> None:
    write_entries(memsearch_env, repo)
    ok(pimem(memsearch_env, "index", "--cwd", str(repo)))
    holder = hold_database(memsearch_env, tmp_path, repo, seconds=1.0)
    hits = search(memsearch_env, repo, "login redirect", k=1)
    holder.wait(10)
    assert "login redirect loop" in str(hits[0]["content"])


def test_a_database_never_released_fails_with_the_lock_message(
    memsearch_env: dict[str, str], repo: Path, tmp_path: Path
) -> None:
    write_entries(memsearch_env, repo)
    ok(pimem(memsearch_env, "index", "--cwd", str(repo)))
    forget_read_model(memsearch_env)
    holder = hold_database(memsearch_env, tmp_path, repo, seconds=30)
    try:
        # pimem's ranker reads the day files: it answers with the database held.
        answered = pimem(memsearch_env, "search", "login redirect", "--cwd", str(repo))
        assert (answered.code, answered.stderr) == (0, "")
        assert "login redirect loop" in answered.stdout
        # memsearch's searches the collection, and waits for it.
        started = time.monotonic()
        result = pimem(
            {**memsearch_env, **MEMSEARCH_RANKED}, "search", "login redirect", "--cwd", str(repo)
        )
        elapsed = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()
    assert result.code == 1
    *waiting, error = result.stderr.splitlines()
    # What it waits on, retry by retry, then one line saying why it gave up.
    assert waiting == [
        f"pimem: waiting on the memory database, which another process holds (retry {n} of 4)..."
        for n in range(1, 5)
    ]
    assert "another process kept the Milvus Lite database open" in error
    assert elapsed < 25  # the backoff schedule, not the holder's 30 s


def test_a_store_with_no_memory_says_so_everywhere_and_advises_nothing_that_loops(
    memsearch_env: dict[str, str], repo: Path
) -> None:
    memory_dir = repo / ".memsearch" / "memory"
    status = json.loads(ok(pimem(memsearch_env, "status", "--json", "--cwd", str(repo))))
    assert status["chunks"]["indexed_chunks"] is None
    text = ok(pimem(memsearch_env, "status", "--cwd", str(repo)))
    assert "indexed chunks: 0 (no memory yet; write or capture something first)" in text
    assert "index: no state recorded yet (no memory to index yet)" in text
    assert "pimem index" not in text
    searched = pimem(memsearch_env, "search", "anything", "--cwd", str(repo))
    assert (searched.code, searched.stdout) == (
        0,
        f"no memory yet in {memory_dir}; write or capture something first\n",
    )
    expanded = pimem(memsearch_env, "expand", "0123456789abcdef", "--cwd", str(repo))
    assert expanded.code == 1
    assert "no memory yet" in expanded.stderr
    indexed = pimem(memsearch_env, "index", "--cwd", str(repo))
    assert indexed.stdout.startswith(f"no memory yet in {memory_dir}; nothing to index")
    assert not (repo / ".memsearch").exists()


def test_a_collection_never_indexed_here_is_built_by_the_first_search_or_expand(
    memsearch_env: dict[str, str], repo: Path
) -> None:
    """Day files that were never indexed on this machine (a fresh clone) are indexed before
    the first search or expand, which says so in one line; nothing has to run `pimem index`."""
    write_entries(memsearch_env, repo)
    text = ok(pimem(memsearch_env, "status", "--cwd", str(repo)))
    assert "indexed chunks: 0 (collection not created yet; `pimem index` builds it)" in text
    notice = (
        "pimem: indexed 1 daily memory file new or changed since the last index run, "
        "before searching\n"
    )
    expanded = pimem(memsearch_env, "expand", "0123456789abcdef", "--cwd", str(repo))
    assert expanded.code == 1
    assert expanded.stderr == (
        f"pimem: error: chunk 0123456789abcdef is not in collection {Scope.derive_collection(repo)}; "
        "it may have been re-indexed under a new hash: search again\n"
    )
    assert "indexed chunks: 3" in ok(pimem(memsearch_env, "status", "--cwd", str(repo)))
    found = pimem(memsearch_env, "search", "login redirect", "--json", "--cwd", str(repo))
    assert (found.code, found.stderr) == (0, "")
    assert "login redirect loop" in json.loads(found.stdout)[0]["content"]
    # Another store, never indexed: pimem's ranker reads its day files (three chunks, embedded
    # before it answers), and memsearch's indexes them first and tells.
    for name, ranked, said in (("other", {}, ""), ("third", MEMSEARCH_RANKED, notice)):
        other = repo.parent / name
        (other / ".git").mkdir(parents=True)
        write_entries(memsearch_env, other)
        first = pimem(
            {**memsearch_env, **ranked}, "search", "login redirect", "--json", "--cwd", str(other)
        )
        assert (first.code, first.stderr) == (0, said)
        assert "login redirect loop" in json.loads(first.stdout)[0]["content"]


def test_status_reports_backend_store_and_health(memsearch_env: dict[str, str], repo: Path) -> None:
    write_entries(memsearch_env, repo)
    ok(pimem(memsearch_env, "index", "--cwd", str(repo)))
    text = ok(pimem(memsearch_env, "status", "--cwd", str(repo)))
    lines = text.splitlines()
    # Health first (the index), then the scope, then the setup (the backend).
    (health,) = [
        n for n, line in enumerate(lines) if re.fullmatch(r"index: ok \(last indexed \S+\)", line)
    ]
    (backend,) = [
        n for n, line in enumerate(lines) if line.startswith("backend: available (memsearch 0.4.")
    ]
    assert health < lines.index(f"scope: {repo}") < backend
    assert f"collection: {Scope.derive_collection(repo)}" in lines
    assert f"store: {repo / '.memsearch' / 'memory'}" in lines
    assert "bootstrap: not needed" in text
    assert re.search(r"^index: ok \(last indexed \S+\)$", text, re.MULTILINE)
    assert "indexed chunks: 3" in lines


def test_status_in_a_copied_project_reads_its_own_collection_not_the_originals(
    memsearch_env: dict[str, str], repo: Path, tmp_path: Path
) -> None:
    """A copy carries the original's state file, which names the original's collection: the
    copy is not indexed yet, and status says so beside its 0 chunks, until its own index run."""
    write_entries(memsearch_env, repo)
    ok(pimem(memsearch_env, "index", "--cwd", str(repo)))
    copy = tmp_path / "copy"
    shutil.copytree(repo, copy)
    lines = ok(pimem(memsearch_env, "status", "--cwd", str(copy))).splitlines()
    assert (
        "index: not indexed yet (the state file here was written for another collection, "
        f"{Scope.derive_collection(repo)}, as a copied store carries it; the next index run writes "
        "this one's)"
    ) in lines
    assert "indexed chunks: 0 (collection not created yet; `pimem index` builds it)" in lines
    assert not [line for line in lines if line.startswith("index: ok")]
    ok(pimem(memsearch_env, "index", "--cwd", str(copy)))
    copied = ok(pimem(memsearch_env, "status", "--cwd", str(copy)))
    assert re.search(r"^index: ok \(last indexed \S+\)$", copied, re.MULTILINE)
    assert "indexed chunks: 3" in copied.splitlines()


def test_a_damaged_database_is_one_message_at_status_and_search_never_a_traceback(
    memsearch_env: dict[str, str], repo: Path, tmp_path: Path
) -> None:
    # Found by the reliability suite: status's read-only count let pymilvus log a traceback.
    write_entries(memsearch_env, repo)
    ok(pimem(memsearch_env, "index", "--cwd", str(repo)))
    for data_file in (tmp_path / "milvus.db").rglob("*.parquet"):
        data_file.write_bytes(b"not parquet " * 64)
    status = pimem(memsearch_env, "status", "--cwd", str(repo))
    assert status.code == 0
    assert "the memory database could not be used" in status.stdout
    assert status.stderr == ""
    forget_read_model(memsearch_env)
    # pimem's ranker reads the day files, whatever became of the database.
    assert "login redirect loop" in ok(pimem(memsearch_env, "search", "login", "--cwd", str(repo)))
    forget_read_model(memsearch_env)
    found = pimem(
        {**memsearch_env, **MEMSEARCH_RANKED}, "search", "login redirect", "--cwd", str(repo)
    )
    assert found.code == 1
    assert found.stderr.startswith("pimem: error: memory search failed: the memory database")
    assert found.stderr.count("\n") == 1


def test_a_junk_index_state_is_reported_and_the_next_index_writes_it_again(
    memsearch_env: dict[str, str], repo: Path
) -> None:
    # Found by the reliability suite: memsearch re-reads the state before writing it, and JSON
    # nested too deep failed every index run until someone deleted the file.
    write_entries(memsearch_env, repo)
    state = repo / ".memsearch" / ".index-state.json"
    state.write_text("[" * 100_000)
    text = ok(pimem(memsearch_env, "status", "--cwd", str(repo)))
    assert "index: state unreadable (index-state file drifted: not valid JSON)" in text
    assert "the next `pimem index` writes it again" in text
    ok(pimem(memsearch_env, "index", "--cwd", str(repo)))
    assert json.loads(state.read_text())["status"] == "ok"


def test_a_search_timeout_names_the_limit(memsearch_env: dict[str, str], repo: Path) -> None:
    write_entries(memsearch_env, repo)
    ok(pimem(memsearch_env, "index", "--cwd", str(repo)))
    forget_read_model(memsearch_env)
    result = run_cli(
        "search",
        "login",
        "--cwd",
        str(repo),
        env={**memsearch_env, **MEMSEARCH_RANKED, "PI_MEMSEARCH_SEARCH_TIMEOUT_MS": "1"},
    )
    assert result.code == 1
    assert "timed out after 0.001 s" in result.stderr


def test_zero_config_bootstrap_waits_for_the_offline_model_then_selects_it(
    tmp_path: Path, repo: Path, offline_model: OfflineModel
) -> None:
    home = tmp_path / "empty-home"
    home.mkdir()
    config = home / ".memsearch" / "config.toml"
    env = {"HOME": str(home), "HF_HOME": str(tmp_path / "no-models"), "HF_HUB_OFFLINE": "1"}

    text = ok(pimem(env, "status", "--cwd", str(repo)))
    assert not config.exists(), "a model that is not here must not be configured for everyone"
    assert "bootstrap: waiting for the offline model (`pimem model install-offline`)" in text

    # The offline model installed where pimem keeps it ($PIMEM_HOME/hf-home).
    env["PIMEM_HOME"] = str(offline_model.hf_home.parent)
    text = ok(pimem(env, "status", "--cwd", str(repo)))
    assert (
        config.read_text() == '[embedding]\nprovider = "onnx"\nmodel = "local/all-MiniLM-L6-v2"\n'
    )
    assert (
        "bootstrap: set embedding.provider = onnx and embedding.model = local/all-MiniLM-L6-v2 "
        f"in {config}"
    ) in text
    assert "model: local/all-MiniLM-L6-v2 (on this machine: " in text

    config.write_text('[embedding]\nprovider = "openai"\n')
    ok(pimem(env, "status", "--cwd", str(repo)))
    assert config.read_text() == '[embedding]\nprovider = "openai"\n'


def test_use_offline_model_switches_only_the_embedding_keys(
    tmp_path: Path, repo: Path, offline_model: OfflineModel
) -> None:
    home = tmp_path / "home"
    config = home / ".memsearch" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[embedding]\nprovider = "openai"\n\n[milvus]\nuri = "/data/milvus.db"\n')
    env = {"HOME": str(home), "PIMEM_HOME": str(tmp_path / "pimem-home")}

    refused = pimem(env, "config", "use-offline-model", "--cwd", str(repo))
    assert refused.code == 1
    assert refused.stderr.strip() == (
        "pimem: error: the offline model local/all-MiniLM-L6-v2 is not installed: "
        "run `pimem model install-offline` first"
    )
    assert "openai" in config.read_text()

    env["PIMEM_HOME"] = str(offline_model.hf_home.parent)
    (repo / ".memsearch.toml").write_text('[embedding]\nmodel = "other"\n')
    done = json.loads(ok(pimem(env, "config", "use-offline-model", "--json", "--cwd", str(repo))))
    assert done["changed"] is True
    assert done["before"] == {"provider": "openai", "model": ""}
    assert done["overridden_by"] == str(repo / ".memsearch.toml")
    written = config.read_text()
    assert 'provider = "onnx"' in written
    assert 'model = "local/all-MiniLM-L6-v2"' in written
    assert 'uri = "/data/milvus.db"' in written

    again = ok(pimem(env, "config", "use-offline-model", "--cwd", str(repo)))
    assert again.startswith(f"memsearch already embeds with local/all-MiniLM-L6-v2 ({config}).")


def test_without_a_usable_memsearch_writes_work_and_recall_explains(
    memsearch_env: dict[str, str], repo: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "broken"
    (broken / "memsearch").mkdir(parents=True)
    (broken / "memsearch" / "__init__.py").write_text(
        "raise ImportError('simulated broken install')\n"
    )
    env = {**memsearch_env, "PYTHONPATH": str(broken)}
    ok(
        pimem(
            env,
            "write",
            "- still written",
            "--cwd",
            str(repo),
            "--session",
            "s",
            "--turn",
            "t",
            "--transcript",
            "/t",
        )
    )
    assert "- still written" in ok(pimem(env, "snapshot", "--cwd", str(repo)))
    result = pimem(env, "search", "anything", "--cwd", str(repo))
    assert result.code == 1
    assert "memory backend is unavailable" in result.stderr
    assert "pip install" in result.stderr
    status = ok(pimem(env, "status", "--cwd", str(repo)))
    assert status.startswith("backend: unavailable (memsearch failed to import")
    assert "index state:" in status


def test_compaction_refuses_a_store_not_named_memory_before_touching_the_backend(
    memsearch_env: dict[str, str], repo: Path, tmp_path: Path
) -> None:
    store = tmp_path / "central" / "pi-memsearch"
    script = tmp_path / "resolver"
    script.write_text(
        f'#!/bin/sh\ncase "$1" in memory-dir) echo {store};; collection) echo ms_central;; esac\n'
    )
    script.chmod(0o755)
    env = {
        **memsearch_env,
        "PI_MEMSEARCH_STORE_CMD": str(script),
        "PYTHONPATH": str(tmp_path / "none"),
    }
    result = pimem(env, "compact", "--cwd", str(repo))
    assert result.code == 1
    assert 'needs a store directory named "memory"' in result.stderr
    assert str(store) in result.stderr


class ScriptedLLM(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint that always answers with the same summary."""

    summary = "- The team uses Redis for the hot cache.\n- Login redirects are escaped."
    requests: ClassVar[list[dict[str, object]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        ScriptedLLM.requests.append(body)
        reply = json.dumps(
            {
                "id": "c1",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": self.summary},
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def llm_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedLLM)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def use_llm(env: dict[str, str], url: str) -> None:
    """memsearch's ``[llm]`` settings pointed at the scripted endpoint *url*."""
    config = Path(env["HOME"]) / ".memsearch" / "config.toml"
    config.write_text(
        config.read_text()
        + f'\n[llm]\nprovider = "openai"\nmodel = "scripted"\nbase_url = "{url}"\napi_key = "k"\n'
    )


def test_compaction_appends_memsearchs_summary_block(
    memsearch_env: dict[str, str], repo: Path, llm_server: str
) -> None:
    use_llm(memsearch_env, llm_server)
    empty = ok(pimem(memsearch_env, "compact", "--cwd", str(repo)))
    assert "Nothing to compact" in empty or "never indexed" in empty
    write_entries(memsearch_env, repo)
    ok(pimem(memsearch_env, "index", "--cwd", str(repo)))
    summary = ok(pimem(memsearch_env, "compact", "--cwd", str(repo)))
    assert summary.strip() == ScriptedLLM.summary
    # pimem writes memsearch's block itself, at pimem's clock (PIMEM_NOW here).
    today = (repo / ".memsearch" / "memory" / "2026-08-13.md").read_text()
    assert f"\n\n## Memory Compact 22:41\n\n{ScriptedLLM.summary}\n" in today
    hits = search(memsearch_env, repo, "Redis hot cache", k=5)
    assert any("Memory Compact" in str(hit["heading"]) for hit in hits)


def test_compaction_keeps_secrets_from_the_llm_and_from_disk(
    memsearch_env: dict[str, str], repo: Path, llm_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by the reliability suite: memsearch sent the chunks as indexed (another agent's
    # unscrubbed entry included) and wrote whatever summary the LLM returned.
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    use_llm(memsearch_env, llm_server)
    day = repo / ".memsearch" / "memory" / "2026-08-13.md"
    day.parent.mkdir(parents=True)
    day.write_text(f"### 22:00\n<!-- session:o turn:t transcript:/o -->\n- token {secret}\n\n")
    ok(pimem(memsearch_env, "index", "--cwd", str(repo)))
    monkeypatch.setattr(ScriptedLLM, "summary", f"- the GitHub token is {secret}")
    ScriptedLLM.requests.clear()
    summary = ok(pimem(memsearch_env, "compact", "--cwd", str(repo)))
    assert secret not in summary
    assert secret not in json.dumps(ScriptedLLM.requests)
    block = day.read_text().split("## Memory Compact")[1]
    assert secret not in block
    assert "[REDACTED:github-token]" in block


def test_compaction_of_entries_never_recalled_sends_only_them_and_says_so(
    memsearch_env: dict[str, str], repo: Path, llm_server: str
) -> None:
    use_llm(memsearch_env, llm_server)
    memory = repo / ".memsearch" / "memory"
    memory.mkdir(parents=True)
    (memory / "2026-07-01.md").write_text(
        "### 09:00\n<!-- session:o turn:t1 transcript:/o -->\n- billing uses the Stripe webhook\n\n"
        "### 10:00\n<!-- session:o turn:t2 transcript:/o -->\n- the nightly cron prunes tmpfiles\n"
    )
    (memory / "2026-08-12.md").write_text(
        "### 11:00\n<!-- session:o turn:t3 transcript:/o -->\n- Grafana shows queue depth\n"
    )
    ok(pimem(memsearch_env, "index", "--cwd", str(repo)))
    scope = json.loads(ok(pimem(memsearch_env, "scope", "--cwd", str(repo), "--json")))
    record = PimemPaths.from_env(memsearch_env).state_dir / "usage" / scope["collection"]

    refused = pimem(memsearch_env, "compact", "--never-recalled", "10", "--cwd", str(repo))
    assert refused.code == 1
    assert "no usage record of" in refused.stderr

    record.mkdir(parents=True)
    (record / "2026-08-01.jsonl").write_text(
        '{"v": 1, "at": "2026-08-01T09:00:00", "session": "a", "kind": "session"}\n'
    )
    (record / "2026-08-10.jsonl").write_text(
        '{"v": 1, "at": "2026-08-10T09:00:00", "session": "b", "kind": "search", '
        '"query": "billing", "hits": [{"day": "2026-07-01", "time": "09:00"}], "top": 0.8}\n'
    )
    ScriptedLLM.requests.clear()
    done = ok(pimem(memsearch_env, "compact", "--never-recalled", "10", "--cwd", str(repo)))
    assert done.startswith(ScriptedLLM.summary)
    assert "(condensed from 1 entry never recalled in 10 days)" in done
    # The model read the entry nobody recalled, not the recalled one nor the recent one.
    sent = json.dumps(ScriptedLLM.requests)
    assert "tmpfiles" in sent
    assert "Stripe" not in sent
    assert "Grafana" not in sent
    today = (memory / "2026-08-13.md").read_text()
    assert f"## Memory Compact 22:41\n\n{ScriptedLLM.summary}\n" in today

    too_long = pimem(memsearch_env, "compact", "--never-recalled", "30", "--cwd", str(repo))
    assert too_long.code == 1
    assert "begins 2026-08-01" in too_long.stderr
    assert "--never-recalled 13" in too_long.stderr


class _CompactingIndex:
    """An index that compacts to a fixed summary and records what it is asked to index."""

    def __init__(self) -> None:
        self.indexed: list[tuple[Path, ...]] = []
        self.changes: list[StoreChange] = []

    @hookimpl
    def pimem_open_index(self, scope: Scope) -> MemoryIndex:
        indexed = self.indexed

        class Compacting(InMemoryIndex):
            def compact(self, call: BackendCall) -> CompactResult:
                return CompactResult(summary="- the team settled on Redis")

            def index(self, reason: str, files: tuple[Path, ...], call: BackendCall) -> IndexReport:
                indexed.append(files)
                return IndexReport(indexed_chunks=1)

        return Compacting(scope)

    @hookimpl
    def pimem_observe_change(self, change: StoreChange) -> None:
        self.changes.append(change)


def test_compaction_is_written_by_the_store_and_announced_as_compact(repo: Path) -> None:
    pimem = make_pimem({"PIMEM_DISABLE_PLUGINS": "memsearch-index"})
    index = _CompactingIndex()
    pimem.pm.register(index, name="compacting-index")
    scope = pimem.resolve_scope(repo)

    result = pimem.compact_memory(scope)

    day = scope.memory_dir / "2026-08-13.md"
    assert result.file == day
    assert day.read_text() == (
        "# 2026-08-13\n\n\n## Memory Compact 22:41\n\n- the team settled on Redis\n"
    )
    assert index.changes == [StoreChange(kind="compact", file=day)]
    assert index.indexed == [(day,)]
