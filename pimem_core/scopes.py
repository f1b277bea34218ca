"""Public helpers for building a valid :class:`~pimem_core.types.Scope`: for scope resolvers,
bundled or third-party.

The collection name and the store layout are facts every memsearch agent shares (the mesh):
they are mirrored byte for byte, so a resolver that uses these helpers keeps memories flowing
between agents. ::

    from pimem_core.scopes import find_repository_dir, project_scope

    scope = project_scope(find_repository_dir(cwd))
    scope.collection  # "ms_<name>_<8 hex>", as memsearch derives it
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from pimem_core.types import Scope

#: The file in which memsearch records a store's index health.
STATE_FILE = ".index-state.json"
#: The directory memsearch keeps a project's memory in, at the project's root.
TREE = ".memsearch"
_UPPER_TO_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def derive_collection(path: Path | str) -> str:
    """memsearch's collection name for a project directory: ``ms_<name>_<8 hex>``.

    Mirrors ``derive-collection.sh``: the real path (symlinks resolved, the path need not
    exist), its basename lower-cased (ASCII only, as ``tr`` does), every run of characters
    outside ``[a-z0-9]`` made one ``_``, one leading and trailing ``_`` stripped, cut to 40
    characters; then the first 8 hex digits of the SHA-256 of the real path.
    """
    real = os.path.realpath(path)
    name = re.sub(r"[^a-z0-9]+", "_", os.path.basename(real).translate(_UPPER_TO_LOWER))
    name = name.removeprefix("_").removesuffix("_")[:40]
    digest = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    return f"ms_{name}_{digest}"


def find_repository_dir(cwd: Path) -> Path:
    """The nearest directory at or above *cwd* holding ``.git`` (a directory, or a worktree's file).

    Falls back to *cwd* itself. This is where memsearch runs, so a project ``.memsearch.toml``
    applies as it would for a CLI run there.
    """
    start = Path(os.path.realpath(cwd))
    for candidate in (start, *start.parents):
        if (candidate / ".git").exists():
            return candidate
    return start


def project_scope(project_dir: Path, *, repository_dir: Path | None = None) -> Scope:
    """The scope memsearch gives *project_dir*: memory in ``<dir>/.memsearch/memory``, index
    state in ``<dir>/.memsearch/.index-state.json``, the collection derived from the directory.

    This is what the default resolver answers for a project without ``MEMSEARCH_DIR``.

    :param repository_dir: where memsearch runs for this store (default: *project_dir*).
    """
    project_dir = Path(os.path.realpath(project_dir))
    tree = project_dir / TREE
    return Scope(
        repository_dir=project_dir if repository_dir is None else repository_dir,
        scope_dir=project_dir,
        memory_dir=tree / "memory",
        collection=derive_collection(project_dir),
        index_state_path=tree / STATE_FILE,
    )
