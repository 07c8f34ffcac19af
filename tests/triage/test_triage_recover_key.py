"""The TUI's recover key is offered only where a wrapper can answer it."""

from __future__ import annotations

from pathlib import Path

from doctor.cli.triage import _recover_action
from doctor.jobdir.registry import job_dir, write_state
from doctor.triage.collect import CollectOptions, JobRef


def test_no_recover_key_for_pids_or_unwrapped_jobs(tmp_path: Path) -> None:
    options = CollectOptions(env={"NCCL_DOCTOR_HOME": str(tmp_path)})
    # GIVEN ranks named by pid, or a job with no wrapper state THEN there is no recover action
    assert _recover_action(JobRef(pids=(1,)), options) is None
    assert _recover_action(JobRef(job="plain-job"), options) is None


def test_recover_key_for_a_wrapped_job(tmp_path: Path) -> None:
    env = {"NCCL_DOCTOR_HOME": str(tmp_path)}
    # GIVEN a job whose rank 0 runs inside the restart wrapper (it publishes state)
    write_state(job_dir("wrapped", env), 0, {"iteration": 0, "store": "127.0.0.1:1"})
    # THEN the TUI is handed a recover action
    assert callable(_recover_action(JobRef(job="wrapped"), CollectOptions(env=env)))
