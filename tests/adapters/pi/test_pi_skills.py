"""The pi adapter's skills follow the Agent Skills format pi loads: a frontmatter ``name`` equal
to the directory's name and a one-line ``description`` of at most 1024 characters."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import REPO_ROOT

SKILLS = REPO_ROOT / "adapters" / "pi" / "skills"


@pytest.mark.parametrize("skill", sorted(SKILLS.glob("*/SKILL.md")), ids=lambda p: p.parent.name)
def test_skill_frontmatter(skill: Path) -> None:
    text = skill.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    head, body = text[4:].split("\n---\n", 1)
    fields = dict(line.split(": ", 1) for line in head.splitlines())
    assert set(fields) == {"name", "description"}
    assert fields["name"] == skill.parent.name
    assert 0 < len(fields["description"]) <= 1024
    assert body.strip().startswith("# ")


def test_the_adapter_ships_its_skills() -> None:
    assert {path.parent.name for path in SKILLS.glob("*/SKILL.md")} >= {
        "recall",
        "memory-diagnosis",
        "skill-drafting",
    }
