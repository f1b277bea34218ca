"""The index is one service: replaced, every part of pimem that searches uses the replacement.

The in-memory index of the plugin kit stands in for memsearch's: the memory tools, auto-context,
compaction and status all go through it, and no memsearch code runs at all. (memory-to-skill is
blocked too: its candidates are memsearch's skill files, read with memsearch's own module.)
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import REPO_ROOT

ROOT = REPO_ROOT

# Run in a child process, so "no memsearch module was imported" is about this pimem alone.
SCRIPT = textwrap.dedent(
    """
    import json, sys
    from datetime import datetime
    from pathlib import Path

    from pimem_core import Pimem
    from pimem_core.errors import PimemError
    from pimem_core.testing import InMemoryIndexPlugin
    from pimem_core.types import Anchor, Entry, PromptContext, SearchQuery

    repo = Path(sys.argv[1])
    pimem = Pimem.from_env({
        "HOME": sys.argv[2],
        "PIMEM_DISABLE_PLUGINS": "memsearch-index,memory-to-skill",
        "PI_MEMSEARCH_AUTO_CONTEXT": "on",
        "PIMEM_NOW": "2026-08-13T22:41",
    })
    plugin = InMemoryIndexPlugin(similar=True)
    pimem.pm.add_plugin(plugin, "in-memory-index")
    scope = pimem.resolve_scope(repo)
    entry = Entry(
        anchor=Anchor(session="s1", turn="t1", transcript="/t/s1.jsonl"),
        content="- the team chose Redis for the hot cache",
        written_at=datetime(2026, 8, 13, 22, 41),
    )
    pimem.append_entry(scope, entry)
    pimem.index_memory(scope, "test")
    out = {}
    (hit,) = pimem.search_memory(scope, SearchQuery(text="which cache did we choose"))
    out["search"] = hit.content
    out["expand"] = pimem.expand_chunk(scope, hit.chunk_hash).anchor.turn
    pimem.start_session(scope)
    index = plugin.indexes[scope.collection]
    while "warm" not in index.operations:
        pass
    context = PromptContext(
        scope=scope, prompt="Redis cache", snapshot=None, settings=pimem.settings
    )
    out["injected"] = [i.source for i in pimem.collect_injections(context)]
    try:
        pimem.compact_memory(scope)
    except PimemError as error:
        out["compact"] = str(error)
    out["status"] = [line for s in pimem.collect_status(scope) for line in s.lines]
    out["operations"] = index.operations
    out["memsearch_imported"] = sorted(
        name for name in sys.modules if name == "memsearch" or name.startswith("memsearch.")
    )
    print(json.dumps(out))
    """
)


def test_a_replaced_index_serves_every_search_and_memsearch_never_runs(
    repo: Path, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(repo), str(tmp_path / "home")],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert "chose Redis for the hot cache" in out["search"]
    assert out["expand"] == "t1"
    assert out["injected"] == ["auto-context"]
    assert out["compact"] == (
        "the index (SimilarInMemoryIndex, see `pimem plugins`) cannot compact memory: "
        "it offers no compact()"
    )
    assert "backend: in-memory index (1 chunks)" in out["status"]
    assert out["operations"][:4] == ["index", "search", "expand", "warm"]
    assert {"similar", "status"} <= set(out["operations"])
    assert out["memsearch_imported"] == []
