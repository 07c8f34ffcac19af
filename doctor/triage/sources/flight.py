"""Flight Recorder of a live job: fresh dumps where the ranks allow it, old ones where they exist.

Three ways to a rank's trace, tried in this order:

1. the in-rank agent of ``nccl-doctor launch`` (gloo and NCCL): a request
   file, answered with ``<jobdir>/fr/rank_<N>``;
2. NCCL's debug pipe: writing to ``$TORCH_NCCL_DEBUG_INFO_PIPE_FILE<N>.pipe``
   makes the watchdog dump to ``$TORCH_NCCL_DEBUG_INFO_TEMP_FILE<N>``;
3. a dump already written (``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` or
   ``TORCH_FR_DUMP_TEMP_FILE`` prefix plus rank) since the rank started.

Fresh dumps are taken when the window ends (twice if time allows, so the
sequence numbers say whether the job moved: ``progress_of``). The dumps are read and aligned by
``doctor.flight`` (safe unpickling; a bad dump is a ``Skipped``).
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import psutil

from doctor.backends import GLOO_FLIGHT_RECORDER
from doctor.evidence import ProgressSample
from doctor.flight.align import FlightAnalysis, align
from doctor.flight.reader import read_flight
from doctor.model import Skipped
from doctor.triage.fanout import Done, fanout
from doctor.triage.sources.interface import Collected, Source
from doctor.triage.target import RankTarget, Target

PROBE = "flight-recorder"
DEFAULT_TEMP_PREFIX = "/tmp/nccl_trace_rank_"
ENABLE_HINT = (
    "set TORCH_FR_BUFFER_SIZE (e.g. 2000) and start the ranks with `nccl-doctor launch` "
    "(live dumps for gloo and NCCL) or set TORCH_NCCL_DEBUG_INFO_PIPE_FILE (NCCL)"
)


def trigger_pipe(pipe: Path, dump: Path, timeout: float) -> Path | None:
    """Ask NCCL's watchdog for a dump through its debug pipe; the fresh dump or None.

    Opening a FIFO with ``O_NONBLOCK`` fails at once when nobody reads it, so
    a rank whose watchdog is gone costs nothing.
    """
    before = dump.stat().st_mtime if dump.exists() else 0.0
    try:
        fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno in (errno.ENXIO, errno.ENOENT):
            return None
        raise
    try:
        os.write(fd, b"1\n")
    finally:
        os.close(fd)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if dump.exists() and dump.stat().st_mtime > before and dump.stat().st_size > 0:
            time.sleep(0.02)  # let the writer finish the file it just created
            return dump
        time.sleep(0.02)
    return None


def _started(pid: int) -> float:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return 0.0


def written_dump(rank: RankTarget) -> Path | None:
    """A dump the rank already wrote (on a timeout, or asked) since it started."""
    fr_on = rank.env.get("TORCH_FR_BUFFER_SIZE") or rank.env.get("TORCH_NCCL_TRACE_BUFFER_SIZE")
    prefixes = [
        rank.env.get("TORCH_FR_DUMP_TEMP_FILE"),
        rank.env.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE") or (DEFAULT_TEMP_PREFIX if fr_on else None),
    ]
    born = _started(rank.pid)
    for prefix in filter(None, prefixes):
        path = Path(f"{prefix}{rank.rank}")
        try:
            if path.is_file() and path.stat().st_mtime >= born:
                return path
        except OSError:
            continue
    return None


def fresh_dump(rank: RankTarget, timeout: float) -> Path | None:
    """Ask the rank for a dump now (agent, else NCCL pipe); None if it cannot answer."""
    if rank.has_agent and rank.job_dir is not None:
        from doctor.agent import request_fr_dump

        return request_fr_dump(rank.job_dir, rank.rank, timeout)
    pipe = rank.env.get("TORCH_NCCL_DEBUG_INFO_PIPE_FILE")
    if pipe:
        prefix = rank.env.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE") or DEFAULT_TEMP_PREFIX
        return trigger_pipe(Path(f"{pipe}{rank.rank}.pipe"), Path(f"{prefix}{rank.rank}"), timeout)
    return None


def _nccl_capable(pid: int) -> bool:
    """Whether the rank has NCCL loaded (a CPU-only torch cannot run NCCL: gloo, then)."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as maps:
            return any(b"libnccl" in line for line in maps)
    except OSError:
        return True  # unknown: say what works for both


