"""The facts every live rule reads, computed once: rank states and the job's progress.

``job_progress`` decides whether the job moved during the window, from proof
only (see ``doctor.verdict.live`` for the rules that read it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence, Set
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from doctor.evidence import Evidence, ProgressSample, RankProcess, RankStack
from doctor.flight.align import FlightAnalysis
from doctor.model import CollectiveRef, EvidenceLine
from doctor.verdict.stacks import (
    STOPPED_STATUSES,
    WAITING,
    RankState,
    collective_op,
    rank_state,
    top_frame,
)

PROGRESS_CALLS = 8
"""Read/write calls in half a window that count as progress (one gloo step makes dozens)."""
FR_HINT = "Flight Recorder dumps (TORCH_FR_BUFFER_SIZE and `nccl-doctor launch`)"


@dataclass(frozen=True)
class LiveView:
    """The facts every rule reads, computed once from the evidence."""

    evidence: Evidence
    states: dict[int, RankState]
    dead: tuple[int, ...]
    progress: bool | None
    samples: dict[int, list[ProgressSample]]
    frozen: frozenset[int] = frozenset()
    """Ranks in one collective at one call path in every sample (``frozen_ranks``)."""
    flight: FlightAnalysis | None = None
    """The Flight Recorder alignment ``classify`` computed (it names sub-group members)."""
    moving: frozenset[int] = frozenset()
    """Live ranks with proof of their own progress (``moving_ranks``)."""
    shared: dict[str, Any] = field(default_factory=dict, init=False, compare=False, repr=False)
    """What two rules both work out from the view, kept by the first to ask (the live
    ranks that cannot move by themselves: ``culprits``)."""

    @cached_property
    def _processes(self) -> dict[int, RankProcess]:
        """Rank -> process, built once: rules ask per rank, and a look holds 16k ranks."""
        return {p.rank: p for p in reversed(self.evidence.processes)}

    @cached_property
    def _stacks(self) -> dict[int, RankStack]:
        return {s.rank: s for s in reversed(self.evidence.stacks)}

    def process(self, rank: int) -> RankProcess | None:
        return self._processes.get(rank)

    def rank_stack(self, rank: int) -> RankStack | None:
        """The rank's (first) stack."""
        return self._stacks.get(rank)

    @classmethod
    def of(cls, evidence: Evidence, flight: FlightAnalysis | None = None) -> LiveView:
        samples = _stated(evidence.progress)
        read = [
            (s.rank, _loop_state(rank_state(s), samples.get(s.rank, ()))) for s in evidence.stacks
        ]
        states = dict(read)
        dead = tuple(sorted(p.rank for p in evidence.processes if not p.alive))
        for p in evidence.processes:
            if not p.alive:
                states[p.rank] = RankState.DEAD
            elif p.status in STOPPED_STATUSES:
                states[p.rank] = RankState.STOPPED
            else:
                states.setdefault(p.rank, RankState.UNKNOWN)
        moving = frozenset(moving_ranks(evidence))
        frozen = frozenset(frozen_ranks(evidence, samples))
        return cls(
            evidence,
            states,
            dead,
            job_progress(evidence, moving, frozen, {r for r, s in read if s in WAITING}),
            samples,
            frozen,
            flight,
            moving,
        )

    def mostly_elsewhere(self, rank: int) -> bool:
        """Not in a collective in most of the rank's samples (True when it has none)."""
        seen = self.samples.get(rank, [])
        away = sum(s.state != RankState.IN_COLLECTIVE.value for s in seen)
        return not seen or 2 * away > len(seen)

    @cached_property
    def _by_state(self) -> dict[RankState, list[int]]:
        """State -> its ranks, once: the rules ask ``ranks_in`` a dozen times a look."""
        out: dict[RankState, list[int]] = {}
        for rank, state in self.states.items():
            out.setdefault(state, []).append(rank)
        return out

    def ranks_in(self, *wanted: RankState) -> tuple[int, ...]:
        return tuple(sorted(r for w in set(wanted) for r in self._by_state.get(w, ())))

    def stack(self, rank: int) -> str:
        return top_frame(self._stacks.get(rank))

    def waiting_ref(self, waiting: Sequence[int]) -> CollectiveRef | None:
        """The collective the waiters are in, with seq and group from a watchdog line."""
        wanted = set(waiting)  # a set: 16,384 ranks against a tuple was quadratic
        ops = Counter(collective_op(s) for s in self.evidence.stacks if s.rank in wanted)
        if not ops:
            return None
        op = ops.most_common(1)[0][0] or "unknown"
        line = next((e for e in self.evidence.logs if e.kind == "watchdog_timeout" and e.seq), None)
        return CollectiveRef(
            (line.process_group or "0") if line else "unknown", line.seq if line else None, op
        )


