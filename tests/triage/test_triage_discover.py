"""Discovery on real processes: the process table, lost ranks, zombies, error files, registry."""

from __future__ import annotations

import json
import os
import socket
import uuid
from pathlib import Path

import pytest
from triage_helpers import SLEEPER

from doctor.errors import NoSuchJobError, UsageError
from doctor.jobdir.registry import RankRecord, register_rank
from doctor.triage.discover import discover_job, discover_pids, parse_pids
from doctor.trust.process_identity import start_time

SPAWNS_WORKER = (
    "import os, subprocess, sys, time\n"
    "w = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
    "open(sys.argv[1], 'w').close()\n"
    "try:\n    time.sleep(120)\nfinally:\n    w.kill(); w.wait()\n"
)
"""A rank with a data-loader-like child that inherits its RANK."""
EXITS = "import sys; open(sys.argv[1], 'w').close()"


def job_env(job: str, rank: int, **extra: str) -> dict[str, str]:
    return {
        "TORCHELASTIC_RUN_ID": job,
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": "4",
        **extra,
    }


def test_ranks_lost_ranks_children_and_error_files(sleepers, tmp_path: Path) -> None:
    # GIVEN ranks 0, 1, 3 of a 4-rank job (rank 1 with a worker child), rank 2 exited
    # unreaped, and torchrun's error file for rank 2
    job = f"tj-{uuid.uuid4().hex[:8]}"
    attempt = tmp_path / "attempt_0"
    (attempt / "2").mkdir(parents=True)
    (attempt / "2" / "error.json").write_text(
        json.dumps(
            {
                "message": {
                    "message": "RuntimeError: CUDA error: an illegal memory access was encountered",
                    "extraInfo": {"py_callstack": "...", "timestamp": "1"},
                }
            }
        )
    )
    procs = {}
    for rank in (0, 1, 2, 3):
        env = job_env(job, rank, TORCHELASTIC_ERROR_FILE=str(attempt / str(rank) / "error.json"))
        code = {1: SPAWNS_WORKER, 2: EXITS}.get(rank, SLEEPER)
        procs[rank] = sleepers(env, f"rank{rank}", code)
    # WHEN the job is discovered
    target = discover_job(job, os.environ)
    # THEN the live ranks are the topmost processes, the lost one carries its error
    assert {r.rank: r.pid for r in target.ranks} == {r: procs[r].pid for r in (0, 1, 3)}
    assert target.world_size == 4 and target.ranks_expected == 4
    (lost,) = target.lost
    assert (lost.rank, lost.status, lost.pid, lost.exit_code) == (2, "zombie", procs[2].pid, 0)
    assert "illegal memory access" in lost.error
    assert target.launcher is not None and target.launcher.pid == os.getpid()
    assert target.host == socket.gethostname()


LAUNCHES = (
    "import json, os, subprocess, sys, time\n"
    "envs = json.loads(sys.argv[2])\n"
    "ranks = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'],\n"
    "                          env={**os.environ, **e}) for e in envs]\n"
    "time.sleep(1.0)\n"
    "open(sys.argv[1], 'w').close()\n"
    "time.sleep(120)\n"
)
"""A launcher of its own for the ranks: its children are the job's only ones, so no zombie
another test left behind this process can stand for a lost rank."""


def test_a_rank_that_never_appeared_is_missing(sleepers) -> None:
    # GIVEN a launcher that started ranks 0-2 of a 4-rank job (rank 3 never started)
    job = f"tj-{uuid.uuid4().hex[:8]}"
    envs = [job_env(job, rank) for rank in (0, 1, 2)]
    launcher = sleepers({}, "launcher", LAUNCHES.replace("sys.argv[2]", repr(json.dumps(envs))))
    # WHEN the job is discovered THEN rank 3 is missing, and the launcher is the one found
    target = discover_job(job, os.environ)
    assert [r.rank for r in target.ranks] == [0, 1, 2]
    assert target.launcher is not None and target.launcher.pid == launcher.pid
    assert [(lost.rank, lost.status) for lost in target.lost] == [(3, "missing")]


def test_ranks_on_other_hosts_are_remote_not_lost(sleepers) -> None:
    # GIVEN local ranks 4..7 of an 8-rank job on two hosts (torchrun sets LOCAL_WORLD_SIZE)
    job = f"tj-{uuid.uuid4().hex[:8]}"
    for local in range(4):
        sleepers(
            {
                **job_env(job, 4 + local),
                "LOCAL_RANK": str(local),
                "WORLD_SIZE": "8",
                "LOCAL_WORLD_SIZE": "4",
            },
            f"r{local}",
        )
    target = discover_job(job, os.environ)
    assert target.remote == (0, 1, 2, 3) and not target.lost and target.ranks_expected == 4


def test_the_launch_registry_finds_ranks_and_dead_records(sleepers, tmp_path: Path) -> None:
    job = f"lj-{uuid.uuid4().hex[:8]}"
    env = {"NCCL_DOCTOR_HOME": str(tmp_path)}
    directory = tmp_path / "jobs" / job
    live = sleepers({"RANK": "0", "WORLD_SIZE": "2"}, "r0")
    host = socket.gethostname()
    started = start_time(live.pid) or 0
    register_rank(
        RankRecord(job, 0, 2, 0, host, live.pid, 0.0, agent=True, pid_start=started), directory
    )
    register_rank(RankRecord(job, 1, 2, 1, host, 2**22 + 7, 0.0), directory)
    target = discover_job(job, env)
    assert [(r.rank, r.pid, r.has_agent, r.job_dir) for r in target.ranks] == [
        (0, live.pid, True, directory)
    ]
    assert [(lost.rank, lost.status) for lost in target.lost] == [(1, "missing")]


def test_pids_and_input_errors(sleepers) -> None:
    a = sleepers({}, "a")
    b = sleepers({}, "b")
    target = discover_pids([a.pid, b.pid])
    assert [(r.rank, r.pid) for r in target.ranks] == [(0, a.pid), (1, b.pid)]
    with pytest.raises(NoSuchJobError):
        discover_pids([2**22 + 11])
    with pytest.raises(NoSuchJobError):
        discover_job(f"nope-{uuid.uuid4().hex[:6]}", {"NCCL_DOCTOR_HOME": "/nonexistent"})
    with pytest.raises(UsageError):
        parse_pids("12,x")
    with pytest.raises(UsageError):
        discover_job("../etc", {})


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--job", "nope-zz-1"], "no rank of job 'nope-zz-1' runs on this host"),
        (["--job", "a", "--pids", "1"], "one of --job ID or --pids P,P, not both"),
        (["--pids", "1,two"], "not 'two'"),
        (["--pids", "1", "--interval", "0"], "--interval must be between"),
    ],
)
def test_cli_input_errors_are_one_sentence_and_exit_2(cli, args, message, tmp_path) -> None:
    env = {"PATH": os.environ["PATH"], "NCCL_DOCTOR_HOME": str(tmp_path)}
    done = cli("triage", *args, "--once", env=env)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_mistyped_job_id_is_told_the_jobs_the_registry_knows(cli, tmp_path) -> None:
    # GIVEN a launch registry that knows job "train-42" (no rank of it alive)
    env = {"PATH": os.environ["PATH"], "NCCL_DOCTOR_HOME": str(tmp_path)}
    (tmp_path / "jobs" / "train-42").mkdir(parents=True)
    # WHEN the user asks for "train-24" THEN the one sentence names the job that exists
    done = cli("triage", "--job", "train-24", "--once", env=env)
    assert done.returncode == 2
    assert "the launch registry here knows: train-42" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
