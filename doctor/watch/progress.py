"""Progress readings for the detector, from what the ranks already publish.

* **pings** — the wrapper's progress file of each rank (``<jobdir>/progress/rank-<N>``,
  memory the rank writes and this process reads): the ping count of the iteration and
  the time of the last ping. Read every tick; free for the rank, and readable while the
  rank holds the GIL or is stopped.
* **Flight Recorder** — for ranks that do not ping: the sum of their last completed
  sequence numbers (enqueued ones for gloo, whose dumps do not say), from a fresh dump
  asked of the in-rank agent (or NCCL's debug pipe), every ``sample_interval`` (each
  dump costs the rank a little CPU).
* **/proc** — for ranks with neither: their read and write system calls (a gloo rank
  blocked in a collective makes none), every ``sample_interval``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from doctor.restart.watchdog import Phase, ProgressRecord, progress_path, read_progress_file
from doctor.triage.target import RankTarget
from doctor.watch.detector import Reading

PING, FLIGHT, PROC = "ping", "flight-recorder", "proc"


def read_boards(directory: Path, ranks: Iterable[int]) -> dict[int, ProgressRecord]:
    """The progress record of every rank that has one."""
    found = {}
    for rank in ranks:
        record = read_progress_file(progress_path(directory, rank))
        if record is not None:
            found[rank] = record
    return found


def ping_reading(rank: int, record: ProgressRecord) -> Reading:
    """A rank's pings as a reading; armed only while the function runs and pings."""
    running = record.phase == Phase.RUNNING and record.pings > 0
    return Reading(
        rank,
        record.pings,
        record.manual if record.pings else record.auto,
        segment=record.iteration,
        armed=running,
        paused=record.atomic > 0,
        source=PING,
        step_hint=record.step_time,
    )


def moved(
    before: Mapping[int, ProgressRecord], after: Mapping[int, ProgressRecord], ranks: Iterable[int]
) -> bool:
    """Whether one of ``ranks`` moved between two readings: it pinged, or its wrapper went on
    to another phase or iteration. A job that ends shows the second: the last step, the
    results written, the process group destroyed outlast the stall threshold on a loaded
    host, then the ranks leave their function (``EXITING``) while the stall is diagnosed, and
    a rank already gone looked lost (a test job was once stopped as ``rank_loss`` so)."""
    return any(
        (a := after.get(r)) is not None
        and (b := before.get(r)) is not None
        and (a.pings > b.pings or a.phase != b.phase or a.iteration != b.iteration)
        for r in ranks
    )


def pinging(records: Mapping[int, ProgressRecord]) -> set[int]:
    """Ranks whose progress the pings tell: they pinged in this iteration, or are between
    phases of the wrapper (restarting, exiting) where nothing else should be sampled."""
    return {r for r, rec in records.items() if rec.pings > 0 or rec.phase != Phase.RUNNING}


def _io_calls(pid: int) -> int | None:
    try:
        text = Path(f"/proc/{pid}/io").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    try:
        return int(fields["syscr"]) + int(fields["syscw"])
    except (KeyError, ValueError):
        return None


def _flight_counts(ranks: list[RankTarget], timeout: float) -> dict[int, int]:
    """How far each rank got by its own fresh dump (asked of every rank at once): the sum of
    its last completed sequence numbers, or of its last enqueued ones where the dump cannot
    say (gloo's completions)."""
    from doctor.flight.reader import read_flight
    from doctor.triage.fanout import Done, fanout
    from doctor.triage.sources.flight import fresh_dump

    asked = fanout(
        {r.rank: functools.partial(fresh_dump, r, timeout) for r in ranks},
        time.monotonic() + timeout + 0.05,
    )
    counts = {}
    for rank, outcome in asked.items():
        if not isinstance(outcome, Done) or outcome.value is None:
            continue
        for dump in read_flight([outcome.value]).dumps:
            enqueued, completed = dump.reached()
            reached = completed if completed is not None else enqueued
            if reached is not None:
                counts[rank] = reached
    return counts


class Sampler:
    """Flight Recorder or /proc readings for ranks that do not ping, at a low rate."""

    def __init__(self, interval: float, probe_timeout: float = 1.0) -> None:
        self.interval = interval
        self.probe_timeout = probe_timeout
        self._last: dict[int, tuple[str, int, float]] = {}
        self._due = 0.0

    def due(self, now: float) -> bool:
        return now >= self._due

    def sample(self, ranks: list[RankTarget], segment: Mapping[int, int]) -> list[Reading]:
        """One reading per rank: the counter, and when it was last seen to move."""
        self._due = time.monotonic() + self.interval
        live = [r for r in ranks if r.has_agent or r.env.get("TORCH_NCCL_DEBUG_INFO_PIPE_FILE")]
        flight = _flight_counts(live, self.probe_timeout) if live else {}
        now = time.monotonic()
        readings = []
        for rank in ranks:
            if rank.rank in flight:
                source, count = FLIGHT, flight[rank.rank]
            elif (calls := _io_calls(rank.pid)) is not None:
                source, count = PROC, calls
            else:
                continue
            last = self._last.get(rank.rank)
            moved = now if last is None or last[0] != source or last[1] != count else last[2]
            self._last[rank.rank] = (source, count, moved)
            readings.append(
                Reading(rank.rank, count, moved, segment=segment.get(rank.rank, 0), source=source)
            )
        return readings
