"""The child processes of the concurrency scenario: ``python -m reliability.workers KIND ARGS``.

``ARGS`` is one JSON object; every worker writes its own JSON result to ``args["result"]``.
Writers wait for ``args["go"]`` to exist so they all start together, then pace their entries
over about the same span; backend workers loop until ``args["stop"]`` exists.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass

#: memsearch's day-file shape, as its other agent plugins append it (one write per entry).
RAW_ENTRY = (
    "### {time}\n<!-- session:{session} turn:{turn} transcript:{transcript} -->\n{content}\n\n"
)


def entry_content(worker: int, number: int, padding: int) -> str:
    """An entry's text: a unique token (``wNNeNNNN``) to find it by, and padding."""
    return (
        f"- worker {worker} wrote entry {number}, token w{worker:02d}e{number:04d} " + "x" * padding
    )


def _wait_for(path: Path) -> None:
    while not path.exists():
        time.sleep(0.005)


def _paced(args: dict[str, Any], write: Callable[[int], bool]) -> dict[str, Any]:
    """Write ``count`` entries; between bursts, sleep about ``interval`` seconds per entry."""
    rng = random.Random(args["worker"])
    _wait_for(Path(args["go"]))
    started = time.monotonic()
    acknowledged, failures = [], []
    number = 0
    while number < args["count"]:
        burst = rng.randint(1, 8)
        for _ in range(min(burst, args["count"] - number)):
            if write(number):
                acknowledged.append(number)
            else:
                failures.append(number)
            number += 1
        time.sleep(args["interval"] * burst * rng.uniform(0.5, 1.5))
    return {
        "acknowledged": acknowledged,
        "failed": failures,
        "seconds": round(time.monotonic() - started, 2),
    }


def append_session(args: dict[str, Any]) -> dict[str, Any]:
    """A pimem session in-process: ``Pimem.append_entry``, headings decided as in a session."""
    from pimem_core import Pimem
    from pimem_core.types import Anchor, Entry

    pimem = Pimem.from_env()
    scope = pimem.resolve_scope(Path(args["project"]))
    session = f"session-{args['worker']}"

    def write(number: int) -> bool:
        anchor = Anchor(session=session, turn=f"t{number:04d}", transcript=f"/t/{session}.jsonl")
        content = entry_content(args["worker"], number, args["padding"])
        pimem.append_entry(
            scope, Entry(anchor=anchor, content=content, written_at=pimem.settings.now())
        )
        return True

    return _paced(args, write)


