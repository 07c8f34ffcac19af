"""The restart wrapper under srun, ranks on 3 hosts, no key set by hand (issue 22).

One srun task per rank starts ``tests/restart/rank_job.py`` (the wrapper embedded in
the script). With a job directory every host shares, the ranks agree on the key
through it and recover from a fault in place; without one, every rank stops within
seconds with the sentence that names the fix (it hung until the barrier timeout).

Runs before ``test_multihost_triage.py`` (file order): that file's phased job holds
every CPU of the cluster until the session ends.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakecluster import Cluster

RANK_JOB = Path(__file__).resolve().parents[1] / "restart" / "rank_job.py"
SCRIPT = Path(__file__).with_name("restart_job.sbatch")
PER_HOST = 2
pytestmark = pytest.mark.slow


def run_job(cluster: Cluster, name: str, fault: str, shared: bool) -> tuple[str, float]:
    """Submit the job, wait for it to end; its output and its wall time once running."""
    work = cluster.base / "jobs" / name
    work.mkdir(parents=True)
    registry = work / "registry"
    job = cluster.sbatch(
        str(SCRIPT),
        f"--ntasks-per-node={PER_HOST}",
        f"--output={work}/out",
        sys.executable,
        str(RANK_JOB),
        str(work),
        fault,
        str(registry) if shared else "",
    )
    started = ended = None
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline:
            state = subprocess.run(
                ["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True
            ).stdout.strip()
            if state == "RUNNING" and started is None:
                started = time.monotonic()
            if state in ("", "COMPLETED", "FAILED", "COMPLETING", "CANCELLED"):
                ended = time.monotonic()
                break
            time.sleep(0.2)
    finally:
        if ended is None:
            cluster.scancel(job)
    out = (work / "out").read_text(errors="replace") if (work / "out").exists() else ""
    assert ended is not None, f"job {job} did not end within 180 s\n{out[-3000:]}"
    return out, ended - (started or ended)


def test_srun_on_three_hosts_shares_the_key_through_the_job_directory(cluster: Cluster) -> None:
    # GIVEN 6 ranks on 3 hosts with a shared NCCL_DOCTOR_JOB_DIR WHEN rank 1 raises at step 5
    out, _ = run_job(cluster, "restart-shared", "raise:1:5", shared=True)
    # THEN all six re-enter once and finish with the full world
    lines = [line.split("RESULT ", 1)[1] for line in out.splitlines() if "RESULT " in line]
    results = [json.loads(line) for line in lines]
    world = cluster.names.hosts * PER_HOST
    assert sorted(r["initial_rank"] for r in results) == list(range(world)), out[-4000:]
    for r in results:
        assert r["result"]["iteration"] == 1 and r["result"]["world_size"] == world, out[-4000:]
        assert r["result"]["value"] == r["result"]["expected"], out[-4000:]


def test_srun_on_three_hosts_without_a_shared_key_fails_at_once(cluster: Cluster) -> None:
    # GIVEN the same job with no shared directory and no NCCL_DOCTOR_STORE_KEY
    out, wall = run_job(cluster, "restart-unshared", "none:-1:-1", shared=False)
    # THEN every rank stops with the one sentence that names the fix, not a barrier timeout
    world = cluster.names.hosts * PER_HOST
    sentence = r"nccl-doctor wrapper\[(\d+)\]: rank \d+ on h\d .*every host shares"
    said = set(re.findall(sentence, out))
    assert said == {str(r) for r in range(world)}, out[-4000:]
    assert "timed out" not in out and "RESULT " not in out
    assert wall < 60, wall
