"""Fuzzing store-command output: whatever a resolver prints, exits with or dies of.

Resolution either fails with a ``ScopeError`` naming the command and mode, or yields a store
pimem can use: absolute paths free of control characters and a valid collection name. Most
inputs are handed to the output handling in-process (the command's run replaced by the fuzzed
result); a smaller share goes through a real executable that prints the fuzzed bytes.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

import attrs
from hypothesis import strategies as st

from pimem_core.errors import ScopeError
from pimem_core.settings import Settings
from pimem_core.types import COLLECTION_NAME, Scope
from pimem_plugins import store_command
from pimem_plugins.store_command import COMMAND, Mode, StoreCommand, StoreCommandScope
from reliability.fuzzing import run_property
from reliability.outcome import Outcome

MODES: tuple[Mode, ...] = ("memory-dir", "collection", "state-dir")
OUTPUTS = st.one_of(
    st.binary(max_size=60),
    st.sampled_from(
        [
            b"",
            b"\n",
            b"/abs/memory\n",
            b"relative/memory",
            b"/a\x00b",
            b"/a\nb",
            b"ms_ok_12345678",
            b"9starts_with_digit",
            b"/tmp/\xff\xfe",
            b" /padded/memory \n\n",
            b"/a\rb",
            b"/" * 5000,
        ]
    ),
    st.text(max_size=40).map(lambda text: text.encode("utf-8", "surrogatepass")),
)


@attrs.frozen
class Reply:
    """How one mode's run ends: output and exit status, or a timeout or spawn failure."""

    stdout: bytes
    stderr: bytes
    returncode: int
    failure: str | None = None


REPLIES = st.builds(
    Reply,
    stdout=OUTPUTS,
    stderr=st.one_of(st.just(b""), st.binary(max_size=40)),
    returncode=st.sampled_from([0, 0, 0, 1, 2, 127, -9, -15]),
    failure=st.sampled_from([None, None, None, None, None, "timeout", "oserror"]),
)
CASES = st.fixed_dictionaries(dict.fromkeys(MODES, REPLIES))


def check_scope(scope: Scope) -> None:
    """A resolved store is usable: absolute paths, no control characters, a valid collection."""
    for path in (scope.memory_dir, scope.state_dir):
        if path is None:
            continue
        text = str(path)
        assert os.path.isabs(text), f"a relative store path was accepted: {text!r}"
        assert not any(ord(c) < 32 for c in text), f"a control character was accepted: {text!r}"
    assert COLLECTION_NAME.fullmatch(scope.collection), scope.collection


def _resolve(command: str, cwd: Path) -> None:
    try:
        scope = StoreCommandScope().pimem_resolve_scope(
            cwd, Settings().with_values((COMMAND, command))
        )
    except ScopeError as error:
        refusal = str(error)
    else:
        check_scope(scope)
        return
    assert command in refusal, f"the error does not name the command: {refusal}"


def run_in_process(outcome: Outcome, examples: int, seed_value: int, cwd: Path) -> None:
    def check(case: Any) -> None:
        class Scripted(StoreCommand):
            def _execute(self, mode: Mode, directory: str) -> subprocess.CompletedProcess[bytes]:
                reply: Reply = case[mode]
                if reply.failure == "timeout":
                    raise subprocess.TimeoutExpired([self.command, mode], 1)
                if reply.failure == "oserror":
                    raise PermissionError(13, "Permission denied")
                return subprocess.CompletedProcess(
                    [self.command, mode], reply.returncode, reply.stdout, reply.stderr
                )

        with mock.patch.object(store_command, "StoreCommand", Scripted):
            _resolve("/fuzz/resolver", cwd)

    run_property(
        outcome, CASES, check, examples=examples, seed_value=seed_value, label="store-command"
    )


def run_real(outcome: Outcome, examples: int, seed_value: int, scratch: Path) -> None:
    """The same through a real executable: ``<script> <mode>`` prints what the case says."""
    script = scratch / "resolver"
    replies = scratch / "replies"
    replies.mkdir()
    script.write_text(
        "#!/bin/sh\n"
        f'd="{replies}/$1"\n'
        'cat "$d/out"; cat "$d/err" >&2\n'
        'read code < "$d/code"; exit "$code"\n'
    )
    script.chmod(0o755)

    def check(case: Any) -> None:
        for mode in MODES:
            reply: Reply = case[mode]
            folder = replies / mode
            folder.mkdir(exist_ok=True)
            (folder / "out").write_bytes(reply.stdout)
            (folder / "err").write_bytes(reply.stderr)
            (folder / "code").write_text(f"{max(reply.returncode, 0)}\n")
        _resolve(str(script), scratch)

    run_property(
        outcome, CASES, check, examples=examples, seed_value=seed_value, label="store-command-real"
    )


def run(outcome: Outcome, examples: int, seed_value: int) -> None:
    with tempfile.TemporaryDirectory(prefix="pimem-fuzz-store-") as scratch:
        run_in_process(outcome, examples - examples // 10, seed_value, Path(scratch))
        run_real(outcome, examples // 10, seed_value, Path(scratch))
