"""Rules over where the ranks *were* when the logs end: who waited in which collective,
who never got there, and whether anything moved.

The watchdog names its own rank and the collective it waited in (``SeqNum=N``), and the
work it had issued (``last enqueued NCCL work: E``). A rank the others wait for is one
whose position is behind theirs: it issued fewer collectives, it is named by a desync
report or a monitored barrier, RAS counts fewer operations for it, or (when the logs hold
every rank's lines) it is the one that logged no timeout. Why it is behind (its own code,
another collective, a dead process) the positions cannot say: the candidate is
``unknown`` with those ranks as culprits, which a specific rule about the same ranks
refines (``doctor.verdict.classify``), and the missing evidence names their stacks.

Two RAS reports or more: counts that did not move while ranks stay behind are a stuck
communicator whose laggards never issued what the others did (``collective_mismatch``);
counts that moved are a job in flight.

When every timeout in the logs is on a one-element collective (a barrier, a flag) among
a group's first few, and nothing else failed, the ranks wait at the job's first
synchronisation for a rank still at its own start-up work: ``cpu_stuck``, low, no culprit.

When every rank that logged waits in the same collective and every one issued it, the
collective itself did not finish: the GPU or the network (``unknown``, strength 25, for
the GPU and network rules to refine). RAS counts one operation apart in a single report,
and communicators only changing status, are a job in flight: healthy, low.
"""

from __future__ import annotations

import signal
from collections import Counter, defaultdict

from doctor.evidence import LogEvent
from doctor.logs import c10d, kinds
from doctor.model import CollectiveRef, Confidence, EvidenceLine, HangClass
from doctor.ranks import rank_prose
from doctor.verdict.candidate import EVEN_BATCHES, Candidate
from doctor.verdict.log_view import (
    SOURCE,
    LogView,
    later,
    line_of,
    lines_of,
    quote,
    quote_text,
    ranks_of,
)

STACKS_HINT = (
    "stacks of the lagging ranks (py-spy dump, or a Flight Recorder dump): in their own code "
    "is cpu_stuck, in another collective is collective_mismatch, gone is rank_loss"
)


def _furthest(view: LogView, *of: str) -> dict[str, dict[int, int]]:
    """Per process group, each rank's furthest collective in the events ``of`` those kinds."""
    where: dict[str, dict[int, int]] = defaultdict(dict)
    for e in view.of_kind(*of):
        if e.rank is not None and e.seq is not None:
            group = where[e.process_group or "0"]
            group[e.rank] = max(group.get(e.rank, 0), e.seq)
    return where


def _positions(view: LogView) -> dict[str, dict[int, int]]:
    """Per process group, each rank's furthest collective: issued (enqueued) or waited in."""
    return _furthest(view, kinds.WORK_PROGRESS, kinds.WATCHDOG_TIMEOUT)


