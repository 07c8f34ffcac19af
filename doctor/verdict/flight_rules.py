"""Rules over the Flight Recorder alignment: what the dumps alone can conclude.

Every divergent group says who waits on whom: the ranks that reached a
collective wait on the ranks that never scheduled it (``missing``), did not
complete it (``not_completed``) or issued something else (``mismatch``). The
culprits are the ends of those waits: ranks that issued a wrong collective or
did not complete theirs are culprits by themselves; a rank missing from a
group is a culprit only when it waits on nobody else (a rank missing in its
data-parallel group because it is itself waiting on a tensor-parallel peer is
explained by that peer). Flight Recorder cannot see *why* a rank stopped:
a GPU hang, a GIL-held or data-loader-stuck rank and a dead rank look alike
here, so those candidates are ``unknown`` with the missing evidence named.
"""

from __future__ import annotations

from doctor.flight.align import Divergence, FlightAnalysis, GroupAlignment
from doctor.model import CollectiveRef, Confidence, EvidenceLine, Frame, HangClass
from doctor.ranks import rank_prose
from doctor.verdict.candidate import Candidate

SOURCE = "flight-recorder"
MAX_LINES = 12
SELF_CAUSED = ("mismatch", "group_order", "not_completed", "not_started")


def candidates(fa: FlightAnalysis | None) -> list[Candidate]:
    """The candidates the alignment alone supports (none without any dump)."""
    if fa is None:
        return []
    if not fa.ranks_read:
        return [
            Candidate(
                HangClass.UNKNOWN,
                (),
                Confidence.LOW,
                "No Flight Recorder dump could be read.",
                5,
                rule="fr.unreadable",
                missing_evidence=("a readable Flight Recorder dump of every rank",),
            )
        ]
    divergent = fa.divergent
    if not divergent:
        return _quiet(fa)
    out = [c for c in (_mismatch(fa, divergent), _stopped(fa, divergent)) if c is not None]
    return out


def _ref(g: GroupAlignment) -> CollectiveRef:
    d = g.divergence
    assert d is not None
    return CollectiveRef(g.name, d.seq, d.op)


def _lines(
    groups: list[GroupAlignment], fa: FlightAnalysis, culprits: tuple[int, ...]
) -> tuple[EvidenceLine, ...]:
    lines = [
        EvidenceLine(SOURCE, None, g.divergence.text)
        for g in groups[:MAX_LINES]
        if g.divergence is not None
    ]
    for r in culprits:
        op = fa.last_op(r)
        if op is not None:
            frame = user_frame(op.frames)
            where = f" at {frame}" if frame else ""
            lines.append(
                EvidenceLine(
                    SOURCE,
                    r,
                    f"last recorded op: {op.op} (pg {op.group} seq {op.seq}, {op.state}){where}",
                )
            )
    return tuple(lines)


def user_frame(frames: tuple[Frame, ...]) -> Frame | None:
    """The innermost frame outside torch itself: the line of user code that called it."""
    inside = ("torch/distributed/", "torch/nn/parallel/", "c10d_logger")
    return next((f for f in frames if not any(s in f.filename for s in inside)), None)


def _mismatch(fa: FlightAnalysis, divergent: tuple[GroupAlignment, ...]) -> Candidate | None:
    groups = [
        g for g in divergent if g.divergence and g.divergence.kind in ("mismatch", "group_order")
    ]
    if not groups:
        return None
    settled = [g for g in groups if g.divergence and not g.divergence.tie]
    tie = not settled
    groups = groups if tie else settled  # a settled group outweighs another group's tie
    first = groups[0].divergence
    assert first is not None
    culprits = tuple(sorted({r for g in groups if g.divergence for r in g.divergence.culprits}))
    if tie:
        summary = (
            f"{rank_prose(culprits).capitalize()} disagree 1:1 ({first.text}); nothing else "
            f"in the dumps says which one is wrong."
        )
        return Candidate(
            HangClass.COLLECTIVE_MISMATCH,
            culprits,
            Confidence.LOW,
            summary,
            50,
            _ref(groups[0]),
            _lines(groups, fa, culprits),
            (f"py-spy stacks of {rank_prose(culprits)} to see which call site is wrong",),
            rule="fr.mismatch-tie",
        )
    conf = Confidence.HIGH if len(first.waiting) >= 2 else Confidence.MEDIUM
    summary = f"Collective mismatch in {first.text}."
    return Candidate(
        HangClass.COLLECTIVE_MISMATCH,
        culprits,
        conf,
        summary,
        90,
        _ref(groups[0]),
        _lines(groups, fa, culprits),
        rule="fr.mismatch",
    )


def _roots(divergent: tuple[GroupAlignment, ...]) -> tuple[int, ...]:
    """Ends of the wait-for graph: self-caused culprits, then ranks that wait on nobody."""
    waits: dict[int, set[int]] = {}
    suspects: set[int] = set()
    self_caused: set[int] = set()
    for g in divergent:
        d: Divergence = g.divergence  # type: ignore[assignment]
        for w in d.waiting:
            waits.setdefault(w, set()).update(c for c in d.culprits if c != w)
        suspects.update(d.culprits)
        if d.kind in SELF_CAUSED:
            self_caused.update(d.culprits)
    roots = self_caused | {r for r in suspects if not waits.get(r)}
    if not roots:  # everyone waits on someone: a cycle; name its members
        roots = suspects
    return tuple(sorted(roots))


