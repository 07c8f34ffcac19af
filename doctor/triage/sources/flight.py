"""Flight Recorder of a live job: fresh dumps where the ranks allow it, old ones where they exist.

Three ways to a rank's trace, tried in this order:

1. the in-rank agent of ``nccl-doctor launch`` (gloo and NCCL): a request
   file, answered with ``<jobdir>/fr/rank_<N>``;
2. NCCL's debug pipe: writing to ``$TORCH_NCCL_DEBUG_INFO_PIPE_FILE<N>.pipe``
   makes the watchdog dump to ``$TORCH_NCCL_DEBUG_INFO_TEMP_FILE<N>``;
3. a dump already written (``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` or
   ``TORCH_FR_DUMP_TEMP_FILE`` prefix plus rank) since the rank started.

Fresh dumps are taken when the window ends (twice if time allows, so each
rank's own sequence numbers say whether it moved: ``progress_of``). Every file
is read once, by ``doctor.flight.reader`` (safe unpickling; a bad dump is a
``Skipped``), and handed on reduced and raw: aligning ranks is the classifier's job.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

from doctor.evidence import ProgressSample
from doctor.flight.dump import RankDump
from doctor.flight.reader import MAX_DUMP_BYTES, read_dump
from doctor.model import Skipped
from doctor.torchjob.backends import GLOO_FLIGHT_RECORDER
from doctor.triage.fanout import Done, fanout
from doctor.triage.sources.interface import Collected, Source
from doctor.triage.target import RankTarget, Target
from doctor.trust.process_identity import owner_uid, started_at
from doctor.trust.safeio import open_owned

PROBE = "flight-recorder"
DEFAULT_TEMP_PREFIX = "/tmp/nccl_trace_rank_"
ENABLE_HINT = (
    "set TORCH_FR_BUFFER_SIZE (e.g. 2000) and start the ranks with `nccl-doctor launch` "
    "(live dumps for gloo and NCCL) or set TORCH_NCCL_DEBUG_INFO_PIPE_FILE (NCCL)"
)


def trigger_pipe(pipe: Path, dump: Path, timeout: float, owner: int | None = None) -> Path | None:
    """Ask NCCL's watchdog for a dump through its debug pipe; the fresh dump or None.

    Opening a FIFO with ``O_NONBLOCK`` fails at once when nobody reads it, so
    a rank whose watchdog is gone costs nothing.
    """
    before = dump.stat().st_mtime if dump.exists() else 0.0
    try:  # never through a link, and only into a FIFO (root must not write a planted file)
        fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ENXIO, errno.ENOENT, errno.ELOOP):
            return None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISFIFO(info.st_mode) or (owner is not None and info.st_uid != owner):
            return None
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


def written_dump(rank: RankTarget) -> Path | None:
    """A dump the rank already wrote (on a timeout, or asked) since it started."""
    fr_on = rank.env.get("TORCH_FR_BUFFER_SIZE") or rank.env.get("TORCH_NCCL_TRACE_BUFFER_SIZE")
    prefixes = [
        rank.env.get("TORCH_FR_DUMP_TEMP_FILE"),
        rank.env.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE") or (DEFAULT_TEMP_PREFIX if fr_on else None),
    ]
    born, owner = started_at(rank.pid) or 0.0, owner_uid(rank.pid)
    for prefix in filter(None, prefixes):
        path = Path(f"{prefix}{rank.rank}")
        if _owners_file(path, owner, born):
            return path
    return None


def _owners_file(path: Path, owner: int | None, since: float = 0.0) -> bool:
    """Whether ``path`` is the rank owner's own regular file (never through a link), written
    at ``since`` or later: a rank's environment may name any path, root reads only these."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_uid == owner and info.st_mtime >= since


def fresh_dump(rank: RankTarget, timeout: float) -> Path | None:
    """Ask the rank for a dump now (agent, else NCCL pipe); None if it cannot answer."""
    if rank.has_agent and rank.job_dir is not None:
        from doctor.jobdir.agent import request_fr_dump

        owner = owner_uid(rank.pid)
        if owner is None:
            return None
        dump = request_fr_dump(rank.job_dir, rank.rank, timeout, owner)
        return dump if dump is not None and _owners_file(dump, owner) else None
    pipe = rank.env.get("TORCH_NCCL_DEBUG_INFO_PIPE_FILE")
    if pipe:
        prefix = rank.env.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE") or DEFAULT_TEMP_PREFIX
        return trigger_pipe(
            Path(f"{pipe}{rank.rank}.pipe"),
            Path(f"{prefix}{rank.rank}"),
            timeout,
            owner=owner_uid(rank.pid),
        )
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


