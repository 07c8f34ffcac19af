"""Run the 4-rank fault-injection job (``rank_job.py``), one process per rank, and check cleanup."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from clitools import wait_and_reap

from doctor.trust.subproc import free_port

REPO = Path(__file__).resolve().parents[2]
RANK_JOB = Path(__file__).with_name("rank_job.py")
WORLD = 4


@dataclass
class JobRun:
    returncodes: dict[int, int | None]
    results: dict[int, dict]
    stderr: dict[int, str]
    job_dir: Path
    out_dir: Path
    leftovers: list[int]

    def events(self, schema: str | None = None) -> list[dict]:
        """The job's events, only those of ``schema`` when one is given."""
        path = self.job_dir / "events.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return [e for e in map(json.loads, lines) if schema is None or e.get("schema") == schema]


def start_job(
    tmp: Path,
    fault: str = "none:-1:-1",
    timeout: float = 60,
    env: dict[str, str] | None = None,
    job: str | None = None,
    shared_dir: bool = True,
) -> tuple:
    """Start the ranks; ``shared_dir=False`` is a plain launcher's job: no job directory and
    no job id, every rank with RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT only."""
    token = f"NCCL_DOCTOR_TEST_TOKEN={uuid.uuid4().hex}"
    out_dir, job_dir = tmp / "out", tmp / "job"
    out_dir.mkdir(parents=True)
    port = str(free_port())
    if not shared_dir:
        job_dir = tmp / "home" / "jobs" / f"rdzv-127.0.0.1-{port}-{WORLD}"
    base = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(REPO),
        "RES_OPTIONS": os.environ.get("RES_OPTIONS", ""),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": port,
        "WORLD_SIZE": str(WORLD),
        "FAULT": fault,
        "OUT_DIR": str(out_dir),
        "NCCL_DOCTOR_HOME": str(tmp / "home"),
        "TORCH_CPP_LOG_LEVEL": "ERROR",
        token.split("=")[0]: token.split("=")[1],
        **({"NCCL_DOCTOR_JOB_DIR": str(job_dir)} if shared_dir else {}),
        **(env or {}),
    }
    if job:
        base["NCCL_DOCTOR_JOB"] = job
    procs = {}
    for rank in range(WORLD):
        with (out_dir / f"out{rank}").open("w") as out, (out_dir / f"err{rank}").open("w") as err:
            procs[rank] = subprocess.Popen(
                [sys.executable, str(RANK_JOB)],
                env={**base, "RANK": str(rank), "LOCAL_RANK": str(rank)},
                stdout=out,
                stderr=err,
            )
    return procs, token, out_dir, job_dir


def finish_job(
    procs: dict, token: str, out_dir: Path, job_dir: Path, timeout: float = 60
) -> JobRun:
    # monitor processes end once every rank exited; the store host within heartbeat_timeout
    leftovers = wait_and_reap(list(procs.values()), token, timeout)
    results, stderr = {}, {}
    for rank in procs:
        for line in (out_dir / f"out{rank}").read_text().splitlines():
            if line.startswith("RESULT "):
                results[rank] = json.loads(line[7:])["result"]
        stderr[rank] = (out_dir / f"err{rank}").read_text()
    return JobRun(
        {r: p.returncode for r, p in procs.items()}, results, stderr, job_dir, out_dir, leftovers
    )


@contextmanager
def reaped_on_failure(started: tuple) -> Iterator[None]:
    """Reap the job ``start_job`` started when the block fails: ranks left running fail
    the next test (pytest reports their ``Popen`` objects' ResourceWarnings there; the CI
    run of 2026-11-28 lost a second test to the recover test's failure)."""
    try:
        yield
    except BaseException:
        finish_job(*started, timeout=1)
        raise


def run_job(
    tmp: Path, fault: str = "none:-1:-1", timeout: float = 60, env: dict[str, str] | None = None
) -> JobRun:
    return finish_job(*start_job(tmp, fault, timeout, env), timeout=timeout)
