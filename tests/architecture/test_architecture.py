"""The layout holds: the contract, the runtime and the front doors build on each other in that
order, core never imports a plugin nor a backend's libraries, plugins import pimem only through
the declared plugin API (:mod:`pimem_core.plugin`) and never each other, no module imports
itself back through others, no process-wide state is kept, and the product (core and plugins)
stays in modules and classes a reader can take in whole.

Read from the source with :mod:`ast`, so the rules hold for every module, imported by a test or
not. Imports under ``if TYPE_CHECKING:`` are types only: they do not count for the layers, but
they do for cycles and floors (a loop of imports is one a reader walks, whatever it is for).
"""

from __future__ import annotations

import ast
import importlib.metadata
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REPO_ROOT

ROOT = REPO_ROOT
PACKAGES = ("pimem_core", "pimem_plugins")
#: The package whose modules every plugin may import: helpers, no hook implementations.
SHARED = "pimem_plugins.shared"
#: The one module of pimem a plugin may import.
PLUGIN_API = "pimem_core.plugin"
#: The default backend's libraries: the memsearch plugin's, never core's.
BACKEND_LIBRARIES = ("memsearch", "pymilvus", "milvus_lite", "onnxruntime")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {
    module_name(path): path
    for package in PACKAGES
    for path in sorted((ROOT / package).rglob("*.py"))
}


def imports(path: Path, *, types: bool = False) -> Iterator[str]:
    """The pimem modules *path* imports, in functions too: at run time, or with *types* also
    those imported under ``if TYPE_CHECKING:`` (for annotations only)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(node)
        for branch in ast.walk(tree)
        if isinstance(branch, ast.If) and ast.unparse(branch.test).endswith("TYPE_CHECKING")
        for node in ast.walk(branch)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only and not types:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        yield from (name for name in names if name in MODULES)


def runtime_imports(path: Path) -> Iterator[str]:
    """The pimem modules *path* imports at run time (not under ``TYPE_CHECKING``)."""
    return imports(path)


GRAPH = {name: set(runtime_imports(path)) - {name} for name, path in MODULES.items()}
#: Every import, type-checking ones included: what a reader follows, and what may not loop.
EVERY_IMPORT = {name: set(imports(path, types=True)) - {name} for name, path in MODULES.items()}


def every_import(path: Path) -> Iterator[str]:
    """Every module *path* imports, anywhere in it (in functions, for types only) or not."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def plugin_modules() -> set[str]:
    """The module of every bundled plugin entry point."""
    distribution = importlib.metadata.distribution("pimem")
    return {
        entry_point.value.partition(":")[0]
        for entry_point in distribution.entry_points
        if entry_point.group == "pimem"
    }


