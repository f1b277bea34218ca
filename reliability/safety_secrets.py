"""Scenario 4, secrets: planted keys and tokens never reach disk or a model.

Fuzzed: entries with a secret somewhere in the text go through ``Pimem.append_entry`` (the
path ``memory_write`` and capture share); not one 12-character window of a secret may be in
the daily memory file. Then real processes on real memsearch: a bridge session captures
exchanges full of secrets (through the host's model, an HTTP distiller and the extractive
distiller), writes them with ``memory.write``, indexes, and compacts with an LLM that echoes
secrets back. What the models received, every byte under the sandbox and every chunk in the
collection are searched for the secrets.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

from hypothesis import strategies as st

from pimem_core import Pimem
from pimem_core.errors import StoreError
from pimem_core.types import Anchor, Entry
from reliability.fuzzing import run_property
from reliability.host import Bridge, SessionFile, start_params
from reliability.outcome import Outcome
from reliability.sandbox import Sandbox, environment, make_sandbox, offline_model
from reliability.secrets_corpus import Secret, secrets

DELIMITERS = [
    " ",
    "\n",
    "\t",
    "'",
    '"',
    "`",
    "(",
    ")",
    ", ",
    "; ",
    ": ",
    "= ",
    "\r\n",
    "> ",
    "- ",
    "\n\n",
]
PROSE = st.text(alphabet=st.sampled_from("abcdefgh ijk.,é\n"), max_size=40)


class Recorder(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that records every request and answers ``reply``."""

    bodies: ClassVar[list[str]] = []
    reply: ClassVar[str] = "- nothing to report"

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        Recorder.bodies.append(body)
        content = json.dumps(
            {
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": Recorder.reply},
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    def log_message(self, *args: object) -> None:
        pass


def _leaks(planted: list[Secret], data: str) -> list[str]:
    return [secret.kind for secret in planted if secret.leaked_in(data)]


def fuzz(outcome: Outcome, examples: int, seed_value: int) -> None:
    planted = secrets(seed_value)
    with tempfile.TemporaryDirectory(prefix="pimem-rel-secrets-fuzz-") as scratch:
        box = make_sandbox(Path(scratch))
        env = box.env({"PIMEM_DISABLE_PLUGINS": "memsearch-index"})
        with environment(env):
            pimem = Pimem.from_env(env)
            scope = pimem.resolve_scope(box.project)

            def check(case: Any) -> None:
                index, before, left, right, after = case
                secret = planted[index]
                if secret.kind == "env-password" and right == "(":
                    # ``NAME=value(`` reads as code (a call), which the scrubber leaves alone
                    # by design so ``TOKEN=get_token()`` stays as it is.
                    right = " ("
                content = f"- {before}{left}{secret.text}{right}{after}"
                box.day_file.unlink(missing_ok=True)
                try:
                    entry = Entry(
                        anchor=Anchor(session="s", turn="t", transcript="/t"),
                        content=content,
                        written_at=pimem.settings.now(),
                    )
                except StoreError:
                    return  # not an entry at all (a heading in it): nothing is written
                pimem.append_entry(scope, entry)
                written = box.day_file.read_text(encoding="utf-8")
                assert not secret.leaked_in(written), f"{secret.kind} reached the day file"
                sent = pimem.scrubber.scrub(content)
                assert not secret.leaked_in(sent), f"{secret.kind} would reach a distiller"

            run_property(
                outcome,
                st.tuples(
                    st.integers(0, len(planted) - 1),
                    PROSE,
                    st.sampled_from(DELIMITERS),
                    st.sampled_from(DELIMITERS),
                    PROSE,
                ),
                check,
                examples=examples,
                seed_value=seed_value,
                label="secrets",
            )


def _session(box: Sandbox, planted: list[Secret], name: str, extra: dict[str, str]) -> list[str]:
    """One bridge session: an exchange and a ``memory.write`` per secret; the host's prompts."""
    # The host's session file holds the conversation as said: it is the host's, kept apart.
    transcript = SessionFile(box.root.parent / f"{name}.jsonl", f"s-{name}")
    bridge = Bridge(box, extra)
    bridge.call("session.start", **start_params(box, transcript))
    for secret in planted:
        leaf = transcript.exchange(
            f"deploy with {secret.text} please", f"Done: I configured {secret.text} for you."
        )
        bridge.call("session.settled", leaf=leaf)
        bridge.call(
            "memory.write", content=f"- the {secret.kind} credential is {secret.text}", turn=leaf
        )
    bridge.call("session.shutdown", timeout=120)
    bridge.close()
    return [json.dumps(params) for params in bridge.asked]


def run(quick: bool, seed_value: int) -> Outcome:
    outcome = Outcome(
        scenario="Safety: secrets",
        load="",
        faults="secret-shaped strings in prompts, answers, memory.write and LLM summaries",
    )
    started = time.perf_counter()
    fuzz(outcome, 300 if quick else 5000, seed_value)
    planted = secrets(seed_value + 1)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    Recorder.bodies.clear()
    try:
        with tempfile.TemporaryDirectory(prefix="pimem-rel-secrets-") as scratch:
            box = make_sandbox(Path(scratch) / "box", offline_model())
            sent = _session(box, planted, "host", {})
            paths = 3  # the host's model and memory.write, compaction
            if not quick:
                http = {
                    "PIMEM_DISTILLER": "http",
                    "PIMEM_DISTILL_URL": url,
                    "PIMEM_DISTILL_MODEL": "m",
                }
                sent += _session(box, planted, "http", http)
                sent += _session(box, planted, "extractive", {"PIMEM_DISTILLER": "extractive"})
                paths += 4
            config = box.home / ".memsearch" / "config.toml"
            config.write_text(
                config.read_text()
                + f'\n[llm]\nprovider = "openai"\nmodel = "m"\nbase_url = "{url}"\napi_key = "k"\n'
            )
            Recorder.reply = "- summary\n" + "\n".join(f"- {s.kind}: {s.text}" for s in planted)
            compact = box.pimem("compact", timeout=300)
            outcome.expect(compact.returncode == 0, f"compaction failed: {compact.stderr[-300:]}")
            outcome.expect(
                not _leaks(planted, compact.stdout), "the compaction summary shown has secrets"
            )
            sent += Recorder.bodies
            outcome.expect(
                not _leaks(planted, "\n".join(sent)),
                f"a model received secrets: {_leaks(planted, chr(10).join(sent))}",
            )
            text = box.day_file.read_text(encoding="utf-8")
            outcome.expect("## Memory Compact" in text, "the compaction block is missing")
            outcome.expect(
                text.count("[REDACTED:") >= 3 * len(planted),
                "fewer placeholders than planted secrets",
            )
            files = [p for p in box.root.rglob("*") if p.is_file() and not p.is_symlink()]
            on_disk = [
                f"{p.relative_to(box.root)}: {kind}"
                for p in files
                for kind in _leaks(planted, p.read_bytes().decode("latin-1"))
            ]
            outcome.expect(not on_disk, f"secrets on disk: {on_disk[:5]}")
            verify = box.root / "verify.json"
            args = {
                "project": str(box.project),
                "tokens": [s.value for s in planted],
                "sample": 0,
                "seed": 1,
                "result": str(verify),
            }
            done = subprocess.run(
                [sys.executable, "-m", "reliability.workers", "verify", json.dumps(args)],
                env=box.env(),
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            chunks = json.loads(verify.read_text()) if done.returncode == 0 else {}
            outcome.expect(
                chunks.get("missing_count") == len(planted),
                f"secrets in the collection's chunks: {len(planted) - chunks.get('missing_count', 0)}",
            )
            outcome.details["files_scanned"] = len(files)
            outcome.details["chunks_scanned"] = chunks.get("chunks")
            outcome.details["model_requests_scanned"] = len(sent)
    finally:
        server.shutdown()
        server.server_close()
    outcome.inputs += len(planted) * paths
    outcome.load = (
        f"{outcome.inputs - len(planted) * paths} fuzzed entries; {len(planted)} secret shapes "
        "through capture ("
        + ("the host's model" if quick else "host model, HTTP, extractive")
        + "), memory.write and compaction"
    )
    outcome.seconds = time.perf_counter() - started
    return outcome