def laggards(view: LogView) -> list[Candidate]:
    reported: dict[int, str] = {}
    for e in view.of_kind(kinds.DESYNC):
        if e.rank is not None:
            reported.setdefault(e.rank, e.text)
    deduced: dict[int, str] = {}
    ref = None
    positions = _positions(view)
    issued = _furthest(view, kinds.WORK_PROGRESS)
    waited = _furthest(view, kinds.WATCHDOG_TIMEOUT)
    for group, at in positions.items():
        if len(at) >= 2 and len(set(at.values())) > 1:
            front = max(at.values())
            waits = waited.get(group, {})
            for rank, seq in at.items():
                # a rank known only by the collective it waits in may have issued more:
                # only another rank waiting in a later one puts it behind
                later = max((w for r, w in waits.items() if r != rank), default=0)
                bound = front if rank in issued.get(group, {}) else later
                if seq < bound:
                    behind = f"rank {rank} reached collective {seq}, others {bound}"
                    deduced.setdefault(rank, behind)
            ref = CollectiveRef(group, front, _op_at(view, front) or "unknown")
    last = _last_fingerprints(view)
    if len(last) >= 2 and len(set(last.values())) > 1 and not view.of_kind(kinds.MISMATCH_DETECTED):
        front = max(last.values())
        for rank, seq in last.items():
            if seq < front:
                behind = f"rank {rank}'s last collective is #{seq}, others' #{front}"
                deduced.setdefault(rank, behind)
    # torch's own report (the desync report, a monitored barrier, fr_trace) names the ranks
    # that caused the wait; ranks merely behind in the snapshot it prints are not culprits
    named = reported or deduced
    named.update(_ras_laggards(view))
    inside = _inside(view, positions, deduced) if deduced and not reported else {}
    if inside and set(named) == set(inside):
        return [_unfinished(view, inside)]
    if not named:
        named = _silent(view)
    working = [e for e in view.of_kind(kinds.WORKING) if e.rank is None or e.rank in named]
    if not named and working and view.of_kind(kinds.WATCHDOG_TIMEOUT, kinds.STORE_TIMEOUT):
        named = {e.rank: e.text for e in working if e.rank is not None}
        if not named:
            return [_busy(view, working)]
    if not named:
        return []
    ranks = tuple(sorted(named))
    why = f"{rank_prose(ranks)} never reached the collective the others wait in "
    why += f"({quote_text(next(iter(named.values())), 140)})"
    lines = tuple(EvidenceLine(SOURCE, r, text) for r, text in sorted(named.items())[:8])
    working = [e for e in working if e.rank is None or e.rank in ranks]
    if working:
        return [
            Candidate(
                HangClass.CPU_STUCK,
                ranks,
                Confidence.LOW,
                f"{why}, and {working[0].text}: "
                + ("they were at work in their" if len(ranks) > 1 else "it was at work in its")
                + " own code (an evaluation, a save) while the others waited; move that work "
                "out of the collective's way or raise the timeout",
                50,
                collective=ref,
                evidence=lines + lines_of(working[:2]),
                missing_evidence=(STACKS_HINT,),
                rule="log_laggard",
            )
        ]
    unpublished = [e for e in view.of_kind(kinds.DESYNC) if c10d.UNIQUE_ID.search(e.text)]
    if set(ranks_of(unpublished)) == set(ranks) and view.of_kind(kinds.STORE_TIMEOUT):
        return [_start_up_work(view, ranks, ref, lines)]
    summary = (
        f"{why}: {'they are' if len(ranks) > 1 else 'it is'} the likely culprit; its stack says "
        "whether it is stuck in its own code, in another collective, or gone"
    )
    return [
        Candidate(
            HangClass.UNKNOWN,
            ranks,
            Confidence.LOW,
            summary,
            45,
            collective=ref,
            evidence=lines,
            missing_evidence=(STACKS_HINT,),
            rule="log_laggard",
        )
    ]


def _start_up_work(
    view: LogView,
    ranks: tuple[int, ...],
    ref: CollectiveRef | None,
    lines: tuple[EvidenceLine, ...],
) -> Candidate:
    """Ranks whose NCCL unique id the others waited for until the store's timeout: the first
    collective of a group publishes it, so they never reached that collective, and the job
    stayed up for the whole wait (a rank that died ends it): at their own start-up work."""
    who = rank_prose(ranks)
    return Candidate(
        HangClass.CPU_STUCK,
        ranks,
        Confidence.LOW,
        f"{who} never published {'their' if len(ranks) > 1 else 'its'} NCCL unique id while "
        "the others waited for it until the store's timeout: the group's first collective "
        f"publishes it, so {who} never reached that collective, and the job stayed up all that "
        "time (a rank that dies ends it): most often still at its own start-up work (loading "
        "weights, preparing data) past the timeout; do that work before the process group's "
        "first collective, or raise the timeout",
        45,
        collective=ref,
        evidence=lines + lines_of(view.of_kind(kinds.STORE_TIMEOUT)[:1]),
        missing_evidence=(STACKS_HINT,),
        rule="log_laggard",
    )