def package_of(module: str) -> str:
    """A plugin's own package: ``pimem_plugins.memsearch`` for its modules, else the module."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 else module


def test_core_never_imports_a_plugin() -> None:
    wrong = {
        (name, imported)
        for name, imports in GRAPH.items()
        if name.startswith("pimem_core")
        for imported in imports
        if imported.startswith("pimem_plugins")
    }
    assert wrong == set()


def test_core_never_imports_a_backend_library() -> None:
    wrong = {
        (name, imported)
        for name, path in MODULES.items()
        if name.startswith("pimem_core")
        for imported in every_import(path)
        if imported.partition(".")[0] in BACKEND_LIBRARIES
    }
    assert wrong == set()


def plugin_sources() -> dict[str, Path]:
    """Every plugin module: pimem's bundled ones and the example third-party distributions'."""
    bundled = {name: path for name, path in MODULES.items() if name.startswith("pimem_plugins")}
    examples = {
        str(path.relative_to(ROOT)): path
        for path in sorted((ROOT / "examples").glob("*/src/**/*.py"))
    }
    return bundled | examples


@pytest.mark.parametrize("name", sorted(plugin_sources()))
def test_a_plugin_imports_pimem_only_through_the_plugin_api(name: str) -> None:
    # Held exactly as a third party is: what pimem_core.plugin names is the contract.
    imported = set(every_import(plugin_sources()[name]))
    wrong = {i for i in imported if i.partition(".")[0] == "pimem_core" and i != PLUGIN_API}
    assert wrong == set(), f"{name} imports pimem beside its plugin API"


def layer(module: str) -> str:
    """``api`` (the plugin API), ``kit`` (its test kit), ``doors``, ``runtime``, ``plugins`` or
    ``contract`` (the rest of ``pimem_core``)."""
    for prefix, name in (
        (PLUGIN_API, "api"),
        ("pimem_core.testing", "kit"),
        ("pimem_core.doors", "doors"),
        ("pimem_core.runtime", "runtime"),
        ("pimem_plugins", "plugins"),
    ):
        if module.startswith(prefix):
            return name
    return "contract"


#: Which layer may import which: the contract stands alone, the runtime builds on it, the
#: front doors on both; the plugin API stands on the contract floor, and plugins build on it
#: alone. The test kit builds on all but the plugins, in modules of its own.
MAY_IMPORT = {
    "contract": {"contract"},
    "runtime": {"contract", "runtime"},
    "doors": {"contract", "runtime", "doors"},
    "api": {"contract"},
    "kit": {"contract", "runtime", "doors", "api", "kit"},
    "plugins": {"api", "plugins"},
}


def test_each_layer_imports_only_the_layers_below() -> None:
    wrong = {
        (name, imported)
        for name, imports in GRAPH.items()
        if name != "pimem_core.__main__"  # ``python -m pimem_core`` is the launcher
        for imported in imports
        if layer(imported) not in MAY_IMPORT[layer(name)]
    }
    assert wrong == set()


#: The plugin API's most names: what a plugin needs and nothing more.
MAX_PLUGIN_API_NAMES = 70


def test_the_plugin_api_names_nothing_of_the_front_doors_or_the_facade() -> None:
    import pimem_core.plugin

    wrong = {
        name
        for name in pimem_core.plugin.__all__
        if getattr(getattr(pimem_core.plugin, name), "__module__", "").startswith(
            ("pimem_core.doors", "pimem_core.api", "pimem_core.runtime")
        )
    }
    assert wrong == set()
    for module in ("pimem_core.hookspecs", "pimem_core.command_table", PLUGIN_API):
        assert {layer(i) for i in every_import(MODULES[module]) if i in MODULES} <= {"contract"}, (
            module
        )


def test_the_plugin_api_is_small() -> None:
    import pimem_core.plugin

    assert len(pimem_core.plugin.__all__) <= MAX_PLUGIN_API_NAMES


@pytest.mark.parametrize("plugin", sorted(plugin_modules()))
def test_a_plugin_imports_only_shared_helpers_and_its_own_package(plugin: str) -> None:
    own = package_of(plugin)
    seen, todo = set(), [plugin]
    while todo:  # the plugin and every plugins module it brings in
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo += [
            i for i in GRAPH[name] if i.startswith("pimem_plugins") and not i.startswith(SHARED)
        ]
    others = {name for name in seen if name != "pimem_plugins" and package_of(name) != own}
    assert others == set(), f"{plugin} imports another plugin's modules"


def test_shared_helpers_implement_no_hook() -> None:
    for name, path in MODULES.items():
        if name.startswith(SHARED):
            assert "hookimpl" not in path.read_text(encoding="utf-8"), name


def cycle_from(start: str, graph: dict[str, set[str]]) -> list[str] | None:
    """A loop of imports in *graph* that leads from *start* back to it, or ``None``."""
    seen: set[str] = set()
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    while stack:
        name, path = stack.pop()
        for imported in graph[name]:
            if imported == start:
                return [*path, start]
            if imported not in seen:
                seen.add(imported)
                stack.append((imported, [*path, imported]))
    return None


def test_no_import_cycle() -> None:
    """No module imports itself back through others: at run time, in a function, or for types
    only (``if TYPE_CHECKING:``)."""
    cycles = [cycle for name in sorted(MODULES) if (cycle := cycle_from(name, EVERY_IMPORT))]
    assert cycles == []


def test_a_cycle_through_a_type_checking_import_is_found(tmp_path: Path) -> None:
    # The rule's own check: two modules that import each other, one only for its types.
    (tmp_path / "a.py").write_text("import b\n")
    (tmp_path / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\n"
    )
    graph = {
        name: {
            alias.name
            for node in ast.walk(ast.parse((tmp_path / f"{name}.py").read_text()))
            if isinstance(node, ast.Import)
            for alias in node.names
            if alias.name in ("a", "b")
        }
        for name in ("a", "b")
    }
    assert cycle_from("a", graph) == ["a", "b", "a"]


def floor(module: str) -> int:
    """*module*'s floor in the house: 1 for one that imports no other pimem module, else one
    above the highest it imports (every import, type-checking ones included). A call from a
    module to a function of a higher floor's is a call back up."""
    return _FLOORS[module]


def _floors() -> dict[str, int]:
    floors: dict[str, int] = {}

    def height(name: str, path: tuple[str, ...]) -> int:
        if name not in floors:
            assert name not in path, f"an import cycle: {[*path, name]}"
            below = [height(i, (*path, name)) for i in EVERY_IMPORT[name]]
            floors[name] = 1 + max(below, default=0)
        return floors[name]

    for name in MODULES:
        height(name, ())
    return floors


_FLOORS = _floors()


def test_no_process_wide_state() -> None:
    """No ``global`` statement, and no cache on a module-level function but the one pure memo
    of the offline model's recipe hash (installed files, unchanged while pimem runs)."""
    allowed = {("pimem_plugins.memsearch.offline_model", "revision")}
    found = set()
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                found.add((name, "global " + ", ".join(node.names)))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and any(
                ast.unparse(decorator).endswith(("cache", "lru_cache"))
                for decorator in node.decorator_list
            ):
                found.add((name, node.name))
    assert found == allowed


#: Sizes a reader can take in whole: a module, or a class, does one job.
MAX_MODULE_LINES = 500
MAX_CLASS_LINES = 300
#: The areas of the product the rule is checked in, by layer (:func:`layer`).
AREAS = ("contract", "api", "runtime", "doors", "kit", "plugins")


def sizes(area: str) -> dict[str, int]:
    """Every module of *area* and every class in it (``module.Class``), by its length in lines."""
    found = {}
    for name, path in MODULES.items():
        if layer(name) != area:
            continue
        text = path.read_text(encoding="utf-8")
        found[name] = len(text.splitlines())
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                found[f"{name}.{node.name}"] = node.end_lineno - node.lineno + 1
    return found


def limit(name: str) -> int:
    return MAX_MODULE_LINES if name in MODULES else MAX_CLASS_LINES


@pytest.mark.parametrize("area", AREAS)
def test_modules_and_classes_stay_small(area: str) -> None:
    """No module of the product (``pimem_core``, ``pimem_plugins``, their subpackages too) is over
    500 lines, and no class in them over 300."""
    too_long = {name: size for name, size in sizes(area).items() if size > limit(name)}
    assert too_long == {}, "split these along their seams"
