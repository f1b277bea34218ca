"""The docs keep up with the code: every hook documented, every example a working plugin, every
plugin setting in the configuration table."""

from __future__ import annotations

import re
import types

import pytest

from pimem_core.hookspecs import PimemSpecs
from pimem_core.manager import PimemPluginManager

from conftest import REPO_ROOT, make_pimem

ROOT = REPO_ROOT
HOOK_DOCS = (ROOT / "docs" / "plugin-hooks.md").read_text()
EXAMPLES = re.findall(r"```python\n(.*?)```", HOOK_DOCS, re.DOTALL)
HOOKS = sorted(name for name in dir(PimemSpecs) if name.startswith("pimem_"))


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_is_documented_with_its_arguments(hook: str) -> None:
    caller = getattr(PimemPluginManager().hook, hook)
    heading = f"## {hook}({', '.join(caller.spec.argnames)})"
    assert re.search(rf"^{re.escape(heading)}$", HOOK_DOCS, re.MULTILINE), f"missing: {heading}"


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_has_an_example(hook: str) -> None:
    assert any(f"def {hook}(" in example for example in EXAMPLES)


@pytest.mark.parametrize("number", range(len(EXAMPLES)))
def test_every_example_registers_as_a_plugin(number: int) -> None:
    module = types.ModuleType(f"example_{number}")
    exec(compile(EXAMPLES[number], f"plugin-hooks.md example {number}", "exec"), module.__dict__)
    pm = PimemPluginManager()
    pm.add_plugin(module, "module")
    for name, value in vars(module).items():
        if isinstance(value, type) and any(attr.startswith("pimem_") for attr in vars(value)):
            pm.add_plugin(value(), name)
    assert any(pm.get_hookcallers(plugin) for plugin in pm.get_plugins())


CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text()


def test_every_declared_setting_is_documented_with_its_owner() -> None:
    """Each bundled plugin's setting has its row in configuration.md's table, owner included."""
    pm = make_pimem().pm
    rows = {
        found.group(1): found.group(2)
        for found in re.finditer(r"^\| `([A-Z_]+)` \| `?([^|`]+?)`? \|", CONFIGURATION, re.M)
    }
    specs = pm.declared_settings
    assert specs
    for spec in specs:
        assert rows.get(spec.env) == spec.plugin, f"{spec.env}: no row owned by {spec.plugin}"