def _inside(
    view: LogView, positions: dict[str, dict[int, int]], behind: dict[int, str]
) -> dict[int, tuple[str, int, int]]:
    """The ranks behind that are inside the collective they are at: they issued it (their
    watchdog timed out in it, or it is their last enqueued work) and it did not finish for
    them, while the others, past it, finished it. (group, their collective, the others')."""
    out: dict[int, tuple[str, int, int]] = {}
    waits = view.of_kind(kinds.WATCHDOG_TIMEOUT, kinds.WORK_PROGRESS)
    for group, at in positions.items():
        front = max(at.values(), default=0)
        mine = [e for e in waits if (e.process_group or "0") == group]
        for rank, seq in at.items():
            if rank not in behind or seq >= front:
                continue
            own = [e for e in mine if e.rank == rank and e.seq == seq]
            unfinished = own and all(e.completed is None or e.completed < seq for e in own)
            # the others finished it: their watchdogs time out in their oldest unfinished
            # work, so a timeout past it says so, unless their own count says otherwise
            others_done = all(
                e.completed is None or e.completed >= seq for e in mine if e.rank != rank
            )
            if unfinished and others_done:
                out[rank] = (group, seq, front)
    return out


def _unfinished(view: LogView, inside: dict[int, tuple[str, int, int]]) -> Candidate:
    """Ranks waiting inside a collective the others finished: a collective finishes only
    when every rank's part of it has, so theirs was not the same collective (another size
    or op), or their GPU stopped inside it."""
    ranks = tuple(sorted(inside))
    group, seq, front = inside[ranks[0]]
    waits = [
        e
        for e in view.of_kind(kinds.WATCHDOG_TIMEOUT, kinds.WORK_PROGRESS)
        if e.rank is not None and e.seq in (seq, front)
    ]
    return Candidate(
        HangClass.COLLECTIVE_MISMATCH,
        ranks,
        Confidence.LOW,
        f"{rank_prose(ranks)} {'wait' if len(ranks) > 1 else 'waits'} inside collective {seq} "
        f"of group {group}, which the others finished (they wait in {front}): a collective "
        "finishes only when every rank's part does, so the ranks did not run the same "
        f"collective {seq} (another size or op on {rank_prose(ranks)}), or "
        f"{'their GPUs' if len(ranks) > 1 else 'its GPU'} stopped inside it; compare what each "
        "rank passes to that collective",
        50,
        collective=CollectiveRef(group, seq, _op_at(view, seq) or "unknown"),
        evidence=lines_of(waits),
        missing_evidence=(STACKS_HINT, "NCCL_DEBUG=WARN lines and the hosts' Xid lines"),
        rule="log_laggard",
    )


def _busy(view: LogView, working: list[LogEvent]) -> Candidate:
    """A collective (or a wait on the store) timed out while the job's own progress bar
    says a process was busy in its own loop, no rank named: cpu_stuck on the process that
    drew the bar."""
    waits = view.of_kind(kinds.WATCHDOG_TIMEOUT, kinds.STORE_TIMEOUT)
    return Candidate(
        HangClass.CPU_STUCK,
        (),
        Confidence.LOW,
        f"a {'collective' if waits[0].kind == kinds.WATCHDOG_TIMEOUT else 'wait on the store'} "
        f"timed out and {working[0].text}: a process was at work in its own "
        "code (data preparation, a scan of the data) while the others waited; do that work "
        "before the process group starts, on every rank, or raise the timeout",
        50,
        evidence=lines_of(working[:2]) + lines_of(waits[:2]),
        missing_evidence=(STACKS_HINT,),
        rule="log_laggard",
    )


def _op_at(view: LogView, seq: int) -> str | None:
    return next((e.op for e in view.of_kind(kinds.WATCHDOG_TIMEOUT) if e.seq == seq and e.op), None)


def _last_fingerprints(view: LogView) -> dict[int, int]:
    last: dict[int, int] = {}
    for e in view.of_kind(kinds.COLLECTIVE_AT):
        if e.rank is not None and e.seq is not None:
            last[e.rank] = max(last.get(e.rank, 0), e.seq)
    return last


