"""Stall detection from progress: learn the job's own step time, flag a gap far past it.

No I/O and no clock of its own: the watcher feeds ``Reading`` values (a progress
counter per rank, with the time it last moved) and asks ``check(now)``.

Rules, in order:

1. A rank's *step time* is the longest gap between two observed moves of its
   counter among the last ``WINDOW`` gaps: the longest, not the mean, so a job whose
   every fifth step evaluates or logs is judged against its slow steps, not its fast
   ones. The first gap of each segment (an iteration of the wrapper; the first step
   builds communicators and warms caches) is not learned.
2. A rank is judged only once it is past the segment's first step (it moved since the
   segment started, or its counter already stood at ``WARM`` or more when first seen)
   and its step time is known: learned (``LEARN`` gaps), else the source's own hint (the
   wrapper's moving average, for a watcher that started after the job). A hang in the
   first step after a (re)start is the wrapper's soft timeout's to catch.
3. The rank is stalled when it has not moved for ``max(min_stall, stall_factor x
   step time) x backoff``. The job is stalled when any judged rank is: the culprit
   stops first, its peers a step later.
4. Nothing is stalled while any rank is inside ``atomic()`` (a checkpoint write is
   slow on purpose, and a restart would wait for it anyway).
5. After a false alarm the watcher calls ``snooze()``: the backoff doubles until
   any rank moves again, so a slow but healthy phase is looked at rarely, not at
   every tick.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field

WINDOW = 20
"""Gaps remembered per rank (the step time is the longest of them)."""
LEARN = 2
"""Gaps needed before a rank's step time counts as learned."""
WARM = 3
"""A counter first seen at this value or more is past its warm-up steps."""
MAX_BACKOFF = 64.0


@dataclass(frozen=True)
class Reading:
    """Where one rank's progress counter stood, from one source."""

    rank: int
    count: int
    """A counter that only grows within a segment: pings, completed collectives..."""
    moved_at: float
    """Monotonic time of the counter's last move as the source knows it (the ping's own
    time; for sampled sources the time of the sample that saw the move)."""
    segment: int = 0
    """The wrapper's iteration: a new segment (or a smaller count) starts counting again."""
    armed: bool = True
    """False while the rank cannot progress by design (restarting, a waiting spare)."""
    paused: bool = False
    """True while the rank is inside ``atomic()``."""
    source: str = "ping"
    step_hint: float = 0.0
    """The source's own estimate of the step time (0.0: none), used until one is learned."""


@dataclass(frozen=True)
class Stall:
    """The job stopped progressing: who stopped, for how long, against what."""

    ranks: tuple[int, ...]
    """Stalled ranks, the one that stopped first (the likeliest culprit) first."""
    stalled_for: float
    """Seconds since the first of them moved last."""
    step_time: float
    """The job's learned step time (the median over judged ranks)."""
    threshold: float
    """The gap that counted as a stall for the first rank."""
    since: float
    """Monotonic time of the last move of the first stalled rank."""
    source: str


@dataclass
class _Track:
    segment: int
    count: int
    moved_at: float
    started: bool
    """The counter left zero in this segment (its first move is the segment's start)."""
    moves: int = 0
    """Moves since the start of the segment."""
    gaps: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))
    armed: bool = True
    paused: bool = False
    source: str = "ping"
    hint: float = 0.0

    def step_time(self) -> float | None:
        if len(self.gaps) >= LEARN:
            return max(self.gaps)
        return self.hint or None

    def judged(self) -> bool:
        return self.armed and self.started and (self.moves >= 1 or self.count >= WARM)


class Detector:
    """Per-rank tracks of progress readings, and the stall rule over them."""

    def __init__(self, stall_factor: float, min_stall: float) -> None:
        self.stall_factor = stall_factor
        self.min_stall = min_stall
        self.backoff = 1.0
        self._tracks: dict[int, _Track] = {}

    def observe(self, reading: Reading) -> None:
        track = self._tracks.get(reading.rank)
        if track is None or reading.segment != track.segment or reading.count < track.count:
            gaps = track.gaps if track is not None else deque(maxlen=WINDOW)
            track = _Track(
                reading.segment, reading.count, reading.moved_at, reading.count > 0, gaps=gaps
            )
            self._tracks[reading.rank] = track
        elif reading.count > track.count:
            if not track.started:
                track.started = True
            else:
                if track.moves >= 1:  # rule 1: the segment's first gap is warm-up
                    track.gaps.append(max(0.0, reading.moved_at - track.moved_at))
                track.moves += 1
            track.count, track.moved_at = reading.count, reading.moved_at
            self.backoff = 1.0
        track.armed, track.paused, track.source = reading.armed, reading.paused, reading.source
        track.hint = reading.step_hint

    def tracked(self) -> set[int]:
        """Ranks with a track: a rank that left the roster keeps one until forgotten."""
        return set(self._tracks)

    def forget(self, rank: int) -> None:
        """A rank that left the job (excluded, exited) is judged no more."""
        self._tracks.pop(rank, None)

    def acted(self) -> None:
        """The job was acted on (a rank excluded, a restart): what its ranks did in the
        iteration that ends is judged no more. Each is judged again from its first move (in
        the next iteration), however long its restart takes on a loaded host."""
        for track in self._tracks.values():
            track.started = False

    def snooze(self) -> None:
        """A stall was looked at and the job was fine: wait longer before the next look."""
        self.backoff = min(self.backoff * 2, MAX_BACKOFF)

    def step_time(self) -> float | None:
        """The job's learned step time: the median over ranks that learned one."""
        times = [t for track in self._tracks.values() if (t := track.step_time()) is not None]
        return statistics.median(times) if times else None

    def threshold(self, step_time: float) -> float:
        return max(self.min_stall, self.stall_factor * step_time) * self.backoff

    def check(self, now: float) -> Stall | None:
        """The stall of rules 2-4, or None."""
        if any(t.paused for t in self._tracks.values()):
            return None
        stalled: list[tuple[float, int, float, _Track]] = []
        for rank, track in self._tracks.items():
            step = track.step_time()
            if not track.judged() or step is None:
                continue
            limit = self.threshold(step)
            if now - track.moved_at > limit:
                stalled.append((track.moved_at, rank, limit, track))
        if not stalled:
            return None
        stalled.sort(key=lambda s: (s[0], s[1]))
        since, _, limit, first = stalled[0]
        return Stall(
            ranks=tuple(rank for _, rank, _, _ in stalled),
            stalled_for=now - since,
            step_time=self.step_time() or 0.0,
            threshold=limit,
            since=since,
            source=first.source,
        )