def _live(rank: RankTarget) -> bool:
    return (rank.has_agent and rank.job_dir is not None) or bool(
        rank.env.get("TORCH_NCCL_DEBUG_INFO_PIPE_FILE")
    )


def progress_of(analysis: FlightAnalysis, at: float) -> list[ProgressSample]:
    """Per rank, the sums of enqueued and completed sequence ids over its groups."""
    totals: dict[int, list[int | None]] = {}
    for group in analysis.groups:
        for pos in group.positions:
            enq, done = totals.setdefault(pos.rank, [0, 0])
            totals[pos.rank] = [
                None if enq is None or pos.enqueued is None else enq + pos.enqueued,
                None if done is None or pos.completed is None else done + pos.completed,
            ]
    return [
        ProgressSample(rank, at, last_enqueued_seq=e, last_completed_seq=c)
        for rank, (e, c) in sorted(totals.items())
    ]


class FlightSource(Source):
    name = PROBE

    def __init__(self, window: float = 1.0, probe_timeout: float = 1.0) -> None:
        self.window = window
        self.probe_timeout = probe_timeout

    @staticmethod
    def _round(ranks: list[RankTarget], budget: float) -> dict[int, Path]:
        """One fresh dump per rank, in parallel, within ``budget`` seconds."""
        if budget <= 0.1:
            return {}
        calls = {r.rank: (lambda r=r: fresh_dump(r, budget)) for r in ranks}
        got = fanout(calls, time.monotonic() + budget + 0.05)
        return {k: v.value for k, v in got.items() if isinstance(v, Done) and v.value}

    def collect(self, target: Target, deadline: float) -> Collected:
        """Dump rounds start when the window ends: a rank's first dump is slow (PyTorch
        symbolizes its stacks), and its CPU and file writes must not look like progress to
        the process probe. A second round, if time is left, shows whether sequence ids moved.
        """
        start = time.monotonic()
        live = [r for r in target.ranks if _live(r)]
        paths = {r.rank: p for r in target.ranks if (p := written_dump(r))}
        progress: list[ProgressSample] = []
        if live:
            time.sleep(max(0.0, start + self.window + 0.05 - time.monotonic()))
            first = self._round(live, deadline - time.monotonic() - 0.1)
            paths.update(first)
            if first:
                progress += progress_of(self._analyse(first, target), 0.0)
                again = self._round(
                    [r for r in live if r.rank in first],
                    min(self.probe_timeout, deadline - time.monotonic() - 0.1),
                )
                paths.update(again)
                if again:
                    progress += progress_of(
                        self._analyse(again, target), round(time.monotonic() - start, 3)
                    )
        silent = [
            Skipped(
                r.rank,
                PROBE,
                "the rank did not answer a dump request in time (it "
                "may hold the GIL, or still be symbolizing its first dump)",
            )
            for r in live
            if r.rank not in paths
        ]
        if not paths:
            gloo = target.ranks and not any(_nccl_capable(r.pid) for r in target.ranks)
            why = f"no Flight Recorder dump: {GLOO_FLIGHT_RECORDER if gloo else ENABLE_HINT}"
            return Collected(skipped=tuple(silent) or (Skipped(None, PROBE, why),))
        analysis = self._analyse(paths, target)
        return Collected(
            progress=tuple(progress),
            skipped=tuple(silent),
            fr_files=tuple(paths[r] for r in sorted(paths)),
            flight=analysis,
        )

    @staticmethod
    def _analyse(paths: dict[int, Path], target: Target) -> FlightAnalysis:
        read = read_flight(paths[r] for r in sorted(paths))
        return align(read.dumps, read.skipped, world_size=target.world_size)