def _ras_laggards(view: LogView, slack: int = 1) -> dict[int, str]:
    """Ranks RAS counts more than ``slack`` operations behind the most common count (one
    report of a running job often shows ranks one operation behind: NCCL's RAS guide)."""
    out: dict[int, str] = {}
    counts = view.of_kind(kinds.RAS_COUNT)
    usual: dict[tuple[str | None, str | None], tuple[int, int | None]] = {}
    for e in counts:  # per communicator and op, the count of the largest group of ranks
        key = (e.process_group, e.op)
        if e.rank is None and e.nranks and e.nranks > usual.get(key, (0, None))[0]:
            usual[key] = (e.nranks, e.seq)
    for e in counts:
        front = usual.get((e.process_group, e.op), (0, None))[1]
        if e.rank is not None and e.seq is not None and front is not None and e.seq < front - slack:
            out[e.rank] = f"RAS: rank {e.rank} launched {e.seq} {e.op} operations, most {front}"
    return out


def _silent(view: LogView) -> dict[int, str]:
    """With most of the world's timeouts in the logs, the ranks that logged none."""
    timed_out = {e.rank for e in view.of_kind(kinds.WATCHDOG_TIMEOUT) if e.rank is not None}
    world = view.world
    if not world or len(timed_out) < 2 or 2 * len(timed_out) < world or len(timed_out) >= world:
        return {}
    return {
        r: f"rank {r} logged no watchdog timeout while {len(timed_out)} of {world} ranks did"
        for r in range(world)
        if r not in timed_out
    }


def left_loop(view: LogView) -> list[Candidate]:
    """Every rank but the silent ones timed out in one collective, each having issued it,
    and nothing says the silent ones were at work: they never issued it. With no crash of
    theirs in the logs (a crash's rule is stronger), the usual reason is that they left
    the loop early (their data ran out: an iterable dataset split unevenly) or took
    another path of the code: a collective mismatch, low confidence, for ``log_laggard``'s
    culprits (the classifier refines that ``unknown`` with it)."""
    silent = _silent(view)
    timeouts = [e for e in view.of_kind(kinds.WATCHDOG_TIMEOUT) if e.rank is not None and e.seq]
    seqs = {(e.process_group or "0", e.seq or 0) for e in timeouts}
    if not silent or len(seqs) != 1 or view.of_kind(kinds.WORKING):
        return []
    (group, seq), ranks = next(iter(seqs)), tuple(sorted(silent))
    issued = {
        e.rank for e in view.of_kind(kinds.WORK_PROGRESS) if e.seq is not None and e.seq >= seq
    }
    if issued and not issued.isdisjoint(ranks):
        return []
    return [
        Candidate(
            HangClass.COLLECTIVE_MISMATCH,
            ranks,
            Confidence.LOW,
            f"every other rank timed out in collective {seq} and {rank_prose(ranks)} logged "
            "nothing: it never issued that collective, most often because it left the loop "
            f"early (its share of the data ran out) or took another path; {EVEN_BATCHES}",
            30,
            collective=CollectiveRef(group, seq, _op_at(view, seq) or "unknown"),
            evidence=tuple(EvidenceLine(SOURCE, r, t) for r, t in sorted(silent.items())[:8]),
            missing_evidence=(STACKS_HINT,),
            rule="log_left_loop",
        )
    ]


EARLY_SEQ = 5
"""A process group's first few collectives: set-up's broadcasts and the first barrier."""
_QUIET = kinds.SET_UP_PROGRESS | {
    kinds.CONNECT_RETRY,
    kinds.COMPILING,
    kinds.WATCHDOG_TIMEOUT,
    kinds.NCCL_ABORT,
    kinds.WORK_PROGRESS,
    kinds.PROGRESS,
    kinds.NCCL_CALL,
}


def _quiet(view: LogView) -> bool:
    """Whether the logs hold only waits, positions and progress: nothing else failed. A
    rank ending on SIGABRT is ProcessGroupNCCL's watchdog taking the waiting process down
    after its timeout (a consequence, not a failure of its own)."""
    return all(
        e.kind in _QUIET or (e.kind == kinds.EXIT and e.code == -signal.SIGABRT)
        for e in view.events
    )


