"""Acting as another local user (uid 65534, no groups), as root can: what that user reaches of
pimem's sockets and files is what any other user of the machine would."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

#: A Python outside the project's virtual environment, which another user may run.
OUTSIDER = Path("/usr/bin/python3")
NOBODY = 65534

#: Marks a test that needs a second user.
needs_another_user = pytest.mark.skipif(
    os.getuid() != 0 or not OUTSIDER.exists(), reason="needs root to act as a second user"
)


def run_as_nobody(code: str, stdin: str = "") -> str:
    """Run the Python *code* as uid 65534 with no groups, an empty environment and ``/`` as its
    directory; its standard output, stripped."""
    done = subprocess.run(
        [str(OUTSIDER), "-I", "-c", code],
        input=stdin,
        user=NOBODY,
        group=NOBODY,
        extra_groups=[],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
        env={},
        timeout=60,
    )
    return done.stdout.strip()
