"""Which embedding model memsearch will load, whether it is on this machine, and loading it.

memsearch's ``onnx`` provider fetches a model that is missing from the local cache from the
model hub, and with no network its retries take about 24 s before a long error. pimem looks
first: a model on disk is loaded, a missing one whose hub can be reached is left to memsearch's
own download, and a missing one that cannot be fetched fails at once, in one line that names
the model and the pimem command that provides one.

pimem's offline model is loaded from pimem's data directory directly, so no variable has to
tell the Hugging Face libraries where it is.
"""

from __future__ import annotations

import socket
import threading
import urllib.parse
from pathlib import Path
from typing import Any

import attrs

from pimem_core.plugin import PimemError
from pimem_plugins.memsearch.compat import onnx_provider_from_files
from pimem_plugins.memsearch.offline_model import MODEL_ID, PROVIDER, installed_model

#: How long the model hub gets to answer a connection before it counts as unreachable.
HUB_PROBE_SECONDS = 2.0
INSTALL = "`pimem model install-offline`"
SWITCH = "`pimem config use-offline-model`"


class EmbeddingModelMissing(PimemError):
    """The configured embedding model is not on this machine and cannot be fetched now."""


@attrs.frozen(kw_only=True)
class ModelCheck:
    """What a look at the disk (and, if asked, the hub) says about one embedding model."""

    provider: str
    model: str
    #: The model's files on this machine, when they are there.
    location: Path | None = None
    #: Why the model cannot be loaded now, with the command that fixes it.
    problem: str | None = None
    #: A model memsearch will download on first use (its hub is reachable, or was not asked).
    downloads: bool = False

    def describe(self) -> str:
        """The status line's words: the model and where it comes from."""
        if self.location is not None:
            return f"{self.model} (on this machine: {self.location})"
        if self.problem is not None:
            return f"{self.model} ({self.problem})"
        if self.downloads:
            return f"{self.model} (not on this machine yet: memsearch downloads it on first use)"
        return f"{self.model} (provided by {self.provider})"


def resolved_model(provider: str, model: str) -> str:
    """The model memsearch loads for *provider* when *model* may be empty (its default)."""
    if model:
        return model
    from memsearch.embeddings import DEFAULT_MODELS

    return str(DEFAULT_MODELS.get(provider, ""))


def check_model(provider: str, model: str, *, configured: bool, ask_hub: bool) -> ModelCheck:
    """Where *provider*'s *model* would come from; never loads it.

    *configured* says whether a memsearch configuration file chose the model (then switching
    to the offline model is the user's call); *ask_hub* allows a connection attempt to the
    model hub (at most :data:`HUB_PROBE_SECONDS`) for a model that is not on this machine.
    """
    model = resolved_model(provider, model)
    if provider != PROVIDER:
        return ModelCheck(provider=provider, model=model)  # a service: memsearch's own errors
    location = _on_this_machine(model)
    if location is not None:
        return ModelCheck(provider=provider, model=model, location=location)
    if model == MODEL_ID:
        return ModelCheck(
            provider=provider,
            model=model,
            problem=f"not installed on this machine: run {INSTALL}",
        )
    if not ask_hub:
        return ModelCheck(provider=provider, model=model, downloads=True)
    unreachable = hub_unreachable()
    if unreachable is None:
        return ModelCheck(provider=provider, model=model, downloads=True)
    fix = f"run {INSTALL}, then {SWITCH}" if configured else f"run {INSTALL}"
    return ModelCheck(
        provider=provider,
        model=model,
        problem=(
            f"not on this machine, and the model hub cannot be reached to download it "
            f"({unreachable}); for a model that needs no network, {fix}"
        ),
    )


def _offline_files() -> tuple[Path, Path] | None:
    """The offline model's tokenizer and graph in pimem's data directory, when installed."""
    offline = installed_model()
    return None if offline is None else offline.files()


def _on_this_machine(model: str) -> Path | None:
    files = _offline_files() if model == MODEL_ID else None
    if files is not None:
        return files[1].parent
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(model, "tokenizer.json")
    return Path(cached).parent if isinstance(cached, str) else None


def hub_unreachable() -> str | None:
    """Why the model hub cannot be reached now, or ``None`` when it answers a connection."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return "HF_HUB_OFFLINE is set"
    url = urllib.parse.urlsplit(constants.ENDPOINT)
    host = url.hostname or ""
    port = url.port or (443 if url.scheme == "https" else 80)
    outcome: list[str | None] = []

    def connect() -> None:
        try:
            socket.create_connection((host, port), timeout=HUB_PROBE_SECONDS).close()
            outcome.append(None)
        except OSError as error:
            outcome.append(f"{host}: {error.strerror or error}")

    # A resolver can hang past any socket timeout: the probe runs aside, and is waited for.
    probe = threading.Thread(target=connect, name="pimem-hub-probe", daemon=True)
    probe.start()
    probe.join(HUB_PROBE_SECONDS + 0.5)
    return outcome[0] if outcome else f"{host}: no answer in {HUB_PROBE_SECONDS:.0f} s"


def load_embedder(provider: str, model: str, *, configured: bool, options: dict[str, Any]) -> Any:
    """memsearch's embedding provider for *model*, after checking it can be had.

    Raises :class:`EmbeddingModelMissing` at once when it cannot.
    """
    check = check_model(provider, model, configured=configured, ask_hub=True)
    if check.problem is not None:
        raise EmbeddingModelMissing(f"the embedding model {check.model} is {check.problem}")
    files = _offline_files() if provider == PROVIDER and check.model == MODEL_ID else None
    if files is not None:
        return onnx_provider_from_files(
            check.model, *files, batch_size=options.get("batch_size") or 0
        )
    from memsearch.embeddings import get_provider

    return get_provider(provider, model=model or None, **options)