def stopped_early(view: LogView) -> list[Candidate]:
    """A rank's early-stopping check fired, then another rank failed or timed out: the
    stopped rank left the training loop while its peers went on to the next collective,
    which it never joins, so they wait in it until their timeout, or until their transport
    gives up on the rank that left (a connection reset, MPI's progress engine crashing).
    Above a lost rank's reading: that failure is the peers', and the stop came first. A
    check must decide alike on every rank (Lightning reduces its decision across ranks;
    Keras', LightGBM's and most scripts' do not)."""
    stops = view.of_kind(kinds.STOPPED_EARLY)
    if not stops:
        return []
    stopped = ranks_of(stops)
    failed = [
        e
        for e in view.events
        if e.kind in kinds.FAULTS and e.rank not in stopped and later(e, stops[0])
    ]
    if not failed:
        return []
    summary = (
        f"{rank_prose(stopped, none='a rank')} stopped training early ({quote(stops[0])}), "
        f"then a peer failed ({quote(failed[0])}): the rank whose early-stopping check fired "
        "left the loop while the others went on to the next collective, which it never "
        "joins; make the check decide alike on every rank (reduce its decision across the "
        "ranks) so that they stop together"
    )
    return [
        Candidate(
            HangClass.COLLECTIVE_MISMATCH,
            stopped,
            Confidence.LOW,
            summary,
            83,
            evidence=lines_of([stops[0], *failed[:3]]),
            missing_evidence=(STACKS_HINT,),
            rule="log_stopped_early",
        )
    ]


def first_sync(view: LogView) -> list[Candidate]:
    """Every timeout is on a one-element collective (a barrier, a flag, a size exchange)
    among its group's first few, and the logs say nothing else failed: the ranks wait at
    the job's first synchronisation for a rank still at its own start-up work (preparing
    or tokenizing data, loading weights, a first evaluation) for longer than the timeout.
    A collective that cannot finish fails with a transport, GPU or crash line, which the
    stronger rules read."""
    timeouts = [e for e in view.of_kind(kinds.WATCHDOG_TIMEOUT) if e.seq is not None]
    sized = [e for e in timeouts if e.numel is not None]
    if (
        not sized
        or any(e.numel != 1 for e in sized)
        or any(e.seq is not None and e.seq > EARLY_SEQ for e in timeouts)
        or not _quiet(view)
    ):
        return []
    seq = max(e.seq or 0 for e in sized)
    ranks = ranks_of(timeouts)
    return [
        Candidate(
            HangClass.CPU_STUCK,
            (),
            Confidence.LOW,
            f"{rank_prose(ranks, none='a rank')} timed out in collective {seq}, a "
            "one-element synchronisation among the job's first: a rank was still at its own "
            "start-up work (preparing data, loading, a first evaluation) past the timeout; do "
            "that work before the process group starts, on every rank, or raise the timeout",
            28,
            collective=CollectiveRef(
                sized[0].process_group or "0", seq, _op_at(view, seq) or "unknown"
            ),
            evidence=lines_of(sized[:4]),
            missing_evidence=(STACKS_HINT,),
            rule="log_first_sync",
        )
    ]


def broadcast_source(view: LogView) -> list[Candidate]:
    """Every timeout that names its collective is a broadcast, and nothing else failed: the
    waiting ranks wait for the broadcast's source, which had not posted it. A broadcast
    finishes on a rank as soon as the source's data reaches it, so ranks stuck in one were
    not waiting on each other but on the source, which was elsewhere: most often at work
    only it does (an evaluation, a save, data preparation) for longer than the timeout.
    Were it in another collective instead, its own timeout or a mismatch report would say."""
    timeouts = view.of_kind(kinds.WATCHDOG_TIMEOUT)
    named = [e for e in timeouts if e.op]
    if not named or any((e.op or "").upper() != "BROADCAST" for e in named) or not _quiet(view):
        return []
    first, waiting = named[0], ranks_of(timeouts)
    return [
        Candidate(
            HangClass.CPU_STUCK,
            (),
            Confidence.LOW,
            f"{rank_prose(waiting, none='a rank')} timed out waiting in a broadcast and "
            "nothing else failed: the broadcast's source had not sent it, busy with work only "
            "it does (an evaluation, a save, data preparation) past the timeout; give that "
            "work to every rank, or make the others wait for it with a longer timeout",
            27,
            collective=CollectiveRef(
                first.process_group or "0", first.seq or 0, first.op or "BROADCAST"
            ),
            evidence=lines_of(named[:4]),
            missing_evidence=(STACKS_HINT,),
            rule="log_broadcast_source",
        )
    ]


