"""Rules over live evidence (stacks, liveness, NVML, NCCL log lines): ``Evidence -> [Candidate]``.

First the job's *progress* over the window (``job_progress``): proof that it
moved, never its absence of complaints. Proof is Flight Recorder sequence ids
that advanced, or every live rank either making read/write system calls (a
gloo rank blocked in a collective makes none) or showing stacks that change
between samples. Without proof there is no ``healthy``. Then each rule looks
at the ranks' states (``doctor.verdict.stacks``), set by structure (a stopped
process, a main thread waiting for a GIL another thread holds, a wait the
kernel names) before names: a function name only says where a rank is.

=================  ========  ====================================================
rule               strength  fires when
=================  ========  ====================================================
rank_loss          90        an expected rank is dead, a zombie or missing
gpu_hang           85        NVML reports an XID or uncorrected ECC on a rank's GPU
cpu_stuck          82        no proof of progress; a live rank cannot move by
  (blocked)                  itself: stopped (T/t), its main thread waiting for
                             the GIL another thread holds (most samples), or
                             blocked in the kernel on a FIFO, a pipe, a network
                             filesystem or in state D
cpu_stuck          80        no progress; some ranks wait in a collective, others
                             are in their own code (loader, GIL, I/O, stopped)
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
unknown            15        no rank waits in a collective and nothing proved
  (no_proof)                 progress: names the missing evidence
healthy            30        proof of progress and no straggler
=================  ========  ====================================================

The facts the rules share are in ``doctor.verdict.view``; ``blocked`` and
``stuck`` are in ``doctor.verdict.culprits``; ``straggler``, ``healthy`` and
``no_proof`` in ``doctor.verdict.progress``; the rest here. Log lines are judged
by ``doctor.verdict.log_rules`` (its own table), in the same ``classify``.
Culprits are the ranks that keep the others waiting, never the waiters. With
no strict majority (two ranks against two) a mismatch is a tie: both sides
are named and the confidence is low.
"""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Callable, Sequence

from doctor.evidence import Evidence, RankStack
from doctor.flight.align import FlightAnalysis
from doctor.model import CollectiveRef, Confidence, EvidenceLine, HangClass
from doctor.ranks import rank_does, rank_prose
from doctor.verdict.candidate import Candidate
from doctor.verdict.culprits import blocked, stuck
from doctor.verdict.progress import progressing
from doctor.verdict.signals import signal_candidates
from doctor.verdict.stacks import (
    BOOTSTRAP_OPS,
    ELSEWHERE,
    RankState,
    collective_op,
    group_by_signature,
    odd_ones_out,
    odd_ones_out_by_group,
    signature,
)
from doctor.verdict.view import FR_HINT, LiveView, pyspy_line

_GONE = {
    "zombie": "a zombie (it exited; its launcher has not reaped it)",
    "missing": "missing (no process on this host)",
    "dead": "dead (it exited)",
}


