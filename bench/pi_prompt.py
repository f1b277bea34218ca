"""What pimem adds to every request pi sends its model, on both pi lines.

The scripted model server keeps each request's JSON. For each pi line and each store, one
``pi -p`` run without the adapter and one with it, in the same project with the same prompt
(capture off, so the store stays as it was); the added characters are those of the second
request beyond the first:

- ``tools``: the memory tools' definitions in the request's ``tools`` array, as compact JSON
  (as pi serializes it);
- ``snapshot``: what the adapter appends to the system prompt (pimem's instructions, then the
  latest entries; with an empty store the instructions alone);
- ``listing``: the rest of the system prompt's growth: the skills pi lists for the model (with
  pi's own paragraph that introduces them, which pi adds only when it has a skill to list) and
  the tools' lines in pi's "Available tools";
- ``total``: the three together: the characters pimem adds to every request of a session.

The skills' file paths are counted with the package's directory written as ``<package>``, so
that the figure does not depend on where pimem is installed: pi lists each skill with its path,
which adds that directory's length once per skill.

Two stores: an **empty** one (a project where nothing was written yet) and the **full** one the
pi part's latency runs use (300 entries; its last day as today, so the snapshot shows whole
sections).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bench.pi_host import ADAPTER_DIR, MODEL, ModelServer, PiLine, PiWorld, Rule, Text

#: What the adapter added before the cut (issue 38), measured with this bench at that commit.
TODAY_COMMIT = "29912e0"
TODAY: dict[str, dict[str, int]] = {
    "0.73": {"empty": 8525, "full": 13052},
    "1.6": {"empty": 8360, "full": 12887},
}
#: The issue's target: at most half of today's, with an empty store.
TARGET_SHARE = 0.5
PROMPT = "Rename the billing client's flush method."
#: How a skill's path is counted (see the module's docstring).
PACKAGE = "<package>"
#: Where the snapshot starts in the system prompt: the adapter appends it after a blank line.
SNAPSHOT_START = "\n\n## Project memory\n"
STORES = ("empty", "full")
SNAPSHOT_ATTEMPTS = 3


def _compact(value: Any) -> int:
    """Characters of *value* as compact JSON, as ``JSON.stringify`` writes it."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def _request(world: PiWorld, *, adapter: bool) -> Mapping[str, Any]:
    """The body of the agent's request for :data:`PROMPT`, with the adapter or without."""
    before = len(world.server.agent_requests())
    command = world.line.command("--model", MODEL, "-p", PROMPT, adapter=adapter)
    done = subprocess.run(
        command, cwd=world.repo, env=world.env, capture_output=True, timeout=120, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"pi {world.line.name} -p ({'with' if adapter else 'without'} the adapter) exited "
            f"with {done.returncode}: {done.stderr.decode(errors='replace')[-2000:]}"
        )
    requests = world.server.agent_requests()[before:]
    if not requests:
        raise RuntimeError(f"pi {world.line.name} sent the model no request")
    return requests[0].body


def _with_snapshot(world: PiWorld, log: Callable[[str], None]) -> Mapping[str, Any]:
    """The request with the adapter, once it carries the snapshot: a first prompt waits at
    most 3 s for its bridge, which a loaded machine may take to start (then pi goes on
    without memory, as it should, but that request says nothing of what pimem adds)."""
    for attempt in range(1, SNAPSHOT_ATTEMPTS + 1):
        body = _request(world, adapter=True)
        if SNAPSHOT_START in _system(body):
            return body
        log(f"pi {world.line.name}: no snapshot in request {attempt} (the bridge was late)")
    raise RuntimeError(f"pi {world.line.name}: no request carried the snapshot")


def _system(body: Mapping[str, Any]) -> str:
    messages = body.get("messages") or [{}]
    first = messages[0]
    content = first.get("content") if first.get("role") == "system" else ""
    return content if isinstance(content, str) else ""


def added(without: Mapping[str, Any], with_: Mapping[str, Any]) -> dict[str, Any]:
    """The characters the second request adds to the first, by part (see the docstring)."""
    system = _system(with_).replace(str(ADAPTER_DIR), PACKAGE)
    start = system.find(SNAPSHOT_START)
    snapshot = len(system) - start if start != -1 else 0
    listing = len(system) - snapshot - len(_system(without))
    ours = {tool["function"]["name"] for tool in with_.get("tools") or []} - {
        tool["function"]["name"] for tool in without.get("tools") or []
    }
    tools = sum(
        _compact(tool) + 1  # and the comma before it in the array
        for tool in with_.get("tools") or []
        if tool["function"]["name"] in ours
    )
    return {
        "tools": tools,
        "snapshot": snapshot,
        "listing": listing,
        "total": tools + snapshot + listing,
        "tool_count": len(ours),
        "body": _compact(with_) - _compact(without),
    }


