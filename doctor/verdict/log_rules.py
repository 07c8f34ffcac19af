"""Rules over what a job's logs say (``Evidence.logs``, read by ``doctor.logs``).

Logs are written by the victims: the ranks that time out name the collective they
waited in, not who kept them waiting. So each rule looks for the cause among what
the logs *also* say: a rank whose process died of its own error first, a GPU the
kernel reports broken, a link NCCL reports failing, the laggard a desync report or
RAS's counts single out, a mismatch torch's own check caught.

======================  ========  ============================================================
rule                    strength  fires when the logs show
======================  ========  ============================================================
log_unsupported_op      85        the backend rejected an op (``does not support``)
log_mismatch            84        torch's collective check (or gloo's or NCCL's size check)
                                  found ranks disagreeing, or two ranks ran different ops (or
                                  sizes) at one sequence number
log_watchdog_mismatch   84/60     the ranks' watchdogs timed out in different collectives at one
                                  sequence number of a group (an op, or the element count of
                                  an op every rank must give alike); 60 when the lines do not
                                  name their group (torch before 2.3)
log_nccl_calls          84        NCCL's per-call trace (COLL) shows processes calling different
                                  collectives (or sizes) at one operation count of their
                                  communicator
log_stack_calls         66/35     tracebacks printed at a timeout are in different collectives
                                  (35: tracebacks in different collectives and no timeout
                                  line in the excerpt)
log_gpu_fault           84/40     a hardware Xid, uncorrectable ECC, a GPU off the bus or
                                  ``ERR!`` in nvidia-smi, on a rank's GPU (or a host's); 40,
                                  low, when its only Xids record and do not fail (63: a row
                                  remapped, 92: corrected errors' rate)
log_stopped_early       83        a rank's early-stopping check fired, then another rank
                                  failed or timed out: it left the loop its peers wait in
                                  (collective_mismatch, low; above the peers' failure)
log_rank_loss           82/55/45  a rank's process died of its own cause (killed, OOM, a
                                  crash, its own exception, an abort with nothing before it
                                  to follow; 82), RAS says a process is dead
                                  or unreachable (82/55), or a rank exited with no reason
                                  given (45)
log_raised              62        a rank's own uncaught exception (or CUDA out of memory, even
                                  where no prefix names the rank), or the OOM killer killing
                                  a process, while ranks time out waiting, no exit line needed
log_raised_in_set_up    62        a rank's exception raised inside the set-up (its traceback
                                  in init_process_group, set_device, DDP's constructor), then
                                  waits or an exit with an error status, no collective run and
                                  no signal's end: the set-up failed on that rank (bootstrap)
log_oom_killed          55        the OOM killer (the kernel's, or a cgroup's as SLURM's step
                                  reports it) killed a process, and nothing above explains
                                  more: a rank is gone even where no rank timed out
log_gpu_oom             40        torch's allocator ran out of GPU memory and nothing else is
                                  said: the rank raised and ended (rank_loss, low)
log_cancelled           40/10     the job was stopped from outside (SLURM's time limit,
                                  preemption, requeue; a signal to torchrun's agent):
                                  rank_loss, low, no culprit; 10 when a watchdog or store
                                  timeout came first (the job had hung)
log_bus_error           60        ranks were killed by a bus error whose kind nothing names
                                  (``exitcode: -7``, ``Signal 7 (SIGBUS)``) and by nothing
                                  else: /dev/shm full or too small (bootstrap, low; the lost
                                  rank, 45, the alternative)
log_bootstrap           76/50/40  communicator or store creation failed, or a set-up error
                        /22       that names its cause (50, low confidence, when only one of
                                  NCCL's bare error classes says so: system, CUDA, internal,
                                  invalid usage or argument; 40 once a collective had run;
                                  22, low, when only retry warnings do, the store's or
                                  NCCL's, none once anything says the ranks connected: a
                                  collective, a watchdog, NCCL's init, a stack, a barrier)
log_iommu               72/25     the kernel's IOMMU refused a device's DMA (Intel's DMAR
                                  fault, AMD-Vi's IO_PAGE_FAULT): peer-to-peer writes blocked;
                                  25, low: only RCCL's warning that iommu=pt is missing
log_network             70/50/30  NCCL reports a transport error (70), or connections a link
                                  broke (timed out, no route, UCX's reset; 50); 30 when a
                                  rank's death explains them
log_closed_in_set_up    52        a peer's connection ended (a reset, a close) while a rank's
                                  traceback was inside the set-up (init_process_group, the
                                  store, DDP's constructor) and no collective had run
log_peer_exited         50        only a peer's closes (end of file, reset, broken pipe, gRPC's
                                  ``Socket closed``) and no transport error: the peer's
                                  process most likely ended (rank_loss, low; the link, 30)
log_cuda_error          60        a CUDA error stopped a rank's GPU work
log_catalogue           35/20     a failure message NCCL or torchelastic prints that no rule
                                  above reads, known from their sources: the class of the
                                  place that raises it (20: set-up, once collectives ran)
log_main_first          72/40     stacks in main_process_first()'s section (72), or the script
                                  saying rank 0 does shared work alone (40, low): rank 0
                                  busy while the others wait (cpu_stuck)
log_compile             74        a collective timed out while a rank said it was compiling
                                  (torch.compile, a JIT kernel build) and had not said since
                                  that its build was done
log_build               35        a JIT extension build (or its stale lock file) and nothing
                                  that failed: the job stopped in the build
                                  (compile_warmup; medium when a lock file is named)
log_rendezvous          33        the logs stop where the ranks announce they join the job's
                                  rendezvous (Lightning, torchelastic), nothing failed: a rank
                                  never came (bootstrap, low)
log_straggler           60/30     NCCL's diagnostics measured one rank's link far off, or
                                  the job's straggler detector named ranks (30 once a
                                  collective timed out: a straggler is no hang, so the slow
                                  link is network, low, and a named rank only the culprit)
log_laggard             50/45     a desync report, a monitored barrier, RAS counts or the
                                  ranks' own sequence numbers single out ranks that never
                                  reached the collective the others wait in: cpu_stuck (50)
                                  when the job's progress bar counted on after the timeout
                                  (they were at work), else unknown (45: why they did not
                                  is for their stacks to say); cpu_stuck (50), no culprit,
                                  when no rank is singled out but a progress bar had run as
                                  long as the collective waited
log_left_loop           30        every rank but the silent ones timed out in one collective
                                  they issued, none at work: the silent ones left the loop
                                  (collective_mismatch, low; refines log_laggard's unknown)
log_ras_frozen          70        RAS counts did not move across two reports, ranks behind
log_first_sync          28        every timeout is on a one-element collective among its
                                  group's first few (sequence 5 or less) and nothing else
                                  failed: a rank still at its start-up work (cpu_stuck, low)
log_broadcast_source    27        every timeout is in a broadcast and nothing else failed: the
                                  source had not posted it, busy with its own work (cpu_stuck,
                                  low)
log_deep_timeout        26        one rank's timeout (the logs' only position) at sequence
                                  1,000 or later, not a broadcast, and nothing else failed: a
                                  rank whose path left the others' (collective_mismatch, low)
log_gather_unjoined     26        one rank's timeouts (or unnamed ones), all in all-gathers,
                                  and nothing else failed: ranks that did not agree on it
                                  (sizes that differ, a rank that skipped it)
                                  (collective_mismatch, low)
log_stalled             25        every rank that logged timed out in the same collective,
                                  all issued it: different sizes, a GPU or the network (unknown)
log_teardown            45        a rank's watchdog blocked in a CUDA/NCCL call (the heartbeat
                                  monitor) after the program began to exit: process groups
                                  destroyed in different orders (collective_mismatch, low);
                                  before the exit, the same line says only what blocked
                                  (``log_watchdog_stuck``, unknown, for the word model)
log_healthy             30/15     RAS sees every communicator running; the job reports it
                                  trains (DDP's statistics, NCCL DIAG, a straggler report
                                  with none; 15); nothing else is wrong
======================  ========  ============================================================

The rules about what failed are in ``doctor.verdict.log_faults``; those about where the
ranks were, in ``doctor.verdict.log_waits``.
"""

