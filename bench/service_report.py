"""The memory service's section of the benchmark page, and its targets, from ``service.json``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.corpus import LONGEST, VERY_LONG_EVERY
from bench.report import _table, _time

Results = Mapping[str, Any]

# The targets (bench/service.py measures them).
WARM_P50_MS = 150.0
WARM_SPEEDUP = 10.0
#: Cold (the client starts the service) against in process: the larger of these two margins.
COLD_MARGIN = 0.10
COLD_MARGIN_MS = 100.0
RSS_RATIO = 1.3
LEAK_GROWTH = 0.05
RECONNECT_MS = 1000.0
STATUS_P50_MS = 100.0
#: The service's RSS, idle after long entries, above the same after as many short ones.
LONG_ENTRIES_MB = 100.0

KIND_NAMES = {
    "warm": "through the service, running (warm)",
    "cold": "through the service, stopped before each run (cold: the client starts it)",
    "in_process": "in process (`PIMEM_SERVICE=off`)",
    "memsearch": "`memsearch search` (the CLI)",
}


def cold_allowance_ms(in_process_p50: float) -> float:
    """What a cold run may add to an in-process one: 10 % or 100 ms, whichever is larger."""
    return max(COLD_MARGIN * in_process_p50, COLD_MARGIN_MS)


def rss_ratio(memory: Results) -> float:
    return float(memory["service"]["rss_mb"]) / float(memory["in_process"]["rss_mb"])


def _ratio_check(memory: Results, target: str) -> dict[str, Any]:
    """The RSS ratio of *memory*'s sessions through the service against one in process."""
    return {
        "target": target,
        "chunks": None,
        "measured": rss_ratio(memory),
        "unit": "x",
        "detail": f"{memory['service']['rss_mb']:.0f} MB vs "
        f"{memory['in_process']['rss_mb']:.0f} MB",
        "met": rss_ratio(memory) <= RSS_RATIO,
    }


def _pi_memory_check(memory: Results) -> dict[str, Any]:
    sessions = int(memory["service"]["sessions"])
    return _ratio_check(
        memory,
        f"{sessions} real pi sessions through the service: pimem's RSS (service + "
        f"relays) <= {RSS_RATIO:g}x one pi session's bridge in process",
    )


def _long_memory_check(memory: Results, plan: Results) -> dict[str, Any]:
    sessions = int(memory["service"]["sessions"])
    return _ratio_check(
        memory,
        f"{sessions} sessions through the service on {plan['session_entries']:,} long "
        f"entries each use <= {RSS_RATIO:g}x the RSS of one such session in process",
    )


def entries_apart_mb(entries: Results) -> float:
    return float(entries["long"]["idle_mb"]) - float(entries["short"]["idle_mb"])


def _entries_check(entries: Results) -> dict[str, Any]:
    long, short = entries["long"], entries["short"]
    return {
        "target": f"the service's RSS after indexing {long['entries']:,} long entries and "
        f"{long['idle_s']:g} s idle is <= {LONG_ENTRIES_MB:g} MB above that after "
        f"{short['entries']:,} short ones",
        "chunks": None,
        "measured": entries_apart_mb(entries),
        "unit": "MB",
        "detail": f"{long['idle_mb']:.0f} MB vs {short['idle_mb']:.0f} MB",
        "met": entries_apart_mb(entries) <= LONG_ENTRIES_MB,
    }


