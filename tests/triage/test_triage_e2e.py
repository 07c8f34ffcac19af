"""Real hung CPU jobs (4 ranks, gloo) with each injected fault, judged by the real CLI.

Each case starts ``doctor.demo.job`` under torchrun, one process per rank
(as srun starts them), or per rank with the registry and in-rank agent (as
``nccl-doctor launch`` leaves them); waits for the ready file; runs
``nccl-doctor triage --job ID --once --json``; checks the class and the culprit
ranks. One job per fault; the next case's job starts while this one is judged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import psutil
import pytest

from doctor.demo.local import LocalJob

pytestmark = pytest.mark.slow

CASES = [
    # fault, launch, hang class, culprits, what the summary must say
    ("wrong-collective", "torchrun", "collective_mismatch", [2], "rank 2 called all_gather"),
    ("except-clause", "per-rank", "collective_mismatch", [2], "rank 2 called barrier"),
    ("dataloader", "torchrun", "cpu_stuck", [2], "rank 2 is in its data loader"),
    ("gil", "per-rank", "cpu_stuck", [2], "holding the GIL"),
    ("compile", "torchrun", "compile_warmup", [2], "compiling"),
    ("kill", "per-rank", "rank_loss", [2], "killed by SIGKILL"),
    ("straggler", "torchrun", "straggler", [2], "it is the straggler"),
    ("none", "per-rank", "healthy", [], "progress"),
    ("early-exit", "per-rank", "collective_mismatch", [2], "exit code 0"),
    ("subgroup-mismatch", "agent", "collective_mismatch", [2], "all_gather"),
]


STRAGGLE_S = 0.4
"""The straggler's delay per step: long enough that its peers wait in most samples on a
loaded host. At 0.15 s, with two busy loops beside the job, 2 of 20 looks found the
others waiting in under half the samples and said healthy (one CI run failed so); at
0.4 s, 20 of 20 named rank 2."""


ALONE = ("straggler", "none")
"""Cases whose verdict rests on timing (which rank is late): no job is launched beside them.
``early-exit`` follows one of them: its exited rank is a zombie of this process, as the
killed rank of ``kill`` is, and beside another one-process-per-rank job neither zombie can be
told to be its job's (a zombie's environment is gone), so that job's lost rank loses its exit
code (``kill`` launched ``early-exit`` beside it: 'killed by SIGKILL' missing, 3 runs of 3)."""


def triage(job: LocalJob, *args: str) -> subprocess.CompletedProcess[str]:
    return job.triage(*args, timeout=60)


def new_job(tmp: Path, fault: str, launch: str) -> LocalJob:
    return LocalJob(
        f"e2e-{fault}-{uuid.uuid4().hex[:6]}",
        fault,
        tmp,
        launch=launch,
        args=["--straggle", str(STRAGGLE_S)],
    ).spawn_ranks()


def job_for(
    jobs: dict[str, LocalJob], tmp: pytest.TempPathFactory, fault: str, launch: str
) -> LocalJob:
    """The running job of ``fault``, and the next case's job launched beside it: a job's
    start is mostly CPU-bound imports, which overlap this case's triage (at most two jobs
    at a time). A healthy job or a straggler is judged with no job starting beside it."""
    for other in [name for name in jobs if name != fault]:
        jobs.pop(other).stop()
    if fault not in jobs:
        jobs[fault] = new_job(tmp.mktemp(fault), fault, launch)
    after = [c[0] for c in CASES].index(fault) + 1
    if after < len(CASES) and CASES[after][0] not in jobs and fault not in ALONE:
        nxt, nxt_launch = CASES[after][:2]
        jobs[nxt] = new_job(tmp.mktemp(nxt), nxt, nxt_launch)
    return jobs[fault].start()


@pytest.mark.parametrize(
    ("fault", "launch", "hang_class", "culprits", "says"), CASES, ids=[c[0] for c in CASES]
)
def test_fault_is_found(
    kept_jobs, tmp_path_factory, fault, launch, hang_class, culprits, says
) -> None:
    # GIVEN a real 4-rank job that reached the injected fault
    job = job_for(kept_jobs, tmp_path_factory, fault, launch)
    pids = [p.pid for p in job.procs]
    # WHEN triage looks at it once
    done = triage(job, "--once", "--json")
    # THEN the verdict names the fault's class and culprits, and exit 1 means a hang
    doc = json.loads(done.stdout)
    verdict = doc["verdict"]
    found = (verdict["hang_class"], verdict["culprit_ranks"])
    if fault == "none" and found[0] == "straggler":
        # five samples of a job in lock step: 1 look in 40 found a rank late in 3 of them,
        # which only a medium-confidence straggler may claim (high needs late in all 5)
        assert verdict["confidence"] == "medium", doc
    else:
        assert found == (hang_class, culprits), doc
    assert says in verdict["summary"]
    assert done.returncode == (0 if hang_class in ("healthy", "straggler") else 1)
    assert doc["schema"] == "nccl-doctor/triage/v1" and doc["job"] == job.job
    assert doc["collected"]["ranks_expected"] == 4
    # AND the job was not stopped or killed by looking
    for pid in pids:
        if psutil.pid_exists(pid):
            assert psutil.Process(pid).status() != psutil.STATUS_STOPPED


def test_bundle_reproduces_the_verdict_with_analyze(kept_jobs, tmp_path_factory) -> None:
    # GIVEN the agent-launched sub-group mismatch (live Flight Recorder through the agent)
    job = job_for(kept_jobs, tmp_path_factory, "subgroup-mismatch", "agent")
    # (in a folder whose path is wider than the console: a person copies it whole)
    folder = tmp_path_factory.mktemp("out") / ("incident-" + "x" * 90)
    folder.mkdir()
    out = folder / "triage.tar.gz"
    triage(job, "--once", "--json")  # a rank's first Flight Recorder dump is slow: warm it
    # WHEN triage writes a bundle and prints the verdict for a person
    done = triage(job, "--once", "--bundle", str(out))
    assert done.returncode == 1, done.stderr
    # THEN the bundle's path is printed on one line, never cut at the console's width
    assert "collective_mismatch" in done.stdout and f"bundle written: {out}" in done.stdout
    # THEN analyze, from the bundle alone, reaches the same verdict
    env = {"PATH": os.environ["PATH"]}
    again = subprocess.run(
        [sys.executable, "-m", "doctor", "analyze", str(out), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    doc = json.loads(again.stdout)
    assert again.returncode == 1, again.stderr
    assert (doc["verdict"]["hang_class"], doc["verdict"]["culprit_ranks"]) == (
        "collective_mismatch",
        [2],
    )
    # AND the bundle carried the Flight Recorder dumps the agent wrote
    assert doc["groups"], "the bundle's Flight Recorder dumps were not aligned"
