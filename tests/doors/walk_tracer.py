"""Run the ``pimem`` command with its calls traced, for :mod:`test_search_walk`.

``python walk_tracer.py RECORD -- ARGS...`` runs ``pimem ARGS...`` as its entry point does
(:func:`pimem_core.doors.launcher.main`), with a profiler on every thread, and writes RECORD, a
JSON object of the frames of pimem's own modules (``module:function``, outermost first):

``ranking``
    the stack when the ranker's function that orders the hits is entered (the first time), or
    ``null`` when this process ranked nothing;
``after``
    each call a frame of that stack made once the ranker had been entered, as
    ``[caller, callee]``, the callee a function of pimem's source (a record's generated
    constructor is none);
``handing``
    the stacks at each socket write and each read of a line (where a process hands a request
    over and waits for its answer).

Nothing of the product is changed: the profiler is this script's, and only in its process.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from types import FrameType

#: The ranker's function that orders the hits.
RANKER = ("pimem_plugins.memsearch.recall.ranking", "rank")
OURS = ("pimem_core", "pimem_plugins")


def module_of(frame: FrameType) -> str:
    return str(frame.f_globals.get("__name__", ""))


def named(frame: FrameType) -> str:
    return f"{module_of(frame)}:{frame.f_code.co_qualname}"


def ours(frames: list[FrameType]) -> list[str]:
    return [named(frame) for frame in frames if module_of(frame).startswith(OURS)]


def written(frame: FrameType) -> bool:
    """A function of pimem's written in its source: not one generated for a record (attrs's
    ``__init__``), which only holds what it is given."""
    return module_of(frame).startswith(OURS) and not frame.f_code.co_filename.startswith("<")


def stack(frame: FrameType | None) -> list[FrameType]:
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames[::-1]


class Tracer:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.chain: list[FrameType] = []
        self.after: dict[tuple[str, str], None] = {}
        self.handing: list[list[str]] = []

    def __call__(self, frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            if (module_of(frame), frame.f_code.co_name) == RANKER and not self.chain:
                with self.lock:
                    self.chain = stack(frame)
            elif self.chain and frame.f_back is not None and written(frame):
                caller = frame.f_back
                if any(caller is held for held in self.chain):
                    self.after[named(caller), named(frame)] = None
        elif event == "c_call" and getattr(arg, "__name__", "") in ("sendall", "readline"):
            with self.lock:
                self.handing.append(ours(stack(frame)))

    def record(self) -> dict[str, object]:
        return {
            "ranking": ours(self.chain) if self.chain else None,
            "after": [list(pair) for pair in self.after],
            "handing": self.handing,
        }


def main() -> int:
    record_path = Path(sys.argv[1])
    args = sys.argv[sys.argv.index("--") + 1 :]
    tracer = Tracer()
    threading.setprofile(tracer)
    sys.setprofile(tracer)
    sys.argv = ["pimem", *args]
    from pimem_core.doors.launcher import main as pimem

    try:
        return pimem()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        record_path.write_text(json.dumps(tracer.record(), indent=1), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
