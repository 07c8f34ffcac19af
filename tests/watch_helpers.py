"""Run the 4-rank watch test job through ``nccl-doctor launch --wrap --watch``, one process per
rank (as srun starts them), and collect what it left: exit codes, results, events, bundles,
and any process still carrying the run's token."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from clitools import wait_and_reap
from restart.restart_jobs import JobRun

from doctor.trust.subproc import free_port

REPO = Path(__file__).resolve().parent.parent
WATCH_JOB = REPO / "tests" / "watch" / "watch_job.py"
WORLD = 4
CONFIG = """\
[distributed]
timeout = "5m"
[restart]
soft_timeout = "60s"
hard_timeout = "90s"
termination_grace_time = "2s"
spares = {spares}
[watch]
stall_factor = 2.5
min_stall = "{min_stall}"
"""


@dataclass
class WatchRun(JobRun):
    started: float
    """Wall-clock time the ranks were started."""
    observed: object = None
    """What ``while_running`` returned."""

    def bundles(self) -> list[Path]:
        return sorted((self.job_dir / "watch").glob("*.tar.gz"))

    def fault_time(self, rank: int) -> float:
        """When the fault was first injected (a fault that repeats appends a line each time)."""
        return float((self.out_dir / f"fault-{rank}").read_text().split()[0])

    def all_stderr(self) -> str:
        return "\n".join(f"--- rank {r}\n{text[-3000:]}" for r, text in self.stderr.items())


def run_watch_job(
    tmp: Path,
    fault: str = "none:-1:-1",
    *,
    env: dict[str, str] | None = None,
    spares: int = 0,
    min_stall: str = "1s",
    watch: bool = True,
    config: str | None = None,
    timeout: float = 150.0,
    while_running: Callable[[Path], object] | None = None,
) -> WatchRun:
    """Start the job, wait for every rank (bounded), reap, and report what is left;
    ``while_running(job_dir)`` is called once the ranks are started."""
    token = uuid.uuid4().hex
    out_dir, home = tmp / "out", tmp / "home"
    out_dir.mkdir()
    job = f"watch-{token[:8]}"
    config_file = tmp / "nccl-doctor.toml"
    config_file.write_text(config or CONFIG.format(spares=spares, min_stall=min_stall))
    base = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", str(tmp)),
        "RES_OPTIONS": os.environ.get("RES_OPTIONS", ""),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "WORLD_SIZE": str(WORLD),
        "LOCAL_WORLD_SIZE": str(WORLD),
        "NCCL_DOCTOR_JOB": job,
        "NCCL_DOCTOR_HOME": str(home),
        "FAULT": fault,
        "OUT_DIR": str(out_dir),
        "TORCH_CPP_LOG_LEVEL": "ERROR",
        "NCCL_DOCTOR_TEST_TOKEN": token,
        **(env or {}),
    }
    flags = ["--wrap", "--watch"] if watch else ["--wrap"]
    argv = [sys.executable, "-m", "doctor", "launch", *flags, "--config", str(config_file)]
    argv += ["--", "python", str(WATCH_JOB)]
    procs = {}
    started = time.time()
    for rank in range(WORLD):
        with (out_dir / f"err{rank}").open("w") as err:
            procs[rank] = subprocess.Popen(
                argv,
                env={**base, "RANK": str(rank), "LOCAL_RANK": str(rank)},
                stdout=err,
                stderr=subprocess.STDOUT,
                cwd=tmp,
            )
    observed = while_running(home / "jobs" / job) if while_running is not None else None
    leftovers = wait_and_reap(list(procs.values()), token, timeout, grace=10.0)
    results = {
        int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in out_dir.glob("result-*.json")
    }
    stderr = {rank: (out_dir / f"err{rank}").read_text() for rank in procs}
    return WatchRun(
        {r: p.returncode for r, p in procs.items()},
        results,
        stderr,
        home / "jobs" / job,
        out_dir,
        leftovers,
        started,
        observed,
    )