DEEP_SEQ = 1_000
"""A collective this far into its group's sequence ran after a thousand others finished on
the same communicator: its set-up and links had proven themselves."""


def _lone_timeouts(view: LogView) -> list[LogEvent]:
    """The watchdog timeouts of one rank (or of ranks no prefix names) where nothing else
    failed: the logs' only position, read for what its collective says; else none."""
    timeouts = view.of_kind(kinds.WATCHDOG_TIMEOUT)
    if len(ranks_of(timeouts)) > 1 or not _quiet(view):
        return []
    return timeouts


def deep_in_training(view: LogView) -> list[Candidate]:
    """One rank's timeout (or a timeout no rank prefix names) deep into training, the only
    position in the logs, and nothing else failed: after a thousand collectives finished on
    the communicator, one that never completes is most often one some rank never joined, its
    path having left the others' (its data ran out, it skipped a step, a condition only it
    met): torch's own first guess at a timeout. A broken link or GPU would print its own
    line, which a stronger rule reads; a broadcast is ``broadcast_source``'s."""
    timeouts = _lone_timeouts(view)
    placed = [e for e in timeouts if e.seq is not None]
    if (
        not placed
        or any((e.seq or 0) < DEEP_SEQ for e in placed)
        or any((e.op or "").upper() == "BROADCAST" for e in placed)
    ):
        return []
    first = placed[0]
    seq = first.seq or 0
    return [
        Candidate(
            HangClass.COLLECTIVE_MISMATCH,
            (),
            Confidence.LOW,
            f"{rank_prose(ranks_of(timeouts), none='a rank')} timed out in collective {seq} "
            f"of group {first.process_group or '0'}, deep into training, and nothing else "
            "failed: after a thousand collectives had finished, the likeliest cause is a rank "
            "that never joined this one, its path having left the others' (its data ran out, "
            "it skipped a step, a condition only it met); the other ranks' logs or stacks say "
            "which",
            26,
            collective=CollectiveRef(
                first.process_group or "0", seq, first.op or _op_at(view, seq) or "unknown"
            ),
            evidence=lines_of(placed[:4]),
            missing_evidence=(STACKS_HINT, "the other ranks' logs"),
            rule="log_deep_timeout",
        )
    ]


GATHERS = frozenset({"ALLGATHER", "_ALLGATHER_BASE", "ALLGATHER_COALESCED"})
"""ProcessGroupNCCL's names for an all-gather (``all_gather``, ``all_gather_into_tensor``,
``all_gather_coalesced``)."""