from __future__ import annotations

import re
import signal
from collections import Counter
from collections.abc import Callable

from doctor.evidence import Evidence, LogEvent
from doctor.logs import c10d, disagree, harmless, kinds, launcher, training
from doctor.model import CollectiveRef, Confidence, EvidenceLine, HangClass
from doctor.ranks import rank_prose
from doctor.verdict import log_faults, log_waits, log_words
from doctor.verdict.candidate import Candidate
from doctor.verdict.log_view import LogView, later, lines_of, quote, ranks_of, where
from doctor.verdict.view import FR_HINT


def unsupported_op(view: LogView) -> list[Candidate]:
    found = view.of_kind(kinds.UNSUPPORTED_OP)
    if not found:
        return []
    op = found[0].op or "an op"
    ranks = ranks_of(found)
    summary = (
        f"the backend rejected {op}"
        + (f" on {rank_prose(ranks)}" if ranks else "")
        + ": the job crashed in a way that looks like a hang; use an op the backend supports "
        "(or another backend)"
    )
    ref = CollectiveRef(found[0].process_group or "unknown", found[0].seq, op)
    return [
        Candidate(
            HangClass.UNSUPPORTED_OP,
            ranks,
            Confidence.HIGH,
            summary,
            85,
            collective=ref,
            evidence=lines_of(found),
            rule="log_unsupported_op",
        )
    ]


SAME_COUNT_OPS = frozenset(
    {"ALLREDUCE", "BROADCAST", "REDUCE", "_ALLGATHER_BASE", "_REDUCE_SCATTER_BASE"}
)
"""Collectives whose element count every rank must give alike (``NumelIn``): uneven
all_gather, all_to_all, gather and scatter legitimately differ, so only these compare sizes."""
UNMATCHED_OPS = frozenset({"SEND", "RECV", "RECVANYSOURCE", "COALESCED", "UNKNOWN"})
"""Point-to-point work counts its own sequence numbers (torch's ``seqP2P_``), and a coalesced
group hides its ops: neither is compared with the collectives at the same number."""

