"""`nccl-doctor recover` on a healthy wrapped job, and on a job that does not exist."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from restart_jobs import WORLD, finish_job, reaped_on_failure, start_job

from doctor.jobdir.registry import read_states

pytestmark = pytest.mark.slow


def wait_running(job_dir: Path, iteration: int, timeout: float = 60) -> None:
    """Until every rank's state says ``running`` in ``iteration``; the deadline bounds a hang."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        states = read_states(job_dir) if job_dir.exists() else {}
        if len(states) == WORLD and all(
            s["phase"] == "running" and s.get("iteration") == iteration for s in states.values()
        ):
            return
        time.sleep(0.05)
    raise AssertionError(f"the job's ranks were not all running iteration {iteration}: {states}")


def test_recover_restarts_every_rank_of_a_healthy_job(tmp_path: Path, cli) -> None:
    # GIVEN a healthy 4-rank wrapped job, running until it is told to stop (a fixed
    # number of steps could end before recover starts on a loaded host)
    stop = tmp_path / "stop"
    started = start_job(tmp_path, env={"STOP_FILE": str(stop), "STEP_SLEEP": "0.05"}, job="healthy")
    job_dir = started[3]
    with reaped_on_failure(started):
        wait_running(job_dir, iteration=0)
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
        # AND the restarted ranks train again until told to stop
        wait_running(job_dir, iteration=1)
    stop.touch()
    run = finish_job(*started)
    # THEN it reports every rank re-entered, and the job finishes whole
    assert out.returncode == 0, out.stdout + out.stderr
    assert "4 ranks re-entered" in out.stdout
    assert sorted(run.results) == list(range(WORLD)), run.stderr
    for result in run.results.values():
        assert result["iteration"] == 1 and result["world_size"] == WORLD
        assert result["value"] == result["expected"] and result["steps"] >= 1
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
