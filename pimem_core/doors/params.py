"""A host protocol request's params (``pimem serve``, :mod:`pimem_core.doors.serve`), read with
their types checked: a wrong one is a ``request`` error, never a crash."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pimem_core.command_table import UsageError
from pimem_core.errors import PimemError
from pimem_core.runtime.host_model import ModelRef, model_ref_from_json
from pimem_core.types import BranchEntry

#: A request the server cannot act on (unknown method, missing or wrong-typed params).
RequestError = UsageError


class Params:
    """A request's params, read with their types checked."""

    def __init__(self, raw: object, progress: Callable[[str], None] = lambda text: None) -> None:
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise RequestError("params must be a JSON object")
        self.raw: dict[str, Any] = raw
        #: Tells the host what a queued request waits on.
        self.progress = progress

    def text(self, name: str, *, required: bool = True) -> str:
        value = self.raw.get(name)
        if value is None and not required:
            return ""
        if not isinstance(value, str) or (required and not value):
            raise RequestError(f'"{name}" must be a non-empty string')
        return value

    def optional_text(self, name: str) -> str | None:
        value = self.raw.get(name)
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise RequestError(f'"{name}" must be a string')
        return value

    def flag(self, name: str, default: bool) -> bool:
        value = self.raw.get(name, default)
        if not isinstance(value, bool):
            raise RequestError(f'"{name}" must be true or false')
        return value

    def path(self, name: str) -> Path:
        return _path(name, self.text(name))

    def optional_path(self, name: str) -> Path | None:
        value = self.optional_text(name)
        return None if value is None else _path(name, value)

    def model(self, name: str) -> ModelRef | None:
        raw = self.raw.get(name)
        if raw is None:
            return None
        try:
            return model_ref_from_json(raw)
        except PimemError as error:
            raise RequestError(f'"{name}": {error}') from None

    def models(self, name: str) -> tuple[ModelRef, ...]:
        raw = self.raw.get(name)
        if raw is None:
            return ()
        if not isinstance(raw, list):
            raise RequestError(f'"{name}" must be a list of models')
        try:
            return tuple(model_ref_from_json(item) for item in raw)
        except PimemError as error:
            raise RequestError(f'"{name}": {error}') from None

    def branch(self) -> tuple[BranchEntry, ...] | None:
        raw = self.raw.get("branch")
        if raw is None:
            return None
        if not isinstance(raw, list):
            raise RequestError('"branch" must be a list of entries')
        try:
            return tuple(
                BranchEntry(
                    id=str(item["id"]),
                    kind=item.get("kind", "message"),
                    role=item.get("role", "other"),
                    text=str(item.get("text", "")),
                    tool_calls=tuple(str(call) for call in item.get("tool_calls", ())),
                    aborted=bool(item.get("aborted", False)),
                )
                for item in raw
            )
        except (KeyError, TypeError, AttributeError) as error:
            raise RequestError(f'"branch" entries need an "id" and text fields ({error})') from None


def _path(name: str, value: str) -> Path:
    # The operating system refuses a NUL in a path with a ValueError: a wrong request, not a bug.
    if "\x00" in value:
        raise RequestError(f'"{name}" must be a path, without NUL characters')
    return Path(value)
