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
log_mismatch            84        torch's collective check found ranks disagreeing, or two
                                  ranks ran different ops (or sizes) at one sequence number
log_stack_calls         66        tracebacks printed at a timeout are in different collectives
log_gpu_fault           84        a hardware Xid, uncorrectable ECC, a GPU off the bus or
                                  ``ERR!`` in nvidia-smi, on a rank's GPU (or a host's)
log_rank_loss           82/55/45  a rank's process died of its own cause (killed, OOM, a
                                  crash, its own exception; 82), RAS says a process is dead
                                  or unreachable (82/55), or a rank exited with no reason
                                  given (45)
log_bootstrap           76/40     communicator or store creation failed (40 once a
                                  collective had run)
log_network             70/50/30  NCCL reports a transport error (70), or only connections
                                  closed by a peer (50); 30 when a rank's death explains them
log_cuda_error          60        a CUDA error stopped a rank's GPU work
log_compile             74        a collective timed out while a rank said it was compiling
                                  (torch.compile, a JIT kernel build)
log_straggler           60        NCCL's diagnostics measured one rank's link far off
log_laggard             45        a desync report, a monitored barrier, RAS counts or the
                                  ranks' own sequence numbers single out ranks that never
                                  reached the collective the others wait in (unknown: why
                                  they did not is for their stacks to say)
log_stalled             25        every rank that logged timed out in the same collective,
                                  all issued it: GPU or network (unknown)
log_healthy             30/15     RAS sees every communicator running; the job reports it
                                  trains (15); nothing else is wrong
======================  ========  ============================================================