def append_cli(args: dict[str, Any]) -> dict[str, Any]:
    """``pimem write``, one process per entry: every entry seeds its heading from the file."""
    session = f"session-{args['worker']}"
    errors: list[str] = []

    def write(number: int) -> bool:
        argv = [
            "write",
            entry_content(args["worker"], number, args["padding"]),
            "--cwd",
            args["project"],
            "--session",
            session,
            "--turn",
            f"t{number:04d}",
            "--transcript",
            f"/t/{session}.jsonl",
        ]
        if args.get("in_process"):
            # The CLI's own entry point, a fresh Pimem per entry, without the interpreter
            # start-up a quick run cannot afford.
            from pimem_core.doors.cli import main

            # stdout: "Saved the memory entry to ..."; stderr: the warning that the entry is in
            # argv, once per entry, which would fill the pipe the scenario reads at the end.
            said = io.StringIO()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(said):
                code = main(argv)
            if code != 0:
                errors.append(said.getvalue().strip()[-300:])
            return code == 0
        done = subprocess.run(
            [sys.executable, "-m", "pimem_core", *argv], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            errors.append(done.stderr.strip()[-300:])
        return done.returncode == 0

    result = _paced(args, write)
    result["errors"] = errors[:5]
    return result


def append_raw(args: dict[str, Any]) -> dict[str, Any]:
    """Another agent's memsearch plugin: ``O_APPEND`` and one write of the whole entry."""
    session = f"session-{args['worker']}"
    file = Path(args["day_file"])
    file.parent.mkdir(parents=True, exist_ok=True)
    headed = False

    def write(number: int) -> bool:
        nonlocal headed
        entry = RAW_ENTRY.format(
            time=args["time"],
            session=session,
            turn=f"t{number:04d}",
            transcript=f"/t/{session}.jsonl",
            content=entry_content(args["worker"], number, args["padding"]),
        )
        data = (("" if headed else f"\n## Session {args['time']}\n\n") + entry).encode()
        fd = os.open(file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            written = os.write(fd, data)
        finally:
            os.close(fd)
        headed = True
        return written == len(data)

    return _paced(args, write)


def backend(args: dict[str, Any]) -> dict[str, Any]:
    """Index the day file and search in a loop (``role`` index) or search and expand (search),
    counting every call's outcome: ok, ok after backoff, the lock message, anything else."""
    from pimem_core import Pimem
    from pimem_core.errors import PimemError
    from pimem_core.types import SearchQuery
    from pimem_plugins.memsearch.errors import DatabaseLocked
    from pimem_plugins.memsearch.index import MemsearchMemoryIndex

    pimem = Pimem.from_env()
    scope = pimem.resolve_scope(Path(args["project"]))
    rng = random.Random(args["seed"])
    retries = 0
    queue = MemsearchMemoryIndex.opened_by(pimem, scope).queue
    sleep = queue._sleep

    def counted_sleep(seconds: float) -> None:
        nonlocal retries
        retries += 1
        sleep(seconds)

    queue._sleep = counted_sleep
    tally = {"ok": 0, "ok_after_backoff": 0, "locked": 0, "collection_missing": 0, "other": 0}
    others: list[str] = []
    locked_messages: set[str] = set()
    stop = Path(args["stop"])
    day_file = Path(args["day_file"])

    def call(operation: Callable[[], object]) -> None:
        before = retries
        try:
            operation()
        except DatabaseLocked as error:
            tally["locked"] += 1
            locked_messages.add(str(error))
            return
        except PimemError as error:
            if type(error).__name__ in ("CollectionMissing", "NoMemoryYet"):
                tally["collection_missing"] += 1  # nothing written yet: a normal early answer
                return
            tally["other"] += 1
            others.append(f"{type(error).__name__}: {error}"[:300])
            return
        except Exception as error:  # noqa: BLE001 - a bug: counted and described
            tally["other"] += 1
            others.append(f"{type(error).__name__}: {error}"[:300])
            return
        tally["ok_after_backoff" if retries > before else "ok"] += 1

    _wait_for(Path(args["go"]))
    while not stop.exists():
        token = f"token w{rng.randrange(args['workers']):02d}e{rng.randrange(args['count']):04d}"
        if args["role"] == "index" and day_file.exists():
            call(lambda: pimem.index_memory(scope, "reliability", files=(day_file,)))
        call(functools.partial(pimem.search_memory, scope, SearchQuery(text=token, top_k=3)))
        time.sleep(args["pause"])
    return {
        "calls": tally,
        "retries": retries,
        "other_errors": others[:10],
        "lock_messages": sorted(locked_messages),
    }


def verify(args: dict[str, Any]) -> dict[str, Any]:
    """After the final index: every token in the collection's chunks, and a sample found by
    search. Reads the collection through pimem's engine (memsearch's own store)."""
    from pimem_core import Pimem
    from pimem_core.types import SearchQuery
    from pimem_plugins.memsearch.index import MemsearchMemoryIndex

    pimem = Pimem.from_env()
    scope = pimem.resolve_scope(Path(args["project"]))
    index = MemsearchMemoryIndex.opened_by(pimem, scope)
    engine = index.engine

    def chunks() -> list[dict[str, Any]]:
        config = engine.config(scope)
        with engine.database.use(scope, config) as memsearch:
            rows: list[dict[str, Any]] = memsearch.store.query()
        return rows

    rows = index.queue.run("verify", chunks)
    contents = [str(row["content"]) for row in rows]
    tokens = args["tokens"]
    joined = "\n".join(contents)
    missing = [token for token in tokens if token not in joined]
    rng = random.Random(args["seed"])
    sample = rng.sample(tokens, min(len(tokens), args["sample"]))
    not_found = []
    for token in sample:
        hits = pimem.search_memory(scope, SearchQuery(text=f"token {token}", top_k=10))
        if not any(token in hit.content for hit in hits):
            not_found.append(token)
    engine.release()
    return {
        "chunks": len(rows),
        "missing_tokens": missing[:20],
        "missing_count": len(missing),
        "searched": len(sample),
        "not_found_by_search": not_found[:20],
        "not_found_count": len(not_found),
    }


KINDS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "append-session": append_session,
    "append-cli": append_cli,
    "append-raw": append_raw,
    "backend": backend,
    "verify": verify,
}


def main(
    argv: list[str], kinds: Mapping[str, Callable[[dict[str, Any]], dict[str, Any]]] = KINDS
) -> int:
    """Run the worker *argv* names (its kind, then its JSON arguments); write its result."""
    kind, raw = argv
    args = json.loads(raw)
    result = kinds[kind](args)
    Path(args["result"]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
