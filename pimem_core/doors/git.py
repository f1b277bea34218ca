"""``pimem git``: the merge driver for the store's daily memory files, and its registration.

``.gitattributes`` gives every clone git's union merge (the ``git-merge`` plugin writes it).
A clone that runs ``pimem git merge-driver`` once merges the day files block by block instead:
the driver is defined in the clone's git configuration and selected by a line in its
``info/attributes``, which outranks ``.gitattributes`` and is never shared (ADR 0016).
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

from pimem_core.api import Pimem
from pimem_core.command_table import Args, Outcome
from pimem_core.conflicts import after_conflicts, conflicted_files, without_conflicts
from pimem_core.doors.front_door import FrontDoor, in_front_door
from pimem_core.errors import PimemError, StoreError
from pimem_core.gitrepo import (
    DRIVER,
    ensure_attribute,
    locate_store,
    merge_attribute,
    run_git,
)

_DAY_FILE = re.compile(r"\d{4}-\d{2}-\d{2}\.md")


def _read_version(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise StoreError(f"cannot read {path} as UTF-8 text: {error}") from None


@in_front_door
def merge_day_files(door: FrontDoor, a: Args) -> Outcome:
    base, ours, theirs = (_read_version(a[name]) for name in ("base", "ours", "theirs"))
    merged = door.pimem.merge_day_file(base, ours, theirs)
    # Written only once merged: a failure leaves OURS as it was, for git's own merge to take.
    a["ours"].write_bytes(merged.encode("utf-8"))
    return Outcome(text=None)


def _git(work_tree: Path, *args: str) -> str:
    done = run_git(work_tree, *args)
    if done is None:
        raise PimemError("git could not be run; is it installed and on PATH?")
    if done.returncode != 0:
        said = done.stderr.strip() or f"exit status {done.returncode}"
        raise PimemError(f"`git {' '.join(args)}` failed: {said}")
    return done.stdout.strip()


@in_front_door
def merge_driver(door: FrontDoor, a: Args) -> Outcome:
    root, pattern, _ = _place(door, "register")
    # This Python and this pimem, whatever PATH says when git runs the driver; when it cannot
    # run, git's own merge writes conflict markers, which pimem reads around.
    pimem = f"{shlex.quote(sys.executable)} -m pimem_core git merge-day-files %O %A %B"
    driver = f"{pimem} || git merge-file %A %O %B"
    _git(root, "config", f"merge.{DRIVER}.name", "pimem: daily memory files, block by block")
    _git(root, "config", f"merge.{DRIVER}.driver", driver)
    attributes = root / _git(root, "rev-parse", "--git-path", "info/attributes")
    wanted = f"merge={DRIVER}"
    added = ensure_attribute(attributes, pattern, wanted)
    said = wanted if added else merge_attribute(attributes.read_text(encoding="utf-8"), pattern)
    lines = [
        f"Registered pimem's merge driver in this clone ({root}): git merges "
        f"{pattern} block by block, so a forget stays forgotten and entries written at "
        "the same minute stay apart.",
        f"  driver: merge.{DRIVER}.driver = {driver}",
        f"  {attributes}: {pattern} {said}"
        + (
            ""
            if said == wanted
            else f" (left as it is: the driver applies where a line says {wanted})"
        ),
        "Each clone registers it once; a clone without it merges by .gitattributes.",
    ]
    return Outcome(
        text="\n".join(lines),
        data={
            "work_tree": str(root),
            "pattern": pattern,
            "driver": driver,
            "attributes_file": str(attributes),
            "attribute": said,
        },
    )


def _place(door: FrontDoor, doing: str) -> tuple[Path, str, str]:
    """The session repository's work tree, the store's day files as a pattern there and the
    store's directory relative to it; a ``PimemError`` saying why there are none."""
    place = locate_store(door.scope())
    if place.work_tree is None or place.pattern is None:
        raise PimemError(f"nothing to {doing}: {place.why_not}")
    return place.work_tree, place.pattern, place.pattern.rsplit("/", 1)[0]


def _unmerged(root: Path, store: str) -> dict[str, dict[int, str]]:
    """The store's day files git left unmerged: each one's blob by stage (1 the ancestor, 2
    ours, 3 theirs; a side that deleted the file has none)."""
    found: dict[str, dict[int, str]] = {}
    for record in _git(root, "ls-files", "--unmerged", "-z", "--", store).split("\0"):
        if not record:
            continue
        info, path = record.split("\t", 1)
        _, blob, stage = info.split()
        if _DAY_FILE.fullmatch(Path(path).name):
            found.setdefault(path, {})[int(stage)] = blob
    return found


def _blob(root: Path, blob: str | None) -> str:
    return "" if blob is None else _git_raw(root, "cat-file", "blob", blob)


def _git_raw(work_tree: Path, *args: str) -> str:
    done = run_git(work_tree, *args)
    if done is None or done.returncode != 0:
        raise PimemError(f"`git {' '.join(args)}` failed: {'' if done is None else done.stderr}")
    return done.stdout


def _resolved_text(pimem: Pimem, stages: dict[int, str], current: str) -> str:
    """A conflicted day file resolved: the sides merged block by block (from git's stages
    when it still has them, else both sides as the markers hold them), plus what was appended
    since the merge (below the markers)."""
    if not stages:
        return without_conflicts(current)
    base, ours, theirs = (stages.get(stage, "") for stage in (1, 2, 3))
    merged = pimem.merge_day_file(base, ours, theirs)
    # Every block of either side is accounted for by `merged`; a block the end of the file
    # adds to them was written since.
    both = pimem.merge_day_file("", ours, theirs)
    since = pimem.merge_day_file("", both, after_conflicts(current))
    return pimem.merge_day_file(both, merged, since)


@in_front_door
def resolve(door: FrontDoor, a: Args) -> Outcome:
    root, _, store = _place(door, "resolve")
    unmerged = _unmerged(root, store)
    marked = {
        file.relative_to(root).as_posix()
        for file in conflicted_files(root / store)
        if _DAY_FILE.fullmatch(file.name)
    }
    done: list[dict[str, object]] = []
    for path in sorted(set(unmerged) | marked):
        file = root / path
        current = _read_version(file) if file.exists() else ""
        stages = {stage: _blob(root, blob) for stage, blob in unmerged.get(path, {}).items()}
        text = _resolved_text(door.pimem, stages, current)
        if text.strip():
            file.write_bytes(text.encode("utf-8"))
        elif file.exists():
            file.unlink()  # nothing worth keeping, as a forget of the last entry leaves it
        if path in unmerged:
            _git(root, "add", "--all", "--", path)
        done.append({"file": str(file), "staged": path in unmerged, "deleted": not text.strip()})
    if not done:
        return Outcome(
            text=f"No daily memory file of {root / store} needs resolving.", data={"resolved": []}
        )
    lines = [f"Resolved {len(done)} daily memory file(s), both sides kept block by block:"]
    lines += [
        f"  {item['file']}" + (" (staged)" if item["staged"] else " (not staged: `git add` it)")
        for item in done
    ]
    return Outcome(text="\n".join(lines), data={"resolved": done})