An exit counts as the rank's *own* cause unless it is what the others do once a peer is
gone: SIGABRT (ProcessGroupNCCL's watchdog aborts the process after a timeout), SIGTERM
(the launcher tearing down the survivors), or an exception raised by the collective
itself (``DistBackendError``, an NCCL error, a timeout).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence

from doctor.evidence import Evidence, LogEvent
from doctor.logs import kinds
from doctor.logs.kernel import XID_MEANING
from doctor.logs.launcher import ROOT_CAUSE
from doctor.logs.nccl import IB_STATUS
from doctor.logs.who import host_key
from doctor.model import CollectiveRef, Confidence, HangClass
from doctor.verdict import log_waits
from doctor.verdict.candidate import Candidate
from doctor.verdict.live import FR_HINT
from doctor.verdict.log_view import LogView, lines_of, quote, ranks_of, where
from doctor.verdict.signals import names

COLLATERAL_CODES = frozenset({-6, -15, -2})
"""SIGABRT (the watchdog's own abort), SIGTERM and SIGINT (the launcher stopping survivors)."""
_COLLATERAL_TEXT = re.compile(
    r"DistBackendError|NCCL (?:error|communicator)|ncclRemoteError|ncclSystemError|"
    r"[Tt]imed? ?out|Watchdog|watchdog|Connection (?:closed|reset)|Broken pipe|"
    r"DistNetworkError|DistStoreError|ProcessGroup|SIGTERM|SignalException|KeyboardInterrupt|"
    r"ChildFailedError|ProcessExitedException"
)


def unsupported_op(view: LogView) -> list[Candidate]:
    found = view.of_kind(kinds.UNSUPPORTED_OP)
    if not found:
        return []
    op = found[0].op or "an op"
    ranks = ranks_of(found)
    summary = (
        f"the backend rejected {op}"
        + (f" on {names(ranks)}" if ranks else "")
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


def mismatch(view: LogView) -> list[Candidate]:
    """torch's fingerprint check, or two ranks' own words about collective N, disagree."""
    detected = view.of_kind(kinds.MISMATCH_DETECTED)
    at: dict[int, dict[int, LogEvent]] = {}
    for e in view.of_kind(kinds.COLLECTIVE_AT):
        if e.rank is not None and e.seq is not None:
            at.setdefault(e.seq, {})[e.rank] = e
    culprits: tuple[int, ...] = ()
    tie = False
    ref = None
    for seq, ranks in sorted(at.items()):
        shapes = Counter((e.op, e.numel) for e in ranks.values())
        if len(shapes) < 2:
            continue
        (major, n), *_ = shapes.most_common()
        tie = 2 * n <= len(ranks)
        culprits = tuple(sorted(r for r, e in ranks.items() if tie or (e.op, e.numel) != major))
        ref = CollectiveRef(ranks[min(ranks)].process_group or "0", seq, major[0] or "unknown")
        break
    named = ranks_of(e for e in detected if e.rank is not None)
    if named and not culprits:
        culprits, tie = named, False
    if not detected and not culprits:
        return _different_calls(view)
    found = detected + [e for e in view.of_kind(kinds.COLLECTIVE_AT) if e.rank in culprits]
    summary = (
        f"{names(culprits)} ran a different collective than the others at sequence number {ref.seq}"
        if ref and not tie
        else f"the ranks split evenly at sequence number {ref.seq} ({names(culprits)}): a tie "
        "the logs cannot break"
        if ref
        else "torch's collective check found the ranks "
        "disagreeing on a collective (op, shape or dtype)"
    ) + ": make every rank issue the same collectives in the same order"
    return [
        Candidate(
            HangClass.COLLECTIVE_MISMATCH,
            culprits,
            Confidence.LOW if tie else Confidence.HIGH,
            summary,
            84,
            collective=ref,
            evidence=lines_of(found),
            rule="log_mismatch",
        )
    ]


def _different_calls(view: LogView) -> list[Candidate]:
    """Tracebacks printed at a timeout show the ranks in different collectives (barrier on
    some, broadcast on others): they called different collectives at the same point."""
    calls = [e for e in view.of_kind(kinds.COLLECTIVE_AT) if e.seq is None and e.op]
    ops = sorted({e.op for e in calls if e.op})
    positions = {e.seq for e in view.of_kind(kinds.COLLECTIVE_AT) if e.seq is not None}
    stuck = (
        view.of_kind(kinds.WATCHDOG_TIMEOUT, kinds.DESYNC)
        or len(positions) > 1
        or [e for e in view.of_kind(kinds.EXCEPTION) if "imed out" in e.text or "imeout" in e.text]
    )
    if len(ops) < 2 or not stuck:
        return []
    by_op = {op: ranks_of(e for e in calls if e.op == op) for op in ops}
    summary = (
        f"the stacks printed at the timeout are in different collectives ({', '.join(ops)}): "
        "the ranks called different collectives at the same point (a rank-conditional path); "
        "make every rank issue the same collectives in the same order"
    )
    culprits = min(by_op.values(), key=len) if all(by_op.values()) else ()
    return [
        Candidate(
            HangClass.COLLECTIVE_MISMATCH,
            culprits,
            Confidence.LOW,
            summary,
            66,
            evidence=lines_of(calls),
            missing_evidence=(FR_HINT,),
            rule="log_stack_calls",
        )
    ]


def gpu_fault(view: LogView) -> list[Candidate]:
    found = view.of_kind(kinds.GPU_FAULT)
    if not found:
        return []
    ranks = ranks_of(found)
    xids = sorted({e.code for e in found if e.code is not None})
    what = (
        ", ".join(f"Xid {x} ({XID_MEANING.get(x, 'see NVIDIA Xid catalog')})" for x in xids)
        if xids
        else quote(found[0])
    )
    devices = sorted({e.device for e in found if e.device})
    summary = (
        f"the GPU of {names(ranks)}"
        if ranks
        else "a GPU" + (f" ({', '.join(devices)})" if devices else "")
    ) + f"{where(found)} failed: {what}; drain the node and reset the GPU before restarting"
    return [
        Candidate(
            HangClass.GPU_HANG,
            ranks,
            Confidence.HIGH,
            summary,
            84,
            evidence=lines_of(found),
            rule="log_gpu_fault",
        )
    ]


def _own_exits(view: LogView) -> tuple[list[LogEvent], list[LogEvent]]:
    """(exits of the ranks' own cause, exits with no cause given)."""
    oom = view.of_kind(kinds.OOM)
    oom_ranks = {e.rank for e in oom if e.rank is not None}
    oom_pids = {e.pid for e in oom if e.pid is not None}
    own_exceptions = {
        e.rank
        for e in view.of_kind(kinds.EXCEPTION)
        if e.rank is not None and not _COLLATERAL_TEXT.search(e.text)
    }
    own, unexplained = [], []
    for e in view.of_kind(kinds.EXIT):
        if e.code == 0 or e.code in COLLATERAL_CODES:
            continue
        if (e.code is not None and e.code < 0) or e.rank in oom_ranks or e.pid in oom_pids:
            own.append(e)
        elif e.rank in own_exceptions or (e.code is None and e.host):
            own.append(e)  # its own exception, or a node that failed
        elif not _COLLATERAL_TEXT.search(e.text):
            unexplained.append(e)
    own.sort(key=lambda e: not e.text.startswith(ROOT_CAUSE))
    return own, unexplained


def rank_loss(view: LogView) -> list[Candidate]:
    own, unexplained = _own_exits(view)
    dead = view.of_kind(kinds.RAS_DEAD)
    missing = view.of_kind(kinds.RAS_MISSING)
    out: list[Candidate] = []
    if own:
        first = own[0]
        ranks = ranks_of(own[:1]) if first.text.startswith(ROOT_CAUSE) else ranks_of(own)
        summary = (
            f"{names(ranks) if ranks else 'a rank'}{where(own[:1])} died of its own cause "
            f"({_exit_text(first)}) and the others cannot finish without it: find why it died "
            "(the OOM killer, a crash, its traceback), then restart"
        )
        out.append(_loss(ranks, Confidence.HIGH, summary, 82, own, "log_rank_loss"))
    if dead or missing:
        ranks = _ras_lostranks_of(dead, missing)
        state = "considered dead" if dead else "unreachable (a stopped or hung process)"
        summary = (
            f"NCCL RAS reports {names(ranks) if ranks else 'a process'}{where(dead or missing)} "
            f"{state}: the others wait for it; check that process and its host"
        )
        sure = Confidence.HIGH if dead else Confidence.MEDIUM
        out.append(_loss(ranks, sure, summary, 82 if dead else 55, dead + missing, "log_ras_dead"))
    if unexplained and not out:
        ranks = ranks_of(unexplained)
        summary = (
            f"{names(ranks) if ranks else 'a rank'} exited ({_exit_text(unexplained[0])}) "
            "and the logs do not say why: its own output (or its traceback) decides whether "
            "it failed first or was stopped by a peer's failure"
        )
        out.append(_loss(ranks, Confidence.LOW, summary, 45, unexplained, "log_exit"))
    return out


def _loss(
    ranks: tuple[int, ...],
    sure: Confidence,
    summary: str,
    strength: int,
    found: Sequence[LogEvent],
    rule: str,
) -> Candidate:
    return Candidate(
        HangClass.RANK_LOSS, ranks, sure, summary, strength, evidence=lines_of(found), rule=rule
    )


def _exit_text(e: LogEvent) -> str:
    from doctor.verdict.live import exit_text

    return exit_text(e.code) if e.code is not None else quote(e, 80)


def _ras_lostranks_of(dead: Sequence[LogEvent], missing: Sequence[LogEvent]) -> tuple[int, ...]:
    """The ranks RAS lost: its dead processes' ranks, else the communicator ranks it misses
    (the same processes, counted per communicator), when as many are missing as are dead."""
    ranked = ranks_of(e for e in dead + list(missing) if e.rank is not None and e.process_group)
    by_pid = {(host_key(e.host), e.pid): e.rank for e in missing if e.pid and e.rank is not None}
    from_dead = {
        by_pid[(host_key(e.host), e.pid)] for e in dead if (host_key(e.host), e.pid) in by_pid
    }
    if from_dead:
        return tuple(sorted(from_dead))
    return ranked


def bootstrap(view: LogView) -> list[Candidate]:
    found = view.of_kind(kinds.BOOTSTRAP)
    if not found:
        return []
    late = view.ran_collectives()
    ranks = ranks_of(found)
    peers = sorted({e.peer for e in found if e.peer})
    summary = (
        f"communicator creation failed{' on ' + names(ranks) if ranks else ''}{where(found)} "
        f"({quote(found[0])})"
        + (f", reaching {', '.join(peers[:3])}" if peers else "")
        + ": check MASTER_ADDR/port reachability, NCCL_SOCKET_IFNAME and the host's "
        "interfaces and fabric (NVLS: fabric manager)"
    )
    return [
        Candidate(
            HangClass.BOOTSTRAP,
            ranks,
            Confidence.LOW if late else Confidence.MEDIUM,
            summary,
            40 if late else 76,
            evidence=lines_of(found),
            rule="log_bootstrap",
        )
    ]


def network(view: LogView) -> list[Candidate]:
    errors = view.of_kind(kinds.NETWORK)
    gone = view.of_kind(kinds.PEER_GONE)
    if not errors and not gone:
        return []
    own, _ = _own_exits(view)
    found = errors or gone
    named = Counter(r for e in found if e.peer for r in view.who.ranks_on(e.peer))
    reporters = ranks_of(found)
    culprits = tuple(sorted(r for r, _n in named.most_common(4))) if named else reporters
    peers = sorted({e.peer for e in found if e.peer})
    codes = Counter(e.code for e in errors if e.code is not None).most_common(1)
    meaning = (
        f"; IB status {codes[0][0]}: {IB_STATUS[codes[0][0]]}"
        if codes and codes[0][0] in IB_STATUS
        else ""
    )
    summary = (
        ("NCCL reports transport errors" if errors else "connections were closed by a peer")
        + (f" on {names(reporters)}" if reporters else "")
        + where(found)
        + (f" with {', '.join(peers[:3])}" if peers else "")
        + f" ({quote(found[0])}){meaning}: check the links and NICs between them"
        + ("" if errors else ", and whether the peer process died")
    )
    explained = own or view.of_kind(kinds.RAS_DEAD) or view.dead
    laggard = view.of_kind(kinds.DESYNC)
    strength = 30 if explained or (laggard and not errors) else (70 if errors else 50)
    sure = Confidence.MEDIUM if errors and strength == 70 else Confidence.LOW
    return [
        Candidate(
            HangClass.NETWORK,
            culprits,
            sure,
            summary,
            strength,
            evidence=lines_of(found),
            rule="log_network",
        )
    ]


def cuda_error(view: LogView) -> list[Candidate]:
    found = view.of_kind(kinds.CUDA_ERROR)
    if not found:
        return []
    ranks = ranks_of(found)
    summary = (
        f"a CUDA error stopped the GPU work of {names(ranks) if ranks else 'a rank'}"
        f"{where(found)} ({quote(found[0])}): a faulty kernel or a failing GPU; run it "
        "with CUDA_LAUNCH_BLOCKING=1 and check the host's Xid lines"
    )
    return [
        Candidate(
            HangClass.GPU_HANG,
            ranks,
            Confidence.LOW,
            summary,
            60,
            evidence=lines_of(found),
            rule="log_cuda_error",
        )
    ]


def main_first(view: LogView) -> list[Candidate]:
    """Ranks whose stacks are in a main-process-first section wait for the main process."""
    found = view.of_kind(kinds.WAITS_FOR_MAIN)
    if not found:
        return []
    summary = (
        "the ranks wait in main_process_first()'s barrier while the main process (rank 0) "
        "does its part alone (preprocessing, downloading, writing): it took longer than the "
        "collective timeout; raise the timeout (ddp_timeout) or do that work before launch"
    )
    return [
        Candidate(
            HangClass.CPU_STUCK,
            (0,),
            Confidence.MEDIUM,
            summary,
            72,
            evidence=lines_of(found),
            rule="log_main_first",
        )
    ]


def compiling(view: LogView) -> list[Candidate]:
    """A collective timed out while a rank said it was compiling, and nothing failed harder."""
    found = view.of_kind(kinds.COMPILING)
    timeouts = view.of_kind(kinds.WATCHDOG_TIMEOUT)
    if not found or not timeouts:
        return []
    waiting = ranks_of(timeouts)
    ranks = tuple(r for r in ranks_of(found) if r not in waiting)  # a waiter is not compiling
    summary = (
        f"{names(ranks) if ranks else 'a rank'} was compiling ({quote(found[-1])}) when "
        f"{names(waiting) if waiting else 'the others'} timed out waiting: the compilation "
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


def straggler(view: LogView) -> list[Candidate]:
    found = view.of_kind(kinds.OUTLIER)
    if not found:
        return []
    ranks = ranks_of(found)
    summary = (
        f"NCCL's diagnostics measured the link of {names(ranks)}{where(found)} far below the "
        "others': every collective waits for it; check its NIC, cable and switch port"
    )
    return [
        Candidate(
            HangClass.STRAGGLER,
            ranks,
            Confidence.MEDIUM,
            summary,
            60,
            evidence=lines_of(found),
            rule="log_straggler",
        )
    ]


def _silent_logs(files: int) -> Candidate:
    return Candidate(
        HangClass.UNKNOWN,
        (),
        Confidence.LOW,
        f"the logs ({files} file{'s' if files > 1 else ''}) hold no line that tells: no watchdog "
        "timeout, NCCL warning, traceback, launcher exit report, RAS report or Xid",
        1,
        missing_evidence=(
            "the job's stderr with TORCH_NCCL_DESYNC_DEBUG=1 and NCCL_DEBUG=WARN",
            "Flight Recorder dumps (TORCH_FR_BUFFER_SIZE)",
            "an NCCL RAS report (ncclras) taken during the hang",
        ),
        rule="log_silent",
    )


RULES: tuple[Callable[[LogView], list[Candidate]], ...] = (
    unsupported_op,
    mismatch,
    gpu_fault,
    rank_loss,
    bootstrap,
    network,
    cuda_error,
    main_first,
    compiling,
    straggler,
    log_waits.laggards,
    log_waits.stalled,
    log_waits.healthy,
)


def candidates(evidence: Evidence) -> list[Candidate]:
    """Every log rule's conclusions; for logs that said nothing, what would have."""
    if not evidence.logs and not evidence.log_files:
        return []
    view = LogView.of(evidence)
    found = [c for rule in RULES for c in rule(view)]
    only_logs = evidence.flight is None and not (evidence.stacks or evidence.processes)
    return found or ([_silent_logs(len(evidence.log_files))] if only_logs else [])