def targets(results: Results) -> list[dict[str, Any]]:
    size = int(results["size"])
    search = results["search"]["summary"]
    warm, cold = search["warm"]["p50"], search["cold"]["p50"]
    in_process, memsearch = search["in_process"]["p50"], search["memsearch"]["p50"]
    memory, leak = results["memory"], results["leak"]
    sessions = int(memory["service"]["sessions"])
    reconnect = results["reconnect"]["summary"]["p50"]
    checks = [
        {
            "target": f"`pimem search` through the warm service: p50 <= {WARM_P50_MS:g} ms",
            "chunks": size,
            "measured": warm,
            "unit": "ms",
            "met": warm <= WARM_P50_MS,
        },
        {
            "target": f"warm service >= {WARM_SPEEDUP:g}x faster than `memsearch search` (p50)",
            "chunks": size,
            "measured": memsearch / warm,
            "unit": "x",
            "detail": f"{_time(warm)} vs {_time(memsearch)}",
            "met": memsearch / warm >= WARM_SPEEDUP,
        },
        {
            "target": "cold service (the client starts it) no slower than in process: p50 within "
            f"+{COLD_MARGIN:.0%} or +{COLD_MARGIN_MS:g} ms, whichever is larger",
            "chunks": size,
            "measured": cold,
            "unit": "ms",
            "detail": f"in process {_time(in_process)}",
            "met": cold <= in_process + cold_allowance_ms(in_process),
        },
        {
            "target": f"{sessions} sessions through the service (service + relays) use <= "
            f"{RSS_RATIO:g}x the RSS of one session in process",
            "chunks": None,
            "measured": rss_ratio(memory),
            "unit": "x",
            "detail": f"{memory['service']['rss_mb']:.0f} MB vs "
            f"{memory['in_process']['rss_mb']:.0f} MB",
            "met": rss_ratio(memory) <= RSS_RATIO,
        },
    ]
    if "status" in results:
        status = results["status"]["summary"]["p50"]
        checks.insert(
            1,
            {
                "target": f"`pimem status` through the warm service: p50 <= {STATUS_P50_MS:g} ms",
                "chunks": size,
                "measured": status,
                "unit": "ms",
                "met": status <= STATUS_P50_MS,
            },
        )
    if "memory_pi" in results:
        checks.append(_pi_memory_check(results["memory_pi"]))
    if "memory_long" in results:
        checks.append(_long_memory_check(results["memory_long"], results["plan"]))
    if "entries" in results and results["plan"]["judge_entries"]:
        checks.append(_entries_check(results["entries"]))
    if results["plan"]["judge_leak"]:
        checks.append(
            {
                "target": f"the service's RSS grows <= {LEAK_GROWTH:.0%} over "
                f"{leak['ops']:,} requests (after {leak['warmup_ops']:,} to warm up)",
                "chunks": size,
                "measured": leak["growth"],
                "unit": "share",
                "detail": f"{leak['before_mb']:.0f} MB to {leak['after_mb']:.0f} MB",
                "met": leak["growth"] <= LEAK_GROWTH,
            }
        )
    checks.append(
        {
            "target": "a relayed session answers again within 1 s of the service's SIGKILL (p50)",
            "chunks": None,
            "measured": reconnect,
            "unit": "ms",
            "met": reconnect <= RECONNECT_MS,
        }
    )
    return checks


def _stats_row(label: str, stats: Mapping[str, float]) -> tuple[str, ...]:
    return (
        label,
        _time(stats["p50"]),
        _time(stats["p95"]),
        _time(stats["min"]),
        _time(stats["max"]),
        str(int(stats["n"])) if "n" in stats else "",
    )


def _search_table(results: Results) -> str:
    summary = results["search"]["summary"]
    rows = [
        _stats_row(KIND_NAMES[kind], summary[kind])
        for kind in ("warm", "in_process", "memsearch", "cold")
    ]
    return _table(("`pimem search QUERY`, whole process", "p50", "p95", "min", "max", "n"), rows)