def gather_unjoined(view: LogView) -> list[Candidate]:
    """One rank's timeouts (or timeouts no rank prefix names), every one in an all-gather,
    the logs' only positions, and nothing else failed. An all-gather hangs most often where
    its ranks did not agree on it: a variable-length output gathered as if its size were
    the same on every rank, or a rank that never issued it (a step, an evaluation or a
    metric only some ranks ran); torch's own first guess at a timeout is sizes that differ.
    A broken link prints its own line, which a stronger rule reads; a peer-to-peer path
    blocked (ACS, an IOMMU) may print none, and is said as the other cause."""
    timeouts = _lone_timeouts(view)
    gathers = [e for e in timeouts if (e.op or "").upper() in GATHERS]
    if not gathers or any(e.op and e.op.upper() not in GATHERS for e in timeouts):
        return []
    first = next((e for e in gathers if e.seq is not None), gathers[0])
    group, seq = first.process_group or "0", first.seq
    return [
        Candidate(
            HangClass.COLLECTIVE_MISMATCH,
            (),
            Confidence.LOW,
            f"{rank_prose(ranks_of(timeouts), none='a rank')} timed out in all-gather"
            f"{'' if seq is None else f' {seq}'} "
            f"({first.op}) and nothing else failed: an all-gather hangs most often where its "
            "ranks did not agree on it, a variable-length output gathered as if every rank's "
            "were the same size, or a rank that never issued it (a step, an evaluation or a "
            "metric only some ranks ran); a peer-to-peer path that carries nothing (ACS or "
            "an IOMMU in the way, NCCL_P2P_LEVEL) hangs one too, most often among the first "
            "collectives; the other ranks' logs or stacks say which",
            26,
            collective=None if seq is None else CollectiveRef(group, seq, first.op or ""),
            evidence=lines_of(gathers[:4]),
            missing_evidence=(STACKS_HINT, "the other ranks' logs", "each rank's tensor size"),
            rule="log_gather_unjoined",
        )
    ]


def stalled(view: LogView) -> list[Candidate]:
    """Every rank that logged waits in one collective it issued: it never finished."""
    timeouts = [e for e in view.of_kind(kinds.WATCHDOG_TIMEOUT) if e.rank is not None and e.seq]
    if not timeouts or any(c.rule == "log_laggard" for c in laggards(view)):
        return []
    where = Counter((e.process_group or "0", e.seq or 0) for e in timeouts)
    (group, seq), _n = where.most_common(1)[0]
    ranks = ranks_of(timeouts)
    where_all = (
        "no other rank's position is in the logs"
        if len(ranks) <= 1
        else "none is behind: every rank that logged issued it"
    )
    summary = (
        f"{rank_prose(ranks, none='a rank')} timed out in collective {seq} of group "
        f"{group}, and {where_all}; "
        "it did not finish: ranks that gave it different sizes (torch's own first guess), a "
        "GPU that stopped inside it, or the network"
    )
    return [
        Candidate(
            HangClass.UNKNOWN,
            (),
            Confidence.LOW,
            summary,
            25,
            collective=CollectiveRef(group, seq, _op_at(view, seq) or "unknown"),
            evidence=lines_of(timeouts),
            missing_evidence=(
                "NCCL_DEBUG=WARN lines of every rank",
                "the hosts' kernel log (Xid lines)",
                "an NCCL RAS report (ncclras) taken during the hang",
            ),
            rule="log_stalled",
        )
    ]


def watchdog_stuck(view: LogView) -> list[Candidate]:
    """A rank's watchdog thread itself blocked in a CUDA or NCCL call (PyTorch's heartbeat
    monitor). After the program began to exit, the job hung in its teardown: communicators
    destroyed in different orders on different ranks, or while peers still use them (the
    destroy waits for them); before, the blocked call tells nothing by itself."""
    stuck = view.of_kind(kinds.WATCHDOG_STUCK)
    if not stuck:
        return []
    ranks = ranks_of(stuck)
    who = rank_prose(ranks, none="a rank")
    seconds = max(e.code or 0 for e in stuck)
    how_long = f"for {seconds} s" if seconds else "past the heartbeat timeout"
    blocked = (
        f"{who}'s watchdog thread was itself blocked {how_long} in a CUDA or NCCL call "
        f"(PyTorch's heartbeat monitor: {quote(stuck[0], 80)})"
    )
    exiting = view.of_kind(kinds.EXITING)
    if exiting:
        summary = (
            f"{blocked} after the program began to exit (destroy_process_group() was not "
            "called): the job hung in its teardown, most often ranks destroying their process "
            "groups in different orders, or while peers still use them; call "
            "dist.destroy_process_group() on every rank, after a barrier, groups in the same order"
        )
        return [
            Candidate(
                HangClass.COLLECTIVE_MISMATCH,
                (),
                Confidence.LOW,
                summary,
                45,
                evidence=lines_of(stuck + exiting[:1]),
                rule="log_teardown",
            )
        ]
    summary = (
        f"{blocked}: a CUDA call that never returned (a GPU that stopped, an NCCL abort "
        "waiting for peers that left, another thread holding the GIL inside a CUDA call)"
    )
    return [
        Candidate(
            HangClass.UNKNOWN,
            (),
            Confidence.LOW,
            summary,
            1,
            evidence=lines_of(stuck),
            missing_evidence=(
                "a native stack of that rank (py-spy dump --native): which call blocks",
                "the hosts' kernel log (Xid lines)",
            ),
            rule="log_watchdog_stuck",
        )
    ]


