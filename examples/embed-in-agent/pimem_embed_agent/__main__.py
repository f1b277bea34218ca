"""``embed-agent``: chat with a model that remembers, one user message a line.

The model is any OpenAI-compatible chat endpoint: ``--base-url`` (``OPENAI_BASE_URL``) and
``--model`` (``OPENAI_MODEL``), with ``OPENAI_API_KEY`` as its bearer token when set. Each
run is one session of pimem's memory for ``--cwd``: what the user says is captured when an
exchange settles, and found again by the next run.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

from pimem_core import Memory, PimemError
from pimem_embed_agent.agent import Agent
from pimem_embed_agent.model import ChatModel, ModelError


def transcripts_dir() -> Path:
    """Where conversations are kept: ``$XDG_STATE_HOME/embed-agent``, by default under
    ``~/.local/state``."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "embed-agent"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="embed-agent", description=__doc__.split("\n")[0])
    parser.add_argument("--cwd", type=Path, default=Path.cwd(), help="the project (default: .)")
    parser.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"))
    parser.add_argument("--model", default=os.environ.get("OPENAI_MODEL"))
    args = parser.parse_args(argv)
    if not args.base_url or not args.model:
        parser.error("give the model: --base-url and --model (or OPENAI_BASE_URL, OPENAI_MODEL)")
    model = ChatModel(
        base_url=args.base_url, model=args.model, api_key=os.environ.get("OPENAI_API_KEY")
    )
    session_id = uuid.uuid4().hex
    transcript = transcripts_dir() / f"{session_id}.jsonl"
    transcript.parent.mkdir(parents=True, exist_ok=True)
    try:
        memory = Memory.open(args.cwd)
        session = memory.session(model=model.complete, transcript=transcript, session_id=session_id)
    except PimemError as error:
        print(f"embed-agent: {error}", file=sys.stderr)
        return 1
    with session:  # ended on the way out: capture writes what it still holds
        agent = Agent(model, session, transcript)
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                answer = agent.ask(line.strip())
            except ModelError as error:
                print(f"embed-agent: {error}", file=sys.stderr)
                return 1
            print(answer, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