Fingerprint = tuple[str | None, int | None]


def mismatch(view: LogView) -> list[Candidate]:
    """torch's fingerprint check, two ranks' own words about collective N, or the collectives
    their watchdogs timed out in at one sequence number, disagree."""
    detected = view.of_kind(kinds.MISMATCH_DETECTED)
    said: dict[tuple[str, int], dict[int, LogEvent]] = {}
    for e in view.of_kind(kinds.COLLECTIVE_AT):
        if e.rank is not None and e.seq is not None:
            said.setdefault((e.process_group or "0", e.seq), {})[e.rank] = e
    split = _split(said, lambda e: (e.op, e.numel))
    timed_out: dict[tuple[str, int], dict[int, LogEvent]] = {}
    if split is None and not detected:
        timed_out = _timed_out_in(view)
        split = _split(timed_out, _watchdog_fingerprint)
    culprits, tie, ref = split or ((), False, None)
    named = ranks_of(e for e in detected if e.rank is not None)
    if named and not culprits:
        culprits, tie = named, False
    if not detected and not culprits:
        return _different_calls(view)
    found = detected + [e for e in view.of_kind(kinds.COLLECTIVE_AT) if e.rank in culprits]
    if timed_out and ref is not None:
        waits = timed_out[(ref.process_group, ref.seq or 0)]
        found += list(waits.values())
        strength = 84 if _grouped(view) else 60
        summary = _waits_apart(waits, ref)
        return [
            _disagree(
                culprits, tie, summary, ref, lines_of(found), "log_watchdog_mismatch", strength
            )
        ]
    checked = _check_said(detected)
    summary = (
        f"{rank_prose(culprits)} ran a different collective than the others at sequence "
        f"number {ref.seq}"
        if ref and not tie
        else f"the ranks split evenly at sequence number {ref.seq} ({rank_prose(culprits)}): a tie "
        "the logs cannot break"
        if ref
        else checked
        or "torch's collective check found the ranks "
        "disagreeing on a collective (op, shape or dtype)"
    ) + ": make every rank issue the same collectives in the same order"
    return [_disagree(culprits, tie, summary, ref, lines_of(found), "log_mismatch")]


_SIZES = re.compile(
    r"(?P<by>op\.preamble\.length <= op\.nbytes)\. (?P<sent>\d{1,18}) vs (?P<posted>\d{1,18})|"
    r"truncated ?: ?receiving (?P<sent2>\d{1,18}) bytes instead of (?P<posted2>\d{1,18})"
)


_MODELS = re.compile(
    r"params\[\d{1,9}\] in this process with sizes \[[\d, ]{0,200}\] appears not to match sizes "
    r"of the same param in process \d{1,9}|DDP expects same model across all ranks[^.]{0,300}"
)


_REDUCER = re.compile(c10d.REDUCER)
_RING_ABORT = re.compile(c10d.RING_ABORT)
_GROUP_SIZE = re.compile(c10d.GROUP_SIZE)
_SHAPES_ACROSS = re.compile(c10d.SHAPES_ACROSS)
_MPI_TRUNCATED = re.compile(c10d.MPI_TRUNCATED)


def _check_said(detected: list[LogEvent]) -> str:
    """What a transport's size check or DDP's model check found, in words; "" when it was
    torch's collective check."""
    missing = [e for e in detected if e.text.startswith(launcher.MISSING_SAID)]
    if missing:
        return (
            f"{missing[0].text}"
            + (
                f" (and {len(missing) - 1} more such line{'s' * (len(missing) > 2)})"
                if len(missing) > 1
                else ""
            )
            + ": the others wait for it"
        )
    for e in detected:
        if m := _SIZES.search(e.text):
            sent, posted = m["sent"] or m["sent2"], m["posted"] or m["posted2"]
            told = (
                f"a rank received {sent} bytes of a collective where its own call expects {posted}"
            )
            if m["by"]:
                return f"{told} (gloo): the ranks gave different sizes or ran different collectives"
            return (
                f"{told} (NCCL): the ranks gave different sizes or ran different collectives, "
                "or differ in NCCL settings (NCCL_PROTO, NCCL_ALGO) or NCCL's version"
            )
        if m := _MODELS.search(e.text):
            return (
                f"DDP found the ranks' models differ ({m.group(0)}): every rank must build the "
                "same model (same parameters, shapes and order) before wrapping it"
            )
        if m := _REDUCER.search(e.text):
            return (
                f"DDP's reducer found a parameter whose gradient was not reduced as it expects "
                f"({m.group(0)}): a parameter that took no part in the loss, on some ranks or in "
                "some iterations, or one used twice (reentrant checkpointing); pass "
                "find_unused_parameters=True, or make every parameter take part once"
            )
        if m := _SHAPES_ACROSS.search(e.text):
            checker = "Accelerate's debug mode" if "desired" in m.group(0) else "TensorFlow"
            return (
                f"{checker} found the processes' tensor shapes differ ({m.group(0)}): every "
                "process must give the collective the same shape"
            )
        if m := _MPI_TRUNCATED.search(e.text):
            return (
                f"MPI found a rank received more of a collective than its call posted "
                f"({m.group(0)}): the ranks gave the collective different counts (a last batch "
                "of another size, a tensor of another shape)"
            )
        if m := _GROUP_SIZE.search(e.text):
            return (
                f"the workers disagree on a collective group's size ({m.group(0)}): every "
                "worker must join the same collectives (an earlier strategy's collective may "
                "still be pending)"
            )
        if m := _RING_ABORT.search(e.text):
            return (
                f"a worker's input ran out while the others were in a collective ({m.group(0)}): "
                "the workers were given different numbers of batches; give each the same"
            )
        if m := disagree.HOROVOD_MISMATCH.search(e.text):
            return f"Horovod's coordinator found the ranks disagree on one tensor ({m.group(0)}...)"
        if disagree.HOROVOD_STALL.search(e.text):
            return (
                "Horovod's stall inspector saw tensors submitted by some ranks only (the "
                "'Missing ranks:' list after its warning names the ranks it waits for)"
            )
    return ""