def _memory_table(results: Results, key: str = "memory") -> str:
    memory = results[key]
    service, alone = memory["service"], memory["in_process"]

    def split(side: Mapping[str, Any]) -> str:
        pid = side.get("service_pid")
        roots: dict[int, float] = {}
        for row in side["processes"]:
            roots[row["root"]] = roots.get(row["root"], 0.0) + row.get("VmRSS", 0) / 1024
        relays = [mb for root, mb in roots.items() if root != pid]
        parts = [f"service {roots[pid]:.0f} MB"] if pid in roots else []
        name = "relays" if pid is not None else "bridge"
        parts.append(f"{name} {' + '.join(f'{mb:.0f}' for mb in relays)} MB")
        return ", ".join(parts)

    rows = [
        (
            f"{service['sessions']} sessions through one service",
            f"{service['rss_mb']:.0f} MB",
            split(service),
            f"{service['peak_total_mb']:.0f} MB",
            f"{service['hwm_mb']:.0f} MB",
        ),
        (
            "1 session in process",
            f"{alone['rss_mb']:.0f} MB",
            split(alone),
            f"{alone['peak_total_mb']:.0f} MB",
            f"{alone['hwm_mb']:.0f} MB",
        ),
    ]
    return _table(
        ("Sessions", "RSS at the end", "of which", "largest total seen", "peaks (VmHWM) added"),
        rows,
    )


def _leak_table(results: Results) -> str:
    leak = results["leak"]
    mix = ", ".join(
        f"{count:,} {kind} ({leak['mean_ms'][kind]:.0f} ms)"
        for kind, count in sorted(leak["counts"].items(), key=lambda item: -item[1])
    )
    rows = [
        (
            f"{leak['warmup_ops']:,} + {leak['ops']:,}",
            f"{leak['before_mb']:.0f} MB",
            f"{leak['after_mb']:.0f} MB",
            f"{leak['growth']:+.1%}",
            f"{leak['hwm_mb']:.0f} MB",
            f"{leak['ops_s']:.0f} s",
            mix,
        )
    ]
    return _table(
        (
            "Requests (warm-up + measured)",
            "RSS before",
            "RSS after",
            "growth",
            "peak",
            "took",
            "mix (mean per request)",
        ),
        rows,
    )


def _status_table(results: Results) -> str:
    status = results.get("status")
    if status is None:
        return ""
    table = _table(
        ("`pimem status`, whole process", "p50", "p95", "min", "max", "n"),
        [_stats_row("through the service, running (warm)", status["summary"])],
    )
    return (
        "`pimem status` through the same warm service, each run once the lease on the database "
        "lapsed (1.3 s), after one untimed run:\n\n" + table
    )


def _long_memory(results: Results) -> str:
    memory = results.get("memory_long")
    if memory is None:
        return ""
    plan = results["plan"]
    return (
        f"The same sessions on long entries: each project held {plan['session_entries']:,} "
        "long entries first (the lengths of distilled sessions' entries, below), indexed in "
        "process; memory is read once every session's read model has their facts embedded, "
        f"and {plan['idle_s']:g} s later.\n\n{_memory_table(results, 'memory_long')}"
    )


def _entries_table(results: Results) -> str:
    entries = results["entries"]
    rows = []
    for kind, label in (("short", "short (the bench's usual)"), ("long", "long")):
        side = entries[kind]
        rows.append(
            (
                f"{side['entries']:,} {label}",
                f"{side['median_chars']:,} / {side['over_1400']:.0%} / {side['longest_chars']:,}",
                f"{side['chunks']:,}",
                f"{side['started_mb']:.0f} MB",
                f"{side['indexed_mb']:.0f} MB",
                f"{side['facts_mb']:.0f} MB",
                f"{side['idle_mb']:.0f} MB",
                f"{side['hwm_mb']:.0f} MB",
            )
        )
    return _table(
        (
            "Entries",
            "characters: median / over 1,400 / longest",
            "chunks",
            "RSS at start",
            "indexed",
            "facts embedded",
            f"idle {entries['long']['idle_s']:g} s",
            "peak",
        ),
        rows,
    )


def _entries_note(entries: Results) -> str:
    long, short = entries["long"], entries["short"]
    return (
        f"- Idle, the service held {entries_apart_mb(entries):+.0f} MB after the long entries "
        f"beside the short ones ({long['idle_mb']:.0f} MB against {short['idle_mb']:.0f} MB); "
        f"at its peak, while it embedded them, {long['hwm_mb']:.0f} MB against "
        f"{short['hwm_mb']:.0f} MB."
    )


