"""A torchrun job torn down after a rank was killed: its log directory still names the rank."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from doctor.demo.training import TrainingJob
from doctor.triage.ended import ended_torchrun_job


def write_run(tmp: Path, job: str, errors: dict[int, str]) -> None:
    attempt = tmp / "torchelastic_abc" / f"{job}_x1" / "attempt_0"
    for rank in range(4):
        (attempt / str(rank)).mkdir(parents=True)
        if rank in errors:
            doc = {"message": {"message": errors[rank], "extraInfo": {"timestamp": "1"}}}
            (attempt / str(rank) / "error.json").write_text(json.dumps(doc))


def test_the_last_attempt_of_an_ended_job_gives_every_rank_and_its_error(tmp_path: Path) -> None:
    # GIVEN torchrun's log directory of run "t-1": ranks 0, 1, 3 raised, rank 2 wrote nothing
    peer = "RuntimeError: [pair.cc:553] Connection closed by peer [127.0.0.1]:53438"
    write_run(tmp_path, "t-1", {0: peer, 1: peer, 3: peer})
    # WHEN the ended job is read
    target = ended_torchrun_job("t-1", tmp_path)
    # THEN every rank is lost, with its error; no live rank; another id finds nothing
    assert target is not None and target.ranks == () and target.world_size == 4
    assert [(r.rank, r.error[:12]) for r in target.lost] == [
        (0, "RuntimeError"),
        (1, "RuntimeError"),
        (2, ""),
        (3, "RuntimeError"),
    ]
    assert ended_torchrun_job("t-2", tmp_path) is None


@pytest.mark.slow
def test_a_torn_down_ddp_job_is_rank_loss_of_the_killed_rank(tmp_path: Path) -> None:
    # GIVEN a DDP job under torchrun (no restarts) whose rank 2 was killed: torchrun tore
    # every rank down and exited
    job = TrainingJob(f"td-{uuid.uuid4().hex[:6]}", "ddp", "kill", tmp_path, launch="torchrun")
    with job:
        job.procs[0].wait(timeout=120)
        # WHEN triage looks for it
        done = job.triage("--once", "--json")
    # THEN its files give rank_loss naming rank 2, not "no such job" (a rank that torchrun's
    # SIGTERM reached before it raised left no error file either: then both are named, low)
    doc = json.loads(done.stdout)
    verdict = doc["verdict"]
    assert verdict["hang_class"] == "rank_loss" and 2 in verdict["culprit_ranks"], doc
    assert verdict["culprit_ranks"] == [2] or verdict["confidence"] == "low"
    assert done.returncode == 1
