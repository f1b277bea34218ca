"""The workload's section of the benchmark page, from ``workload.json`` alone."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bench.report import _table

KIND_NAMES = {
    "decision": "decisions",
    "chatter": "chatter",
    "recall": "recall questions",
    "/recall": "`/recall` prompts",
    "write": "explicit writes",
    "forget": "forgets",
    "status": "status checks",
    "question": "questions answered from memory",
    "small talk": "small talk",
}

Metrics = Mapping[str, Any]


def _rate(name: str) -> Callable[[Metrics], str]:
    def cell(m: Metrics) -> str:
        return f"{m['per_100'][name]:.1f}"

    return cell


def _count_rate(name: str, count: str) -> Callable[[Metrics], str]:
    def cell(m: Metrics) -> str:
        if name not in m["per_100"]:
            return "-"  # results of a script before the row was measured
        return f"{m['per_100'][name]:.1f} ({m[count]})"

    return cell


def _snapshot(kind: str) -> Callable[[Metrics], str]:
    def cell(m: Metrics) -> str:
        return str(m["snapshots"][kind])

    return cell


def _of(part: str, whole: str) -> Callable[[Metrics], str]:
    def cell(m: Metrics) -> str:
        return f"{m[part]} of {m[whole]}"

    return cell


def _plain(name: str) -> Callable[[Metrics], str]:
    def cell(m: Metrics) -> str:
        return str(m.get(name, "-"))

    return cell


def _failed_otherwise(m: Metrics) -> str:
    return str(sum(m["calls_failed_otherwise"].values()))


def _decisions(m: Metrics) -> str:
    share = m["decisions_captured"] / m["decisions"] if m["decisions"] else 0.0
    return f"{share:.0%} ({m['decisions_captured']} of {m['decisions']})"


def _write_duplicates(m: Metrics) -> str:
    missing = m["explicit_writes_missing"]
    text = f"{m['per_100']['explicit_write_duplicates']:.1f} ({m['explicit_write_duplicates']})"
    return text + (f", {missing} writes missing" if missing else "")


ROWS: Sequence[tuple[str, Callable[[Metrics], str]]] = (
    ("Entries written, per 100 exchanges", _count_rate("entries_written", "entries_written")),
    (
        "Entries about memory, per 100 exchanges",
        _count_rate("entries_about_memory", "entries_about_memory"),
    ),
    (
        "Entries of questions answered from memory, per 100 exchanges",
        _count_rate("entries_answered_from_memory", "entries_answered_from_memory"),
    ),
    (
        "Entries of small talk, per 100 exchanges",
        _count_rate("entries_small_talk", "entries_small_talk"),
    ),
    ("Duplicates of an explicit write, per 100 exchanges", _write_duplicates),
    (
        "Duplicate entries (all), per 100 exchanges",
        _count_rate("duplicate_entries", "duplicate_entries"),
    ),
    ("Forgotten subjects back, per 100 exchanges", _count_rate("forgotten_back", "forgotten_back")),
    ("Decisions captured", _decisions),
    ("- of them put as a question", _plain("decisions_asked")),
    ("- of them checked against memory first", _plain("decisions_checked")),
    (
        "Snapshot changes within a session, per 100 exchanges",
        _count_rate("snapshot_changes", "snapshot_changes_total"),
    ),
    ("- across a bridge kill", _snapshot("across_kills")),
    ("- at a forget (a checkpoint)", _snapshot("at_checkpoints")),
    ("- elsewhere", _snapshot("other")),
    ("Forgets done", _of("forgets_done", "forgets")),
    ("Recall questions answered from memory", _of("recalls_answered", "recalls_answered_of")),
    (
        "Recalls of a forgotten subject that found it",
        _of("forgotten_found_by_recall", "recalls_of_forgotten"),
    ),
    ("Bridges killed", _of("kills", "sessions")),
    (
        "Memory calls that met the killed bridge (then called again)",
        _plain("calls_failed_after_kill"),
    ),
    ("Memory calls that failed otherwise", _failed_otherwise),
)


def _with_totals(m: Metrics) -> dict[str, Any]:
    """The metrics with the few totals the rows show beside their rates."""
    return {
        **m,
        "snapshot_changes_total": m["snapshots"]["total"],
        "recalls_answered_of": m["recalls"] - m["recalls_of_forgotten"],
        "sessions": len(m["snapshots"]["distinct_per_session"]),
    }


def _heading(run: Mapping[str, Any]) -> str:
    return f"pi {run['pi']}, {run['label']}"


def _order(runs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """pi 1.x first, each line's before beside its after."""
    return sorted(runs, key=lambda run: (run["line"] != "1.6", run["variant"] != "before"))


#: Why a search in a new project's first seconds fails, when the runs show it.
NEVER_INDEXED = (
    "A new project's collection is made by its first index run, which waits until no write "
    "came for 5 s; the scripted model asks within a second of the decision, so the first "
    "session's first recalls find no collection. A user's prompts are further apart."
)


