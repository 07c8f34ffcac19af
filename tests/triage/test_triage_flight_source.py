"""Flight Recorder for live triage: NCCL's debug pipe, dumps already written, staleness."""

from __future__ import annotations

import os
import shutil
import subprocess
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


def test_triage_and_analyze_align_once_through_the_same_call(tmp_path: Path, monkeypatch) -> None:
    # GIVEN a job whose four ranks already wrote their dumps, and a count of alignments
    from doctor import verdict
    from doctor.analyze.load import load_evidence
    from doctor.flight import align as aligner
    from doctor.triage.collect import CollectOptions, collect_snapshot
    from doctor.triage.export import write_triage_bundle
    from doctor.verdict.classify import analyse

    calls: list[int] = []

    def counted(*args, **kwargs):
        calls.append(1)
        return aligner.align(*args, **kwargs)

    monkeypatch.setattr(verdict.classify, "align", counted)
    prefix = tmp_path / "nccl_trace_rank_"
    for rank in range(4):
        shutil.copy(DUMPS / f"rank_{rank}", f"{prefix}{rank}")
    env = {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE": str(prefix)}
    ranks = tuple(RankTarget(r, os.getpid(), "h", r, 4, env) for r in range(4))
    target = Target("j", "h", ranks, 4)
    # WHEN triage looks once
    snap = collect_snapshot(target, CollectOptions(interval=0.05), sources=[FlightSource(0.0)])
    # THEN the dumps were aligned exactly once, by the classifier, and the TUI's grid and
    # the verdict share that one alignment
    assert len(calls) == 1 and snap.flight is snap.analysis.flight is not None
    assert snap.verdict.culprit_ranks == (2,)
    # WHEN its bundle is analysed elsewhere THEN the same call reaches the same verdict
    evidence = load_evidence([write_triage_bundle(snap, tmp_path / "b.tar.gz")])
    assert evidence == snap.evidence
    assert analyse(evidence) == snap.analysis and len(calls) == 2


def test_a_dump_of_the_attempt_before_a_restart_is_not_the_new_ranks(tmp_path: Path) -> None:
    # GIVEN a dump written 0.15 s before the rank's process started (torchrun restarted its
    # ranks 0.17-0.48 s after attempt 0's dumps in tests/triage/test_realstack_restarts.py)
    prefix = tmp_path / "trace_rank_"
    dump = Path(f"{prefix}0")
    shutil.copy(DUMPS / "rank_0", dump)
    rank = subprocess.Popen(["sleep", "30"])
    try:
        started = time.time()
        os.utime(dump, (started - 0.15, started - 0.15))
        target = RankTarget(0, rank.pid, "h", 0, 1, {"TORCH_FR_DUMP_TEMP_FILE": str(prefix)})
        # WHEN triage looks for a dump the rank wrote
        # THEN that one is not it
        assert written_dump(target) is None
        # AND one written after the start is
        os.utime(dump, (started + 0.05, started + 0.05))
        assert written_dump(target) == dump
    finally:
        rank.kill()
        rank.wait()
