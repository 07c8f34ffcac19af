"""The complexity guard (``complexity_cases.py``), counted in an interpreter of its own.

The guard counts operations with ``sys.settrace``, and counts taken inside the suite's
process depend on what ran before it: in a full fresh-clone run the guard's first case
never finished (its tracer still running at the 300 s timeout after ~700 other tests),
while the module alone takes 4 s. So the cases run in a pytest of their own, and the
counts are those of a clean process every time.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from clitools import REPO

CASES = Path(__file__).with_name("complexity_cases.py")


def test_every_large_job_path_stays_linear_counted_in_a_clean_interpreter() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(CASES)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
    assert "9 passed" in out.stdout, out.stdout[-2000:]