def progress_of(dumps: tuple[RankDump, ...], at: float) -> list[ProgressSample]:
    """Per rank, how far its own dump says it got (``RankDump.reached``) at time ``at``."""
    return [
        ProgressSample(d.rank, at, last_enqueued_seq=e, last_completed_seq=c)
        for d in sorted(dumps, key=lambda d: d.rank)
        for e, c in (d.reached(),)
    ]


class _Reads:
    """The newest read of each rank's dump, over the rounds of one collection."""

    def __init__(self) -> None:
        self.paths: dict[int, Path] = {}
        self.dumps: dict[int, RankDump] = {}
        self.unreadable: dict[int | None, list[Skipped]] = {}

    def take(self, paths: dict[int, Path], owners: dict[int, int | None]) -> tuple[RankDump, ...]:
        """Read ``paths`` (rank -> file), replacing what earlier rounds read of those ranks.
        Each file is opened through its folders walked and checked as its rank's owner's or
        root's (``safeio.open_owned``), as the bundle copies it: a rank's environment names
        the path, and a folder on it swapped after the check must not lead root elsewhere."""
        read: list[RankDump] = []
        for rank in sorted(paths):
            self.paths[rank] = paths[rank]
            self.dumps.pop(rank, None)
            self.unreadable.pop(rank, None)
            got = read_dump(rank, paths[rank].name, _owned_opener(paths[rank], owners.get(rank)))
            if isinstance(got, Skipped):
                self.unreadable.setdefault(got.rank, []).append(got)
            else:
                self.dumps[got.rank] = got
                read.append(got)
        return tuple(read)


def _owned_opener(path: Path, owner: int | None) -> Callable[[], bytes]:
    def read() -> bytes:
        fd = open_owned(path, None if owner is None else {owner})
        with os.fdopen(fd, "rb") as f:  # read(n) would allocate n bytes up front
            return f.read(os.fstat(fd).st_size + 1)[: MAX_DUMP_BYTES + 1]

    return read


class FlightSource(Source):
    """Flight Recorder dumps of a live job, read once each and handed on reduced."""

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
        owners = {r.rank: owner_uid(r.pid) for r in target.ranks}
        live = [r for r in target.ranks if _live(r)]
        written = {r.rank: p for r in target.ranks if (p := written_dump(r))}
        reads = _Reads()
        progress: list[ProgressSample] = []
        if live:
            time.sleep(max(0.0, start + self.window + 0.05 - time.monotonic()))
            first = self._round(live, deadline - time.monotonic() - 0.1)
            if first:
                progress += progress_of(reads.take(first, owners), 0.0)
                again = self._round(
                    [r for r in live if r.rank in first],
                    min(self.probe_timeout, deadline - time.monotonic() - 0.1),
                )
                if again:
                    at = round(time.monotonic() - start, 3)
                    progress += progress_of(reads.take(again, owners), at)
        reads.take({r: p for r, p in written.items() if r not in reads.paths}, owners)
        silent = [
            Skipped(
                r.rank,
                PROBE,
                "the rank did not answer a dump request in time (it "
                "may hold the GIL, or still be symbolizing its first dump)",
            )
            for r in live
            if r.rank not in reads.paths
        ]
        if not reads.paths:
            gloo = target.ranks and not any(_nccl_capable(r.pid) for r in target.ranks)
            why = f"no Flight Recorder dump: {GLOO_FLIGHT_RECORDER if gloo else ENABLE_HINT}"
            return Collected(skipped=tuple(silent) or (Skipped(None, PROBE, why),))
        return Collected(
            progress=tuple(progress),
            skipped=tuple(silent),
            fr_files=tuple(reads.paths[r] for r in sorted(reads.paths)),
            dumps=tuple(reads.dumps[r] for r in sorted(reads.dumps)),
            unreadable_dumps=tuple(s for ss in reads.unreadable.values() for s in ss),
        )
