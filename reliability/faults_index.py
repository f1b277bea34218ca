"""Scenario 2, the index: a damaged Milvus Lite database, a damaged ``.index-state.json``.

Real memsearch, Milvus Lite and the offline model. After the damage, ``pimem status`` must say
so (and how to rebuild), search must answer from the day files (pimem's read model) or fail
with that message rather than a traceback, and writing, capture and the snapshot must go on as
if nothing happened. Following the rebuild
instructions must bring every entry back into the collection.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from reliability.host import Bridge, SessionFile, start_params
from reliability.outcome import Outcome
from reliability.sandbox import Sandbox, make_sandbox, offline_model


def _collection_dir(box: Sandbox) -> Path:
    return next((box.database / "collections").iterdir())


def _garbage_parquet(box: Sandbox) -> None:
    for file in _collection_dir(box).rglob("*.parquet"):
        file.write_bytes(b"not parquet " * 64)


def _junk_manifest(box: Sandbox) -> None:
    for name in ("manifest.json", "manifest.json.prev"):
        (_collection_dir(box) / name).write_text("{truncated")


def _database_is_a_file(box: Sandbox) -> None:
    shutil.rmtree(box.database)
    box.database.write_text("this is not a Milvus Lite database")


DAMAGE: dict[str, tuple[str, Callable[[Sandbox], None]]] = {
    "data files": ("every data file of the collection overwritten with junk", _garbage_parquet),
    "manifest": ("the collection's manifest and its backup truncated", _junk_manifest),
    "not a database": ("the database directory replaced by a file", _database_is_a_file),
}


def _entries(box: Sandbox, first: int, count: int) -> list[str]:
    tokens = []
    for number in range(first, first + count):
        token = f"zq{number:03d}marker"
        done = box.pimem(
            *box.write_args(f"- fact {number}, token {token}", session="s", turn=f"t{number}")
        )
        if done.returncode != 0:
            raise RuntimeError(done.stderr)
        tokens.append(token)
    return tokens


def _database(name: str, root: Path) -> Outcome:
    what, damage = DAMAGE[name]
    outcome = Outcome(
        scenario=f"Fault: damaged database ({name})",
        load="5 indexed entries, then status, search, write, capture, snapshot, rebuild",
        faults=what,
    )
    box = make_sandbox(root / name.replace(" ", "-"), offline_model())
    tokens = _entries(box, 0, 5)
    outcome.expect(box.pimem("index").returncode == 0, "the first index failed")
    damage(box)

    started = time.perf_counter()
    try:
        status = box.pimem("status", timeout=120)
    except subprocess.TimeoutExpired:
        outcome.problems.append("`pimem status` hung (killed after 120 s)")
        return outcome
    outcome.details["status_seconds"] = round(time.perf_counter() - started, 2)
    outcome.expect(status.returncode == 0, f"status exited {status.returncode}")
    outcome.expect(
        "could not be used" in status.stdout, "status does not say the database is unusable"
    )
    outcome.expect(
        "pimem index" in status.stdout and "aside" in status.stdout,
        "status gives no rebuild instructions",
    )
    search = box.pimem("search", "fact")
    if search.returncode == 0:
        # The index run left pimem's read model complete: it answers without the database.
        outcome.expect("zq00" in search.stdout, "search answered without the indexed entries")
    else:
        outcome.expect(search.returncode == 1, f"search exited {search.returncode}")
        outcome.expect(
            "could not be used" in search.stderr, f"unclear search error: {search.stderr[-300:]}"
        )
    outcome.expect("Traceback" not in search.stderr + status.stderr, "a traceback was printed")
    tokens += _entries(box, 5, 2)

    transcript = SessionFile(root / f"{name}.jsonl", f"s-{name.replace(' ', '-')}")
    bridge = Bridge(box)
    bridge.call("session.start", **start_params(box, transcript))
    leaf = transcript.exchange("the database broke, token zq900marker", "the database")
    bridge.call("session.settled", leaf=leaf)
    found = bridge.call("memory.search", query="fact")
    # Either one clear error (memsearch's ranker), or pimem's read model answering from the day
    # files, the entries written after the damage among its hits (ADR 0026).
    said = str((found.get("result") or {}).get("text", ""))
    outcome.expect(
        (found.get("error") or {}).get("type") == "memory"
        or ("zq00" in said and "zq006marker" in said),
        f"memory.search answered {str(found)[:300]}",
    )
    outcome.expect(
        bridge.call("session.shutdown").get("result", {}).get("captured_in_time") is True,
        "capture did not finish",
    )
    bridge.close()
    tokens.append("zq900marker")
    text = box.day_file.read_text()
    outcome.expect("zq900marker" in text, "the exchange was not captured")
    snapshot = box.pimem("snapshot")
    outcome.expect(
        snapshot.returncode == 0 and "zq006marker" in snapshot.stdout, "the snapshot failed"
    )

    aside = root / f"{name.replace(' ', '-')}-aside"
    if box.database.is_dir():
        shutil.move(_collection_dir(box), aside)  # as status says: the collection's directory
    else:
        shutil.move(box.database, aside)
    rebuilt = box.pimem("index", "--json")
    outcome.expect(rebuilt.returncode == 0, f"rebuilding failed: {rebuilt.stderr[-300:]}")
    result = root / f"{name.replace(' ', '-')}-verify.json"
    args = {"project": str(box.project), "tokens": tokens, "sample": len(tokens), "seed": 1}
    verify = subprocess.run(
        [
            sys.executable,
            "-m",
            "reliability.workers",
            "verify",
            json.dumps({**args, "result": str(result)}),
        ],
        env=box.env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    checked = json.loads(result.read_text()) if verify.returncode == 0 else {}
    outcome.expect(verify.returncode == 0, f"verification failed: {verify.stderr[-300:]}")
    missing = checked.get("missing_tokens", tokens) + checked.get("not_found_by_search", [])
    outcome.inputs = len(tokens)
    outcome.entries_lost = len(missing)
    outcome.expect(not missing, f"not found after the rebuild: {missing}")
    return outcome


def _state_file(root: Path, quick: bool) -> Outcome:
    outcome = Outcome(
        scenario="Fault: damaged index-state file",
        load="3 entries; status, write, snapshot, index, for each kind of damage",
        faults="junk, JSON nested 100,000 deep, schema_version 2",
    )
    box = make_sandbox(root / "state", offline_model())
    _entries(box, 0, 3)
    damages: dict[str, Callable[[Path], object]] = {
        "junk": lambda path: path.write_text('{"schema_version": 1, "sta'),
        "deep": lambda path: path.write_text("[" * 100_000),
        "schema": lambda path: path.write_text(json.dumps({"schema_version": 2, "status": "ok"})),
    }
    if quick:
        damages = {"deep": damages["deep"]}
        outcome.faults = "JSON nested 100,000 deep (junk and schema_version 2 in the full run)"
    for number, (kind, damage) in enumerate(damages.items()):
        box.state_file.parent.mkdir(parents=True, exist_ok=True)
        damage(box.state_file)
        status = box.pimem("status")
        outcome.expect(status.returncode == 0, f"{kind}: status exited {status.returncode}")
        outcome.expect("state unreadable" in status.stdout, f"{kind}: status does not say so")
        outcome.expect("writes it again" in status.stdout, f"{kind}: no way out given")
        _entries(box, 10 + number, 1)
        outcome.expect(box.pimem("snapshot").returncode == 0, f"{kind}: the snapshot failed")
        index = box.pimem("index")
        outcome.expect(index.returncode == 0, f"{kind}: index failed: {index.stderr[-300:]}")
        after = box.pimem("status")
        outcome.expect("index: ok" in after.stdout, f"{kind}: the state was not written again")
    outcome.inputs = len(damages)
    return outcome


def run(quick: bool) -> list[Outcome]:
    outcomes = []
    kinds = list(DAMAGE)[:1] if quick else list(DAMAGE)
    with tempfile.TemporaryDirectory(prefix="pimem-rel-index-") as scratch:
        for name in kinds:
            started = time.perf_counter()
            outcome = _database(name, Path(scratch))
            outcome.seconds = time.perf_counter() - started
            outcomes.append(outcome)
        started = time.perf_counter()
        outcome = _state_file(Path(scratch), quick)
        outcome.seconds = time.perf_counter() - started
        outcomes.append(outcome)
    return outcomes
