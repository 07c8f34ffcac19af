"""The prologue under `torchrun --no-python`, with --wrap: a fault recovered in place."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_torchrun_launch_wrap_recovers_an_injected_fault(tmp_path: Path) -> None:
    # GIVEN 4 ranks under torchrun, each through `nccl-doctor launch --wrap`
    (tmp_path / "nccl-doctor.toml").write_text(
        '[distributed]\ntimeout = "5m"\n[restart]\nsoft_timeout = "20s"\nhard_timeout = "30s"\n'
    )
    torchrun = Path(sys.executable).with_name("torchrun")
    env = {
        "PATH": os.environ["PATH"],
        "NCCL_DOCTOR_HOME": str(tmp_path / "home"),
        "INJECT": "1",
        "STEPS": "10",
        "TORCH_CPP_LOG_LEVEL": "ERROR",
    }
    # WHEN rank 1 raises once at step 5
    out = subprocess.run(
        [
            str(torchrun),
            "--nproc-per-node",
            "4",
            "--log-dir",
            str(tmp_path / "torchrun-logs"),  # else torchrun leaves a torchelastic_* in TMPDIR
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            "127.0.0.1:0",
            "--rdzv-id",
            "tr1",
            "--no-python",
            sys.executable,
            "-m",
            "doctor",
            "launch",
            "--wrap",
            "--",
            "python",
            str(REPO / "docs/examples/train_wrapped.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # THEN every rank re-enters the script and finishes with the full world
    assert out.returncode == 0, out.stderr[-3000:]
    finished = sorted(line for line in out.stdout.splitlines() if "iteration 1" in line)
    assert finished == [f"rank {r}/4 iteration 1: value 1398100" for r in range(4)]
    job = tmp_path / "home" / "jobs" / "tr1"
    event = json.loads((job / "events.jsonl").read_text())
    assert (event["cause"], event["rank"], event["world_size"]) == ("exception", 1, 4)
    assert event["phases"]["reentry"] < 2.0
    assert "single-node policy" in out.stderr and "preflight OK" in out.stderr
    # AND every rank removed its record and pid file on the way out
    assert not list(job.glob("rank-*.json")) and not list(job.glob("agent-*.pid"))
