"""``pimem plugins`` lists the plugin groups, in its text and its JSON: each group's name (the
one ``PIMEM_USE`` and ``PIMEM_DISABLE_PLUGINS`` take), its package and its plugins, and a group
that is not used with why."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_plugin_groups import install_acme

from pimem_core.testing import RunPimem


def test_pimem_plugins_lists_the_plugin_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_pimem: RunPimem
) -> None:
    package = install_acme(tmp_path, monkeypatch, groups={"acme": "{package}", "empty": "nowhere"})
    listed = run_pimem("plugins", "--json", installed=True)
    assert listed.exit_code == 0, listed.stderr
    groups = {group["name"]: group for group in listed.json["groups"]}
    assert groups["acme"] == {
        "name": "acme",
        "distribution": "acme-backend",
        "package": package,
        "plugins": ["acme-index", "acme-llm"],
        "error": None,
    }
    assert groups["memsearch"]["package"] == "pimem_plugins.memsearch"
    assert "memsearch-index" in groups["memsearch"]["plugins"]
    assert groups["empty"]["error"] == "no plugin of acme-backend lies in nowhere"

    text = run_pimem("plugins", installed=True).stdout
    heading = "plugin groups (a name PIMEM_USE and PIMEM_DISABLE_PLUGINS take):"
    assert heading in text
    lines = text.split(heading, 1)[1].splitlines()
    assert f"  acme ({package}): acme-index, acme-llm" in lines
    assert "  empty: not used: no plugin of acme-backend lies in nowhere" in lines
