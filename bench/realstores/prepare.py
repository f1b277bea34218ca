"""``python -m bench.realstores.prepare DEST [--mirrors DIR] [--only NAMES]``.

Export the real-store development set into DEST: for each store of ``stores.json``, its day
files at the listed commit, byte for byte, into ``DEST/<store>/.memsearch/memory/``. Nothing is
downloaded here: each repository must already be on this machine as a git directory under
``--mirrors`` (or ``$PIMEM_REALSTORES_MIRRORS``), at
``<owner>+<name>/repo`` as a snapshot fetch leaves it, or a clone at ``<owner>+<name>``
(``git clone https://github.com/<owner>/<name> <owner>+<name>``, or ``--bare`` into
``<owner>+<name>.git``): the listed commits must be in it. Each exported file is checked
against the size and SHA-256 recorded in ``stores.json``; a store whose repository or commit is
missing is named with what to do, and the others are still exported.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.realstores.dataset import DatasetError, Store, load_stores, sha256

DEFAULT_MIRRORS = os.environ.get("PIMEM_REALSTORES_MIRRORS")


def git_dir(mirrors: Path, repo: str) -> Path | None:
    """The git directory holding *repo* under *mirrors*, if any."""
    owner, name = repo.split("/", 1)
    flat = f"{owner}+{name}"
    for candidate in (
        mirrors / flat / "repo",
        mirrors / flat / ".git",
        mirrors / flat,
        mirrors / f"{flat}.git",
        mirrors / owner / name,
        mirrors / owner / f"{name}.git",
    ):
        probe = subprocess.run(
            ["git", "--git-dir", str(candidate), "rev-parse", "--git-dir"],
            capture_output=True,
            check=False,
        )
        if candidate.is_dir() and probe.returncode == 0:
            return candidate
    return None


def _blob(git: Path, commit: str, path: str) -> bytes:
    done = subprocess.run(
        ["git", "--git-dir", str(git), "cat-file", "blob", f"{commit}:{path}"],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise DatasetError(f"{git}: no {path} at {commit} ({done.stderr.decode().strip()})")
    return done.stdout


def export(store: Store, mirrors: Path, dest: Path) -> int:
    """Write *store*'s day files under *dest*; the bytes written."""
    git = git_dir(mirrors, store.repo)
    if git is None:
        raise DatasetError(
            f"{store.repo} is not under {mirrors}: fetch github:{store.repo} first, or "
            f"git clone --bare https://github.com/{store.repo} "
            f"{mirrors / (store.repo.replace('/', '+') + '.git')}"
        )
    files = {
        file.name: _blob(git, store.commit, f"{store.memory_dir}/{file.name}")
        for file in store.files
    }
    for file in store.files:
        data = files[file.name]
        if len(data) != file.bytes or sha256(data) != file.sha256:
            raise DatasetError(
                f"{store.repo}@{store.commit}:{store.memory_dir}/{file.name} is not the file "
                "stores.json lists"
            )
    memory = store.memory(dest)
    # The copy is this script's own: a previous export is replaced, never merged into.
    if memory.exists():
        shutil.rmtree(memory)
    memory.mkdir(parents=True)
    for name, data in files.items():
        (memory / name).write_bytes(data)
    return sum(len(data) for data in files.values())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.realstores.prepare", description=__doc__.split("\n\n")[1]
    )
    parser.add_argument("dest", type=Path, help="where the stores go, one directory each")
    parser.add_argument(
        "--mirrors",
        type=Path,
        default=None if DEFAULT_MIRRORS is None else Path(DEFAULT_MIRRORS),
        required=DEFAULT_MIRRORS is None,
        help="where the repositories' git directories are ($PIMEM_REALSTORES_MIRRORS)",
    )
    parser.add_argument("--only", help="store names, comma-separated (default all)")
    args = parser.parse_args(argv)
    stores = load_stores()
    if args.only:
        chosen = {name.strip() for name in args.only.split(",") if name.strip()}
        unknown = chosen - {store.name for store in stores}
        if unknown:
            parser.error(f"no such store: {', '.join(sorted(unknown))}")
        stores = tuple(store for store in stores if store.name in chosen)
    failed = 0
    for store in stores:
        try:
            written = export(store, args.mirrors, args.dest)
        except DatasetError as error:
            failed += 1
            print(f"{store.name}: {error}", file=sys.stderr)
            continue
        print(
            f"{store.name}: {len(store.files)} day files, {written:,} bytes "
            f"({store.repo}@{store.commit[:12]}, written by {store.agent})"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
