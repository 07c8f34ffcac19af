"""The session's 3-host cluster and the one phased job the multi-host tests share.

The cluster (``fakecluster``) comes up once per session and is torn down, by
PID, namespaces and bridge included, even when a test fails. The job runs two
ranks on each host; tests switch its fault (``phased_job.py``) instead of
starting a job each, so the suite pays for one torch start-up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from clusterconf import ClusterNames
from fakecluster import Cluster, cluster_or_skip

HERE = Path(__file__).parent
LAUNCH_ID = "phased-launch"
RANKS_PER_HOST = 2
TRIAGE_TIMEOUT = 30
"""Generous: on a quiet machine a round takes 2-3 s; on a loaded one (load 16 on 2 cores
seen) starting Python on each host alone can take seconds. Only the cut-off test, which
checks the deadline, sets its own."""


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    names = ClusterNames.from_env(os.environ)
    with cluster_or_skip(names, tmp_path_factory.mktemp("cluster")) as running:
        yield running


@dataclass
class PhasedJob:
    """The running job, its control file, and triage as run on the login node."""

    cluster: Cluster
    job: str
    control: Path
    ready: Path
    job_dir: Path
    """The shared ``NCCL_DOCTOR_JOB_DIR`` every rank's ``nccl-doctor launch`` registers in."""
    launch_id: str
    phase: int = 0
    fault: str = ""

    @property
    def world(self) -> int:
        return self.cluster.names.hosts * RANKS_PER_HOST

    def enter(self, fault: str, rank: int = -1, timeout: float = 120) -> None:
        """Switch the job to ``fault`` on ``rank`` and wait until it is there."""
        if self.fault == f"{fault} {rank}":
            return
        self.phase += 1
        self.control.write_text(f"{self.phase} {fault} {rank}\n")
        want = [f"fault {self.phase} {rank}"] if rank >= 0 and fault != "straggler" else []
        want += [] if want else [f"seen {self.phase} {r}" for r in range(self.world)]
        _wait_lines(self.ready, want, timeout, self.log)
        self.fault = f"{fault} {rank}"

    def log(self) -> str:
        out = self.cluster.base / "jobs" / f"{self.job}.out"
        return out.read_text(errors="replace")[-3000:] if out.exists() else ""

    def triage(
        self, *args: str, job: str | None = None, env: dict[str, str] | None = None
    ) -> tuple[dict[str, Any], float, int]:
        """``nccl-doctor triage --job ID --once --json ARGS`` on the login node."""
        env = {**os.environ, **self.cluster.env, **(env or {})}
        job = job or self.job
        argv = [sys.executable, "-m", "doctor", "triage", "--job", job, "--once", "--json"]
        if "--timeout" not in args:
            args = (*args, "--timeout", str(TRIAGE_TIMEOUT))
        start = time.monotonic()
        done = subprocess.run(
            self.cluster.login([*argv, *args]),
            capture_output=True,
            text=True,
            env=env,
            timeout=TRIAGE_TIMEOUT + 60,
        )
        wall = time.monotonic() - start
        assert done.stdout, f"rc={done.returncode}\n{done.stderr[-3000:]}"
        return json.loads(done.stdout), wall, done.returncode


def _wait_lines(path: Path, lines: list[str], timeout: float, details: Any) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        have = set(path.read_text().splitlines()) if path.exists() else set()
        if all(line in have for line in lines):
            return
        time.sleep(0.1)
    raise AssertionError(f"the job did not reach {lines} within {timeout}s\n{details()}")


def start_phased_job(cluster: Cluster) -> PhasedJob:
    """Submit the phased job (2 ranks per host, each started by ``nccl-doctor launch`` with a
    shared job directory) and wait until every rank runs."""
    work = cluster.base / "jobs"
    control, ready, job_dir = work / "control", work / "ready", work / "registry"
    control.write_text("0 none -1\n")
    job_dir.mkdir(mode=0o700, exist_ok=True)
    job = cluster.sbatch(
        str(HERE / "phased_job.sbatch"),
        f"--ntasks-per-node={RANKS_PER_HOST}",
        f"--output={work}/%j.out",
        sys.executable,
        str(HERE / "phased_job.py"),
        str(control),
        str(ready),
        str(job_dir),
        LAUNCH_ID,
    )
    running = PhasedJob(cluster, job, control, ready, job_dir, LAUNCH_ID)
    try:
        _wait_lines(ready, [f"seen 0 {r}" for r in range(running.world)], 240, running.log)
    except BaseException:
        cluster.scancel(job)
        raise
    return running


_PHASED: list[PhasedJob] = []
"""The phased job while it runs, for the hook below."""


@pytest.fixture(scope="session")
def phased_job(cluster: Cluster) -> Iterator[PhasedJob]:
    """The phased job, started healthy; cancelled after this folder's last test."""
    running = start_phased_job(cluster)
    _PHASED.append(running)
    try:
        yield running
    finally:
        _cancel_phased()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """A session fixture outlives its folder (no ``__init__.py``: "package" scope is the
    session), and the phased job left hung (5 ranks) ran on through the restart and triage
    suites, where a triage test listed it among the host's jobs."""
    if nextitem is None or HERE not in Path(nextitem.path).parents:
        _cancel_phased()


def _cancel_phased() -> None:
    while _PHASED:
        running = _PHASED.pop()
        running.cluster.scancel(running.job)
