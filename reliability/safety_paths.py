"""Scenario 4, paths and addresses: nothing is written outside the resolved store, and chunk
hashes, dates, times and project labels are checked before anything uses them.

Fuzzed forgets by chunk point their section at ``..`` paths, absolute paths and symbolic links
leading out; fuzzed day addresses and chunk hashes carry path tricks and junk. Every file
outside the store (a sentinel tree beside it) must keep its bytes, nothing new may appear
outside the store, and every refusal must be a ``PimemError``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import tempfile
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from pimem_core.api import Pimem
from pimem_core.doors.serve import Server
from pimem_core.errors import PimemError, StoreError
from pimem_core.runtime.session import SessionInfo
from pimem_core.types import Anchor, ChunkAddress, DayAddress, Entry, Scope, Section
from pimem_plugins.markdown_store import MarkdownMemoryStore, append_block
from pimem_plugins.memsearch.chunks import CHUNK_HASH
from pimem_plugins.memsearch.engine import MemsearchEngine
from pimem_plugins.memsearch.work_queue import BackendQueue
from reliability.fuzzing import run_property
from reliability.outcome import Outcome
from reliability.strategies import TEXT

ENTRY = "### 22:41\n<!-- session:s turn:t transcript:/t -->\n- a fact\n\n"
SEGMENTS = st.sampled_from(
    ["..", ".", "memory", ".memsearch", "outside", "link", "2026-08-13.md", "evil.md", "", "//"]
)


def _tree_digest(root: Path) -> dict[str, str]:
    """Every file under *root* (links not followed) and a hash of its bytes."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not path.is_file():
            found[str(path)] = "link" if path.is_symlink() else "dir"
        else:
            found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


#: Project labels a host may send back to ``memory.expand``; only absolute paths are labels.
LABELS = ("relative/project", "../..", "a\x00b", "/no/such/project", "~/project")


def _explicit(scope: Scope, base: Path) -> list[str]:
    """Writes through a daily file linked out of the store, and hostile project labels."""
    problems = []
    link = scope.memory_dir / "2026-08-13.md"
    link.unlink(missing_ok=True)
    link.symlink_to(base / "outside" / "2026-08-13.md")
    entry = Entry(
        anchor=Anchor(session="s", turn="t", transcript="/t"),
        content="- planted",
        written_at=datetime(2026, 8, 13, 22, 41),
    )
    writes: list[tuple[str, Callable[[], Path]]] = [
        ("an append", lambda: MarkdownMemoryStore(scope).append_entry(entry)),
        ("a compaction block", lambda: append_block(scope, link.name, "## Memory Compact\n")),
    ]
    for name, write in writes:
        try:
            write()
        except StoreError as error:
            if "outside the memory store" not in str(error):
                problems.append(f"{name} through a link out was refused unclearly: {error}")
        else:
            problems.append(f"{name} went through a daily file linked out of the store")
    link.unlink()
    env = {"HOME": str(base / "home"), "PIMEM_DISABLE_PLUGINS": "memsearch-index"}
    lines = [
        json.dumps(
            {
                "id": n,
                "method": "memory.expand",
                "params": {"chunk_hash": "0" * 16, "project": label},
            }
        )
        for n, label in enumerate(LABELS)
    ]
    output = io.StringIO()
    cwd = os.getcwd()
    try:
        server = Server(Pimem.from_env(env), io.StringIO("\n".join(lines) + "\n"), output)
        server.session.start(SessionInfo(session_id="s", cwd=scope.repository_dir, transcript=None))
        server.serve()
    finally:
        os.chdir(cwd)
    for reply in map(json.loads, output.getvalue().splitlines()[1:]):
        label = LABELS[reply["id"]]
        kind = (reply.get("error") or {}).get("type")
        wanted = "memory" if label.startswith("/") else "request"
        if kind != wanted:
            problems.append(f"project label {label!r}: {kind or 'a result'}, not a {wanted} error")
    return problems


@st.composite
def sources(draw: st.DrawFn, base: Path) -> str:
    """A chunk's source: relative with ``..``, absolute inside or outside, or through a link."""
    parts = draw(st.lists(SEGMENTS, max_size=6))
    relative = "/".join(parts)
    kind = draw(st.sampled_from(["relative", "absolute", "outside", "text", "store"]))
    if kind == "store":  # the day file itself, as memsearch names it, or relative to the scope
        return draw(
            st.sampled_from(
                [
                    str(base / "project/.memsearch/memory/2026-08-13.md"),
                    ".memsearch/memory/2026-08-13.md",
                ]
            )
        )
    if kind == "absolute":
        return str(base / relative)
    if kind == "outside":
        return str(base / "outside" / draw(st.sampled_from(["2026-08-13.md", "secret.md"])))
    if kind == "text":
        return draw(TEXT)
    return relative