def _report(e: LogEvent) -> str:
    """Which RAS report an event came from: its file (or live query), less the line."""
    return at[0] if (at := line_of(e)) else e.origin


def ras_frozen(view: LogView) -> list[Candidate]:
    """Two RAS reports or more: counts that moved are progress; counts that did not move,
    with ranks behind, are a stuck communicator (NCCL's RAS guide: "if the output does not
    change across subsequent RAS queries, it may indicate that the communicator is stuck";
    frozen with a spread, the ranks behind never issued what the others did: a desync)."""
    groups = [e for e in view.of_kind(kinds.RAS_COUNT) if e.rank is None and e.seq is not None]
    reports = list(dict.fromkeys(_report(e) for e in groups))
    if len(reports) < 2:
        return []
    first = {(e.process_group, e.op, e.seq) for e in groups if _report(e) == reports[0]}
    last = {(e.process_group, e.op, e.seq) for e in groups if _report(e) == reports[-1]}
    behind = _ras_laggards(view, slack=0)
    if first != last or not behind:
        return []  # moving (or nothing singled out): the healthy and laggard rules say so
    ranks = tuple(sorted(behind))
    summary = (
        f"NCCL RAS counts did not move across {len(reports)} reports and {rank_prose(ranks)} "
        f"{'stay' if len(ranks) > 1 else 'stays'} behind the others: the communicator is "
        "stuck and the ranks behind never issued the collectives the others did (a desync)"
    )
    return [
        Candidate(
            HangClass.COLLECTIVE_MISMATCH,
            ranks,
            Confidence.MEDIUM,
            summary,
            70,
            evidence=lines_of([e for e in view.of_kind(kinds.RAS_COUNT) if e.rank in ranks]),
            missing_evidence=(STACKS_HINT,),
            rule="log_ras_frozen",
        )
    ]


def _ras_moved(view: LogView) -> bool:
    groups = [e for e in view.of_kind(kinds.RAS_COUNT) if e.rank is None and e.seq is not None]
    reports = list(dict.fromkeys(_report(e) for e in groups))
    if len(reports) < 2:
        return False
    counts = [{(e.process_group, e.op, e.seq) for e in groups if _report(e) == r} for r in reports]
    return counts[0] != counts[-1]


def healthy(view: LogView) -> list[Candidate]:
    """Nothing failed, and something says the job runs (RAS, DIAG, DDP's statistics)."""
    if any(e.kind in kinds.FAULTS for e in view.events) or (
        _ras_laggards(view) and not _ras_moved(view)
    ):
        return []
    progress = view.of_kind(kinds.PROGRESS)
    in_flight = [e for e in view.of_kind(kinds.RAS_COUNT) if e.rank is None]
    if not progress and not in_flight:
        return []
    ras_ok = any(e.text.startswith("RAS:") for e in progress) and not in_flight
    summary = (
        "NCCL RAS sees every communicator running with no errors"
        if ras_ok
        else "nothing in the logs failed and the job reports progress"
        + (
            "; RAS counts differ by at most one operation, which a running job shows"
            if in_flight
            else ""
        )
    )
    return [
        Candidate(
            HangClass.HEALTHY,
            (),
            Confidence.MEDIUM if ras_ok else Confidence.LOW,
            summary,
            30 if ras_ok else 15,
            evidence=lines_of(progress + in_flight),
            missing_evidence=()
            if ras_ok
            else ("a second RAS report a minute later: counts that did not move are a hang",)
            if in_flight
            else (),
            rule="log_healthy",
        )
    ]
