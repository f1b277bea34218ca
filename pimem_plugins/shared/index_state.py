"""Index health from memsearch's ``.index-state.json``: read without opening the database.

The memsearch index reports its health from it, and the default scope resolver reads the
collection a foreign store was last indexed as.
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs

from pimem_core.plugin import FailedFile, PimemError, Scope, StatusSection
from pimem_plugins.shared.layout import has_memory_files

SCHEMA_VERSION = 1


class IndexStateError(PimemError):
    """An ``.index-state.json`` file does not have the shape memsearch writes (schema version 1)."""


@attrs.frozen(kw_only=True)
class IndexState:
    """memsearch's ``.index-state.json`` (schema version 1), the fields pimem reads."""

    status: str
    failed_files: tuple[FailedFile, ...] = ()
    last_completed_at: str | None = None
    last_error: str | None = None
    collection: str | None = None


@attrs.frozen(kw_only=True)
class IndexHealth:
    """What is known about a store's index without touching the database."""

    #: The state file read; ``None`` when no state file will ever be written for this store.
    state_path: Path | None
    state: IndexState | None = None
    #: Why the state file could not be read, when it exists but is unusable.
    unreadable: str | None = None
    #: The collection the state file was written for, when it is not this store's (a copied
    #: project's file names the original's collection): ``state`` is ``None`` then, since
    #: nothing is known of this collection's index.
    other_collection: str | None = None


def _drifted(detail: str) -> IndexStateError:
    return IndexStateError(f"index-state file drifted: {detail}")


def _optional_text(state: dict[str, object], field: str) -> str | None:
    value = state.get(field)
    if value is None or isinstance(value, str):
        return value
    raise _drifted(f'field "{field}" should be a string, found {type(value).__name__}')


def parse_index_state(text: str) -> IndexState:
    """Parse a schema-1 state file; raise :class:`IndexStateError` on any other shape."""
    try:
        state = json.loads(text)
    except (ValueError, RecursionError):  # junk, or nesting too deep for the parser
        raise _drifted("not valid JSON") from None
    if not isinstance(state, dict):
        raise _drifted("the state is not a JSON object")
    version = state.get("schema_version")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        raise _drifted(f"unsupported schema_version {json.dumps(version)}")
    status = state.get("status")
    if not isinstance(status, str):
        raise _drifted('field "status" should be a string')
    raw_failed = state.get("failed_files", [])
    if not isinstance(raw_failed, list):
        raise _drifted('field "failed_files" should be an array')
    failed = []
    for index, item in enumerate(raw_failed):
        if not (
            isinstance(item, dict)
            and isinstance(item.get("path"), str)
            and isinstance(item.get("error"), str)
        ):
            raise _drifted(f'failed_files[{index}] should have string "path" and "error"')
        failed.append(FailedFile(path=item["path"], error=item["error"]))
    return IndexState(
        status=status,
        failed_files=tuple(failed),
        last_completed_at=_optional_text(state, "last_completed_at"),
        last_error=_optional_text(state, "last_error"),
        collection=_optional_text(state, "collection"),
    )


def read_index_state(path: Path) -> IndexState | None:
    """The state at *path*; ``None`` when the file does not exist (nothing indexed yet)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise IndexStateError(f"cannot read {path}: {error}") from None
    return parse_index_state(text)


def read_index_health(scope: Scope) -> IndexHealth:
    """What *scope*'s state file says of its collection; an unreadable file is reported, never
    raised. The file's place is the store's, not the collection's: copied with the store into
    another directory (whose collection is another), it speaks of the original's index and is
    not this one's state."""
    path = scope.index_state_path
    if path is None:
        return IndexHealth(state_path=None)
    try:
        state = read_index_state(path)
    except IndexStateError as error:
        return IndexHealth(state_path=path, unreadable=str(error))
    if state is not None and state.collection not in (None, scope.collection):
        return IndexHealth(state_path=path, other_collection=state.collection)
    return IndexHealth(state_path=path, state=state)


def describe_index_health(health: IndexHealth, *, has_memory: bool = True) -> list[str]:
    """The index-health lines of ``pimem status``; *has_memory* false for a store with no
    memory files yet (no index run writes a state for it)."""
    if health.state_path is None:
        return [
            "index: no state file will ever be written for this store (it lies outside a "
            ".memsearch tree, the store command declines state-dir, and MEMSEARCH_DIR is "
            "unset); make the store command answer state-dir to get index health back"
        ]
    lines = []
    state = health.state
    if health.unreadable is not None:
        lines.append(
            f"index: state unreadable ({health.unreadable}); the next `pimem index` writes it "
            "again (the file only records index health: no memory is lost)"
        )
    elif health.other_collection is not None:
        lines.append(
            f"index: not indexed yet (the state file here was written for another collection, "
            f"{health.other_collection}, as a copied store carries it; the next index run "
            "writes this one's)"
        )
    elif state is None and not has_memory:
        lines.append("index: no state recorded yet (no memory to index yet)")
    elif state is None:
        lines.append("index: no state recorded yet (the next index run writes it)")
    elif state.status == "ok":
        when = f" (last indexed {state.last_completed_at})" if state.last_completed_at else ""
        lines.append(f"index: ok{when}")
    elif state.status == "degraded":
        lines.append(f"index: degraded ({len(state.failed_files)} failed file(s))")
    elif state.status == "error":
        lines.append(f"index: error ({state.last_error})" if state.last_error else "index: error")
    else:
        lines.append(f"index: {state.status}")
    if state is not None:
        lines.extend(f"  failed: {item.text}" for item in state.failed_files)
    return lines


def index_status_sections(scope: Scope) -> tuple[StatusSection, ...]:
    """``pimem status``'s sections for *scope*'s index state: its health, with the others
    that say how memory is doing, and where the state file is, with the configuration."""
    health = read_index_health(scope)
    state = health.state
    sections = [
        StatusSection(
            name="index",
            rank=30,
            lines=describe_index_health(health, has_memory=has_memory_files(scope.memory_dir)),
            data={
                "state_path": None if health.state_path is None else str(health.state_path),
                "status": None if state is None else state.status,
                "unreadable": health.unreadable,
                "other_collection": health.other_collection,
                "last_completed_at": None if state is None else state.last_completed_at,
                "last_error": None if state is None else state.last_error,
                "failed_files": [] if state is None else [f.to_json() for f in state.failed_files],
            },
        )
    ]
    if health.state_path is not None:
        sections.append(
            StatusSection(
                name="index_state",
                rank=62,
                lines=(f"index state: {health.state_path}",),
                data={"path": str(health.state_path)},
            )
        )
    return tuple(sections)
