"""`nccl-doctor recover` on a healthy wrapped job, and on a job that does not exist."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from restart_jobs import WORLD, finish_job, start_job

from doctor.registry import read_states

pytestmark = pytest.mark.slow


def test_recover_restarts_every_rank_of_a_healthy_job(tmp_path: Path, cli) -> None:
    # GIVEN a healthy 4-rank wrapped job, running
    started = start_job(tmp_path, env={"STEPS": "80", "STEP_SLEEP": "0.1"}, job="healthy")
    job_dir = started[3]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        states = read_states(job_dir) if job_dir.exists() else {}
        if len(states) == WORLD and all(s["phase"] == "running" for s in states.values()):
            break
        time.sleep(0.1)
    # WHEN recover is asked for a graceful restart
    out = cli(
        "recover",
        "--job",
        "healthy",
        "--reason",
        "test",
        "--timeout",
        "30",
        env={"NCCL_DOCTOR_JOB_DIR": str(job_dir), "PATH": "/usr/bin:/bin"},
    )
    run = finish_job(*started)
    # THEN it reports every rank re-entered, and the job finishes whole
    assert out.returncode == 0, out.stdout + out.stderr
    assert "4 ranks re-entered" in out.stdout
    assert sorted(run.results) == list(range(WORLD)), run.stderr
    for result in run.results.values():
        assert result["iteration"] == 1 and result["world_size"] == WORLD
        assert result["value"] == result["expected"]
    event = run.events()[0]
    assert event["cause"] == "recover" and event["reason"] == "test" and event["rank"] is None
    assert run.leftovers == []


def test_recover_of_no_such_job_is_an_input_error(tmp_path: Path, cli) -> None:
    out = cli(
        "recover",
        "--job",
        "nothing-here",
        env={"NCCL_DOCTOR_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 2
    assert out.stderr.startswith("nccl-doctor: no wrapped rank of job 'nothing-here'")
    assert "Traceback" not in out.stderr
