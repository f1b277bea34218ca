"""The ``memsearch-tools`` plugin: the commands only the memsearch backend needs, and the model
files its long-lived processes watch.

``pimem model install-offline`` writes the offline embedding model; ``pimem config
use-offline-model`` points memsearch's global configuration at it. Both run in the process that
was asked (the memory service takes only the core's memory commands).
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
from pimem_plugins.memsearch.config import use_offline_model
from pimem_plugins.memsearch.offline_model import (
    default_hf_home,
    describe_install,
    install_offline_model,
    repo_dir,
)


def _install(door: Door, a: Args) -> Outcome:
    report = install_offline_model(a["hf_home"], progress=lambda line: door.note(f"pimem: {line}"))
    return Outcome(text=describe_install(report), data=report.to_json())


def _use_offline_model(door: Door, a: Args) -> Outcome:
    choice = use_offline_model(door.scope().repository_dir)
    return Outcome(text=choice.describe(), data=choice.to_json())


COMMANDS = (
    Command(
        path=("model", "install-offline"),
        help="write all-MiniLM-L6-v2 as an ONNX model (about 87 MB) that loads with no network",
        handler=_install,
        project=False,
        params=(
            Param(
                name="hf_home",
                kind=FilePath(),
                flags=("--hf-home",),
                metavar="DIR",
                help="where to put the model",
            ),
        ),
        group_help="manage the offline embedding model",
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
