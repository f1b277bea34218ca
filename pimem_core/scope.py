"""Where one project's memory lives, and how memsearch lays out a project's store.

The collection name and the store's layout are facts every memsearch agent shares (the mesh):
they are mirrored byte for byte, so a resolver that builds its scope with
:meth:`Scope.for_project` keeps memories flowing between agents. ::

    scope = Scope.for_project(Scope.find_repository_dir(cwd))
    scope.collection  # "ms_<name>_<8 hex>", as memsearch derives it
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import attrs

#: A collection name Milvus accepts: a letter or underscore, then letters, digits, underscores.
COLLECTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")
#: The file in which memsearch records a store's index health.
STATE_FILE = ".index-state.json"
#: The directory memsearch keeps a project's memory in, at the project's root.
TREE = ".memsearch"
_UPPER_TO_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


@attrs.frozen(kw_only=True)
class Scope:
    """Where one project's memory lives and how it is indexed.

    ``repository_dir`` is where memsearch runs (so a project ``.memsearch.toml`` applies);
    ``scope_dir`` keys the memory store and the collection. They differ only when
    ``MEMSEARCH_DIR`` or a store command moves the store.
    """

    repository_dir: Path
    scope_dir: Path
    memory_dir: Path
    collection: str = attrs.field(validator=attrs.validators.matches_re(COLLECTION_NAME))
    #: The file the index records its state and health in, as the resolver placed it (the
    #: store's layout decides it: memsearch's ``.index-state.json``); ``None`` when none will
    #: ever be written. Its directory holds the store's other state (maintenance outputs).
    index_state_path: Path | None
    #: The store command that named this store, if one did.
    store_command: str | None = None
    #: The store command's ``state-dir`` answer, which an index's own tools are pointed at
    #: (memsearch's: ``MEMSEARCH_DIR``).
    state_dir: Path | None = None

    def to_json(self) -> dict[str, str | None]:
        return {
            "repository_dir": str(self.repository_dir),
            "scope_dir": str(self.scope_dir),
            "memory_dir": str(self.memory_dir),
            "collection": self.collection,
            "index_state_path": None
            if self.index_state_path is None
            else str(self.index_state_path),
            "store_command": self.store_command,
            "state_dir": None if self.state_dir is None else str(self.state_dir),
        }

    @staticmethod
    def is_collection_name(name: str) -> bool:
        """Whether *name* is a collection name a scope accepts: ``[A-Za-z_][A-Za-z0-9_]{0,254}``."""
        return COLLECTION_NAME.fullmatch(name) is not None

    @classmethod
    def for_project(cls, project_dir: Path, *, repository_dir: Path | None = None) -> Scope:
        """The scope memsearch gives *project_dir*: memory in ``<dir>/.memsearch/memory``,
        index state in ``<dir>/.memsearch/.index-state.json``, the collection derived from the
        directory. The default resolver's answer for a project without ``MEMSEARCH_DIR``.

        :param repository_dir: where memsearch runs for this store (default: *project_dir*).
        """
        project_dir = Path(os.path.realpath(project_dir))
        tree = project_dir / TREE
        return cls(
            repository_dir=project_dir if repository_dir is None else repository_dir,
            scope_dir=project_dir,
            memory_dir=tree / "memory",
            collection=cls.derive_collection(project_dir),
            index_state_path=tree / STATE_FILE,
        )

    @staticmethod
    def derive_collection(path: Path | str) -> str:
        """memsearch's collection name for a project directory: ``ms_<name>_<8 hex>``.

        As ``derive-collection.sh`` derives it: the real path (symlinks resolved, the path need
        not exist), its basename lower-cased (ASCII only, as ``tr`` does), every run of
        characters outside ``[a-z0-9]`` made one ``_``, one leading and trailing ``_``
        stripped, cut to 40 characters; then the first 8 hex digits of the real path's SHA-256.
        """
        real = os.path.realpath(path)
        name = re.sub(r"[^a-z0-9]+", "_", os.path.basename(real).translate(_UPPER_TO_LOWER))
        name = name.removeprefix("_").removesuffix("_")[:40]
        digest = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:8]
        return f"ms_{name}_{digest}"

    @staticmethod
    def find_repository_dir(cwd: Path) -> Path:
        """The nearest directory at or above *cwd* holding ``.git`` (a directory, or a
        worktree's file); *cwd* itself when none does. memsearch runs there, so a project
        ``.memsearch.toml`` applies as it would for a CLI run in it."""
        start = Path(os.path.realpath(cwd))
        for candidate in (start, *start.parents):
            if (candidate / ".git").exists():
                return candidate
        return start