def _entries(results: Results) -> str:
    if "entries" not in results:
        return ""
    entries = results["entries"]
    long = entries["long"]
    judged = (
        ""
        if results["plan"]["judge_entries"]
        else (
            " A quick run indexes too few entries to judge the memory they leave; no target is set."
        )
    )
    return f"""## Memory after long entries

A service of its own for each kind, on a fresh home and project: `pimem status` starts it,
`pimem index` indexes the store through it, a `pimem search` loads the read model, whose facts
are then embedded in the background; its RSS (`VmRSS`) at each step, and
{long["idle_s"]:g} s after the facts were done. Long entries have the lengths of a real store's
distilled entries: a median near 900 characters, a tenth over 1,400, and one in
{VERY_LONG_EVERY} a write-up of 4,000 to {LONGEST:,}.

{_entries_table(results)}

{_entries_note(entries)}{judged}
"""


def _beside(difference_ms: float) -> str:
    if difference_ms < 0:
        return f"{_time(-difference_ms)} less than"
    return f"{_time(difference_ms)} more than"


def _pi_memory(results: Results) -> str:
    memory = results.get("memory_pi")
    if memory is None:
        return ""
    service, alone = memory["service"], memory["in_process"]
    table = _table(
        ("pimem's processes", "resident", "pi's own processes", "of one session in process"),
        [
            (
                f"{service['sessions']} pi sessions through one service",
                f"{service['rss_mb']:.0f} MB",
                f"{service['pi_rss_mb']:.0f} MB",
                f"{rss_ratio(memory):.2f}x",
            ),
            (
                "1 pi session, its bridge in process",
                f"{alone['rss_mb']:.0f} MB",
                f"{alone['pi_rss_mb']:.0f} MB",
                "1.00x",
            ),
        ],
    )
    return (
        f"In the real pi (pi {memory['pi']}, RPC mode, a scripted model on 127.0.0.1): "
        f"{service['sessions']} pi sessions in {service['sessions']} projects, each capturing "
        "an exchange and then searching memory with a tool call, then a shell's `pimem search` "
        f"in each project.\n\n{table}"
    )


def _notes(results: Results) -> list[str]:
    search = results["search"]["summary"]
    warm, cold = search["warm"], search["cold"]
    in_process, memsearch = search["in_process"], search["memsearch"]
    memory = results["memory"]
    reconnect = results["reconnect"]["summary"]
    allowance = cold_allowance_ms(in_process["p50"])
    notes = [
        f"A shell's `pimem search` through the warm service took {_time(warm['p50'])} at p50 "
        f"({_time(warm['p95'])} p95): {in_process['p50'] / warm['p50']:.1f}x less than the same "
        f"command in process ({_time(in_process['p50'])}) and "
        f"{memsearch['p50'] / warm['p50']:.1f}x less than `memsearch search` "
        f"({_time(memsearch['p50'])}) on the same collection. What is left is the thin "
        "client's interpreter start-up and one request on the socket.",
        f"With the service stopped, the client starts it and waits for it: "
        f"{_time(cold['p50'])} at p50, {_beside(cold['p50'] - in_process['p50'])} in "
        f"process (allowed: {_time(allowance)} more, the larger of 10 % and 100 ms). The "
        "service then stays, and the next command is warm.",
        f"Memory: {memory['service']['sessions']} sessions through one service held "
        f"{memory['service']['rss_mb']:.0f} MB in all (the service and the relays), "
        f"{rss_ratio(memory):.2f}x the "
        f"{memory['in_process']['rss_mb']:.0f} MB of one session served in process; each "
        "session in process would load its own embedder and read models.",
        f"After a SIGKILL of the service, a relayed session answered `ping` again in "
        f"{_time(reconnect['p50'])} at p50 ({_time(reconnect['max'])} at most, "
        f"n {int(reconnect['n'])}): the relay saw the socket close, started a new service and "
        "replayed its `session.start`.",
    ]
    if "status" in results:
        status = results["status"]["summary"]
        notes.insert(
            1,
            f"`pimem status` through the warm service took {_time(status['p50'])} at p50 "
            f"({_time(status['p95'])} p95): it counts the collection once (opening the database "
            "read-only loads the whole collection), then answers with that count for as long "
            "as the collection's files are as they were.",
        )
    if "memory_long" in results:
        memory = results["memory_long"]
        notes.append(
            f"On long entries, {memory['service']['sessions']} sessions through one service held "
            f"{memory['service']['rss_mb']:.0f} MB, {rss_ratio(memory):.2f}x the "
            f"{memory['in_process']['rss_mb']:.0f} MB of one session in process."
        )
    trace = [float(mb) for _, mb in results["leak"].get("trace_mb", [])]
    if len(trace) >= 4:
        half = len(trace) // 2
        early, late = sum(trace[:half]) / half, sum(trace[half:]) / (len(trace) - half)
        notes.append(
            f"Sampled {len(trace)} times during the {results['leak']['ops']:,} requests, the "
            f"service's RSS stayed between {min(trace):.0f} and {max(trace):.0f} MB, "
            f"{early:.0f} MB on average in the first half and {late:.0f} MB in the second: "
            "it rises and falls as the database is opened and closed (the lease lapses between "
            "bursts), with no trend."
        )
    if not results["plan"]["judge_leak"]:
        notes.append("A quick run sends too few requests to judge a leak; no target is set.")
    return notes