def _waits_apart(waits: dict[int, LogEvent], ref: CollectiveRef) -> str:
    """Which ranks timed out in which collective, largest party first."""
    parties: dict[Fingerprint, list[int]] = {}
    for rank, e in sorted(waits.items()):
        parties.setdefault(_watchdog_fingerprint(e), []).append(rank)
    told = [
        f"{rank_prose(tuple(ranks))} in {op}"
        + (f" of {numel} element{'' if numel == 1 else 's'}" if numel is not None else "")
        for (op, numel), ranks in sorted(parties.items(), key=lambda kv: -len(kv[1]))
    ]
    return (
        f"at sequence number {ref.seq} of group {ref.process_group} the ranks' watchdogs timed "
        f"out in different collectives ({'; '.join(told)}): they issued different collectives, "
        "or one size where all must match; make every rank issue the same collectives in the "
        "same order, with the same sizes"
    )


def _split(
    at: dict[tuple[str, int], dict[int, LogEvent]], fingerprint: Callable[[LogEvent], Fingerprint]
) -> tuple[tuple[int, ...], bool, CollectiveRef] | None:
    """The first collective whose ranks disagree: the ranks off the majority (all, on a tie)."""
    for (group, seq), ranks in sorted(at.items()):
        shapes = Counter(fingerprint(e) for e in ranks.values())
        if len(shapes) < 2:
            continue
        (major, n), *_ = shapes.most_common()
        tie = 2 * n <= len(ranks)
        culprits = tuple(sorted(r for r, e in ranks.items() if tie or fingerprint(e) != major))
        return culprits, tie, CollectiveRef(group, seq, major[0] or "unknown")
    return None


def _watchdog_fingerprint(e: LogEvent) -> Fingerprint:
    return e.op, e.numel if e.op in SAME_COUNT_OPS else None


def _timed_out_in(view: LogView) -> dict[tuple[str, int], dict[int, LogEvent]]:
    """The collective each rank's watchdog timed out in, by (group, sequence number). A line
    without its group (torch before 2.3) counts only from a rank that timed out in one
    collective: a rank of several groups times out in each, at unrelated numbers."""
    timeouts = [
        e
        for e in view.of_kind(kinds.WATCHDOG_TIMEOUT)
        if e.rank is not None and e.seq is not None and e.op and e.op not in UNMATCHED_OPS
    ]
    per_rank = Counter(
        e.rank for e in {(e.rank, e.seq, e.op, e.numel): e for e in timeouts}.values()
    )
    at: dict[tuple[str, int], dict[int, LogEvent]] = {}
    for e in timeouts:
        if e.process_group is not None or per_rank[e.rank] == 1:
            at.setdefault((e.process_group or "0", e.seq or 0), {})[e.rank or 0] = e
    return at


def _grouped(view: LogView) -> bool:
    """Whether every watchdog line names its process group (torch 2.3 and later)."""
    return all(e.process_group is not None for e in view.of_kind(kinds.WATCHDOG_TIMEOUT))


def _disagree(
    culprits: tuple[int, ...],
    tie: bool,
    summary: str,
    ref: CollectiveRef | None,
    evidence: tuple[EvidenceLine, ...],
    rule: str,
    strength: int = 84,
) -> Candidate:
    """A collective mismatch read from the ranks' own words: low on a tie."""
    return Candidate(
        HangClass.COLLECTIVE_MISMATCH,
        culprits,
        Confidence.LOW if tie else Confidence.HIGH,
        summary,
        strength,
        collective=ref,
        evidence=evidence,
        rule=rule,
    )


