"""Flight Recorder for live triage: NCCL's debug pipe, dumps already written, staleness."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

from doctor.triage.sources.flight import FlightSource, trigger_pipe, written_dump
from doctor.triage.target import RankTarget, Target

DUMPS = Path(__file__).parents[1] / "fixtures" / "fr" / "gloo-wrong-collective"


def test_the_debug_pipe_makes_the_watchdog_dump(tmp_path: Path) -> None:
    # GIVEN a FIFO read by a stand-in for NCCL's watchdog, which dumps when poked
    pipe, dump = tmp_path / "pipe_rank_0.pipe", tmp_path / "trace_rank_0"
    os.mkfifo(pipe)

    def watchdog() -> None:
        with open(pipe, "rb") as f:
            f.read()
        dump.write_bytes((DUMPS / "rank_0").read_bytes())

    reader = threading.Thread(target=watchdog, daemon=True)
    reader.start()
    time.sleep(0.05)
    # WHEN triage writes to the pipe
    got = trigger_pipe(pipe, dump, timeout=5)
    # THEN the fresh dump is returned
    assert got == dump and dump.stat().st_size > 0
    reader.join(5)


def test_a_pipe_nobody_reads_costs_nothing(tmp_path: Path) -> None:
    pipe = tmp_path / "nobody.pipe"
    os.mkfifo(pipe)
    start = time.monotonic()
    assert trigger_pipe(pipe, tmp_path / "dump", timeout=5) is None
    assert trigger_pipe(tmp_path / "missing.pipe", tmp_path / "dump", timeout=5) is None
    assert time.monotonic() - start < 1


def test_dumps_already_written_are_read_and_stale_ones_ignored(tmp_path: Path) -> None:
    # GIVEN dumps written by the ranks at TORCH_NCCL_DEBUG_INFO_TEMP_FILE<rank>
    prefix = tmp_path / "nccl_trace_rank_"
    for rank in range(4):
        shutil.copy(DUMPS / f"rank_{rank}", f"{prefix}{rank}")
    env = {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE": str(prefix)}
    ranks = tuple(RankTarget(r, os.getpid(), "h", r, 4, env) for r in range(4))
    # WHEN the flight source collects
    got = FlightSource(window=0.0).collect(Target("j", "h", ranks, 4), time.monotonic() + 5)
    # THEN every dump is read once, reduced, and kept for a bundle (aligning is the
    # classifier's job)
    assert [d.rank for d in got.dumps] == [0, 1, 2, 3] and got.unreadable_dumps == ()
    assert got.fr_files == tuple(Path(f"{prefix}{r}") for r in range(4))
    # AND a dump older than the rank's process is not this run's
    old = time.time() - 10**7
    os.utime(f"{prefix}0", (old, old))
    assert written_dump(ranks[0]) is None and written_dump(ranks[1]) is not None
