"""The job registry and the evidence JSON that bundles carry."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from doctor.evidence import (
    Evidence,
    Frame,
    GpuSample,
    LogEvent,
    ProgressSample,
    RankProcess,
    RankStack,
    ThreadStack,
)
from doctor.jobdir.registry import (
    RankRecord,
    job_dir,
    list_jobs,
    read_ranks,
    read_states,
    register_rank,
    registry_root,
    write_state,
)
from doctor.model import Skipped


def test_registry_round_trip_is_private_and_sorted(tmp_path: Path) -> None:
    env = {"NCCL_DOCTOR_HOME": str(tmp_path)}
    directory = job_dir("job-1", env)
    for rank in (2, 0, 1):
        register_rank(RankRecord("job-1", rank, 3, rank, "h", 100 + rank, 1.0), directory)
    (directory / "rank-9.json").write_text("{not json")
    assert [r.rank for r in read_ranks(directory)] == [0, 1, 2]
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert list_jobs(env) == ["job-1"]


def test_job_dir_env_wins_and_unsafe_ids_are_refused(tmp_path: Path) -> None:
    assert job_dir("x", {"NCCL_DOCTOR_JOB_DIR": str(tmp_path)}) == tmp_path
    assert registry_root({"XDG_RUNTIME_DIR": "/run/u"}) == Path("/run/u/nccl-doctor")
    with pytest.raises(ValueError):
        job_dir("../../etc", {"NCCL_DOCTOR_HOME": str(tmp_path)})


def test_wrapper_state_is_replaced_atomically(tmp_path: Path) -> None:
    write_state(tmp_path, 1, {"iteration": 0})
    write_state(tmp_path, 1, {"iteration": 1})
    assert read_states(tmp_path) == {1: {"iteration": 1}}
    assert not list(tmp_path.glob(".*tmp"))


def test_evidence_survives_json() -> None:
    # GIVEN evidence of every kind WHEN written as JSON and read back THEN it is equal
    frame = Frame("all_reduce", "torch/distributed/distributed_c10d.py", 3252)
    evidence = Evidence(
        job="j",
        ranks_expected=2,
        processes=(
            RankProcess(0, 11, "h", True, local_rank=0, cpu_seconds_delta=0.0),
            RankProcess(1, None, "h", False, exit_code=-9),
        ),
        stacks=(
            RankStack(0, (ThreadStack(11, "MainThread", (frame,), True, True, True),), "py-spy"),
        ),
        gpus=(GpuSample(0, 0, throttle_reasons=("HW_SLOWDOWN",), xid_events=(79,)),),
        logs=(LogEvent(0, "watchdog_timeout", "x", seq=12, op="ALLREDUCE"),),
        progress=(ProgressSample(0, 1.5, 12, 11, "sig"),),
        skipped=(Skipped(1, "py-spy", "process gone"),),
        seconds=0.8,
    )
    assert Evidence.from_json(json.loads(json.dumps(evidence.to_json()))) == evidence
    assert str(frame) == "all_reduce (torch/distributed/distributed_c10d.py:3252)"