def _different_calls(view: LogView) -> list[Candidate]:
    """Tracebacks printed at a timeout show the ranks in different collectives (barrier on
    some, broadcast on others): they called different collectives at the same point. A
    primitive never calls another, so two of them in the stacks are two ranks in different
    collectives even where the excerpt kept no timeout line (weaker: 35)."""
    calls = [e for e in view.of_kind(kinds.COLLECTIVE_AT) if e.seq is None and e.op]
    ops = sorted({e.op for e in calls if e.op})
    positions = {e.seq for e in view.of_kind(kinds.COLLECTIVE_AT) if e.seq is not None}
    stuck = (
        view.of_kind(kinds.WATCHDOG_TIMEOUT, kinds.DESYNC)
        or len(positions) > 1
        or [e for e in view.of_kind(kinds.EXCEPTION) if "imed out" in e.text or "imeout" in e.text]
    )
    if len(ops) < 2:
        return []
    parties = sorted((ranks_of(e for e in calls if e.op == op) for op in ops), key=len)
    tie = all(parties) and len(parties[0]) == len(parties[1])
    culprits = () if not all(parties) else parties[0] if not tie else ranks_of(calls)
    summary = (
        f"the stacks printed{' at the timeout' if stuck else ''} are in different collectives "
        f"({', '.join(ops)}): "
        "the ranks called different collectives at the same point (a rank-conditional path"
        + ("; as many ranks on each side, so which side left the common path is open" * tie)
        + "); make every rank issue the same collectives in the same order"
    )
    return [
        Candidate(
            HangClass.COLLECTIVE_MISMATCH,
            culprits,
            Confidence.LOW,
            summary,
            66 if stuck else 35,
            evidence=lines_of(calls),
            missing_evidence=(FR_HINT,),
            rule="log_stack_calls",
        )
    ]


_NCCL_SPLIT = 2
"""A communicator's operation counts are comparable across processes that each hold only one
communicator of its size: the pointer NCCL prints is each process's own, so a process with
two communicators of one size could be in either."""


def nccl_calls(view: LogView) -> list[Candidate]:
    """NCCL's per-call trace: processes of one communicator called different collectives
    (or one with different counts) as the same operation of that communicator."""
    calls = view.of_kind(kinds.NCCL_CALL)
    comms: dict[tuple[int, tuple[str, int | None]], set[str | None]] = {}
    for e in calls:
        comms.setdefault((e.nranks or 0, (e.host, e.pid)), set()).add(e.process_group)
    at: dict[tuple[int, int], dict[tuple[str, int | None], LogEvent]] = {}
    for e in calls:
        size, proc = e.nranks or 0, (e.host, e.pid)
        if e.seq is not None and len(comms[(size, proc)]) == 1:
            at.setdefault((size, e.seq), {}).setdefault(proc, e)
    for (size, seq), procs in sorted(at.items(), key=lambda kv: kv[0][1]):
        shapes = Counter((e.op, e.numel) for e in procs.values())
        if len(procs) < _NCCL_SPLIT or len(shapes) < _NCCL_SPLIT:
            continue
        (major, n), *_ = shapes.most_common()
        tie = 2 * n <= len(procs)
        odd = [e for e in procs.values() if tie or (e.op, e.numel) != major]
        culprits = tuple(sorted({e.rank for e in odd if e.rank is not None}))
        who = ", ".join(f"{e.host}:{e.pid} ({e.op} of {e.numel})" for e in odd[:4])
        summary = (
            f"NCCL's trace of each call shows {who} calling a different collective than "
            f"{'the others' if not tie else 'an equal number of others'} as operation {seq} "
            f"of a {size}-rank communicator (the others: {major[0]} of {major[1]}): make every "
            "rank issue the same collectives, with the same sizes, in the same order"
        )
        ref = CollectiveRef(f"{size} ranks", seq, major[0] or "unknown")
        evidence = lines_of(list(procs.values())[:8])
        return [_disagree(culprits, tie, summary, ref, evidence, "log_nccl_calls")]
    return []


def main_first(view: LogView) -> list[Candidate]:
    """Ranks whose stacks are in a main-process-first section wait for the main process; a
    script that says rank 0 does shared work alone is read the same, less surely (no stack
    shows the others waiting)."""
    found = view.of_kind(kinds.WAITS_FOR_MAIN)
    if not found:
        return []
    stacks = [e for e in found if not training.RANK0_WORK.search(e.text)]
    where_they_wait = (
        "in main_process_first()'s barrier" if stacks else f"for it ({quote(found[0])})"
    )
    summary = (
        f"the ranks wait {where_they_wait} while the main process (rank 0) does its part "
        "alone (preprocessing, downloading, building indices, writing): past the collective "
        "timeout it is the hang; raise the timeout (ddp_timeout) or do that work before "
        "launch, once (a cache on shared storage)"
    )
    return [
        Candidate(
            HangClass.CPU_STUCK,
            (0,),
            Confidence.MEDIUM if stacks else Confidence.LOW,
            summary,
            72 if stacks else 40,
            evidence=lines_of(found),
            rule="log_main_first",
        )
    ]


