"""memsearch's configuration files, as every agent of the mesh reads them, and the one change
pimem makes to them on request: choosing the offline embedding model.

memsearch resolves its settings from the global ``~/.memsearch/config.toml``, then the
project's ``.memsearch.toml`` in the repository directory. It reads the project file relative
to the working directory and fixes the global path at import; an agent's process has neither
in the right place, so :func:`config_files` points both at the right files for one call.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from pimem_core.plugin import PimemError, Scope, SettingSpec
from pimem_plugins.memsearch.compat import config_paths
from pimem_plugins.memsearch.offline_model import MODEL_ID, PROVIDER, installed_model


def global_config_path() -> Path:
    """memsearch's global configuration, looked up now (not when memsearch was imported)."""
    return Path.home() / ".memsearch" / "config.toml"


#: ``${NAME}`` in a configuration value: memsearch takes the variable's value there.
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def configured_settings() -> tuple[SettingSpec[str | None], ...]:
    """The variables memsearch's global configuration names (``${OPENAI_API_KEY}``), declared
    as settings of the index: what it answers depends on them as on the file, so a memory
    service keeps them and one started with other values is another service. A project's
    own file is not read here: it is read per call, in the repository."""
    try:
        text = global_config_path().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ()
    names = sorted(set(_VARIABLE.findall(text))) if "${" in text else []
    return tuple(
        SettingSpec.text(
            plugin="memsearch-index",
            name=name.lower(),
            env=name,
            help=f"named by memsearch's configuration ({global_config_path()})",
            secret=True,
        )
        for name in names
    )


def project_config_path(repository_dir: Path) -> Path:
    return repository_dir / ".memsearch.toml"


def config_files(repository_dir: Path) -> contextlib.AbstractContextManager[None]:
    """memsearch's config lookup pointed at this user's and *repository_dir*'s files, for one
    call (only one thread at a time uses memsearch in pimem)."""
    return config_paths(global_config_path(), project_config_path(repository_dir))


@attrs.frozen(kw_only=True)
class ModelChoice:
    """What :func:`use_offline_model` found and did."""

    path: Path
    before: tuple[str, str]
    changed: bool
    #: A project file whose own ``[embedding]`` outranks the global choice, if there is one.
    overridden_by: Path | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "config": str(self.path),
            "provider": PROVIDER,
            "model": MODEL_ID,
            "before": {"provider": self.before[0], "model": self.before[1]},
            "changed": self.changed,
            "overridden_by": None if self.overridden_by is None else str(self.overridden_by),
        }

    def describe(self) -> str:
        provider, model = self.before
        if not self.changed:
            said = f"memsearch already embeds with {MODEL_ID} ({self.path})."
        else:
            said = (
                f"memsearch now embeds with {PROVIDER} / {MODEL_ID} ({self.path}; it was "
                f"{provider or 'unset'} / {model or 'its default model'}). Collections indexed "
                "with another model have vectors of another size: index them again."
            )
        if self.overridden_by is not None:
            said += (
                f" {self.overridden_by} sets its own [embedding], which wins in that project: "
                "edit it there."
            )
        return said


def _embedding(path: Path) -> tuple[str, str]:
    from memsearch.config import load_config_file

    section: dict[str, Any] = load_config_file(path).get("embedding", {})
    return str(section.get("provider", "")), str(section.get("model", ""))


def configured_embedding(path: Path) -> tuple[str, str] | None:
    """The provider and model a configuration file names (``""`` for a missing one), or
    ``None`` when there is no such file. Raises :class:`PimemError` for a file memsearch
    cannot read."""
    if not path.is_file():
        return None
    try:
        return _embedding(path)
    except (OSError, ValueError) as error:
        raise PimemError(f"cannot read memsearch's configuration {path}: {error}") from None


def use_offline_model(repository_dir: Path) -> ModelChoice:
    """Choose pimem's offline model in memsearch's global configuration, keeping every other
    setting. Raises :class:`PimemError` when the model is not installed."""
    if installed_model() is None:
        raise PimemError(
            f"the offline model {MODEL_ID} is not installed: run `pimem model install-offline` "
            "first"
        )
    path = global_config_path()
    try:
        before = _embedding(path)
        changed = before != (PROVIDER, MODEL_ID)
        if changed:
            from memsearch.config import set_config_value

            with config_files(repository_dir):
                set_config_value("embedding.provider", PROVIDER)
                set_config_value("embedding.model", MODEL_ID)
        project = project_config_path(repository_dir)
        overridden = project.is_file() and any(_embedding(project))
    except (OSError, ValueError) as error:
        raise PimemError(f"cannot update memsearch's configuration {path}: {error}") from None
    return ModelChoice(
        path=path, before=before, changed=changed, overridden_by=project if overridden else None
    )


def child_environment(scope: Scope, base: Mapping[str, str]) -> dict[str, str]:
    """The environment for a memsearch process working on *scope*'s store: a store command's
    ``state-dir`` answer becomes its ``MEMSEARCH_DIR``; otherwise *base*'s is kept as it is."""
    env = dict(base)
    env["PYTHONIOENCODING"] = "utf-8"
    if scope.state_dir is not None:
        env["MEMSEARCH_DIR"] = str(scope.state_dir)
    return env