def render(results: Results, plots: str) -> str:
    meta, plan = results["meta"], results["plan"]
    size = int(results["size"])
    store = results["store"]
    built = "kept store; indexed when built" if store["reused"] else "indexed by this run"
    kind = "quick run (`--quick`: a small store, fewer samples)" if meta["quick"] else "full run"
    notes = "\n".join(f"- {note}" for note in _notes(results))
    return f"""# The memory service

One warm process per user (on by default, [the memory service](service.md)) beside pimem
in process and the memsearch CLI, timed as a shell or an agent host sees them: whole processes,
started and waited for (`make bench BENCH_ARGS="--only service"` measures this part alone).

- This run: a {kind} started {meta["started_at"]}, taking {meta["duration_s"] / 60:.1f} minutes.
- The store: the latency benchmark's, {size:,} chunks ({built}); the offline embedding model,
  Milvus Lite, a `HOME` and a runtime directory of the bench's own.

## Search from a shell

{plan["rounds"]} rounds of one run of each kind, the order turned each round (the cold run
followed by the warm one), then {plan["rounds"]} more warm runs back to back; queries from the
store's generator, 5 hits as JSON. Before each run that may open the database the bench waits
1.3 s for the last holder's lease on it to lapse, so no run waits on another's.

{_search_table(results)}

{_status_table(results)}

## Memory

{plan["sessions"]} `pimem serve` sessions in {plan["sessions"]} projects through one service,
each a scripted host: `session.start`, {plan["writes"]} `memory.write`, 3 `memory.search`, a
`session.settled` whose `complete` it answers, and {plan["cli_calls"]} `pimem search` calls
through the same service; beside that, one session served in process (`PIMEM_SERVICE=off`)
doing one session's work, and the same `pimem search` calls in process. Resident memory
(`VmRSS` from `/proc`) of the service and the relays, or the bridge, with any process they
started, each counted once, when every capture was written; the largest total is sampled every
0.2 s during the work. Each side has a fresh memsearch home and fresh projects.

{_memory_table(results)}

{_pi_memory(results)}

{_long_memory(results)}

{_entries(results)}

## A leak, and a reconnect

The service's RSS after {plan["leak_warmup"]:,} requests to warm up and again after
{plan["leak_ops"]:,} more, sent on its socket as the thin client sends them: searches, expands
of their hits and `status` in the store's project, the socket's own status, and writes in a
scratch project of the same home.

{_leak_table(results)}

{notes}

Raw results: [service.json]({plots}/service/service.json).
"""
