"""Skill candidates as people and agents read them: the same text for ``pimem skills`` and the
``memory_skills`` tool, and JSON for scripts. Installing is only ever an explicit request."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pimem_core.service_values import SkillCandidate


def candidate_to_json(candidate: SkillCandidate) -> dict[str, object]:
    data: dict[str, object] = {
        "name": candidate.name,
        "description": candidate.description,
        "path": str(candidate.path),
        "status": candidate.status,
        "pending": candidate.pending,
        "occurrences": candidate.occurrences,
        "sources": list(candidate.sources),
        "installed_paths": list(candidate.installed_paths),
        "updated_at": candidate.updated_at,
    }
    if candidate.text:
        data["text"] = candidate.text
    return data


def _label(candidate: SkillCandidate) -> str:
    if candidate.pending == "updated":
        return "updated since it was installed"
    if candidate.pending:
        return "new, not installed"
    return "installed" if candidate.status == "installed" else candidate.status


def render_candidates(candidates: Sequence[SkillCandidate]) -> str:
    if not candidates:
        return (
            "No skill candidates yet. The memory_to_skill maintenance task drafts them from "
            "workflows that recur in the memory (PIMEM_MAINTENANCE=memory_to_skill)."
        )
    pending = sum(1 for candidate in candidates if candidate.pending)
    lines = [f"{len(candidates)} skill candidate(s), {pending} pending install:", ""]
    for candidate in candidates:
        seen = f", seen {candidate.occurrences}x" if candidate.occurrences else ""
        lines.append(f"- {candidate.name} ({_label(candidate)}{seen}): {candidate.description}")
    lines += [
        "",
        "Nothing is installed until someone asks: show one, then install it into a skills "
        "directory.",
    ]
    return "\n".join(lines)


def render_candidate(candidate: SkillCandidate) -> str:
    head = [f"skill candidate {candidate.name} ({_label(candidate)})", f"file: {candidate.path}"]
    if candidate.sources:
        head.append(f"seen in: {', '.join(candidate.sources)}")
    if candidate.installed_paths:
        head.append(f"installed at: {', '.join(candidate.installed_paths)}")
    return "\n".join(head) + "\n\n" + candidate.text.rstrip() + "\n"


def render_installed(name: str, written: Sequence[Path]) -> str:
    places = ", ".join(str(path) for path in written)
    return f"Installed the skill {name} at {places}. The agent loads it from its next session on."
