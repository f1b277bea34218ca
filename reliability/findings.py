"""What the suite found in pimem, and the commits that fixed each (printed in the report)."""

from __future__ import annotations

#: (the scenario that found it, what happened, the fix)
FOUND: tuple[tuple[str, str, str], ...] = (
    (
        "damaged database",
        "`pimem status` (any backend call) hung for ever on a damaged Milvus Lite database: "
        "pymilvus raises `e from e`, and the lock check walked that cause chain in a loop; "
        "search and index died with a pymilvus traceback and no way out",
        "7a8c672: the chain is walked once; status, search and index say what the database "
        "said and how to rebuild the collection from the markdown",
    ),
    (
        "bridge fuzzing",
        "a line of JSON nested too deep ended `pimem serve` (RecursionError in the reader), "
        "and so did a request id holding a lone surrogate (the UTF-8 writer refused the echo); "
        "a NUL in a path, a relative project label and `session.before_prompt` before "
        "`session.start` were internal errors",
        "48dd65c",
    ),
    (
        "transcript fuzzing",
        "a transcript line nested too deep, or a timestamp out of range once made local, raised "
        "instead of being skipped",
        "bac9e9e",
    ),
    (
        "index-state fuzzing, damaged state file",
        "the same deep nesting raised from the parser; memsearch re-reads the state before "
        "every index run, so such a file failed every run until deleted",
        "bac9e9e, 6fe5417: indexing drops a state file it cannot parse; status says the next "
        "index writes it again",
    ),
    (
        "hanging store command, store-command fuzzing",
        "the timeout killed the command but not its children (a `sleep` in the script lived "
        "on); a NUL or another control character in an answer reached every file operation",
        "d994b5a: a process group, killed whole; control characters refused",
    ),
    (
        "full disk, read-only store",
        "the exchange captured during the fault was lost: its entry and its marker were both "
        "refused, and the next capture started after it",
        "6f0c712: the entry is held and written, in order, once the store takes appends again; "
        "status shows what waits",
    ),
    (
        "full disk (short write)",
        "a write cut short left half an entry, which swallowed the heading of the next one",
        "4a3460c: the partial bytes are cut back off (unless another writer appended after them)",
    ),
    (
        "writes stay in the store",
        "a daily file that is a symbolic link out of the store was appended to (a write wherever "
        "the link pointed), and forget copied the outside file's text into the store",
        "4a3460c: such a link is refused",
    ),
    (
        "bridge SIGKILL",
        "the exchange a killed bridge was distilling was lost: the next bridge started after it",
        "fd784ab: a capture journal; the next process that starts the session captures it, or "
        "leaves a marker",
    ),
    (
        "secrets",
        "compaction sent chunks to the LLM as indexed (another agent's unscrubbed entry "
        "included), and memsearch wrote whatever summary came back",
        "d467416: scrubbed both ways; the summary is appended in one write, and the database "
        "is closed while the LLM works",
    ),
    (
        "path fuzzing",
        "a chunk source holding a NUL raised ValueError from forget",
        "279fb0b",
    ),
    (
        "another user's store",
        "forget (and write) on a store the user may not look into died with a PermissionError "
        "traceback",
        "0c9e71a",
    ),
)


def markdown() -> str:
    lines = [
        "## What the suite found",
        "",
        "Each was fixed with a focused test beside the code (`tests/`); the scenario that found "
        "it now passes.",
        "",
        "| Found by | What happened | Fix |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {found} | {what} | {fix} |" for found, what, fix in FOUND]
    return "\n".join(lines) + "\n"
