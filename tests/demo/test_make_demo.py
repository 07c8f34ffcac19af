"""`make demo` is the README's first command: it must run and find the injected hang."""

from __future__ import annotations

import subprocess
import sys

import pytest
from clitools import REPO, clean_env

pytestmark = pytest.mark.slow


def test_demo_triages_the_injected_hang_and_says_so() -> None:
    # GIVEN this machine WHEN the demo runs (preflight, a hung 4-rank job, triage, analyze)
    done = subprocess.run(
        [sys.executable, "-m", "doctor.demo"],
        cwd=REPO,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    # THEN it shows each step and exits 0 because the verdict names rank 2's data loader
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for step in (
        "$ nccl-doctor preflight",
        "$ nccl-doctor triage --job nccl-doctor-demo",
        "$ nccl-doctor analyze",
        "verdict: cpu_stuck",
    ):
        assert step in done.stdout
    assert done.stdout.rstrip().endswith(
        "injected: cpu_stuck on rank 2; found: cpu_stuck on ranks [2] -> RIGHT"
    )
