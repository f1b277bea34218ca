"""git-merge: team memory through git. The repository's ``.gitattributes`` marks the store's
daily memory files ``merge=union``, and status says how git merges them (ADR 0016).

The line is written at the first change to a store that lies in the session's own work tree,
never by a read: one line, added once, and never when a line for the pattern already says how
to merge, when git ignores the day files (nothing of them is merged), or when
``PIMEM_GIT_UNION_MERGE=off``. A store that a store command or ``MEMSEARCH_DIR`` put outside the
repository is left to whoever put it there. With the line, the repository's ``.gitignore``
gets memsearch's ``.index-state.json``: it describes this machine's collection only.

Adding a line to someone's repository is said, once: the write that did it answers with a
line for its writer (``memory_write``, ``pimem write``), and status names each line pimem
added and when, from a small record in pimem's state directory (one file per work tree).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from pimem_core.plugin import (
    PimemPaths,
    Scope,
    Settings,
    SettingSpec,
    StatusSection,
    StoreChange,
    StorePlace,
    hookimpl,
    write_private,
)
from pimem_plugins.shared.layout import DAY_FILE

SOURCE = "git-merge"
UNION = "merge=union"
IGNORE = ".gitignore"
ATTRIBUTES = ".gitattributes"

log = logging.getLogger(__name__)

UNION_MERGE = SettingSpec.switch(
    plugin=SOURCE,
    name="union_merge",
    env="PIMEM_GIT_UNION_MERGE",
    default=True,
    help="mark the store's daily memory files merge=union in the repository's .gitattributes",
)


class GitMerge:
    """The ``git-merge`` plugin."""

    def __init__(self) -> None:
        # Scopes whose .gitattributes need nothing more from this process.
        self._settled: set[Scope] = set()

    @staticmethod
    @hookimpl
    def pimem_declare_settings() -> tuple[SettingSpec[bool]]:
        return (UNION_MERGE,)

    @hookimpl(trylast=True)
    def pimem_observe_change(
        self, scope: Scope, change: StoreChange, settings: Settings
    ) -> str | None:
        if scope in self._settled or not UNION_MERGE.read(settings):
            return None
        try:
            added = self._mark_union(scope, change.file)
        except OSError as error:
            # The write itself succeeded; the next process tries again.
            log.warning("could not mark the daily memory files merge=union: %s", error)
            return None
        self._settled.add(scope)
        if not added:
            return None
        place = StorePlace.locate(scope)
        assert place.work_tree is not None
        _remember(place.work_tree, added, settings.now().strftime("%Y-%m-%d %H:%M"))
        return _tell(added)

    def _mark_union(self, scope: Scope, file: Path) -> list[tuple[str, str]]:
        """Add what the repository lacks; ``(file name, line)`` for each line added."""
        place = StorePlace.locate(scope)
        if place.work_tree is None or place.pattern is None:
            return []
        added = []
        attributes = place.work_tree / ATTRIBUTES
        # A line in place already, or someone decided otherwise: it is left as it is.
        if place.merge_attribute(_read(attributes)) is None:
            # Only now is git asked, once: is anything of the store committed at all?
            if place.ignores(_relative(place, file)) is not False:
                return []
            if place.ensure_attribute(attributes, UNION):
                log.info("marked %s %s in %s", place.pattern, UNION, attributes)
                added.append((ATTRIBUTES, f"{place.pattern} {UNION}"))
        line = _ignore_index_state(scope, place)
        if line is not None:
            added.append((IGNORE, line))
        return added

    @staticmethod
    @hookimpl
    def pimem_collect_status(scope: Scope, settings: Settings) -> Iterator[StatusSection]:
        place = StorePlace.locate(scope)
        yield _unmerged_status(place)
        yield _status(place, UNION_MERGE.read(settings))


def _ignore_index_state(scope: Scope, place: StorePlace) -> str | None:
    """memsearch's ``.index-state.json`` describes this machine's collection: committed, it
    would tell a teammate's pimem about an index their machine does not have, and every pull
    would overwrite it. The line, when this call added it."""
    state = scope.index_state_path
    assert place.work_tree is not None
    if state is None:
        return None
    real = Path(os.path.realpath(state))
    if os.path.commonpath([str(real), str(place.work_tree)]) != str(place.work_tree):
        return None
    line = "/" + real.relative_to(place.work_tree).as_posix()
    if not place.ensure_line(place.work_tree / IGNORE, line):
        return None
    log.info("git ignores %s now (.gitignore)", line)
    return line


#: Why each file got its line, as the write's answer says it.
_WHY = {
    ATTRIBUTES: "so that git keeps both sides' entries when teammates' daily memory files merge",
    IGNORE: "since that file describes this machine's index only",
}


def _tell(added: list[tuple[str, str]]) -> str:
    """The one line a write answers with after adding *added* to the repository."""
    said = ", and ".join(f"`{line}` to {name}, {_WHY[name]}" for name, line in added)
    return f"pimem added {said}. Commit {'them' if len(added) > 1 else 'it'} with the memory files."


def _record_path(work_tree: Path) -> Path:
    digest = hashlib.sha256(str(work_tree).encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return PimemPaths.from_env().state_dir / SOURCE / f"{digest}.json"


def _remember(work_tree: Path, added: list[tuple[str, str]], when: str) -> None:
    """Keep what pimem added to *work_tree* and when, for status: the repository's files
    cannot say who wrote a line."""
    known = _remembered(work_tree)
    known.update({f"{name}\0{line}": when for name, line in added})
    try:
        write_private(
            _record_path(work_tree), json.dumps({"work_tree": str(work_tree), "added": known})
        )
    except OSError as error:  # status then cannot say who added it; nothing else depends on it
        log.warning("could not record the lines pimem added to %s: %s", work_tree, error)


def _remembered(work_tree: Path) -> dict[str, str]:
    """``"<file>\\0<line>"`` to when pimem added it, as far as recorded."""
    try:
        raw = json.loads(_record_path(work_tree).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    added = raw.get("added") if isinstance(raw, dict) else None
    if not isinstance(added, dict):
        return {}
    return {str(key): str(value) for key, value in added.items()}


def _unmerged_status(place: StorePlace) -> StatusSection:
    """The day files git has not merged yet: conflict markers, or a side that deleted the file
    (a forget of its last entry) while the other wrote to it, which leaves no marker."""
    files: list[str] = []
    if place.work_tree is not None and place.pattern is not None:
        store = place.pattern.rsplit("/", 1)[0]
        done = place.git("ls-files", "--unmerged", "-z", "--", store)
        if done is not None and done.returncode == 0:
            paths = {
                record.split("\t", 1)[1] for record in done.stdout.split("\0") if "\t" in record
            }
            files = sorted(path for path in paths if DAY_FILE.fullmatch(Path(path).name))
    lines = (
        (
            "unmerged: git has not merged "
            + ", ".join(Path(path).name for path in files)
            + " yet; `pimem git resolve` merges both sides block by block and stages them",
        )
        if files
        else ()
    )
    return StatusSection(name="unmerged", rank=13, lines=lines, data={"files": files})


def _status(place: StorePlace, union_on: bool) -> StatusSection:
    data: dict[str, object] = {
        "work_tree": None if place.work_tree is None else str(place.work_tree),
        "pattern": place.pattern,
        "union_merge": union_on,
    }
    if place.work_tree is None or place.pattern is None:
        line = f"git: {place.why_not}; pimem leaves .gitattributes alone"
        return StatusSection(name="git", rank=70, lines=(line,), data={**data, "why_not": line})
    is_ignored = place.ignores(place.sample())
    merge, driver = _effective_merge(place), _driver_defined(place)
    said = place.merge_attribute(_read(place.work_tree / ATTRIBUTES))
    data.update(ignored=is_ignored, merge=merge, driver_defined=driver, gitattributes=said)
    if is_ignored:
        line = "git: git ignores the daily memory files: nothing of them is merged"
        return StatusSection(name="git", rank=70, lines=(line,), data=data)
    lines = [f"git: daily memory files ({place.pattern}) merge by {_how(merge, driver)}"]
    remembered = _remembered(place.work_tree)
    if said is not None:
        when = remembered.get(f"{ATTRIBUTES}\0{place.pattern} {said}")
        added = f" (added by pimem on {when})" if when else ""
        lines.append(
            f"  .gitattributes: `{place.pattern} {said}`"
            + (added if said == UNION else ", left as it is")
        )
    elif union_on:
        lines.append(
            f"  .gitattributes: no line yet; the next write adds `{place.pattern} {UNION}`"
        )
    else:
        lines.append("  .gitattributes: no line (PIMEM_GIT_UNION_MERGE=off)")
    for key, when in remembered.items():
        name, _, line = key.partition("\0")
        if name == IGNORE:
            lines.append(f"  {IGNORE}: `{line}` (added by pimem on {when})")
    data["added_by_pimem"] = [
        {"file": key.partition("\0")[0], "line": key.partition("\0")[2], "at": when}
        for key, when in remembered.items()
    ]
    if merge != StorePlace.DRIVER or not driver:
        lines.append(
            "  merges that keep forgets and entries of the same minute apart: `pimem git "
            "merge-driver` (once per clone)"
        )
    return StatusSection(name="git", rank=70, lines=tuple(lines), data=data)


def _how(merge: str | None, driver: bool) -> str:
    if merge == StorePlace.DRIVER:
        if driver:
            return "pimem's merge driver, block by block (defined in this clone)"
        return (
            f"{StorePlace.DRIVER}, which this clone does not define: a text merge, with conflict "
            "markers; "
            "`pimem git merge-driver` defines it"
        )
    if merge == "union":
        return "git's union merge"
    if merge == "unset":
        return "no merge (-merge): git keeps this side and reports a conflict"
    if merge in ("unspecified", "set"):
        return "git's text merge: two sides that write on the same day conflict"
    if merge is None:
        return "whatever git decides (git could not be asked)"
    return f"the merge driver {merge}"


def _effective_merge(place: StorePlace) -> str | None:
    assert place.work_tree is not None
    done = place.git("check-attr", "merge", "--", place.sample())
    if done is None or done.returncode != 0 or ": merge: " not in done.stdout:
        return None
    return done.stdout.strip().rsplit(": ", 1)[1]


def _driver_defined(place: StorePlace) -> bool:
    done = place.git("config", "--get", f"merge.{StorePlace.DRIVER}.driver")
    return done is not None and done.returncode == 0 and bool(done.stdout.strip())


def _relative(place: StorePlace, file: Path) -> str:
    assert place.work_tree is not None
    real = os.path.realpath(file)
    root = str(place.work_tree)
    if os.path.commonpath([real, root]) != root:
        return place.sample()
    return Path(real).relative_to(root).as_posix()


def _read(file: Path) -> str:
    """An attributes file's text; ``""`` when there is none (or it cannot be read: writing it
    then fails too, and says why)."""
    try:
        return file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
