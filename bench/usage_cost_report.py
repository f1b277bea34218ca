"""The usage part's section of the benchmark page, from its JSON alone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench import report
from bench.usage_cost import LEVEL, NEGLIGIBLE_MS, STEPS, TARGET_BYTES_PER_EXCHANGE

LABELS = {"before_agent_start": "`before_agent_start`", "memory_search": "`memory_search` call"}


def _ms(value: float) -> str:
    return f"{value:.2f} ms"


def _signed(value: float) -> str:
    return f"{value:+.2f} ms"


def _verdict(row: Mapping[str, Any]) -> str:
    if row["low"] <= 0 <= row["high"]:
        return "none measurable"
    if row["unmeasurable"]:
        return f"under {NEGLIGIBLE_MS:g} ms"
    return "**measurable**"


def _steps_table(summary: Mapping[str, Any]) -> str:
    rows = []
    for step in STEPS:
        row = summary["steps"][step]
        on, off = row["on"], row["off"]
        rows.append(
            (
                LABELS[step],
                f"{_ms(on['p50'])} / {_ms(on['p95'])}",
                f"{_ms(off['p50'])} / {_ms(off['p95'])}",
                f"{_signed(row['difference'])} ({_signed(row['low'])} to {_signed(row['high'])})",
                _verdict(row),
            )
        )
    return report._table(
        (
            "Step",
            "Record on: p50 / p95",
            "Record off: p50 / p95",
            f"On minus off, medians ({LEVEL:.0%} interval)",
            "Cost of the record",
        ),
        rows,
    )


def _bytes_table(results: Mapping[str, Any]) -> str:
    sizes: Mapping[str, int] = results["record_bytes"]["on"]
    exchanges = int(results["exchanges"])
    rows = [
        (f"`{kind}`", f"{size:,}", f"{size / exchanges:,.0f}")
        for kind, size in sorted(sizes.items(), key=lambda item: -item[1])
    ]
    total = sum(sizes.values())
    rows.append(("all", f"{total:,}", f"{total / exchanges:,.0f}"))
    return report._table(("Lines", "Bytes", "Per exchange"), rows)


def render(results: Mapping[str, Any]) -> str:
    meta, plan, summary = results["meta"], results["plan"], results["summary"]
    kind = "quick run (`--quick`: a small store, fewer prompts)" if meta["quick"] else "full run"
    samples = summary["steps"][STEPS[0]]["on"]["n"]
    before, after = results["load"]["before"], results["load"]["after"]
    caution = ""
    if results["contention"] > report.CONTENTION_WARNING:
        caution = (
            f"\n\n**Caution:** other processes (the two memory services among them) took "
            f"{results['contention']:.0%} of the CPUs while the prompts ran; both variants "
            "shared that load, prompt by prompt."
        )
    return f"""# What the usage record costs

The usage record ([usage.md](usage.md)) is written off the agent's path: the host's events only
queue a note, and a worker thread builds the events and appends them. This part measures what
that costs the agent in the real pi, with the record on (the default) and off
(`PIMEM_DISABLE_PLUGINS=usage`: no plugin hears the record, so a session keeps no usage notes
at all) in the same run (`make bench BENCH_ARGS="--only usage"` measures this part alone).

- This run: a {kind} started {meta["started_at"]}, taking {meta["duration_s"] / 60:.1f}
  minutes; pi {results["line"]}, {samples} prompts per variant after each session's first.
- Two pi RPC sessions at once, each in its own copy of one project ({plan["store_entries"]:,}
  generated entries, indexed once per copy) with its own memsearch home and so its own memory
  service (the switch is one of the service's settings); capture on, auto-context off.
- Every prompt makes the scripted model call `memory_search` once and then answer with the
  first hit's words: each exchange gives the record the snapshot's entries, a search, a capture
  and a use to judge.
- Prompts alternate between the sessions in ABBA order (on, off, off, on, ...), each
  {plan["think_s"]:g} s after the answer before it, so a slow moment of the machine, a capture
  or an index run weighs on both variants alike. Each session's first prompt (which may wait
  for its bridge to start) is left out.
- The adapter's timing switch (`PIMEM_PI_TIMINGS`) times `before_agent_start` (the handler:
  the snapshot's round trip to the bridge) and each `memory_search` call as pi awaits it (the
  request to the bridge and its answer).
- The difference is the on-variant's median minus the off-variant's, with a percentile
  bootstrap {LEVEL:.0%} interval ({summary["steps"][STEPS[0]]["resamples"]:,} resamples, each
  variant resampled on its own). The record adds no measurable time when the interval contains
  0 or the difference is under {NEGLIGIBLE_MS:g} ms.
- Load: the machine's 1-minute load average was {before[0]:.2f} before the prompts and
  {after[0]:.2f} after them; other processes than the bench's own took
  {results["contention"]:.0%} of the CPUs meanwhile.{caution}

{_steps_table(summary)}

The record on disk after the run (the on-variant's state; the off-variant's holds
{summary["bytes_off"]:,} bytes), over {results["exchanges"]} exchanges, the first included;
the session and snapshot lines come once a session, not once an exchange (target: at most
{TARGET_BYTES_PER_EXCHANGE:,} bytes per exchange, all lines counted):

{_bytes_table(results)}
"""