def _stopped(fa: FlightAnalysis, divergent: tuple[GroupAlignment, ...]) -> Candidate | None:
    roots = _roots(divergent)
    mismatched = {
        r
        for g in divergent
        if g.divergence and g.divergence.kind in ("mismatch", "group_order")
        for r in g.divergence.culprits
    }
    culprits = tuple(r for r in roots if r not in mismatched)
    if not culprits:
        return None
    groups = [g for g in divergent if g.divergence and set(g.divergence.culprits) & set(culprits)]
    kinds = {g.divergence.kind for g in groups if g.divergence}
    no_dump = kinds == {"no_dump"}
    gpu_side = "not_completed" in kinds or "not_started" in kinds
    one = len(culprits) == 1
    they = "it" if one else "they"
    if no_dump:
        lean = f"{they} left no dump while every dumped peer waits"
    elif gpu_side:
        lean = (
            f"{they} did not complete collectives {'its' if one else 'their'} peers "
            f"completed, which points at the GPU"
        )
    else:
        lean = f"{they} stopped scheduling collectives {'its' if one else 'their'} peers scheduled"
    summary = (
        f"{rank_prose(culprits).capitalize()} {'holds' if one else 'hold'} up the job: {lean}; "
        f"Flight Recorder alone cannot tell a GPU hang from a rank stuck on its CPU (GIL, "
        f"data loader) or a dead rank."
    )
    missing = (
        f"py-spy stacks of {rank_prose(culprits)} (a GIL-held, data-loader or "
        f"torch.compile rank shows there)",
        f"NVML of {rank_prose(culprits)}'s GPU (a hung kernel keeps utilisation high; XID errors)",
        f"process liveness of {rank_prose(culprits)} (a dead rank is rank_loss)",
    )
    return Candidate(
        HangClass.UNKNOWN,
        culprits,
        Confidence.LOW,
        summary,
        40 if no_dump else 60,
        _ref(groups[0]),
        _lines(groups, fa, culprits),
        missing,
        rule="fr.no-dump" if no_dump else "fr.stopped",
    )


def _stuck(fa: FlightAnalysis, g: GroupAlignment) -> Candidate:
    """Every member scheduled a collective and none completed it.

    Peers point at the transport; a group of one has none (NCCL runs it on the rank's own
    GPU), so the work queued on that GPU did not finish: a kernel before the collective
    that never ends, or a hung GPU (a real H200 hang recorded in tests/fixtures/gpu)."""
    seq = min(p.completed or 0 for p in g.positions) + 1  # all known: the caller says so
    op = next((o.op for o in fa.ops if o.group == g.name and o.seq == seq), "")
    ref = CollectiveRef(g.name, seq, op)
    if len(g.members) == 1:
        rank = g.members[0]
        return Candidate(
            HangClass.GPU_HANG,
            (rank,),
            Confidence.LOW,
            f"Rank {rank}, alone in pg {g.name}, scheduled seq {seq} ({op or 'op'}) and never "
            f"completed it: with no peer to wait for, the work queued on its GPU did not "
            f"finish (a kernel before the collective that never ends, or a hung GPU).",
            45,
            ref,
            missing_evidence=(
                f"NVML of rank {rank}'s GPU (a spinning kernel keeps utilisation at 100%; "
                f"XID errors)",
            ),
            rule="fr.alone-stuck",
        )
    return Candidate(
        HangClass.NETWORK,
        (),
        Confidence.LOW,
        f"Every rank of pg {g.name} scheduled seq {seq} ({op or 'op'}) and none completed "
        f"it: the transport is the suspect.",
        45,
        ref,
        missing_evidence=("NCCL logs (NCCL_DEBUG=WARN) of every rank for transport errors",),
        rule="fr.network",
    )


def _quiet(fa: FlightAnalysis) -> list[Candidate]:
    """No group diverges: a straggler, a network stall, or a healthy job."""
    out: list[Candidate] = []
    for s in fa.stragglers:
        out.append(
            Candidate(
                HangClass.STRAGGLER,
                (s.rank,),
                Confidence.MEDIUM,
                f"Rank {s.rank} was the last to enqueue {s.last_share:.0%} of {s.samples} "
                f"collectives "
                f"of pg {s.group}, {s.median_delay_ms:.0f} ms behind its peers on average.",
                30,
                evidence=(
                    EvidenceLine(
                        SOURCE,
                        s.rank,
                        f"last in {s.last_share:.0%} of pg {s.group}'s "
                        f"collectives, +{s.median_delay_ms:.0f} ms",
                    ),
                ),
                rule="fr.straggler",
            )
        )
    stuck = [
        g
        for g in fa.groups
        if g.positions
        and all(
            p.completed is not None and p.enqueued is not None and p.completed < p.enqueued
            for p in g.positions
        )
    ]
    if stuck:
        out.append(_stuck(fa, stuck[0]))
    if not out:
        conf = Confidence.MEDIUM if fa.completion_known else Confidence.LOW
        missing = (
            ()
            if fa.completion_known
            else ("completion state (gloo dumps do not record it): stacks or process liveness",)
        )
        out.append(
            Candidate(
                HangClass.HEALTHY,
                (),
                conf,
                f"The {len(fa.groups)} process groups of {len(fa.ranks_read)} ranks "
                f"agree: no rank diverges in the Flight Recorder dumps.",
                20,
                missing_evidence=missing,
                rule="fr.consistent",
            )
        )
    return out
