"""memsearch's configuration for a project, resolved the way memsearch resolves it (and written
once, at a zero-config start), and whether memsearch can run here at all."""

from __future__ import annotations

import importlib.metadata
import time
from pathlib import Path
from typing import Any

import attrs

from pimem_core.plugin import PimemError, Scope
from pimem_plugins.memsearch.config import config_files, global_config_path, project_config_path
from pimem_plugins.memsearch.errors import BackendUnavailable, install_instructions
from pimem_plugins.memsearch.offline_model import MODEL_ID, PROVIDER, installed_model

NEGATIVE_PROBE_SECONDS = 30.0


def zero_config() -> dict[str, dict[str, str]]:
    """The embedding settings that apply while no memsearch configuration exists: the onnx
    provider, as memsearch's own agent plugins choose, with pimem's offline model once it is
    installed (else memsearch's default onnx model, from the model hub)."""
    if installed_model() is None:
        return {"embedding": {"provider": PROVIDER}}
    return {"embedding": {"provider": PROVIDER, "model": MODEL_ID}}


@attrs.frozen
class Availability:
    version: str | None
    reason: str | None = None

    @property
    def available(self) -> bool:
        return self.reason is None


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


class Configurations:
    """memsearch's configuration per project, re-read only when its files change."""

    def __init__(self) -> None:
        self._probe: Availability | None = None
        self._probed_at = 0.0
        self.bootstrap_note = "not checked yet"
        self._configs: dict[tuple[Path, Path, str], tuple[tuple[object, ...], Any]] = {}
        #: Configurations made of pimem's zero-config defaults, no file: by id.
        self._zero_configs: dict[int, Any] = {}

    def availability(self) -> Availability:
        """Whether memsearch can be imported; a failure is re-checked after 30 s."""
        fresh = time.monotonic() - self._probed_at < NEGATIVE_PROBE_SECONDS
        if self._probe is not None and (self._probe.available or fresh):
            return self._probe
        try:
            import memsearch.core  # the import is the probe
            import memsearch.store  # noqa: F401

            self._probe = Availability(version=importlib.metadata.version("memsearch"))
        except Exception as error:  # noqa: BLE001 - any import failure: the backend cannot run
            self._probe = Availability(version=None, reason=f"memsearch failed to import ({error})")
        self._probed_at = time.monotonic()
        return self._probe

    def require(self) -> None:
        availability = self.availability()
        if availability.reason is not None:
            raise BackendUnavailable(install_instructions(availability.reason))

    def bootstrap(self, scope: Scope) -> None:
        """Zero-config start: with no memsearch configuration at all and the offline model
        installed, write the onnx provider and that model to memsearch's global configuration,
        so every agent of the mesh embeds alike. Without the model nothing is written: a
        configuration naming a model that is not there would hold back every other agent. An
        existing configuration is never changed."""
        if global_config_path().exists():
            self.bootstrap_note = f"not needed (existing config: {global_config_path()})"
            return
        if project_config_path(scope.repository_dir).exists():
            self.bootstrap_note = (
                f"not needed (existing config: {project_config_path(scope.repository_dir)})"
            )
            return
        if installed_model() is None:
            self.bootstrap_note = (
                "waiting for the offline model (`pimem model install-offline`); until then "
                "memsearch's onnx defaults apply, and no configuration is written"
            )
            return
        from memsearch.config import set_config_value

        try:
            with config_files(scope.repository_dir):
                set_config_value("embedding.provider", PROVIDER)
                set_config_value("embedding.model", MODEL_ID)
        except OSError as error:
            self.bootstrap_note = f"failed ({error})"
            return
        self.bootstrap_note = (
            f"set embedding.provider = {PROVIDER} and embedding.model = {MODEL_ID} "
            f"in {global_config_path()}"
        )

    def config(self, scope: Scope, *, bootstrap: bool = True) -> Any:
        """memsearch's resolved configuration for *scope*, re-read when its files change.

        With *bootstrap* false nothing is written (a read of a project the session does not
        own). With no configuration at all, :func:`zero_config` applies in memory.
        """
        self.require()
        if bootstrap:
            self.bootstrap(scope)
        files = (global_config_path(), project_config_path(scope.repository_dir))
        stamp = tuple(_stamp(path) for path in files)
        defaults = zero_config() if stamp == (None, None) else None
        key = (*files, str(defaults))
        cached = self._configs.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        from memsearch.config import ConfigEnvVarError, resolve_config

        try:
            with config_files(scope.repository_dir):
                config = resolve_config(default_overrides=defaults)
        except ConfigEnvVarError as error:
            raise PimemError(f"memsearch configuration error: {error}") from None
        except (OSError, ValueError) as error:
            raise PimemError(f"cannot read memsearch's configuration: {error}") from None
        self._configs[key] = (stamp, config)
        if defaults is not None:
            self._zero_configs[id(config)] = config
        return config

    def configured(self, config: Any) -> bool:
        """Whether a memsearch configuration file made *config*, not pimem's zero-config
        defaults: switching a configured model to the offline one is then the user's call."""
        return config is not self._zero_configs.get(id(config))
