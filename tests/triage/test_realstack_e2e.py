"""Real training stacks with faults from outside, judged by the real CLI.

Each case trains the tiny GPT with DDP, PyTorch Lightning, Hugging Face
accelerate or FSDP2 (4 ranks, gloo, CPU), whose collectives run inside the framework
(DDP's reducer from backward hooks, buffer broadcasts in forward), never from
hand-written calls. ``doctor.demo.training.TrainingJob`` waits until every
rank made 3 optimizer steps, then does the fault to rank 2 from outside:
SIGSTOP, SIGKILL (one process per rank, as srun starts them), its data shard
turned into a FIFO, a file that makes a thread (from ``sitecustomize``) hold the GIL in
a C call, or (from the start) a sleep in each optimizer step. One job at a time; every
fault but the sleep is done to the job the case before judged (``FOLLOWS``).
"""

from __future__ import annotations

import json
import os
import signal
import uuid
from pathlib import Path

import pytest
from triage_helpers import healthy_or_honest_lag

from doctor.demo.local import LocalJob
from doctor.demo.training import TrainingJob

pytestmark = pytest.mark.slow

EXPECTED = {
    # fault: hang class, culprits, what the summary says, launcher
    "none": ("healthy", [], "", "torchrun"),
    "sigstop": ("cpu_stuck", [2], "rank 2 is stopped", "torchrun"),
    "fifo": ("cpu_stuck", [2], "opening a FIFO", "torchrun"),
    "slow": ("straggler", [2], "straggler", "per-rank"),
    "gil": ("cpu_stuck", [2], "holds the GIL", "per-rank"),
    "kill": ("rank_loss", [2], "rank 2", "per-rank"),  # its exit code: where a zombie is kept
}
FOLLOWS = {"sigstop": "none", "fifo": "sigstop", "gil": "slow", "kill": "gil"}
"""Faults done from outside to the running job of the case named, right after it was judged
(same framework and launcher): a job's start is 10 of its 13 s on this 2-core host, and the
fault's evidence is the same on a job that has been triaged once. The FIFO follows the
stop: its shard becomes the FIFO, then the stopped rank is let go on (SIGCONT) and blocks
at its next batch, as on a job that only ever got the FIFO (none of the ranks' collectives
times out in between: 1800 s). The slow rank then starts holding the GIL (its steps stop
sleeping), and the rank holding it is then killed. A case whose job is missing (run alone,
or after a failure) starts its own."""
FRAMEWORKS = ("ddp", "lightning", "accelerate")
FSDP_FAULTS = ("sigstop", "gil")
"""FSDP2 (``fully_shard``) on CPU: its all-gathers wait in Python frames and in ``Work::wait``."""
FSDP_FOLLOWS = {"gil": "sigstop"}
"""FSDP's stopped rank is let go on, then holds the GIL at its next step."""


def follows(framework: str) -> dict[str, str]:
    return FSDP_FOLLOWS if framework == "fsdp" else FOLLOWS


CASES = [(f, fault) for f in FRAMEWORKS for fault in EXPECTED] + [
    ("fsdp", fault) for fault in FSDP_FAULTS
]


def triage(job: TrainingJob, *args: str) -> tuple[int, dict]:
    done = job.triage("--once", "--json", *args, timeout=60)
    if not done.stdout.strip() and "no rank of job" in done.stderr and job.launch == "per-rank":
        # every rank ended before triage found one: a killed rank's peers exit within 1.5 s
        # of losing it (measured, quiet host), a race a loaded host loses; a user who kept
        # srun's pids looks at the ended ranks by them
        done = job.triage("--once", "--json", *args, timeout=60, by_pids=True)
    assert done.stdout.strip(), done.stderr
    return done.returncode, json.loads(done.stdout)


def job_for(kept: dict[str, LocalJob], framework: str, fault: str, tmp: Path) -> TrainingJob:
    """The kept job (``framework-fault``: the job judged last, which a ``FOLLOWS`` case uses
    next) with the fault done to it when the case follows it; else a new job."""
    before = follows(framework).get(fault)
    job = kept.pop(f"{framework}-{before}", None)
    for other in list(kept):  # one job at a time
        kept.pop(other).stop()
    if isinstance(job, TrainingJob):
        if before == "sigstop" and fault == "gil":  # goes on, then holds the GIL
            os.kill(job.rank_pids()[job.fault_rank], signal.SIGCONT)
        job.inflict(fault)
        if before == "sigstop" and fault == "fifo":  # goes on, up to the FIFO
            os.kill(job.rank_pids()[job.fault_rank], signal.SIGCONT)
        return job
    launch = EXPECTED[fault][3]
    name = f"rs-{framework}-{fault}-{uuid.uuid4().hex[:6]}"
    return TrainingJob(name, framework, fault, tmp, launch=launch).start()


@pytest.mark.parametrize(("framework", "fault"), CASES, ids=[f"{f}-{x}" for f, x in CASES])
def test_a_fault_from_outside_is_found_on_a_real_stack(
    kept_jobs: dict[str, LocalJob], framework: str, fault: str, tmp_path: Path
) -> None:
    if framework in ("lightning", "accelerate"):
        pytest.importorskip(
            {"lightning": "pytorch_lightning", "accelerate": "accelerate"}[framework]
        )
    hang_class, culprits, says, _launch = EXPECTED[fault]
    # GIVEN a real training job whose rank 2 got the fault after 3 steps (or after the case
    # it follows was judged)
    job = job_for(kept_jobs, framework, fault, tmp_path)
    try:
        # WHEN triage looks at it (a slow rank: up to three looks, see below)
        looks = [triage(job)]
        while (
            fault == "slow"
            and len(looks) < 3
            and looks[-1][1]["verdict"]["hang_class"] != hang_class
        ):
            # as the "unknown" verdict advises: look again over a longer window
            looks.append(triage(job, "--interval", "3"))
    finally:
        if fault in follows(framework).values():
            kept_jobs[f"{framework}-{fault}"] = job
        else:
            job.stop()
    code, doc = looks[-1]
    verdict = doc["verdict"]
    found = (verdict["hang_class"], verdict["culprit_ranks"])
    # THEN a healthy job is never called hung; on a loaded 2-core host one of four ranks
    # can honestly lag: a straggler of medium confidence, not a hang
    if fault == "none":
        assert healthy_or_honest_lag(verdict), doc
        assert code == 0
        return
    # AND a slow rank is never confused with another rank; when the host is so loaded that
    # every rank crawls, one look in 1 s may find no lag (measured at load average 20:
    # 4 of 5 looks said straggler; at load 5 a fresh clone's accelerate job gave no proof
    # of progress in three 1 s looks), hence up to three looks, the later ones longer
    assert all(d["verdict"]["culprit_ranks"] in ([], [2]) for _, d in looks), looks
    # AND a fault gives its class and culprits, and a hung job never exits 0
    assert found == (hang_class, culprits), doc
    assert says in verdict["summary"]
    assert code == (0 if hang_class == "straggler" else 1)
