"""The jobs on this host from a process table: listing, the only job, torchrun --standalone."""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.errors import NoSuchJobError, UsageError
from doctor.triage.hostjobs import find_job, host_jobs

HZ = 100


def fake_proc(root: Path, procs: list[tuple[int, int, str, dict[str, str], float]]) -> Path:
    """A /proc with (pid, ppid, cmdline, environment, started seconds after boot) each."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "uptime").write_text("1000.00 1.00\n")
    for pid, ppid, cmd, env, started in procs:
        d = root / str(pid)
        d.mkdir(parents=True)
        rest = ["S", str(ppid)] + ["0"] * 17 + [str(int(started * HZ))] + ["0"] * 30
        d.joinpath("stat").write_text(f"{pid} (python3) {' '.join(rest)}\n")
        d.joinpath("environ").write_bytes(
            b"\0".join(f"{k}={v}".encode() for k, v in env.items()) + b"\0"
        )
        d.joinpath("cmdline").write_bytes(cmd.replace(" ", "\0").encode() + b"\0")
    return root


def ranks(job: str, key: str, parent: int, first: int) -> list:
    return [
        (first + r, parent, "python3 train.py", {"RANK": str(r), "WORLD_SIZE": "2", key: job}, 900)
        for r in range(2)
    ]


def test_a_standalone_torchrun_job_is_found_by_the_rdzv_id_it_was_given(tmp_path: Path) -> None:
    # GIVEN torchrun --standalone --rdzv-id train-7, whose ranks carry a random run id
    proc = fake_proc(
        tmp_path,
        [(50, 1, "python3 -m torch.distributed.run --standalone --rdzv-id train-7 x.py", {}, 880)]
        + ranks("0b1f-random", "TORCHELASTIC_RUN_ID", 50, 60),
    )
    # WHEN the jobs are listed and the given id is looked up
    (job,) = host_jobs(proc)
    target = find_job("train-7", {}, proc)
    # THEN the job is the random id, known under the given one, with its launcher and age
    assert (job.job, job.alias, job.launcher, job.ranks) == (
        "0b1f-random",
        "train-7",
        "torchrun --standalone",
        2,
    )
    assert job.age_s == pytest.approx(100.0)
    assert target.job == "0b1f-random" and [r.rank for r in target.ranks] == [0, 1]


def test_no_job_named_picks_the_only_one_and_lists_several(tmp_path: Path) -> None:
    one = fake_proc(tmp_path / "one", ranks("4242", "SLURM_JOB_ID", 7, 10))
    assert find_job(None, {}, one).job == "4242"
    two = fake_proc(
        tmp_path / "two",
        ranks("4242", "SLURM_JOB_ID", 7, 10) + ranks("r2", "TORCHELASTIC_RUN_ID", 8, 20),
    )
    with pytest.raises(UsageError, match="2 jobs run on this host.*4242.*r2"):
        find_job(None, {}, two)
    with pytest.raises(NoSuchJobError, match="no job runs on this host"):
        find_job(None, {}, fake_proc(tmp_path / "none", []))


def test_an_unknown_id_names_the_jobs_that_exist(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, ranks("4242", "SLURM_JOB_ID", 7, 10))
    with pytest.raises(NoSuchJobError, match=r"jobs on this host: 4242: .*2 ranks, up 100s"):
        find_job("4224", {"NCCL_DOCTOR_HOME": str(tmp_path / "home")}, proc)