_FEEDING = ("queue.py", "dataloader.py", "iterators.py", "multiprocessing/connection.py")
"""Where a main thread waits for batches: a queue its loader's workers or threads fill."""


def lone_dump(view: LogView) -> list[Candidate]:
    """A pasted stack dump whose main thread waits for its data (a queue a loader fills), and
    nothing else in the logs: that rank is busy outside collectives as far as one dump goes."""
    if any(e.kind != kinds.NCCL_ABORT for e in view.events):  # the abort: only that it hung
        return []
    fed = [
        d.rank
        for d in view.dumps
        for t in d.threads
        if t.is_main and any(f.filename.endswith(_FEEDING) for f in t.frames[:4])
    ]
    if not fed:
        return []
    ranks = tuple(sorted(set(fed)))
    summary = (
        f"{rank_prose(ranks)}'s main thread waits for its next batch (a data loader's queue), "
        "outside any collective: if the other ranks wait in one, this rank holds them up; "
        "one dump cannot tell a slow loader from a stuck one: dump every rank twice"
    )
    return [
        Candidate(
            HangClass.CPU_STUCK,
            ranks,
            Confidence.LOW,
            summary,
            40,
            missing_evidence=("py-spy dumps of every rank, taken twice a minute apart",),
            rule="log_lone_dump",
        )
    ]


def compiling(view: LogView) -> list[Candidate]:
    """A collective timed out while a rank said it was compiling, and nothing failed harder.
    A rank whose last word on compiling is that its build was done (``Loading extension
    module``) was compiling no more."""
    last = {e.rank: e for e in view.of_kind(kinds.COMPILING, kinds.COMPILED)}
    found = [e for e in last.values() if e.kind == kinds.COMPILING]
    timeouts = view.of_kind(kinds.WATCHDOG_TIMEOUT)
    if not found or not timeouts:
        return []
    waiting = ranks_of(timeouts)
    ranks = tuple(r for r in ranks_of(found) if r not in waiting)  # a waiter is not compiling
    summary = (
        f"{rank_prose(ranks, none='a rank')} was compiling ({quote(found[-1])}) when "
        f"{rank_prose(waiting, none='the others')} timed out waiting: the compilation "
        "outlasted the collective timeout; raise the timeout for the first steps, warm the "
        "compile cache, or build the kernels before launch"
    )
    return [
        Candidate(
            HangClass.COMPILE_WARMUP,
            ranks,
            Confidence.MEDIUM,
            summary,
            74,
            evidence=lines_of(found[-2:] + timeouts[:2]),
            rule="log_compile",
        )
    ]


def build_unfinished(view: LogView) -> list[Candidate]:
    """The logs say a JIT extension build ran and nothing that failed: the job stopped
    there. torch builds under a ``lock`` file in the build directory and every other
    process waits while it exists, so one left by an interrupted build waits forever."""
    builds = [e for e in view.of_kind(kinds.COMPILING) if c10d.JIT_BUILD.search(e.text)]
    said = view.of_kind(kinds.COMPILING, kinds.COMPILED)
    finished = bool(said) and said[-1].kind == kinds.COMPILED
    if not builds or finished or view.of_kind(*(kinds.FAULTS - {kinds.COMPILING})):
        return []
    lock = next((e for e in builds if "ock file" in e.text), None)
    summary = (
        f"the logs stop at a JIT extension build ({quote(lock or builds[-1])}) and nothing "
        "failed: a build that does not finish, or waits on the 'lock' file an interrupted "
        "build left in its build directory (every later build waits while it exists); "
        "delete that lock file, or build the extensions before launch"
    )
    return [
        Candidate(
            HangClass.COMPILE_WARMUP,
            (),
            Confidence.MEDIUM if lock else Confidence.LOW,
            summary,
            35,
            evidence=lines_of(builds[-2:]),
            rule="log_build",
        )
    ]


def rendezvous_unfinished(view: LogView) -> list[Candidate]:
    """The logs stop where the ranks announce they join the rendezvous, and nothing failed:
    the job waits there for a rank that never comes. Lightning and torchelastic print that
    line just before the wait and another once every rank came (``kinds.JOINED``)."""
    if not view.events or view.events[-1].kind != kinds.JOINING:
        return []
    # anything that failed, or a wait that ended or work after the last joining (an earlier
    # rendezvous of its own file ended before it)
    last = view.events[-1]
    moved_on = view.of_kind(kinds.JOINED, kinds.PROGRESS, kinds.WORKING, kinds.NCCL_CALL)
    if view.of_kind(*kinds.FAULTS) or any(later(e, last) for e in moved_on):
        return []
    joining = view.of_kind(kinds.JOINING)
    world = max((e.nranks or 0 for e in joining), default=0)
    ranks = ranks_of(joining)
    counted = f"; {len(ranks)} of {world} ranks announced themselves here" if world else ""
    summary = (
        f"the logs stop as the ranks join the job's rendezvous ({quote(joining[-1])}{counted}) "
        "and nothing failed: the rendezvous never completed, because a rank never came: either "
        "one the launch did not start (the scheduler's task count, or Lightning's num_nodes and "
        "devices, short of the world size), or one that cannot reach MASTER_ADDR and "
        "MASTER_PORT (a firewall, a wrong address); check that every rank started and "
        "reaches the master's port"
    )
    return [
        Candidate(
            HangClass.BOOTSTRAP,
            (),
            Confidence.LOW,
            summary,
            33,
            evidence=lines_of(joining[-2:]),
            rule="log_rendezvous",
        )
    ]