#: Why the script's very last exchange may be missing from memory at the end.
LAST_EXCHANGE = (
    " (the last is the script's last exchange: pi's exit handed it to the next session in the "
    "project, and the closing session did not capture it)"
)


def _exchange(results: Mapping[str, Any], at: Sequence[int]) -> str:
    """An exchange of the script by its session and place, with its kind."""
    session, index = at
    kind = results["script"]["sessions"][session]["exchanges"][index]["kind"]
    return f"session {session + 1}, exchange {index + 1} ({KIND_NAMES.get(kind, kind)})"


def _notes(results: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> list[str]:
    notes = [f"{run['label'].capitalize()}: {run['note']}." for run in runs if run.get("note")]
    notes = list(dict.fromkeys(notes))
    failures: dict[str, list[str]] = {}
    for run in runs:
        m, name = run["metrics"], _heading(run)
        if m["decisions_missed"]:
            last = results["script"]["sessions"][-1]["exchanges"][-1]["bullets"][0]
            notes.append(
                f"{name}: decisions not in memory at the end: "
                + "; ".join(f"`{bullet}`" for bullet in m["decisions_missed"])
                + (LAST_EXCHANGE if last in m["decisions_missed"] else "")
            )
        back = m["forgotten_back_subjects"]
        if back:
            such = ", ".join(back[:3]) + (", ..." if len(back) > 3 else "")
            notes.append(f"{name}: {len(back)} forgotten subjects named again at the end ({such})")
        for reason, count in m["calls_failed_otherwise"].items():
            failures.setdefault(reason, []).append(f"{count} in {name}")
        if m["entries_unknown"]:
            notes.append(
                f"{name}: {m['entries_unknown']} entries match no exchange of the script "
                "(diagnostic markers, say)"
            )
        usage = run.get("usage")
        for field, what in (
            ("missed", "used memory and has no `used` line"),
            ("extra", "has a `used` line and used no memory"),
        ):
            if usage and usage[field]:
                places = ", ".join(_exchange(results, at) for at in usage[field])
                notes.append(f"{name}: what {what}: {places}")
    for reason, where in failures.items():
        why = f" {NEVER_INDEXED}" if "was never indexed" in reason else ""
        notes.append(f'Memory calls that failed with "{reason}": {", ".join(where)}.{why}')
    for line, reason in results.get("skipped", {}).items():
        notes.append(f"pi {line} was not measured: {reason}.")
    return notes


def _fraction(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _lines(u: Metrics) -> str:
    unplaced = u["used_lines_unplaced"]
    return str(u["used_lines"]) + (f" ({unplaced} outside any exchange)" if unplaced else "")


def _pair(name: str) -> Callable[[Metrics], str]:
    def cell(u: Metrics) -> str:
        pair = u["counts"][name]
        mark = "" if pair["pimem"] == pair["bench"] else " **differ**"
        return f"{pair['pimem']} / {pair['bench']}{mark}"

    return cell


USAGE_ROWS: Sequence[tuple[str, Callable[[Metrics], str]]] = (
    ("Exchanges whose answer restated memory (the bench)", lambda u: str(u["used_bench"])),
    ("Exchanges with a `used` line (pimem)", lambda u: str(u["used_pimem"])),
    ("- of them both", lambda u: str(u["used_both"])),
    ("- of them with a term of the entry the model restated", lambda u: str(u["used_attributed"])),
    ('Precision of "used"', lambda u: _fraction(u["precision"])),
    ('Recall of "used"', lambda u: _fraction(u["recall"])),
    ("`used` lines", _lines),
    *(
        (f"{name.capitalize()}: pimem / the bench", _pair(name))
        for name in ("recalls", "expands", "injections", "captures")
    ),
)


def _usage_section(runs: Sequence[Mapping[str, Any]]) -> str:
    """pimem's usage record beside what the scripted model knows, per run that keeps one."""
    recorded = [run for run in runs if run.get("usage")]
    if not recorded:
        return "No run kept a usage record."
    return _table(
        ("Usage record", *(_heading(run) for run in recorded)),
        [(label, *(cell(run["usage"]) for run in recorded)) for label, cell in USAGE_ROWS],
    )


def render(results: Mapping[str, Any], plots: str) -> str:
    """The section as its own page (``pages`` demotes its headings one level); *plots* is the
    directory of the page's JSON relative to the page."""
    plan, meta = results["plan"], results["meta"]
    runs = _order(results["runs"])
    kinds = runs[0]["metrics"]["kinds"] if runs else {}
    exchanges = sum(kinds.values())
    mix = ", ".join(f"{count} {KIND_NAMES.get(kind, kind)}" for kind, count in kinds.items())
    if runs:
        table = _table(
            ("Measured", *(_heading(run) for run in runs)),
            [
                (label, *(cell(_with_totals(run["metrics"])) for run in runs))
                for label, cell in ROWS
            ],
        )
    else:
        table = "No pi line could run."
    times = ", ".join(f"{_heading(run)} {run['seconds']:.0f} s" for run in runs)
    notes = "\n".join(f"- {note}" for note in _notes(results, runs))
    kind = "quick run (`--quick`: this checkout only)" if meta["quick"] else "full run"
    return f"""# Memory under a workload

What memory holds after {plan["sessions"]} pi sessions of {plan["exchanges"]} prompts in one
project: the real pi in RPC mode with the adapter and `pimem serve`, a scripted model on
127.0.0.1, the offline embedding model. In the middle of each session the bridge is killed
with SIGKILL between two prompts, once it is idle (a crash while the user types). "Before"
is pimem and its adapter as of the commit before the capture gates, on the same script;
"after" is this checkout, and the targets are judged on it; "after, bridge killed at once"
kills each bridge the moment its prompt settles, while capture may still hold the exchange.
After the last session one more starts, with no prompt, and ends once it has captured what
the last one's exit handed over (pi's exit does not wait for capture: ADR 0028).

- The script (`bench/workload.py`, seed {plan["seed"]}): {exchanges} exchanges, {mix}.
- This run: a {kind} started {meta["started_at"]}, taking {meta["duration_s"] / 60:.1f}
  minutes ({times}).

{table}

{notes}

How it is counted, from the day files at the end and the requests the model received:

- The scripted distiller restates each exchange as a model would: decisions as "the team
  decided to use X for Y", chatter as what the user asked, a recall question as "the user
  asked what we decided about Y", a question answered from memory as "the user asked which
  option we use for Y", small talk as what the user said, a forget request as "the user asked
  to forget the decision to use X for Y", and "Remember that F" as the bullet `- F` that
  `memory_write` wrote. So each entry says which exchange it came from.
- **Entries written**: the entries in the day files at the end plus those forgotten. **About
  memory**: entries from recall questions, `/recall`, status checks and forget requests.
  **Questions answered from memory**: entries from questions the model answered in words at
  once, as from the snapshot or an auto-context injection. **Small talk**: entries from
  greetings and thanks.
  **Duplicates of an explicit write**: copies of a written fact beyond the written one.
  **Duplicate entries**: entries whose bullets (compared as capture compares them) equal an
  earlier entry's.
- **Forgotten subjects back**: subjects forgotten by a `memory_forget` that an entry names
  at the end. Forgets target a decision of an earlier session, found by `memory_search`;
  some later recall questions ask about a forgotten subject.
- **Decisions captured**: decisions whose bullet is in the day files at the end, or which a
  forget removed (the search found them). Some decisions are put as a question ("Can we use
  X for Y from now on?"), and for some the model searches memory before it answers.
- **Snapshot changes**: the snapshot is the end of the system prompt each request carried;
  a change between two requests of a session is counted at a forget (a checkpoint, where the
  snapshot is rebuilt on purpose), across the kill (from the kill to the next checkpoint), or
  elsewhere. A tool call that meets the killed bridge fails and says memory restarts; the
  scripted model calls it again, as a model would.
- Raw results, with the script, every request's record and the day files:
  [workload.json]({plots}/workload/workload.json).

## Does the usage record see what the model did?

pimem's usage record ([usage.md](usage.md)) of each run, read from the run's own state
directory (`pimem usage --json` for the counts, the record's `used` lines for "used"), beside
what the scripted model knows of the same run:

{_usage_section(runs)}

- **The bench's truth.** A question answered from memory is answered in the words of the
  snapshot line that holds its decision (its choice is what the user did not say), and only
  when the snapshot holds it; otherwise the model says memory holds nothing. A recall question
  is answered from the hit it expanded, in the decision's words; a `/recall` also cites the
  hit's day and time, as the recall skill asks. Every other answer (decisions, chatter, small
  talk, writes, forgets, status checks, failed calls) restates nothing of memory.
- **The unit is the exchange**: pimem says an exchange used memory when a `used` line names
  one of its turns (the record's `turn`, mapped to the script's exchange through pi's session
  files); a line naming no exchange of the script counts against precision. Not per entry:
  the workload's clock is fixed (`PIMEM_NOW`), so every entry is `2026-09-01 10:00`, the
  record names entries by that address, and a citation of it names every entry given. "With
  a term of the entry" counts the exchanges where a `used` line's term is in the memory text
  the model restated, or is a citation.
- **Where they differ.** With the bridge killed at once, the exchange in flight at each
  kill is never judged: what memory gave it was noted by the killed bridge, and the next one
  captures it from the journal without that; a capture the killed bridge wrote before its
  record line was written is missing from the record too. The exchanges each run misses or
  adds are listed above the section.
- **Counts**: recalls and expands are the `memory_search` and `memory_expand` calls whose
  results the model received without a failure; injections, the exchanges whose first request
  carried a context message of memory hits (auto-context is off in this workload, its
  default, so none); captures, the entries written (the day files at the end, plus those
  forgotten) less those `memory_write` wrote.
"""
