"""The real-store development set: which public stores, which files, and the queries on them.

``stores.json`` names each store by repository, commit and memory directory, and lists its day
files with their size and SHA-256, so a prepared copy can be checked byte for byte. The files
themselves are never in this repository: ``python -m bench.realstores.prepare DEST`` exports
them from fetched snapshots. ``queries/<store>.json`` holds the queries written for each store.

A query's relevant entries are named by their day file and a distinctive substring of their
text: a hit is right when its source is that day file and its text holds the substring. That
survives any chunking that keeps an entry's text whole.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import attrs

HERE = Path(__file__).resolve().parent
STORES = HERE / "stores.json"
QUERIES = HERE / "queries"
MEMORY_DIR = Path(".memsearch") / "memory"
Kind = Literal["keyword", "paraphrase", "question", "no-answer"]
KINDS: tuple[Kind, ...] = ("keyword", "paraphrase", "question", "no-answer")
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}\.md")


class DatasetError(Exception):
    """The store list, a query file or a prepared copy is not as this module expects."""


@attrs.frozen(kw_only=True)
class DayFile:
    name: str
    bytes: int
    sha256: str


@attrs.frozen(kw_only=True)
class Store:
    name: str
    repo: str
    commit: str
    #: The memory directory inside the repository (memsearch's ``.memsearch/memory``).
    memory_dir: str
    #: Who wrote the entries: ``claude-code``, ``codex``, ``opencode``... (from their anchors).
    agent: str
    files: tuple[DayFile, ...]
    note: str = ""

    def memory(self, root: Path) -> Path:
        """This store's memory directory in a prepared copy at *root*."""
        return root / self.name / MEMORY_DIR


@attrs.frozen(kw_only=True)
class Relevant:
    file: str
    contains: str

    def matches(self, source: str, content: str) -> bool:
        """Whether a hit (its day file and its text) is this entry: it holds the substring, or
        it is another chunk of the same entry (memsearch cuts an entry longer than its chunk
        size in several; the one that answers is found by any of them, and expanded whole)."""
        if Path(source).name != self.file:
            return False
        if self.contains in content:
            return True
        entry = _entry_holding(source, self.contains)
        body = [line for line in content.splitlines() if line.strip() and not _aside(line)]
        return entry is not None and bool(body) and all(line in entry for line in body)


@attrs.frozen(kw_only=True)
class Query:
    id: str
    kind: Kind
    text: str
    #: Empty for a no-answer query: nothing in the store answers it.
    relevant: tuple[Relevant, ...]

    def rank(self, hits: Sequence[tuple[str, str]]) -> int | None:
        """The 1-based rank of the first right hit among *hits* (source, content)."""
        for i, (source, content) in enumerate(hits, 1):
            if any(r.matches(source, content) for r in self.relevant):
                return i
        return None


def load_stores(path: Path = STORES) -> tuple[Store, ...]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    stores = tuple(
        Store(
            name=item["name"],
            repo=item["repo"],
            commit=item["commit"],
            memory_dir=item["memory_dir"],
            agent=item["agent"],
            note=item.get("note", ""),
            files=tuple(DayFile(**file) for file in item["files"]),
        )
        for item in raw["stores"]
    )
    for store in stores:
        odd = [f.name for f in store.files if not _DAY.fullmatch(f.name)]
        if odd:
            raise DatasetError(f"{store.name}: not day files: {', '.join(odd)}")
    return stores


def load_queries(store: Store, directory: Path = QUERIES) -> tuple[Query, ...]:
    raw = json.loads((directory / f"{store.name}.json").read_text(encoding="utf-8"))
    queries = []
    for item in raw["queries"]:
        query = Query(
            id=item["id"],
            kind=item["kind"],
            text=item["text"],
            relevant=tuple(Relevant(**r) for r in item.get("relevant", ())),
        )
        if query.kind not in KINDS:
            raise DatasetError(f"{store.name}/{query.id}: unknown kind {query.kind!r}")
        if (query.kind == "no-answer") != (not query.relevant):
            raise DatasetError(
                f"{store.name}/{query.id}: a no-answer query has no relevant entry, and "
                "every other query has one"
            )
        names = {f.name for f in store.files}
        stray = [r.file for r in query.relevant if r.file not in names]
        if stray:
            raise DatasetError(f"{store.name}/{query.id}: {', '.join(stray)} not in the store")
        queries.append(query)
    ids = [q.id for q in queries]
    if len(set(ids)) != len(ids):
        raise DatasetError(f"{store.name}: query ids repeat")
    return tuple(queries)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


_HEADING = re.compile(r"#{1,6} ")


def entries(text: str) -> list[str]:
    """*text* (a day file) cut before each markdown heading, as memsearch chunks it when no
    section is too long: each ``### HH:MM`` entry with its anchor and body."""
    parts: list[list[str]] = [[]]
    for line in text.splitlines(keepends=True):
        if _HEADING.match(line) and parts[-1]:
            parts.append([])
        parts[-1].append(line)
    return ["".join(part) for part in parts if part]


def _aside(line: str) -> bool:
    """A heading or an anchor comment: a continuation chunk repeats the entry's."""
    stripped = line.strip()
    return bool(_HEADING.match(stripped)) or stripped.startswith("<!--")


@functools.lru_cache(maxsize=512)
def _entry_holding(source: str, contains: str) -> str | None:
    """The entry of the day file at *source* that holds *contains* (``None``: no such)."""
    try:
        text = Path(source).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return next((entry for entry in entries(text) if contains in entry), None)


def ambiguous(root: Path, store: Store, queries: Sequence[Query]) -> list[str]:
    """Every relevant entry of *queries* whose substring is not in exactly one entry of its
    day file in the prepared copy at *root*: a query names one entry, never several or none."""
    memory = store.memory(root)
    cut = {f.name: entries((memory / f.name).read_text(encoding="utf-8")) for f in store.files}
    problems = []
    for query in queries:
        for relevant in query.relevant:
            found = sum(relevant.contains in entry for entry in cut[relevant.file])
            if found != 1:
                problems.append(
                    f"{store.name}/{query.id}: {relevant.contains!r} is in {found} entries "
                    f"of {relevant.file}"
                )
    return problems


def verify(root: Path, store: Store) -> None:
    """Check that *root* holds *store* as ``prepare`` exports it, byte for byte."""
    memory = store.memory(root)
    if not memory.is_dir():
        raise DatasetError(
            f"{memory}: missing; run `python -m bench.realstores.prepare {root}` first"
        )
    for file in store.files:
        path = memory / file.name
        if not path.is_file() or sha256(path.read_bytes()) != file.sha256:
            raise DatasetError(f"{path}: missing or not the file of {store.repo}@{store.commit}")
