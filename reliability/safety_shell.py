"""Scenario 4, subprocesses: pimem never runs a command through a shell.

A check on the code itself: every ``subprocess`` call in ``pimem_core`` and ``pimem_plugins``
passes an argument list (not a command string) and no ``shell=`` other than ``False``; nothing
calls ``os.system``, ``os.popen`` or ``subprocess.getoutput``; the pi adapter spawns without
``shell: true`` and never uses ``child_process.exec``.
"""

from __future__ import annotations

import ast
import re
import time
from pathlib import Path

from reliability.outcome import Outcome
from reliability.sandbox import ROOT

PACKAGES = ("pimem_core", "pimem_plugins")
ADAPTER = ROOT / "adapters" / "pi" / "src"
SPAWNING = {"run", "Popen", "call", "check_call", "check_output"}
SHELL_ONLY = {
    ("os", "system"),
    ("os", "popen"),
    ("subprocess", "getoutput"),
    ("subprocess", "getstatusoutput"),
}
# ``shell:`` set to anything but false, or child_process's shell-running ``exec`` imported.
_TS_SHELL = re.compile(
    r"\bshell\s*:(?!\s*false\b)|\bexec(?:Sync)?\b[^;]*from\s+[\"'](?:node:)?child_process"
)


def _dotted(node: ast.expr) -> tuple[str, ...]:
    if isinstance(node, ast.Attribute):
        return (*_dotted(node.value), node.attr)
    if isinstance(node, ast.Name):
        return (node.id,)
    return ()


def scan_python(path: Path) -> tuple[int, list[str]]:
    """Subprocess call sites in *path*, and what is wrong with any of them."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    sites, problems = 0, []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        where = f"{path.relative_to(ROOT)}:{node.lineno}"
        if tuple(name[-2:]) in SHELL_ONLY:
            problems.append(f"{where}: {'.'.join(name)} runs a shell")
        if name[-1:] and name[-1] in SPAWNING and "subprocess" in name:
            sites += 1
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant | ast.JoinedStr | ast.BinOp):
                problems.append(f"{where}: a command string instead of an argument list")
        for keyword in node.keywords:
            if keyword.arg == "shell" and not (
                isinstance(keyword.value, ast.Constant) and keyword.value.value is False
            ):
                problems.append(f"{where}: shell={ast.unparse(keyword.value)}")
    return sites, problems


def run(quick: bool) -> Outcome:
    outcome = Outcome(
        scenario="Safety: no shell",
        load="every Python module of pimem_core and pimem_plugins, the pi adapter's sources",
        faults="(a check on the code)",
    )
    started = time.perf_counter()
    files = [path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]
    sites = 0
    for path in files:
        found, problems = scan_python(path)
        sites += found
        outcome.problems.extend(problems)
    ts_files = sorted(ADAPTER.rglob("*.ts")) if ADAPTER.is_dir() else []
    for path in ts_files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _TS_SHELL.search(line) and not line.lstrip().startswith("//"):
                outcome.problems.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    outcome.inputs = len(files) + len(ts_files)
    outcome.details = {
        "python_files": len(files),
        "subprocess_call_sites": sites,
        "adapter_files": len(ts_files),
    }
    outcome.seconds = time.perf_counter() - started
    return outcome