def measure_line(
    line: PiLine,
    repos: Mapping[str, Path],
    root: Path,
    base_env: Mapping[str, str],
    now: str,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Per store in *repos*: the request without the adapter, the request with it, and what
    the second adds."""
    rule = Rule("any agent request", lambda request: not request.is_distillation, Text("Done."))
    stores: dict[str, Any] = {}
    with ModelServer([rule], max_requests=4 * len(repos) + 4) as server:
        for store, repo in repos.items():
            log(f"pi {line.name}: one request without the adapter and one with it, {store} store")
            world = PiWorld.create(
                line,
                repo=repo,
                agent_dir=root / f"agent-prompt-{line.name}-{store}",
                server=server,
                base_env=base_env,
                extra_env={"PIMEM_NOW": now, "PI_MEMSEARCH_CAPTURE": "off"},
            )
            without = _request(world, adapter=False)
            with_ = _with_snapshot(world, log)
            stores[store] = added(without, with_)
        failures = list(server.failures)
    if failures:
        raise RuntimeError(f"pi {line.name}: the model server saw {failures}")
    return stores


def empty_project(root: Path) -> Path:
    """A git project whose memory holds nothing yet."""
    repo = root / "empty-project"
    (repo / ".git").mkdir(parents=True, exist_ok=True)
    return repo


def targets(lines: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per pi line: pimem adds at most half of today's characters with an empty store."""
    checks = []
    for name, stores in sorted(lines.items()):
        today = TODAY.get(name, {}).get("empty")
        if today is None or "empty" not in stores:
            continue
        limit = today * TARGET_SHARE
        measured = stores["empty"]["total"]
        checks.append(
            {
                "target": f"pi {name}: pimem adds <= {limit:,.0f} characters to a request with "
                f"an empty store (half of {today:,} at {TODAY_COMMIT})",
                "chunks": None,
                "measured": f"{measured:,} characters",
                "met": measured <= limit,
            }
        )
    return checks


def render(prompt: Mapping[str, Mapping[str, Any]]) -> str:
    """The section's table: per line and store, today's characters beside now's, by part."""
    rows = []
    for name, stores in sorted(prompt.items()):
        for store in STORES:
            if store not in stores:
                continue
            now = stores[store]
            today = TODAY.get(name, {}).get(store)
            share = f" ({now['total'] / today:.0%})" if today else ""
            rows.append(
                "| "
                + " | ".join(
                    (
                        f"pi {name}",
                        store,
                        f"{today:,}" if today else "-",
                        f"{now['total']:,}{share}",
                        f"{now['tools']:,}",
                        f"{now['snapshot']:,}",
                        f"{now['listing']:,}",
                    )
                )
                + " |"
            )
    header = (
        "| pi | store | today | now | tools | snapshot | skills and tool lines |\n"
        "|---|---|---|---|---|---|---|"
    )
    return header + "\n" + "\n".join(rows)


def merge(path: Path, prompt: Mapping[str, Any]) -> None:
    """Put *prompt* into the pi part's results at *path*, its targets with them, leaving the
    latency runs as they are."""
    results = json.loads(path.read_text(encoding="utf-8"))
    kept = [t for t in results.get("targets", []) if "characters to a request" not in t["target"]]
    results["prompt"] = prompt
    results["targets"] = kept + targets(prompt)
    path.write_text(json.dumps(results, separators=(",", ":")) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Measure both pi lines on an empty store and a 300-entry one and print the table
    (``python -m bench.pi_prompt [--merge PI_JSON]``); with ``--merge``, also put the
    figures into the pi part's results (``bench/results/pi/pi.json``), so that ``python -m
    bench --report-only`` publishes them without measuring latency again. The pi part of
    ``python -m bench`` measures them with the rest."""
    import argparse
    import tempfile

    from bench import pi_latency
    from bench.pi_host import PI_LINES
    from pimem_plugins.memsearch.offline_model import install_offline_model

    parser = argparse.ArgumentParser(prog="python -m bench.pi_prompt", description=__doc__)
    parser.add_argument("--merge", type=Path, metavar="PI_JSON")
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    model = install_offline_model(progress=log).model
    with tempfile.TemporaryDirectory(prefix="pimem-prompt-") as scratch:
        project = pi_latency.prepare_project(Path(scratch) / "pi", pi_latency.PI_FULL, model)
        try:
            results = {
                name: measure_line(
                    line,
                    {"empty": empty_project(project.root), "full": project.repo},
                    project.root,
                    project.env,
                    project.now,
                    log,
                )
                for name, line in sorted(PI_LINES.items())
                if line.missing() is None
            }
        finally:
            pi_latency.stop_services(project.env)
    if args.merge is not None:
        merge(args.merge, results)
    print(render(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