def straggler(view: LogView) -> list[Candidate]:
    """A slow rank, measured or named. A straggler slows a job and never stops it (DESIGN:
    ``straggler`` is no hang): once a collective timed out, the slow rank is where to look,
    and a link measured slow the likely cause."""
    measured = view.of_kind(kinds.OUTLIER)
    named = view.of_kind(kinds.STRAGGLER)
    if not measured and not named:
        return []
    ranks = ranks_of(measured + named)
    who = rank_prose(ranks)
    hung = view.of_kind(kinds.WATCHDOG_TIMEOUT, kinds.NCCL_ABORT, kinds.STORE_TIMEOUT)[:1]
    had = "had " if hung else ""
    slow = (
        f"NCCL's diagnostics {had}measured the link of {who}{where(measured)} far below the others'"
        if measured
        else f"the job's straggler detector {had}named {who}{where(named)} slower than its peers"
    )
    if hung:
        then = (
            "a link that slow or failing stops collectives; check its NIC, cable and switch port"
            if measured
            else f"{who} is where to look first (its stacks say what it was doing)"
        )
        summary = f"the job hung ({quote(hung[0])}), not only slowed; {slow}: {then}"
        judged = (HangClass.NETWORK if measured else HangClass.UNKNOWN, Confidence.LOW, 30)
    else:
        then = (
            "check its NIC, cable and switch port"
            if measured
            else "compare its GPU clocks, temperature and input pipeline with the others'"
        )
        summary = f"{slow}: every collective waits for it; {then}"
        judged = (HangClass.STRAGGLER, Confidence.MEDIUM, 60)
    hang_class, sure, strength = judged
    return [
        Candidate(
            hang_class,
            ranks,
            sure,
            summary,
            strength,
            evidence=lines_of([*measured, *named, *hung]),
            rule="log_straggler",
        )
    ]


def _silent_logs(files: int, view: LogView) -> Candidate:
    """Nothing that tells. What comes closest is said, with the lines that would tell: a
    traceback that lost its exception line, or the watchdog's abort without its timeout."""
    cut = sorted(view.of_kind(kinds.TRACEBACK_CUT), key=lambda e: not e.op)  # set-up first
    aborts = view.of_kind(kinds.NCCL_ABORT)
    aborted = [e for e in view.of_kind(kinds.EXIT) if e.code == -signal.SIGABRT]
    raised = view.of_kind(kinds.EXCEPTION)
    told = ["watchdog timeout", "NCCL warning", *([] if cut or raised else ["traceback"])]
    told += [*([] if aborted else ["launcher exit report"]), "RAS report or Xid"]
    summary = (
        f"the logs ({files} file{'s' if files > 1 else ''}) hold no line that tells: no "
        + ", ".join(told)
    )
    asked: tuple[str, ...] = ()
    set_up = [e for e in cut if e.op]
    if cut:
        ranks = ranks_of(cut)
        who = rank_prose(ranks, none="a rank")
        summary += f"; {who}'s {cut[0].text}: the exception that line names is what would tell"
        asked = ("the traceback's last lines, to its exception",)
    if raised and not cut:
        who = rank_prose(ranks_of(raised), none="a process")
        summary += (
            f"; {who} raised {quote(raised[0], 100)}, and nothing says whether a rank died "
            "of it or who waited"
        )
    if set_up:
        summary += (
            ". A rank that fails there failed creating its process group or NCCL communicator "
            "(DDP's first broadcast creates it): most often the set-up (interfaces, the GPUs "
            "each rank was given, the NCCL build), a guess from where the traceback stops"
        )
    if aborted:
        ranks = ranks_of(aborted)
        summary += (
            f"; the launcher says {rank_prose(ranks, none='a rank')} ended on SIGABRT, "
            "most often ProcessGroupNCCL's watchdog ending a rank once a collective timed out "
            "or NCCL failed (a consequence, not the cause): that rank's own log before the "
            "abort says which collective and why"
        )
        asked += ("the aborted rank's log before its abort",)
    if aborts:
        ranks = ranks_of(aborts)
        summary += (
            f"; ProcessGroupNCCL{' of ' + rank_prose(ranks) if ranks else ''} reported that "
            "some NCCL operations failed or timed out and ended the process: the line printed "
            "just before it (the watchdog's timeout, or NCCL's error) says which and why"
        )
        asked += ("the lines before ProcessGroupNCCL's 'Some NCCL operations have failed'",)
    return Candidate(
        HangClass.BOOTSTRAP if set_up else HangClass.UNKNOWN,
        ranks_of(set_up),
        Confidence.LOW,
        summary,
        1,
        evidence=lines_of((cut + aborts + aborted)[:2]),
        missing_evidence=(
            *asked,
            "the job's stderr with TORCH_NCCL_DESYNC_DEBUG=1 and NCCL_DEBUG=WARN",
            "Flight Recorder dumps (TORCH_FR_BUFFER_SIZE)",
            "an NCCL RAS report (ncclras) taken during the hang",
        ),
        rule="log_set_up_cut" if set_up else "log_silent",
    )