def run(outcome: Outcome, examples: int, seed_value: int) -> None:
    with tempfile.TemporaryDirectory(prefix="pimem-rel-paths-") as scratch:
        base = Path(scratch)
        project = base / "project"
        memory = project / ".memsearch" / "memory"
        outside = base / "outside"
        memory.mkdir(parents=True)
        outside.mkdir()
        (outside / "2026-08-13.md").write_text(ENTRY)  # what a link would lead a forget to
        (outside / "secret.md").write_text(ENTRY.replace("a fact", "the outside secret"))
        (memory / "link.md").symlink_to(outside / "2026-08-13.md")
        (memory / "outside").symlink_to(outside)
        scope = Scope(
            repository_dir=project,
            scope_dir=project,
            memory_dir=memory,
            collection="ms_paths_00000000",
            index_state_path=None,
        )
        store = MarkdownMemoryStore(scope)
        sentinel = _tree_digest(outside)
        outside_names = set(os.listdir(base))
        tally = outcome.details.setdefault("paths", {"refused": 0, "forgot_inside": 0})

        def forget(case: Any) -> None:
            source, heading, start, end = case
            (memory / "2026-08-13.md").write_text(ENTRY)
            section = Section(
                chunk_hash="0123456789abcdef",
                source=source,
                heading=heading,
                start_line=start,
                end_line=end,
                content="",
            )
            try:
                redaction = store.forget_entry(ChunkAddress(section=section))
            except StoreError:
                tally["refused"] += 1
            else:
                real = os.path.realpath(redaction.file)
                assert real.startswith(os.path.realpath(memory) + os.sep), (
                    f"a forget rewrote {real}, outside the store"
                )
                tally["forgot_inside"] += 1
            assert _tree_digest(outside) == sentinel, "a file outside the store changed"
            assert set(os.listdir(base)) == outside_names, "a file appeared outside the store"

        run_property(
            outcome,
            st.tuples(
                sources(base),
                st.sampled_from(["22:41", "Memory Compact", ""]),
                st.one_of(st.just(1), st.integers(-3, 6)),
                st.one_of(st.just(4), st.integers(-3, 8)),
            ),
            forget,
            examples=examples // 2,
            seed_value=seed_value,
            label="forget-by-chunk",
        )

        def address(case: Any) -> None:
            day, time = case
            try:
                parsed = DayAddress.parse(day, time)
            except StoreError:
                return
            assert len(parsed.day.isoformat()) == 10, parsed
            assert len(parsed.time) == 5, parsed
            with contextlib.suppress(StoreError):
                store.forget_entry(parsed)
            assert _tree_digest(outside) == sentinel, "a file outside the store changed"

        dates = st.one_of(
            TEXT,
            st.dates().map(lambda day: day.isoformat()),
            st.sampled_from(
                ["../../x", "2026-08-13/../../a", "2026-02-30", "٢٠٢٦-٠٨-١٣", "2026-08-13\n"]
            ),
        )
        times = st.one_of(
            TEXT, st.sampled_from(["22:41", "24:00", "22:60", "2:41", "٢٢:٤١", "22:41\n"])
        )
        run_property(
            outcome,
            st.tuples(dates, times),
            address,
            examples=examples // 4,
            seed_value=seed_value,
            label="day-address",
        )

        explicit = _explicit(scope, base)
        outcome.problems.extend(explicit)
        outcome.inputs += len(LABELS) + 2
        outcome.expect(_tree_digest(outside) == sentinel, "a file outside the store changed")

        engine = MemsearchEngine(BackendQueue())

        def chunk_hash(text: Any) -> None:
            if CHUNK_HASH.fullmatch(text):
                return  # a well-formed hash would go to the database: not this check's business
            try:
                engine.reads.expand(scope, text)
            except PimemError as error:
                refusal = str(error)
            else:
                raise AssertionError(f"a malformed chunk hash was used: {text!r}")
            assert "16 lowercase hex digits" in refusal, refusal

        run_property(
            outcome,
            st.one_of(
                TEXT,
                st.text(alphabet="0123456789abcdefABCDEF\"' =|&()", max_size=20),
                st.sampled_from(
                    [
                        '0123456789abcde" or 1==1 or "',
                        "0123456789ABCDEF",
                        "\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669abcdef",
                    ]
                ),
            ),
            chunk_hash,
            examples=examples - examples // 2 - examples // 4,
            seed_value=seed_value,
            label="chunk-hash",
        )
