"""Triage under ``torchrun --max-restarts 1`` judges the running attempt, never the last one.

A DDP job of 2 ranks (gloo, CPU) under real torchrun: attempt 0 loses rank 1 to
``kill -9`` after 3 steps, torchrun restarts every rank, and attempt 1 trains
again (its 3 steps awaited on the ready file). What attempt 0 left behind is real:
the agent's failure line for rank 1 in the launcher's log, ``attempt_0`` in
torchrun's log folder, and each rank's Flight Recorder dump (written from
``sitecustomize`` at the 3rd step, as a timed-out attempt leaves them). Then
attempt 1 either gets a fault of its own from outside (``kill -STOP`` of rank 0,
then its data shard turned into a FIFO no one writes) or none: one job for the
three cases, judged in turn. (2 ranks: with 3 on
this 2-core host, a healthy attempt was a high-confidence straggler in 1 of 4 runs,
whichever rank the scheduler left out.)

The contract (DESIGN.md): ``rank_loss`` is "a rank's process is gone while the
others wait". In attempt 1 no rank is gone: rank 1 was restarted and trains. So
the verdict is attempt 1's: its stopped rank, or ``healthy`` while it makes
progress; attempt 0's loss is history torchrun already answered by restarting.

Restarts need ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` (``TrainingJob`` sets it):
see ``doctor.demo.training``.
"""

from __future__ import annotations

import json
import os
import signal
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from triage_helpers import healthy_or_honest_lag

from doctor.demo import inject
from doctor.demo.training import TrainingJob

pytestmark = pytest.mark.slow

WORLD, KILLED, FAULTY = 2, 1, 0
EXPECTED = {
    # attempt 1's fault: hang class, culprits, what the summary says
    "none": ("healthy", [], ""),
    "sigstop": ("cpu_stuck", [FAULTY], f"rank {FAULTY} is stopped"),
    "fifo": ("cpu_stuck", [FAULTY], "opening a FIFO"),
}
"""In this order, on one job: its healthy attempt 1 is judged, then its rank 0 is stopped,
then that rank's shard becomes a FIFO and the rank goes on (SIGCONT), up to the FIFO."""


@dataclass
class Restarted:
    """The module's job, after torchrun restarted it, and where attempt 0 left its dumps."""

    job: TrainingJob
    fr_prefix: Path
    workdir: Path


@pytest.fixture(scope="module")
def restarted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Restarted]:
    # GIVEN a DDP job under torchrun --max-restarts 1 whose rank 1 was killed in attempt 0,
    # and whose restarted ranks (attempt 1) made 3 steps each
    workdir = tmp_path_factory.mktemp("restarted")
    # attempt 0's ranks leave their Flight Recorder traces where triage reads written dumps
    fr_prefix = workdir / "fr" / "trace_rank_"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TORCH_FR_BUFFER_SIZE", "2000")
        env.setenv("TORCH_FR_DUMP_TEMP_FILE", str(fr_prefix))
        env.setenv(inject.DUMP_ENV, "0")
        job = TrainingJob(
            f"rr-{uuid.uuid4().hex[:6]}",
            "ddp",
            "kill",
            workdir,
            launch="torchrun",
            world=WORLD,
            fault_rank=KILLED,
            max_restarts=1,
        )
        with job:
            yield Restarted(job, fr_prefix, workdir)


@pytest.mark.parametrize("fault", list(EXPECTED))
def test_triage_judges_the_restarted_attempt_only(fault: str, restarted: Restarted) -> None:
    hang_class, culprits, says = EXPECTED[fault]
    job = restarted.job
    pids = job.rank_pids()
    assert sorted(pids) == list(range(WORLD))
    attempts = {psutil.Process(p).environ()["TORCHELASTIC_RESTART_COUNT"] for p in pids.values()}
    assert attempts == {"1"}
    # AND attempt 0's end is in the launcher's log (evidence triage must scope away); the
    # agent names its first failure, rank 1's -9 or, when both exits fall in the same
    # second (its timestamps are whole seconds), rank 0's -15 (its SIGTERM)
    log = (restarted.workdir / f"{job.job}.log").read_text(errors="replace")
    assert "failed (exitcode: " in log
    # AND so are attempt 0's Flight Recorder dumps, of every rank
    assert all(Path(f"{restarted.fr_prefix}{rank}").stat().st_size for rank in range(WORLD))
    # AND attempt 1 gets its own fault from outside the training code, or none
    if fault != "none":
        job.inflict(fault, FAULTY)
    if fault == "fifo":  # a rank stopped by the case before goes on, up to the FIFO
        os.kill(pids[FAULTY], signal.SIGCONT)
    # WHEN triage looks at the job once
    done = job.triage("--once", "--json", timeout=90)
    assert done.stdout.strip(), done.stderr
    code, doc = done.returncode, json.loads(done.stdout)
    verdict = doc["verdict"]
    found = (verdict["hang_class"], verdict["culprit_ranks"])
    # THEN nothing of attempt 0 is blamed on attempt 1's ranks: no transport error, no loss
    assert verdict["hang_class"] not in ("network", "rank_loss"), verdict
    # AND attempt 0's Flight Recorder dumps are no trace of attempt 1's ranks (read as one,
    # they made a healthy attempt's proof of progress "high"): gloo wrote none since
    skipped = {s["probe"]: s["reason"] for s in doc["skipped"]}
    assert "no Flight Recorder dump" in skipped.get("flight-recorder", ""), doc["skipped"]
    if fault == "none":
        # AND a training attempt is healthy (or, on a loaded host, a medium straggler)
        assert healthy_or_honest_lag(verdict), verdict
        assert code == 0
        return
    # AND attempt 1's own fault is found, with its culprit only
    assert found == (hang_class, culprits), verdict
    assert says in verdict["summary"]
    assert code == 1