def _unplaced_waits(view: LogView) -> Candidate | None:
    """Timeouts no rule could place (torch's older watchdog line has no sequence number; a
    wait on the store with nothing beside it): said as what they are, not as silence."""
    waits = view.of_kind(kinds.WATCHDOG_TIMEOUT, kinds.STORE_TIMEOUT)
    if not waits:
        return None
    ranks = ranks_of(waits)
    return Candidate(
        HangClass.UNKNOWN,
        (),
        Confidence.LOW,
        f"{rank_prose(ranks, none='a rank')} timed out waiting ({quote(waits[0])}), "
        "and nothing else in the logs says for whom: a rank busy in its own code, one gone, "
        "or a collective that never finished",
        1,
        evidence=lines_of(waits[:2]),
        missing_evidence=(log_waits.STACKS_HINT, "the other ranks' logs"),
        rule="log_unplaced_wait",
    )


RULES: tuple[Callable[[LogView], list[Candidate]], ...] = (
    unsupported_op,
    mismatch,
    nccl_calls,
    log_faults.gpu_fault,
    log_faults.rank_loss,
    log_faults.cancelled,
    log_faults.bootstrap,
    log_faults.iommu,
    log_faults.network,
    log_faults.cuda_error,
    log_faults.catalogued,
    main_first,
    lone_dump,
    compiling,
    build_unfinished,
    rendezvous_unfinished,
    straggler,
    log_waits.ras_frozen,
    log_waits.stopped_early,
    log_waits.laggards,
    log_waits.left_loop,
    log_waits.first_sync,
    log_waits.broadcast_source,
    log_waits.deep_in_training,
    log_waits.gather_unjoined,
    log_waits.stalled,
    log_waits.watchdog_stuck,
    log_waits.healthy,
)


def candidates(evidence: Evidence) -> list[Candidate]:
    """Every log rule's conclusions; for logs that said nothing, what would have."""
    if not evidence.logs and not evidence.log_files:
        return []
    view = LogView.of(evidence)
    found = [c for rule in RULES for c in rule(view)]
    only_logs = not evidence.has_flight and not (evidence.stacks or evidence.processes)
    if not only_logs or any(c.hang_class is not HangClass.UNKNOWN for c in found):
        return found
    said = found or [_unplaced_waits(view) or _silent_logs(len(evidence.log_files), view)]
    if any(c.hang_class is not HangClass.UNKNOWN for c in said):
        return said  # where a cut traceback stopped said enough: no guess from words
    if working := _harmless_only(view):
        if working.hang_class is HangClass.HEALTHY:
            return [working]
        said = [working]  # a warning that names a hang: said, and the words guess
    failed = view.of_kind(kinds.EXCEPTION, kinds.TRACEBACK_CUT, kinds.EXIT)
    return log_words.refine(said, evidence.log_words, silent=not failed)


def _harmless_only(view: LogView) -> Candidate | None:
    """Logs in which nothing failed and whose warnings are ones working jobs print: the
    lines that made someone look are harmless, so the logs are a working job's, said with
    why each warning is (not a guess from the other lines' words: no rule read a fault in
    them either). Where one of those warnings names a hang it can come before, they prove
    no working job: ``unknown``, saying where it hangs and what to check."""
    warnings = view.of_kind(kinds.HARMLESS)
    if not warnings or view.of_kind(*kinds.FAULTS):
        return None
    found = list(dict.fromkeys(w for e in warnings if (w := harmless.find(e.text))))
    lead = "nothing in the logs failed, and the only warnings are ones working jobs print"
    hang_class, rule = HangClass.HEALTHY, "log_harmless_only"
    summary = f"{lead}: " + "; ".join(w.why for w in found[:3])
    if warned := [w for w in found if w.hang_if]:
        hang_class, rule = HangClass.UNKNOWN, "log_harmless_warns"
        summary = f"{lead}, and hung jobs too: " + "; ".join(
            f"{w.why}, yet {w.hang_if}" for w in warned[:2]
        )
    return Candidate(
        hang_class,
        (),
        Confidence.LOW,
        summary,
        1,
        evidence=lines_of(warnings[:3]),
        missing_evidence=("the job's whole log: a hang's timeout comes later",),
        rule=rule,
    )