def loop_calls(process: RankProcess, stack: RankStack | None) -> int:
    """Read/write calls of the training loop: the main thread and threads with no Python
    frames (gloo's and NCCL's workers), not another Python thread (a metrics uploader,
    a heartbeat), whose calls say nothing about the loop."""
    if stack is None or not process.io_calls_by_thread:
        return process.io_calls_delta or 0
    others = {t.thread_id for t in stack.threads if t is not stack.main}
    return sum(n for tid, n in process.io_calls_by_thread if tid not in others)


def moving_ranks(evidence: Evidence) -> set[int]:
    """Live ranks with proof of their own progress: at least ``PROGRESS_CALLS`` read/write
    calls of the training loop (``loop_calls``), or a main thread caught at different
    call paths across the samples (a rank that waits in one collective, spins in one
    loop or is stopped shows one)."""
    signatures: dict[int, set[str]] = {}
    for s in evidence.progress:
        if s.stack_signature:
            signatures.setdefault(s.rank, set()).add(s.stack_signature)
    # a rank's stack matters only for calls counted per thread
    split = any(p.io_calls_by_thread for p in evidence.processes)
    stacks = {s.rank: s for s in evidence.stacks} if split else {}
    return {
        p.rank
        for p in evidence.processes
        if p.alive
        and p.status not in STOPPED_STATUSES
        and (
            len(signatures.get(p.rank, ())) > 1
            or loop_calls(p, stacks.get(p.rank)) >= PROGRESS_CALLS
        )
    }


_LOOPING = (RankState.USER_CODE.value, RankState.GIL_LOOP.value)


def _loop_state(state: RankState, samples: Sequence[ProgressSample]) -> RankState:
    """Whether a rank in its own code holds the GIL, by most of its samples: one dump can
    catch a Python loop at the moment it lets go (a file read, another thread's turn), as
    a multi-host triage of a GIL-holding rank did in 1 of 2 reads in one CI run."""
    if state.value not in _LOOPING:
        return state
    seen = [s.state for s in samples if s.state in _LOOPING]
    held = 2 * seen.count(RankState.GIL_LOOP.value) - len(seen)
    return RankState.GIL_LOOP if held > 0 else RankState.USER_CODE if held < 0 else state


def _stated(progress: Sequence[ProgressSample]) -> dict[int, list[ProgressSample]]:
    """Rank -> its samples that name a state, in order."""
    seen: dict[int, list[ProgressSample]] = {}
    for s in progress:
        if s.state:
            seen.setdefault(s.rank, []).append(s)
    return seen


def frozen_ranks(
    evidence: Evidence, stated: dict[int, list[ProgressSample]] | None = None
) -> set[int]:
    """Ranks sampled at least twice, in a collective at one and the same call path every
    time: how a waiter of a hung job looks. A waiter of a slow but healthy job is caught
    elsewhere (its forward pass, its data) in some sample of the window. ``stated``:
    ``_stated(evidence.progress)`` when the caller has it."""
    seen = _stated(evidence.progress) if stated is None else stated
    return {
        rank
        for rank, samples in seen.items()
        if len(samples) > 1
        and len({s.stack_signature for s in samples}) == 1
        and all(s.state in WAITING for s in samples)
    }


def job_progress(
    evidence: Evidence,
    moving: Set[int] | None = None,
    frozen: Set[int] | None = None,
    waiting: Set[int] | None = None,
) -> bool | None:
    """Whether the job moved during the window: True only with proof, None when nothing
    can say.

    In order: Flight Recorder sequence ids that moved between two reads; every live
    rank moving (``moving_ranks``; a wrapper's heartbeat file or the agent answering a
    dump makes a few calls, fewer than ``PROGRESS_CALLS``); a stopped rank, or every
    waiting rank frozen in its collective (``frozen_ranks``) without I/O (False);
    sequence ids read twice that did not move (False). The Flight Recorder reads are
    taken after the window, so their cost never looks like progress. ``moving`` and
    ``frozen``, ``waiting`` (ranks whose stack waits): those sets when the caller has
    them (a pass over every rank each).
    """
    readings = [
        s
        for s in evidence.progress
        if s.last_enqueued_seq is not None or s.last_completed_seq is not None
    ]
    fr: dict[int, set[tuple[int | None, int | None]]] = {}
    for s in readings:
        fr.setdefault(s.rank, set()).add((s.last_enqueued_seq, s.last_completed_seq))
    if any(len(v) > 1 for v in fr.values()):
        return True
    alive = [p for p in evidence.processes if p.alive]
    moving = moving_ranks(evidence) if moving is None else moving
    if alive and all(p.rank in moving for p in alive):
        return True
    if waiting is None:
        waiting = {s.rank for s in evidence.stacks if rank_state(s) in WAITING}
    stopped = {p.rank for p in alive if p.status in STOPPED_STATUSES}
    measured = {p.rank for p in alive if p.io_calls_delta is not None}
    frozen = frozen_ranks(evidence) if frozen is None else frozen
    stuck = waiting & measured
    if stopped or (stuck and all(r in frozen and r not in moving for r in stuck)):
        return False
    return False if len(readings) > len(fr) else None


def pyspy_line(rank: int | None, text: str) -> EvidenceLine:
    return EvidenceLine("py-spy", rank, text)
