"""The read model on disk, so a restart loads it instead of reading the collection again.

One directory per collection (and database and model): a *base* (a generation) written whole
into a new directory and renamed into place, so a reader never sees half of it, and an
*overlay* file beside it with the changes since, rewritten (milliseconds) after each change so
a short-lived process (``pimem search`` from the shell) leaves what it embedded for the next.
The overlay names its base and is ignored on any other. Anything unreadable is ignored, and
the read model is rebuilt from the collection.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from pimem_core.plugin import private_dir, tighten, write_private
from pimem_plugins.memsearch.recall.dense import FactIndex
from pimem_plugins.memsearch.recall.generation import ChunkRecord, Generation
from pimem_plugins.memsearch.recall.lexical import LexicalIndex
from pimem_plugins.memsearch.recall.text import lexical_words

#: 2: fact vectors as 8-bit codes and their scale. 4: the lexical index holds words without
#: their plural and past endings, and each entry's day (3 stemmed more, and was never
#: released). A cache of an older format is read, its vectors encoded and its lexical index
#: rebuilt from its chunks, so an upgrade embeds nothing again. 5: a path's parts are words too.
FORMAT = 5
READABLE = (1, 2, 3, 4, 5)

#: A store file's stat: (mtime in ns, size), what the read model last saw of it.
Stamp = tuple[int, int]


@attrs.frozen(kw_only=True)
class Saved:
    generation: Generation
    #: Sources whose chunks the read model has as the file was at that stamp.
    stamps: dict[str, Stamp]
    #: The base's name, which an overlay must carry to apply to it.
    base: str
    added: list[tuple[ChunkRecord, npt.NDArray[np.float32]]] = attrs.field(factory=list)
    removed: list[str] = attrs.field(factory=list)
    #: Whether it was saved in an older format (it is worth saving again).
    outdated: bool = False


def cache_dir(root: Path, uri: str, collection: str, model: str) -> Path:
    key = hashlib.sha256(f"{uri}\0{collection}\0{model}".encode()).hexdigest()[:12]
    return root / "read-model" / f"{collection}-{key}"


def save(directory: Path, generation: Generation, stamps: dict[str, Stamp]) -> str:
    """Write *generation* as the base; return its name (the overlay of another is void)."""
    base = uuid.uuid4().hex
    staging = directory.with_name(f"{directory.name}.{os.getpid()}.new")
    shutil.rmtree(staging, ignore_errors=True)
    # Private from the start, so what numpy and bm25s write in it with the umask's modes is
    # out of reach until it is tightened, before it takes the cache's place.
    private_dir(staging)
    generation.dense.save(staging)
    generation.lexical.save(staging)
    (staging / "chunks.json").write_text(json.dumps(_columns(generation.records)), encoding="utf-8")
    (staging / "manifest.json").write_text(
        json.dumps({"format": FORMAT, "stamps": stamps, "base": base}), encoding="utf-8"
    )
    tighten(staging)
    retired = directory.with_name(f"{directory.name}.{os.getpid()}.old")
    with contextlib.suppress(FileNotFoundError):
        directory.rename(retired)
    staging.rename(directory)
    shutil.rmtree(retired, ignore_errors=True)
    return base


def save_overlay(
    directory: Path,
    base: str,
    added: list[tuple[ChunkRecord, npt.NDArray[np.float32]]],
    removed: list[str],
    stamps: dict[str, Stamp],
) -> None:
    """Write the changes since *base* (replacing the last overlay)."""
    if not directory.is_dir():
        return
    vectors = [vectors for _, vectors in added]
    counts = [len(v) for v in vectors]
    meta = {
        "base": base,
        "added": [attrs.asdict(record) for record, _ in added],
        "counts": counts,
        "removed": removed,
        "stamps": stamps,
    }
    # The metadata is in place right after the vectors: the two disagree for an instant only
    # (a reader then finds their counts apart and ignores the overlay).
    stream = io.BytesIO()
    np.save(stream, np.concatenate(vectors).astype(np.float32) if vectors else np.zeros(0))
    write_private(directory / "overlay.npy", stream.getvalue())
    write_private(directory / "overlay.json", json.dumps(meta))


#: The chunks' fields saved column by column, each distinct source and heading once: parsing
#: a list of 100,000 objects would leave tens of megabytes the process does not give back.
_COLUMNS = ("chunk_hash", "content", "heading_level", "start_line", "end_line", "facts_ready")
_SHARED = ("source", "heading")


def _columns(records: Sequence[ChunkRecord]) -> dict[str, Any]:
    saved: dict[str, Any] = {name: [getattr(r, name) for r in records] for name in _COLUMNS}
    for name in _SHARED:
        values = [getattr(record, name) for record in records]
        table = {value: number for number, value in enumerate(dict.fromkeys(values))}
        saved[name] = {"values": list(table), "index": [table[value] for value in values]}
    return saved


def _records(saved: Any) -> list[ChunkRecord]:
    if isinstance(saved, list):  # format 1: one object per chunk
        return [ChunkRecord(**item) for item in saved]
    shared = {name: [saved[name]["values"][i] for i in saved[name]["index"]] for name in _SHARED}
    columns = {name: saved[name] for name in _COLUMNS} | shared
    names = list(columns)
    return [
        ChunkRecord(**dict(zip(names, values, strict=True)))
        for values in zip(*columns.values(), strict=True)
    ]


@attrs.frozen
class _Overlay:
    added: list[tuple[ChunkRecord, npt.NDArray[np.float32]]]
    removed: list[str]
    stamps: dict[str, Stamp]


def _overlay(directory: Path, base: str) -> _Overlay | None:
    try:
        meta = json.loads((directory / "overlay.json").read_text(encoding="utf-8"))
        if meta.get("base") != base:
            return None
        vectors = np.load(directory / "overlay.npy")
        counts = [int(count) for count in meta["counts"]]
        if sum(counts) != (len(vectors) if vectors.ndim == 2 else 0):
            return None  # the two files of different writes
        added, start = [], 0
        for item, count in zip(meta["added"], counts, strict=True):
            added.append((ChunkRecord(**item), vectors[start : start + count]))
            start += count
        return _Overlay(
            added=added,
            removed=[str(key) for key in meta["removed"]],
            stamps={key: (int(v[0]), int(v[1])) for key, v in meta["stamps"].items()},
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def load(directory: Path) -> Saved | None:
    """The saved read model, or ``None`` when there is none or it cannot be read."""
    try:
        manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
        if manifest.get("format") not in READABLE:
            return None
        records = _records(json.loads((directory / "chunks.json").read_text(encoding="utf-8")))
        dense = FactIndex.load(directory)
        lexical = (
            LexicalIndex.load(directory)
            if manifest["format"] == FORMAT
            else LexicalIndex.build([lexical_words(r.content, r.source) for r in records])
        )
        stamps = {key: (int(value[0]), int(value[1])) for key, value in manifest["stamps"].items()}
        base = str(manifest["base"])
        overlay = _overlay(directory, base) or _Overlay([], [], {})
        stamps.update(overlay.stamps)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if lexical.size != len(records) or (len(dense.owners) and dense.owners.max() >= len(records)):
        return None
    return Saved(
        generation=Generation(records, dense, lexical),
        stamps=stamps,
        base=base,
        added=overlay.added,
        removed=overlay.removed,
        outdated=manifest.get("format") != FORMAT,
    )
