"""The ``memsearch-tools`` plugin: the commands only the memsearch backend needs, and the model
files its long-lived processes watch.

``pimem model install-offline`` writes the offline embedding model and ``pimem model status``
says whether it is there; ``pimem config use-offline-model`` points memsearch's global
configuration at it. All run in the process that was asked (the memory service takes only the
core's memory commands); ``pimem setup pi`` runs them from the command table.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from pimem_core.plugin import (
    Args,
    Command,
    Door,
    FilePath,
    Outcome,
    Param,
    Settings,
    hookimpl,
)
from pimem_plugins.memsearch.config import (
    configured_embedding,
    global_config_path,
    use_offline_model,
)
from pimem_plugins.memsearch.offline_model import (
    MODEL_ID,
    PROVIDER,
    default_hf_home,
    describe_install,
    install_offline_model,
    is_installed,
    repo_dir,
)


def _install(door: Door, a: Args) -> Outcome:
    report = install_offline_model(a["hf_home"], progress=lambda line: door.note(f"pimem: {line}"))
    return Outcome(text=describe_install(report), data=report.to_json())


def _status(door: Door, a: Args) -> Outcome:
    hf_home = default_hf_home()
    installed = is_installed(hf_home)
    config = global_config_path()
    embedding = configured_embedding(config)
    if installed:
        model_line = f"offline model: {MODEL_ID}, installed in {hf_home}"
    else:
        model_line = (
            f"offline model: not installed (`pimem model install-offline` writes it to {hf_home})"
        )
    if embedding is None:
        config_line = (
            f"memsearch's configuration: none yet ({config}); pimem writes one that selects the "
            "offline model once it is installed"
        )
    else:
        provider, model = embedding
        chosen = f"{provider or 'no provider'} / {model or 'its default model'}"
        offline = " (the offline model)" if embedding == (PROVIDER, MODEL_ID) else ""
        config_line = f"memsearch's configuration: {config}, embedding with {chosen}{offline}"
    data = {
        "installed": installed,
        "hf_home": str(hf_home),
        "provider": PROVIDER,
        "model": MODEL_ID,
        "config": str(config),
        "config_exists": embedding is not None,
        "config_embedding": None
        if embedding is None
        else {"provider": embedding[0], "model": embedding[1]},
    }
    return Outcome(text=f"{model_line}\n{config_line}", data=data)


def _use_offline_model(door: Door, a: Args) -> Outcome:
    choice = use_offline_model(door.scope().repository_dir)
    return Outcome(text=choice.describe(), data=choice.to_json())


COMMANDS = (
    Command(
        path=("model", "install-offline"),
        help="write all-MiniLM-L6-v2 as an ONNX model (about 87 MB) that loads with no network",
        handler=_install,
        project=False,
        params=(Param.option("hf_home", "DIR", "where to put the model", kind=FilePath()),),
        group_help="manage the offline embedding model",
    ),
    Command(
        path=("model", "status"),
        help="whether the offline embedding model is installed, and what memsearch embeds with",
        handler=_status,
        project=False,
    ),
    Command(
        path=("config", "use-offline-model"),
        help="make memsearch embed with the offline model (its global configuration)",
        description="Set embedding.provider and embedding.model in memsearch's global "
        "configuration to the offline model, keeping every other setting.",
        handler=_use_offline_model,
        group_help="memsearch's configuration, as pimem uses it",
    ),
)


@hookimpl
def pimem_collect_commands() -> Iterable[Command]:
    return COMMANDS


@hookimpl
def pimem_collect_loaded_files(settings: Settings) -> Iterable[Path]:
    # Where memsearch's embedder loads the model from: a reinstall must restart the service.
    hf_home = os.environ.get("HF_HOME")
    return (repo_dir(Path(hf_home) if hf_home else default_hf_home()),)