COLLATERAL_CODES = frozenset({-6, -15, -2})
"""Deaths that follow a lost peer rather than cause one: SIGABRT (ProcessGroupNCCL's
watchdog aborts after a timeout; C++ ``terminate`` on a comm thread's error), SIGTERM and
SIGINT (the launcher tearing down the survivors)."""


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
    signalled = tuple(r for r in view.dead if (procs[r].exit_code or 0) < 0)
    killed = tuple(r for r in signalled if procs[r].exit_code not in COLLATERAL_CODES) or signalled
    followed = [r for r in view.dead if r not in killed]
    if killed and followed:
        # ranks killed by a signal, and ranks that exited with an error after losing a peer
        # (gloo raises on a closed connection): the killed ones are the cause
        lines.append(
            EvidenceLine(
                "process",
                None,
                f"{rank_prose(killed)} ended by a signal, {rank_prose(followed)} otherwise "
                "(an error code, an abort or a teardown signal, or unknown): a rank that loses "
                "a peer raises and exits",
            )
        )
        return [
            Candidate(
                HangClass.RANK_LOSS,
                killed,
                Confidence.HIGH
                if all((procs[r].exit_code or 0) > 0 for r in followed)
                else Confidence.MEDIUM,
                f"{rank_prose(killed)} {'was' if len(killed) == 1 else 'were'} killed "
                f"({exit_text(procs[killed[0]].exit_code)}); {rank_prose(followed)} exited after "
                "losing it"
                + (f" and {rank_prose(alive)} cannot finish without it" if alive else "")
                + ": find why it was killed (OOM killer, a scheduler, a person), then restart "
                "the job (or recover it in process)",
                90,
                evidence=tuple(lines),
                rule="rank_loss",
            )
        ]
    silent = tuple(r for r in view.dead if not procs[r].error and procs[r].exit_code is None)
    if not alive and silent and len(silent) < len(view.dead):
        # an ended job's files: the ranks that raised left an error file, a rank killed by a
        # signal left none
        loud = [r for r in view.dead if r not in silent]
        one = len(silent) == 1
        return [
            Candidate(
                HangClass.RANK_LOSS,
                silent,
                Confidence.MEDIUM if one else Confidence.LOW,
                f"the job has ended; {rank_prose(silent)} left no error file, as a process "
                f"killed by a signal does, while {rank_prose(loud)} raised "
                f"({procs[loud[0]].error[:160]})"
                + (
                    ""
                    if one
                    else "; the launcher's teardown (SIGTERM) also leaves none, so one of "
                    f"{rank_prose(silent)} was killed first: its log says which"
                )
                + ": find why it was killed (OOM killer, a scheduler, a person), then "
                "restart the job",
                90,
                evidence=tuple(lines),
                rule="rank_loss",
            )
        ]
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


def mismatch(view: LiveView) -> list[Candidate]:
    """Every readable live rank waits; they disagree on the op or the call site."""
    if view.progress or view.dead:
        return []
    readable = [s for s in view.evidence.stacks if view.states.get(s.rank) is not RankState.DEAD]
    if len(readable) < 2 or any(
        view.states.get(s.rank) is not RankState.IN_COLLECTIVE for s in readable
    ):
        return []
    if any(s.rank in view.samples and s.rank not in view.frozen for s in readable):
        return []  # a rank caught elsewhere during the window is moving, not mismatched
    ops = {s.rank: collective_op(s) or "?" for s in readable}
    if any(op in BOOTSTRAP_OPS for op in ops.values()):
        return _bootstrap_wait(view, ops)
    counts = Counter(ops.values())
    if len(counts) > 1:
        major, n = counts.most_common(1)[0]
        tie = 2 * n <= len(ops)
        culprits = tuple(sorted(r for r, op in ops.items() if tie or op != major))
        lines = [pyspy_line(r, f"waits in {view.stack(r)}") for r in sorted(ops)]
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
    lines = [pyspy_line(None, f"{rank_prose(g.ranks)}: {g.signature}") for g in groups]
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
            lines.append(
                pyspy_line(None, f"process group {name} ({rank_prose(members[name])}): {what}")
            )
    return lines


def _bootstrap_wait(view: LiveView, ops: dict[int, str]) -> list[Candidate]:
    stuck_in = sorted(r for r, op in ops.items() if op in BOOTSTRAP_OPS)
    others = tuple(sorted(set(ops) - set(stuck_in)))
    summary = (
        f"{rank_does(stuck_in, 'wait')} in {ops[stuck_in[0]]}"
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
            evidence=tuple(pyspy_line(r, f"waits in {view.stack(r)}") for r in stuck_in),
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
    if any(r in view.samples and r not in view.frozen for r in waiting):
        return []  # caught elsewhere in some sample: it moves
    why = {s.rank: s.reason for s in view.evidence.skipped if s.rank in unread}
    if unread:
        summary = (
            f"{rank_prose(unread)} could not be read while {rank_does(waiting, 'wait')} in "
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


RULES: tuple[Callable[[LiveView], list[Candidate]], ...] = (
    rank_loss,
    blocked,
    stuck,
    mismatch,
    all_waiting,
    progressing,
)


def candidates(evidence: Evidence, flight: FlightAnalysis | None = None) -> list[Candidate]:
    """Every live rule's conclusions, plus the NVML rule (``doctor.verdict.signals``)."""
    view = LiveView.of(evidence, flight)
    return [c for rule in RULES for c in rule(view)] + signal_candidates(evidence, view.dead)
