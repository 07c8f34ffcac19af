"""Rules over live evidence (stacks, liveness, NVML, NCCL log lines): ``Evidence -> [Candidate]``.

First the job's *progress* over the window (``job_progress``): Flight
Recorder sequence ids that advanced, else read/write system calls on every
live rank (a gloo rank blocked in a collective makes none), else unknown.
Then each rule looks at the ranks' states (``doctor.verdict.stacks``):

=================  ========  ====================================================
rule               strength  fires when
=================  ========  ====================================================
rank_loss          90        an expected rank is dead, a zombie or missing
gpu_hang           85        NVML reports an XID or uncorrected ECC on a rank's GPU
cpu_stuck          80        no progress; some ranks wait in a collective, others
                             are in their own code (loader, GIL loop, I/O)
compile_warmup     80        the same, with the others in torch.compile/inductor
bootstrap          75        ranks wait in init_process_group/new_group without
                             progress
collective_mismatch 70/65    no progress; every readable rank waits, in different
                             ops (70) or the same op from different call sites (65)
straggler          60        progress; one rank is in its own code while the
                             others wait, in most samples, far more than any other,
                             and each other rank waits in most samples
unknown            40/20     no progress; ranks that could not be read while the
                             rest wait (40); or every rank waits in one collective
                             and stacks cannot say more (20)
healthy            30/15     progress and no straggler (30); no progress signal
                             but no rank waits (15)
=================  ========  ====================================================

Log lines are judged by ``doctor.verdict.log_rules`` (its own table), in the same
``classify``. Culprits are the ranks that keep the others waiting, never the waiters. With
no strict majority (two ranks against two) a mismatch is a tie: both sides
are named and the confidence is low.
"""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from doctor.evidence import Evidence, ProgressSample, RankStack
from doctor.flight.align import FlightAnalysis
from doctor.model import CollectiveRef, Confidence, EvidenceLine, HangClass
from doctor.ranks import rank_prose
from doctor.verdict.candidate import Candidate
from doctor.verdict.signals import signal_candidates
from doctor.verdict.stacks import (
    BOOTSTRAP_OPS,
    ELSEWHERE,
    RankState,
    collective_op,
    group_by_signature,
    odd_ones_out,
    odd_ones_out_by_group,
    rank_state,
    signature,
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
    flight: FlightAnalysis | None = None
    """The Flight Recorder alignment ``classify`` computed (it names sub-group members)."""

    @classmethod
    def of(cls, evidence: Evidence, flight: FlightAnalysis | None = None) -> LiveView:
        states = {s.rank: rank_state(s) for s in evidence.stacks}
        dead = tuple(sorted(p.rank for p in evidence.processes if not p.alive))
        for p in evidence.processes:
            if not p.alive:
                states[p.rank] = RankState.DEAD
            else:
                states.setdefault(p.rank, RankState.UNKNOWN)
        samples: dict[int, list[ProgressSample]] = {}
        for s in evidence.progress:
            if s.state:
                samples.setdefault(s.rank, []).append(s)
        return cls(evidence, states, dead, job_progress(evidence), samples, flight)

    def ranks_in(self, *wanted: RankState) -> tuple[int, ...]:
        return tuple(sorted(r for r, s in self.states.items() if s in wanted))

    def stack(self, rank: int) -> str:
        return top_frame(next((s for s in self.evidence.stacks if s.rank == rank), None))

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


def job_progress(evidence: Evidence) -> bool | None:
    """Whether the job moved during the window; None when nothing can say.

    In order: Flight Recorder sequence ids that moved between two reads; every
    live rank making at least ``PROGRESS_CALLS`` read/write calls (a gloo rank
    blocked in a collective makes none; a wrapper's heartbeat file or the agent
    answering a dump makes a few); a rank waiting in a collective without
    them; sequence ids read twice that did not move. The Flight Recorder reads
    are taken after the window, so their cost never looks like progress.
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
    alive = [p for p in evidence.processes if p.alive and p.io_calls_delta is not None]
    if alive and all((p.io_calls_delta or 0) >= PROGRESS_CALLS for p in alive):
        return True
    waiting = {s.rank for s in evidence.stacks if rank_state(s) is RankState.IN_COLLECTIVE}
    if any(p.rank in waiting and (p.io_calls_delta or 0) < PROGRESS_CALLS for p in alive):
        return False
    return False if len(readings) > len(fr) else None


def _py(rank: int | None, text: str) -> EvidenceLine:
    return EvidenceLine("py-spy", rank, text)


_GONE = {
    "zombie": "a zombie (it exited; its launcher has not reaped it)",
    "missing": "missing (no process on this host)",
    "dead": "dead (it exited)",
}


def exit_text(code: int | None) -> str:
    """``-9`` -> ``killed by SIGKILL``; ``1`` -> ``exit code 1``."""
    if code is None:
        return ""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def rank_loss(view: LiveView) -> list[Candidate]:
    if not view.dead:
        return []
    procs = {p.rank: p for p in view.evidence.processes}
    lines = [
        EvidenceLine(
            "process",
            r,
            f"rank {r} is {_GONE.get(procs[r].status, 'gone')}"
            + (f", pid {procs[r].pid}" if procs[r].pid else "")
            + (f", {exit_text(procs[r].exit_code)}" if procs[r].exit_code is not None else "")
            + (f": {procs[r].error}" if procs[r].error else ""),
        )
        for r in view.dead
    ]
    alive = [r for r, s in view.states.items() if s is not RankState.DEAD]
    if not alive:
        return [
            Candidate(
                HangClass.RANK_LOSS,
                view.dead,
                Confidence.LOW,
                "every rank of the job is gone; read the launcher's log for the first failure",
                50,
                evidence=tuple(lines),
                rule="rank_loss",
            )
        ]
    waiting = view.ranks_in(RankState.IN_COLLECTIVE)
    ref = view.waiting_ref(waiting)
    why = next(
        (
            procs[r].error or exit_text(procs[r].exit_code)
            for r in view.dead
            if procs[r].error or procs[r].exit_code is not None
        ),
        "",
    )
    summary = (
        f"{rank_prose(view.dead)} {'is' if len(view.dead) == 1 else 'are'} gone"
        + (f" ({why})" if why else "")
        + (
            f" while {rank_prose(waiting)} {'waits' if len(waiting) == 1 else 'wait'} in {ref.op}"
            if waiting and ref
            else ""
        )
        + f"; {rank_prose(alive)} cannot finish without it: find why it died, then restart "
        "the job (or recover it in process)"
    )
    return [
        Candidate(
            HangClass.RANK_LOSS,
            view.dead,
            Confidence.HIGH,
            summary,
            90,
            collective=ref,
            evidence=tuple(lines),
            rule="rank_loss",
        )
    ]


_WHERE = {
    RankState.DATA_LOADING: "in its data loader",
    RankState.GIL_LOOP: "in a Python loop holding the GIL",
    RankState.USER_CODE: "in its own code",
    RankState.IDLE: "idle (its main thread has no Python frames)",
    RankState.COMPILE: "compiling (torch.compile / inductor)",
}


def stuck(view: LiveView) -> list[Candidate]:
    if view.progress:
        return []
    waiting = view.ranks_in(RankState.IN_COLLECTIVE)
    elsewhere = view.ranks_in(*ELSEWHERE)
    if not waiting or not elsewhere:
        return []
    ref = view.waiting_ref(waiting)
    wait_line = _py(None, f"{rank_prose(waiting)} wait in {view.stack(waiting[0])}")
    out = []
    compiling = tuple(r for r in elsewhere if view.states[r] is RankState.COMPILE)
    others = tuple(r for r in elsewhere if r not in compiling)
    sure = (
        Confidence.HIGH
        if view.progress is False and 2 * len(elsewhere) <= len(view.states)
        else Confidence.MEDIUM
    )
    for culprits, cls, rule in (
        (compiling, HangClass.COMPILE_WARMUP, "compile_warmup"),
        (others, HangClass.CPU_STUCK, "cpu_stuck"),
    ):
        if not culprits:
            continue
        where = "; ".join(
            f"{rank_prose([r])} is {_WHERE[view.states[r]]} at {view.stack(r)}" for r in culprits
        )
        lines = (
            [_py(r, f"main thread {_WHERE[view.states[r]]}: {view.stack(r)}") for r in culprits]
            + [wait_line]
            + _cpu_lines(view, culprits)
        )
        summary = (
            f"{where}, while {rank_prose(waiting)} wait in {ref.op if ref else 'a collective'}"
        )
        out.append(
            Candidate(
                cls, culprits, sure, summary, 80, collective=ref, evidence=tuple(lines), rule=rule
            )
        )
    return out


def _cpu_lines(view: LiveView, ranks: Sequence[int]) -> list[EvidenceLine]:
    """CPU and I/O of the culprits, and any other thread of theirs that holds the GIL."""
    lines = []
    for p in view.evidence.processes:
        if p.rank in ranks and p.cpu_seconds_delta is not None:
            lines.append(
                EvidenceLine(
                    "process",
                    p.rank,
                    f"used {p.cpu_seconds_delta:.2f}s CPU "
                    f"and {p.io_calls_delta} read/write calls in the window",
                )
            )
    for stack in view.evidence.stacks:
        holder = next((t for t in stack.threads if t.holds_gil and not t.is_main), None)
        if stack.rank in ranks and holder is not None and holder.frames:
            lines.append(
                _py(
                    stack.rank,
                    f"thread {holder.name or holder.thread_id} holds the GIL at {holder.frames[0]}",
                )
            )
    return lines


def mismatch(view: LiveView) -> list[Candidate]:
    """Every readable live rank waits; they disagree on the op or the call site."""
    if view.progress or view.dead:
        return []
    readable = [s for s in view.evidence.stacks if view.states.get(s.rank) is not RankState.DEAD]
    if len(readable) < 2 or any(rank_state(s) is not RankState.IN_COLLECTIVE for s in readable):
        return []
    ops = {s.rank: collective_op(s) or "?" for s in readable}
    if any(op in BOOTSTRAP_OPS for op in ops.values()):
        return _bootstrap_wait(view, ops)
    counts = Counter(ops.values())
    if len(counts) > 1:
        major, n = counts.most_common(1)[0]
        tie = 2 * n <= len(ops)
        culprits = tuple(sorted(r for r, op in ops.items() if tie or op != major))
        lines = [_py(r, f"waits in {view.stack(r)}") for r in sorted(ops)]
        lines += _group_lines(view, readable)
        summary = (
            f"{rank_prose(culprits)} called {', '.join(sorted({ops[r] for r in culprits}))} "
            f"where {rank_prose([r for r in ops if r not in culprits])} called {major}"
        )
        if tie:
            summary = (
                f"the ranks split evenly between {' and '.join(sorted(counts))}: a tie "
                "that stacks alone cannot break"
            )
        return [
            Candidate(
                HangClass.COLLECTIVE_MISMATCH,
                culprits,
                Confidence.LOW if tie else Confidence.MEDIUM,
                summary,
                70,
                collective=CollectiveRef("unknown", None, major),
                evidence=tuple(lines),
                missing_evidence=(FR_HINT,) if view.flight is None else (),
                rule="stack_op_mismatch",
            )
        ]
    groups = group_by_signature(readable)
    if len(groups) == 1:
        return []
    odd = odd_ones_out(groups)
    lines = [_py(None, f"{rank_prose(g.ranks)}: {g.signature}") for g in groups]
    lines += _group_lines(view, readable)
    summary = (
        f"{rank_prose(odd.ranks)} {'wait' if len(odd.ranks) > 1 else 'waits'} in "
        f"{next(iter(counts))} from a different call site than {rank_prose(odd.majority.ranks)}"
        if odd.majority
        else f"the ranks wait in {next(iter(counts))} from different call sites, split evenly"
    )
    return [
        Candidate(
            HangClass.COLLECTIVE_MISMATCH,
            odd.ranks,
            Confidence.LOW if odd.tie else Confidence.MEDIUM,
            summary,
            65,
            collective=CollectiveRef("unknown", None, next(iter(counts))),
            evidence=tuple(lines),
            rule="stack_callsite_mismatch",
        )
    ]


def _group_lines(view: LiveView, stacks: Sequence[RankStack]) -> list[EvidenceLine]:
    """Odd ones out within each sub-group Flight Recorder names (it knows the members)."""
    fa = view.flight
    if fa is None:
        return []
    members = {g.name: g.members for g in fa.groups if 1 < len(g.members) < len(view.states)}
    lines = []
    for name, odd in odd_ones_out_by_group(stacks, members).items():
        if odd.ranks:
            what = "split evenly (a tie)" if odd.tie else f"{rank_prose(odd.ranks)} stand apart"
            lines.append(_py(None, f"process group {name} ({rank_prose(members[name])}): {what}"))
    return lines


def _bootstrap_wait(view: LiveView, ops: dict[int, str]) -> list[Candidate]:
    stuck_in = sorted(r for r, op in ops.items() if op in BOOTSTRAP_OPS)
    others = tuple(sorted(set(ops) - set(stuck_in)))
    summary = (
        f"{rank_prose(stuck_in)} wait in {ops[stuck_in[0]]}"
        + (f" while {rank_prose(others)} went on" if others else "")
        + ": communicator creation does not complete"
    )
    return [
        Candidate(
            HangClass.BOOTSTRAP,
            others or tuple(stuck_in),
            Confidence.MEDIUM if others else Confidence.LOW,
            summary,
            75,
            evidence=tuple(_py(r, f"waits in {view.stack(r)}") for r in stuck_in),
            rule="stack_bootstrap",
        )
    ]


def all_waiting(view: LiveView) -> list[Candidate]:
    """Nothing wrong on the Python side: every rank waits, or some cannot be read."""
    if view.progress or view.dead:
        return []
    waiting = view.ranks_in(RankState.IN_COLLECTIVE)
    unread = view.ranks_in(RankState.UNKNOWN)
    if not waiting or view.ranks_in(*ELSEWHERE):
        return []
    if len({signature(s) for s in view.evidence.stacks if s.rank in waiting}) > 1:
        return []
    why = {s.rank: s.reason for s in view.evidence.skipped if s.rank in unread}
    if unread:
        summary = (
            f"{rank_prose(unread)} could not be read while {rank_prose(waiting)} wait in "
            f"{view.stack(waiting[0])}: {rank_prose(unread)} is the likely culprit"
        )
        lines = [
            EvidenceLine("py-spy", r, f"no stack: {why.get(r, 'unknown reason')}") for r in unread
        ]
        return [
            Candidate(
                HangClass.UNKNOWN,
                unread,
                Confidence.LOW,
                summary,
                40,
                collective=view.waiting_ref(waiting),
                evidence=tuple(lines),
                missing_evidence=tuple(f"stack of rank {r}" for r in unread),
                rule="unreadable_rank",
            )
        ]
    summary = (
        f"every rank waits in {view.stack(waiting[0])} and none is elsewhere: the "
        "collective was issued everywhere and did not finish (GPU or network)"
    )
    return [
        Candidate(
            HangClass.UNKNOWN,
            (),
            Confidence.LOW,
            summary,
            20,
            collective=view.waiting_ref(waiting),
            missing_evidence=(FR_HINT, "NVML GPU state", "NCCL_DEBUG=INFO logs"),
            rule="all_waiting",
        )
    ]


def straggler_counts(view: LiveView) -> Counter[int]:
    """Per rank: samples in which it was elsewhere while most of the others waited."""
    counts: Counter[int] = Counter()
    length = min((len(v) for v in view.samples.values()), default=0)
    for i in range(length):
        at = {r: RankState(v[i].state) for r, v in view.samples.items()}
        for rank, state in at.items():
            others = [s for r, s in at.items() if r != rank]
            if (
                state in ELSEWHERE
                and others
                and 2 * sum(s is RankState.IN_COLLECTIVE for s in others) >= len(others)
            ):
                counts[rank] += 1
    return counts


def _others_wait(view: LiveView, rank: int) -> bool:
    """Every other rank waits in a collective in most samples: they wait *for* ``rank``.

    In a healthy job that runs in lock step, whichever rank is last at a sample looks late
    while a changing majority of the others waits. On the demo job (4 ranks, 5 samples),
    "late in 2 or more samples" named a healthy rank in 3 of 30 triages, and "late in most
    samples" in 1 of 40; a real straggler's peers waited in 3 or more of 5 samples in all
    30 triages of the straggler job."""
    return all(
        2 * sum(RankState(s.state) is RankState.IN_COLLECTIVE for s in samples) > len(samples)
        for r, samples in view.samples.items()
        if r != rank
    )


def progressing(view: LiveView) -> list[Candidate]:
    if not view.progress:
        if (
            view.progress is None
            and not view.dead
            and not view.ranks_in(RankState.IN_COLLECTIVE)
            and view.states
        ):
            return [
                Candidate(
                    HangClass.HEALTHY,
                    (),
                    Confidence.LOW,
                    "no rank waits in a collective, but nothing measured progress either",
                    15,
                    rule="nobody_waits",
                )
            ]
        return []
    counts = straggler_counts(view).most_common(2)
    total = min((len(v) for v in view.samples.values()), default=0)
    rank, n = counts[0] if counts else (-1, 0)
    runner_up = counts[1][1] if len(counts) > 1 else 0
    if 2 * n > total and n >= 2 * runner_up and _others_wait(view, rank):
        summary = (
            f"the job progresses, but {rank_prose([rank])} is in its own code while the others "
            f"wait in {n} of {total} samples: it is the straggler ({view.stack(rank)})"
        )
        sure = Confidence.HIGH if 5 * n >= 4 * total else Confidence.MEDIUM
        lines = [
            _py(rank, f"sample {s.time_s:.2f}s: {s.state} {s.stack_signature}")
            for s in view.samples[rank]
        ]
        return [
            Candidate(
                HangClass.STRAGGLER,
                (rank,),
                sure,
                summary,
                60,
                evidence=tuple(lines),
                rule="stack_straggler",
            )
        ]
    return [
        Candidate(
            HangClass.HEALTHY,
            (),
            Confidence.MEDIUM,
            "every rank made progress during the window and none lags",
            30,
            rule="progressing",
        )
    ]


RULES: tuple[Callable[[LiveView], list[Candidate]], ...] = (
    rank_loss,
    stuck,
    mismatch,
    all_waiting,
    progressing,
)


def candidates(evidence: Evidence, flight: FlightAnalysis | None = None) -> list[Candidate]:
    """Every live rule's conclusions, plus the NVML rule (``doctor.verdict.signals``)."""
    view = LiveView.of(evidence, flight)
    return [c for rule in RULES for c in rule(view)] + signal_candidates(evidence, view.dead)
