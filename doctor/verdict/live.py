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
rank_loss          90        an expected rank is dead, a zombie or missing (one
                             that exited 0 left early: a mismatch; all 0: healthy)
gpu_hang           85/40     NVML reports an XID or uncorrected ECC on a rank's GPU
                             (40, low: only XIDs of a program's fault or records)
cpu_stuck          82        no proof of progress; a live rank cannot move by
  (blocked)                  itself: stopped (T/t), its main thread waiting for
                             the GIL another thread holds (most samples), or
                             blocked in the kernel on a FIFO, a pipe, a network
                             filesystem or in state D
cpu_stuck          80        no progress; some ranks wait in a collective, others
                             are in their own code (loader, GIL, I/O, stopped)
compile_warmup     80        the same, with the others in torch.compile/inductor,
                             a Triton build or autotune, a JIT extension build
gpu_hang           80        the same, with the others waiting for their GPU at a
  (gpu_wait)                 CUDA synchronize (medium: the queued GPU work did not
                             finish)
bootstrap          75        ranks wait in init_process_group/new_group without
                             progress
collective_mismatch 70/65    no progress; every readable rank waits, in different
                             ops (70) or the same op from different call sites (65);
                             a rank whose broadcast root waits elsewhere has no vote;
                             with no majority among 3+ positions, the ranks whose
                             call path leaves the common one; first, where Flight
                             Recorder names the groups, a member pending elsewhere
                             while most of its group waits in the group's op
straggler          60        progress; one rank is in its own code while the
                             others wait, in most samples, far more than any other,
                             and each other rank waits in most samples
unknown            40/20     no progress; ranks that could not be read while the
                             rest wait (40); or every rank waits in one collective,
                             or for its GPU at one call site, and stacks cannot say
                             more (20)
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

from collections import Counter
from collections.abc import Callable, Sequence

from doctor.evidence import Evidence, GpuSample, RankStack
from doctor.flight.align import FlightAnalysis
from doctor.logs.launcher import signal_name
from doctor.model import CollectiveRef, Confidence, EvidenceLine, HangClass
from doctor.ranks import rank_does, rank_prose
from doctor.verdict import stacktree
from doctor.verdict.candidate import EVEN_BATCHES, Candidate
from doctor.verdict.culprits import blocked, stuck
from doctor.verdict.progress import progressing
from doctor.verdict.signals import gpu_line, gpus_of, is_busy, signal_candidates
from doctor.verdict.stacks import (
    BOOTSTRAP_OPS,
    ELSEWHERE,
    WAITING,
    RankState,
    collective_op,
    collective_root,
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
    return f"killed by {signal_name(-code)}" if code < 0 else f"exit code {code}"


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
    if all(procs[r].exit_code == 0 for r in view.dead):
        return _finished(view, tuple(lines), alive)
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
        + (f" while {rank_does(waiting, 'wait')} in {ref.op}" if waiting and ref else "")
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


def _finished(view: LiveView, lines: tuple[EvidenceLine, ...], alive: list[int]) -> list[Candidate]:
    """Gone ranks that all ended their program (exit code 0): no death. With every rank so,
    the job finished; with peers waiting in a collective, those ranks left the loop before
    them (their data ran out, or another path of the code), which is a mismatch of the
    number of collectives; else the job is ending, and the live ranks are judged alone."""
    done = view.dead
    if not alive:
        summary = "every rank ended its program with exit code 0: the job finished"
        return [
            Candidate(
                HangClass.HEALTHY,
                (),
                Confidence.MEDIUM,
                summary,
                90,
                evidence=lines,
                rule="finished",
            )
        ]
    waiting = view.ranks_in(RankState.IN_COLLECTIVE)
    ref = view.waiting_ref(waiting)
    if not waiting or ref is None:
        return []
    it, its = ("it", "its") if len(done) == 1 else ("they", "their")
    summary = (
        f"{rank_prose(done)} ended {its} program (exit code 0) while "
        f"{rank_does(waiting, 'wait')} in {ref.op}: {it} left the loop before them ({its} data "
        f"ran out, or another path of the code), so the others wait for collectives {it} never "
        f"issued; {EVEN_BATCHES}"
    )
    return [
        Candidate(
            HangClass.COLLECTIVE_MISMATCH,
            done,
            Confidence.MEDIUM,
            summary,
            90,
            collective=ref,
            evidence=lines,
            rule="finished_early",
        )
    ]


def mismatch(view: LiveView) -> list[Candidate]:
    """Every readable live rank waits; they disagree on the op or the call site.

    Positions are (op, call site). A rank in a rooted collective whose root waits
    elsewhere is that root's victim and has no vote; with no strict majority among the
    rest, the ranks whose call path leaves the common one (``stacktree.leavers``) are the
    culprits, before anything is called a tie."""
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
    victims = _victims(readable, ops)
    voters = [s for s in readable if s.rank not in victims]
    lines = [pyspy_line(r, f"waits in {view.stack(r)}") for r in sorted(ops)]
    lines += [
        pyspy_line(r, f"waits in {ops[r]} for its root, rank {root}, which waits elsewhere")
        for r, root in sorted(victims.items())
    ]
    lines += _group_lines(view, readable)
    if by_group := _group_odd_ones(view):
        culprits, name, members, op = by_group
        summary = (
            f"{rank_does(culprits, 'wait')} elsewhere while the other members of "
            f"process group {name} ({rank_prose(members)}) wait in its {op}"
        )
        text = summary + _victim_text(victims, ops)
        return [_mismatch(culprits, False, text, op, lines, "stack_group_mismatch", 70)]
    counts = Counter(ops[s.rank] for s in voters)
    if len(counts) > 1:
        return [_op_mismatch(view, readable, victims, ops, counts, lines)]
    groups = group_by_signature(voters)
    if len(groups) == 1:
        return []
    odd = odd_ones_out(groups)
    left = _left_path(readable) if odd.tie and len(group_by_signature(readable)) > 2 else ()
    op = next(iter(counts))
    lines += [pyspy_line(None, f"{rank_prose(g.ranks)}: {g.signature}") for g in groups]
    if left:
        summary = f"{rank_prose(left)} left the call path the other ranks share and {_wait(left)}"
        culprits, tie = left, False
    elif odd.majority:
        summary = (
            f"{rank_does(odd.ranks, 'wait')} in {op} from a different call site "
            f"than {rank_prose(odd.majority.ranks)}"
        )
        culprits, tie = odd.ranks, False
    else:
        summary = f"the ranks wait in {op} from different call sites, split evenly"
        culprits, tie = odd.ranks, True
    text = summary + _victim_text(victims, ops)
    return [_mismatch(culprits, tie, text, op, lines, "stack_callsite_mismatch", 65)]


def _op_mismatch(
    view: LiveView,
    readable: Sequence[RankStack],
    victims: dict[int, int],
    ops: dict[int, str],
    counts: Counter[str],
    lines: list[EvidenceLine],
) -> Candidate:
    """The voters disagree on the op: the minority, the ranks that left the common call
    path, or (neither) a tie."""
    major, n = counts.most_common(1)[0]
    votes = {r: op for r, op in ops.items() if r not in victims}
    tie = 2 * n <= len(votes)
    left = _left_path(readable) if tie and len(counts) > 2 else ()
    if left:
        culprits: tuple[int, ...] = left
        rest = [r for r in votes if r not in left]
        summary = (
            f"{rank_prose(left)} left the call path that {rank_prose(rest)} share and "
            f"{'calls' if len(left) == 1 else 'call'} {', '.join(sorted({ops[r] for r in left}))}"
        )
        tie = False
    else:
        culprits = tuple(sorted(r for r, op in votes.items() if tie or op != major))
        summary = (
            f"{rank_prose(culprits)} called {', '.join(sorted({ops[r] for r in culprits}))} "
            f"where {rank_prose([r for r in votes if r not in culprits])} called {major}"
        )
        if tie:
            summary = (
                f"the ranks split evenly between {' and '.join(sorted(counts))}: a tie "
                "that stacks alone cannot break"
            )
    missing = (FR_HINT,) if view.flight is None else ()
    text = summary + _victim_text(victims, ops)
    return _mismatch(culprits, tie, text, major, lines, "stack_op_mismatch", 70, missing)


def _mismatch(
    culprits: tuple[int, ...],
    tie: bool,
    summary: str,
    op: str,
    lines: list[EvidenceLine],
    rule: str,
    strength: int,
    missing: tuple[str, ...] = (),
) -> Candidate:
    return Candidate(
        HangClass.COLLECTIVE_MISMATCH,
        culprits,
        Confidence.LOW if tie else Confidence.MEDIUM,
        summary,
        strength,
        collective=CollectiveRef("unknown", None, op),
        evidence=tuple(lines),
        missing_evidence=missing,
        rule=rule,
    )


def _group_odd_ones(view: LiveView) -> tuple[tuple[int, ...], str, tuple[int, ...], str] | None:
    """Where Flight Recorder names each rank's pending collective and its process group:
    the first group in which a strict majority of the members wait in one op of that group
    while other members are pending elsewhere (culprits, group, members, op). A member
    with nothing pending is not blamed: its position is unknown."""
    fa = view.flight
    if fa is None:
        return None
    where = {o.rank: (o.group, o.op) for o in fa.last_ops if o.state != "completed"}
    for group in fa.groups:
        here = Counter(where[r] for r in group.members if where.get(r, ("",))[0] == group.name)
        if len(group.members) < 2 or not here:
            continue
        position, n = here.most_common(1)[0]
        away = tuple(r for r in group.members if r in where and where[r] != position)
        if 2 * n > len(group.members) and away:
            return away, group.name, group.members, position[1]
    return None


def _wait(ranks: Sequence[int]) -> str:
    return "waits" if len(ranks) == 1 else "wait"


def _victims(stacks: Sequence[RankStack], ops: dict[int, str]) -> dict[int, int]:
    """Rank -> the root it waits for, for ranks in a rooted collective (a broadcast) whose
    root was read waiting in another op or from another call site: the root keeps them,
    they keep no one. Never every rank: someone must be left to vote."""
    where = {s.rank: (ops[s.rank], signature(s)) for s in stacks}
    out = {}
    for stack in stacks:
        root = collective_root(stack)
        if root is not None and root != stack.rank and root in where:
            if where[root] != where[stack.rank]:
                out[stack.rank] = root
    return out if len(out) < len(stacks) - 1 else {}


def _victim_text(victims: dict[int, int], ops: dict[int, str]) -> str:
    if not victims:
        return ""
    parts = [f"rank {r} waits in {ops[r]} for rank {root}" for r, root in sorted(victims.items())]
    return f" ({'; '.join(parts)}, which waits elsewhere: a victim)"


def _left_path(stacks: Sequence[RankStack]) -> tuple[int, ...]:
    """``stacktree.leavers`` of the waiting ranks' call paths."""
    return stacktree.leavers(stacktree.build(stacks))


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
    waiting = view.ranks_in(*WAITING)
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
    on_gpu = view.states[waiting[0]] is RankState.GPU_WAIT
    gpus = gpus_of(view.evidence, waiting)
    alone = view.evidence.world_size == 1 and len(waiting) == 1
    if on_gpu and alone and gpus and all(map(is_busy, gpus.values())):
        return [_lone_busy_gpu(view, waiting, gpus[waiting[0]])]
    missing = (FR_HINT,) + (() if len(gpus) == len(waiting) else ("NVML GPU state",))
    summary = (
        f"every rank waits for its GPU at {view.stack(waiting[0])} and none is elsewhere: "
        "the GPU work queued before it (a kernel, or an NCCL collective) did not finish "
        "(GPU or network)"
        if on_gpu
        else f"every rank waits in {view.stack(waiting[0])} and none is elsewhere: the "
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
            evidence=tuple(map(gpu_line, gpus.values())),
            missing_evidence=(*missing, "NCCL_DEBUG=INFO logs"),
            rule="all_waiting",
        )
    ]


def _lone_busy_gpu(view: LiveView, waiting: Sequence[int], gpu: GpuSample) -> Candidate:
    """The job's only rank waits for its GPU, and NVML sees that GPU busy: with no peer for a
    collective to wait on, the kernel queued before the wait does not end (a real H100 and
    H200 hang, tests/fixtures/gpu)."""
    [rank] = waiting
    return Candidate(
        HangClass.GPU_HANG,
        (rank,),
        Confidence.MEDIUM,
        f"rank {rank}, the job's only rank, waits for its GPU at {view.stack(rank)} while "
        f"NVML sees that GPU {gpu.utilization_pct:g}% busy: with no peer to wait for, a kernel "
        "queued before the wait does not end (a kernel that never finishes, or a hung GPU)",
        60,
        collective=view.waiting_ref(waiting),
        evidence=(pyspy_line(rank, f"waits in {view.stack(rank)}"), gpu_line(gpu)),
        missing_evidence=(FR_HINT,),
        rule="lone_busy_gpu",
    )


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
