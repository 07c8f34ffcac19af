"""Log rules about what failed: a process that died, a GPU, a link, communicator creation.

See ``doctor.verdict.log_rules`` for the table of every log rule and its strength. An exit
counts as the rank's *own* cause unless it is what the others do once a peer is gone:
SIGABRT (ProcessGroupNCCL's watchdog aborts the process after a timeout), SIGTERM and
SIGINT (the launcher tearing down the survivors), or an exception raised by the
collective itself (``DistBackendError``, an NCCL error, a timeout).
"""

from __future__ import annotations

import re
import signal
from collections import Counter
from collections.abc import Callable, Sequence

from doctor.evidence import LogEvent
from doctor.logs import c10d, crash, cuda, kernel, kinds, nccl, setup, shm, verbs
from doctor.logs.kernel import XID_MEANING
from doctor.logs.launcher import OWN_ABORT, ROOT_CAUSE
from doctor.logs.nccl import IB_STATUS
from doctor.logs.who import host_key
from doctor.model import Confidence, HangClass
from doctor.ranks import rank_prose
from doctor.verdict.candidate import Candidate
from doctor.verdict.live import COLLATERAL_CODES, exit_text
from doctor.verdict.log_view import LogView, lines_of, quote, ranks_of, where

_COLLATERAL_TEXT = re.compile(
    r"Dist(?:Backend|Network|Store)?Error|NCCL (?:[Ee]rror|communicator)|remote process exited|"
    r"ncclRemoteError|ncclSystemError|"
    r"[Tt]imed? ?out|Watchdog|watchdog|Connection (?:closed|reset)|Broken pipe|"
    r"ProcessGroup|SIGTERM|SignalException|KeyboardInterrupt|"
    r"ChildFailedError|ProcessExitedException"
)
_CLOSED = re.compile(
    r"[Cc]onnection closed by (?:remote )?peer|[Cc]onnection reset by peer|Broken pipe|"
    r"UNAVAILABLE: Socket closed|got 0 bytes|Connection was likely closed|"
    r"failed to send a keep-alive heartbeat"
)
"""The kernel's words for a peer whose end went away: an end of file, a reset (ECONNRESET), a
write into a socket it closed (EPIPE); gRPC's and torch's store's for the same end of file
(``Failed to recv, got 0 bytes``). Its kernel sends these when its process exits (a reset
when data was left unread) or its host restarts; a link that fails sends nothing. And
torchelastic's agent that can no longer reach the rendezvous store another node's agent
hosts: that node or its agent went away."""
_ABRUPT = re.compile(r"reset by remote peer|Connection timed out|No route to host")
"""What a failing link causes: no answer, or UCX's ``UCS_ERR_CONNECTION_RESET`` ("reset by
remote peer"), which UCX also raises when its own transport (a NIC) fails."""


def _only_peer_closes(gone: Sequence[LogEvent]) -> bool:
    """Some peer's end went away and nothing says the link failed (NCCL's own ``remote
    process exited or there was a network error`` says neither)."""
    return any(_CLOSED.search(e.text) for e in gone) and not any(
        _ABRUPT.search(e.text) for e in gone
    )


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
    recorded = all(e.code in kernel.RECORD_XIDS for e in found)
    summary = (
        (
            f"the GPU of {rank_prose(ranks)}"
            if ranks
            else "a GPU" + (f" ({', '.join(devices)})" if devices else "")
        )
        + where(found)
        + (
            f" recorded {what}: a record, not a failure (the GPU kept running); nothing else "
            "in the logs failed, so it is the suspect: reset it when the job allows"
            if recorded
            else f" failed: {what}; drain the node and reset the GPU before restarting"
        )
    )
    return [
        Candidate(
            HangClass.GPU_HANG,
            ranks,
            Confidence.LOW if recorded else Confidence.HIGH,
            summary,
            _RECORDED if recorded else 84,
            evidence=lines_of(found),
            rule="log_gpu_fault",
        )
    ]


_RECORDED = 40
"""Only Xids that record (``kernel.RECORD_XIDS``): the GPU is a suspect, below any failure."""


SIGBUS = -7
"""A bus error: a mapped file (NCCL's /dev/shm segment in a container) ran out under it."""
SIGILL = -4
"""An illegal instruction: a trap the program set off itself (``__builtin_trap``, an assertion
built as one) or code built for another CPU; like an abort, a rank's own end only where
nothing failed before it."""
_SELF_STOPS = frozenset({-signal.SIGABRT, SIGILL})


_BESIDE_AN_OWN_ABORT = kinds.SET_UP_PROGRESS | {
    kinds.CONNECT_RETRY,
    kinds.COMPILING,
    kinds.EXIT,
    kinds.EXITING,
    kinds.EXCEPTION,
    kinds.TRACEBACK_CUT,
    kinds.PROGRESS,
    kinds.WORKING,
    kinds.NCCL_CALL,
    kinds.COLLECTIVE_AT,
}
"""What logs may hold beside a rank's own abort: how far it got, a retry, a build, NCCL's and
torch's traces of the calls made (positions, not failures). Anything else (a watchdog's
timeout, NCCL's, CUDA's or the set-up's error, a lost peer) is what ends a rank on SIGABRT as
a consequence: ProcessGroupNCCL's watchdog, or C++ ``terminate`` on an error raised in a
library's thread."""


def _failed_alone(view: LogView) -> bool:
    """Whether the logs hold no wait and no failure an abort could follow, nor an exception
    of the collective's own (a ``DistBackendError``)."""
    return all(e.kind in _BESIDE_AN_OWN_ABORT for e in view.events) and not any(
        _COLLATERAL_TEXT.search(e.text) for e in view.of_kind(kinds.EXCEPTION)
    )


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
    shm = bool(view.of_kind(kinds.BOOTSTRAP))
    alone = _failed_alone(view)
    own, unexplained = [], []
    for e in view.of_kind(kinds.EXIT):
        if alone and e.code in _SELF_STOPS and crash.self_reported(e.text):
            own.append(e)  # nothing waited or failed before it: the rank's own abort
            continue
        if e.code == 0 or e.code in COLLATERAL_CODES or e.code == SIGILL:
            continue
        if shm and e.code == SIGBUS:
            continue  # a bus error where NCCL's setup failed: /dev/shm ran out (bootstrap)
        if (e.code is not None and e.code < 0) or e.rank in oom_ranks or e.pid in oom_pids:
            own.append(e)
        elif (
            e.rank in own_exceptions or (e.code is None and e.host) or e.text.startswith(OWN_ABORT)
        ):
            own.append(e)  # its own exception or failed check, or a node that failed
        elif not _COLLATERAL_TEXT.search(e.text):
            unexplained.append(e)
    own.sort(key=lambda e: not e.text.startswith(ROOT_CAUSE))
    return own, unexplained


def rank_loss(view: LogView) -> list[Candidate]:
    own, unexplained = _own_exits(view)
    if set_up := _set_up_raised(view, [e for e in own + unexplained if (e.code or 0) > 0]):
        return [set_up]
    dead = view.of_kind(kinds.RAS_DEAD)
    missing = view.of_kind(kinds.RAS_MISSING)
    out: list[Candidate] = []
    if own:
        first = own[0]
        ranks = ranks_of(own[:1]) if first.text.startswith(ROOT_CAUSE) else ranks_of(own)
        summary = (
            f"{rank_prose(ranks, none='a rank')}{where(own[:1])} died of its own cause "
            f"({_exit_text(first)}) and the others cannot finish without it: find why it died "
            "(the OOM killer, a crash, its traceback), then restart"
        )
        if all(e.code == SIGBUS and not shm.bus_code_named(e.text) for e in own):
            out.append(_bus_error(ranks, own))
            out.append(_loss(ranks, Confidence.LOW, summary, 45, own, "log_rank_loss"))
        elif all(e.code in _SELF_STOPS for e in own):
            summary += (
                ". It reported the abort itself and the logs hold no timeout or error it "
                "could follow; if the excerpt left out a watchdog timeout before it, the "
                "abort is the watchdog's and that timeout is the story"
            )
            out.append(_loss(ranks, Confidence.MEDIUM, summary, 82, own, "log_rank_loss"))
        else:
            out.append(_loss(ranks, Confidence.HIGH, summary, 82, own, "log_rank_loss"))
    if dead or missing:
        ranks = _ras_lost_ranks(dead, missing)
        state = "considered dead" if dead else "unreachable (a stopped or hung process)"
        summary = (
            f"NCCL RAS reports {rank_prose(ranks) if ranks else 'a process'}"
            f"{where(dead or missing)} "
            f"{state}: the others wait for it; check that process and its host"
        )
        sure = Confidence.HIGH if dead else Confidence.MEDIUM
        out.append(_loss(ranks, sure, summary, 82 if dead else 55, dead + missing, "log_ras_dead"))
    if not out and (raised := _raised_while_others_wait(view)):
        out.append(raised)
    if not out and (killed := _oom_killed(view)):
        out.append(killed)
    if not out and (short := _gpu_memory_ran_out(view)):
        out.append(short)
    if unexplained and not out:
        ranks = ranks_of(unexplained)
        summary = (
            f"{rank_prose(ranks, none='a rank')} exited ({_exit_text(unexplained[0])}) "
            "and the logs do not say why: its own output (or its traceback) decides whether "
            "it failed first or was stopped by a peer's failure"
        )
        out.append(_loss(ranks, Confidence.LOW, summary, 45, unexplained, "log_exit"))
    return out


def _raised_while_others_wait(view: LogView) -> Candidate | None:
    """A rank's own exception (its traceback's last line, or CUDA running out of memory),
    or the kernel's OOM killer killing a process, while ranks time out waiting: an uncaught
    exception ends the process and a kill ends it at once, so it is gone even where no
    launcher line says it exited. Its rank may be unknown (srun's label over torchrun's
    gives a node's task and a local rank): then "a process" raised, and no rank is named."""
    raised = [
        e for e in view.of_kind(kinds.EXCEPTION, kinds.OOM) if not _COLLATERAL_TEXT.search(e.text)
    ]
    ranks = ranks_of(raised)
    waiting = view.of_kind(kinds.WATCHDOG_TIMEOUT, kinds.STORE_TIMEOUT)
    if not raised or not any(e.rank is None or e.rank not in ranks for e in waiting):
        return None
    first = raised[0]
    summary = (
        f"{rank_prose(ranks, none='a process')}{where(raised[:1])} "
        + ("was killed" if first.pid is not None and first.rank is None else "raised")
        + f" ({quote(first, 100)}) while the others timed out waiting: a process that raised "
        "an uncaught exception or was killed is gone, and the others cannot finish without it; "
        "fix what ended it (its traceback, the host's memory), then restart"
    )
    return _loss(ranks, Confidence.MEDIUM, summary, 62, [first, *waiting[:2]], "log_raised")


def _set_up_raised(view: LogView, exited: Sequence[LogEvent]) -> Candidate | None:
    """A rank raised inside the job's set-up (its traceback runs through
    ``init_process_group``, ``set_device`` or DDP's constructor) before any collective ran,
    and a process then exited with an error status or the others timed out waiting: the
    set-up failed on that rank, whatever its words. A signal's end (a crash, a kill) is
    still the rank's loss; the watchdog's abort and the launcher's teardown are not one."""
    raised = [
        e
        for e in view.raised_in_set_up()
        if e.kind == kinds.EXCEPTION and not _COLLATERAL_TEXT.search(e.text)
    ]
    ended = [*view.of_kind(kinds.WATCHDOG_TIMEOUT, kinds.STORE_TIMEOUT), *exited]
    if not raised or not ended:
        return None
    if any((e.code or 0) < 0 and e.code not in COLLATERAL_CODES for e in view.of_kind(kinds.EXIT)):
        return None
    first, ranks = raised[0], ranks_of(raised)
    summary = (
        f"{rank_prose(ranks, none='a process')}{where([first])} raised ({quote(first, 100)}) "
        f"while setting up (in {first.op}) and before any collective ran ({quote(ended[0], 80)})"
        ": the set-up failed on that rank; its error says what it lacked (its GPU, an "
        "address, the same world size, memory)"
    )
    return Candidate(
        HangClass.BOOTSTRAP,
        ranks,
        Confidence.LOW,
        summary,
        62,
        evidence=lines_of([first, *ended[:2]]),
        rule="log_raised_in_set_up",
    )


def _oom_killed(view: LogView) -> Candidate | None:
    """The OOM killer killed a process (the kernel's, or a cgroup's as SLURM's step reports
    it): whatever rank it ran is gone, even where no rank was seen waiting for it."""
    killed = [e for e in view.of_kind(kinds.OOM) if e.code == kinds.KILLED]
    if not killed:
        return None
    first = killed[0]
    victim = f"process {first.pid}" if first.pid is not None else "a process"
    summary = (
        f"the OOM killer killed {victim}{where(killed)} ({quote(first, 100)}): the host or "
        "its container ran out of memory, and a rank it killed is gone for good; give the job "
        "more host memory "
        "(or load less at once: optimizer state, a dataset), then restart"
    )
    return _loss((), Confidence.MEDIUM, summary, 55, killed[:2], "log_oom_killed")


_GPU_OOM = re.compile(cuda.GPU_OOM)


def _gpu_memory_ran_out(view: LogView) -> Candidate | None:
    """A rank's GPU allocation failed and nothing else is said: its framework raised in that
    rank, which ends it unless the script catches the error, and its peers wait for it."""
    short = [e for e in view.of_kind(kinds.OOM) if _GPU_OOM.search(e.text)]
    if not short:
        return None
    ranks = ranks_of(short)
    summary = (
        f"{rank_prose(ranks, none='a rank')}{where(short)} ran out of GPU memory "
        f"({quote(short[0], 100)}): its framework raised in it, which ends the rank unless the "
        "script catches it, and the others wait for it; free memory (smaller batch, "
        "activation checkpointing, sharded optimizer state), then restart"
    )
    return _loss(ranks, Confidence.LOW, summary, 40, short[:2], "log_gpu_oom")


def cancelled(view: LogView) -> list[Candidate]:
    """The job was stopped from outside (SLURM's time limit, a preemption, a requeue; a
    signal to torchrun's agent), not by a fault of its ranks. A job that hung until its time
    limit shows the hang first (a watchdog or store timeout): then the cancellation is its
    consequence and weighs almost nothing."""
    found = view.of_kind(kinds.CANCELLED)
    if not found:
        return []
    hung = view.of_kind(kinds.WATCHDOG_TIMEOUT, kinds.STORE_TIMEOUT)
    what, _, advice = found[0].text.partition(": ")  # the event says what, then what to do
    summary = f"{what}{where(found)}: {advice}; the logs say nothing failed before it"
    return [_loss((), Confidence.LOW, summary, 10 if hung else 40, found, "log_cancelled")]


def _bus_error(ranks: tuple[int, ...], found: Sequence[LogEvent]) -> Candidate:
    """Ranks killed by a bus error whose kind nobody names (a launcher's ``exitcode: -7``,
    ``Signal 7 (SIGBUS)``, the shell's ``Bus error (core dumped)``): a page of a mapped file
    had no backing, which in a training job is most often a shared-memory segment (NCCL's,
    the data loader's) in a full or too small ``/dev/shm``, a host's set-up. The lost rank
    stays the alternative; a banner that names another kind of bus error is a crash."""
    summary = (
        f"{rank_prose(ranks, none='a rank')}{where(found[:1])} was killed by a bus error "
        f"({_exit_text(found[0])}) and nothing else says why: most often a shared-memory "
        "segment in a full or too small /dev/shm (a container's default is 64 MB); "
        f"{shm.MORE_SHM} and rerun"
    )
    return Candidate(
        HangClass.BOOTSTRAP,
        ranks,
        Confidence.LOW,
        summary,
        60,
        evidence=lines_of(found),
        rule="log_bus_error",
    )


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
    return exit_text(e.code) if e.code is not None else quote(e, 80)


def _ras_lost_ranks(dead: Sequence[LogEvent], missing: Sequence[LogEvent]) -> tuple[int, ...]:
    """The ranks RAS lost: its dead processes' ranks, else the communicator ranks it misses
    (the same processes, counted per communicator), when as many are missing as are dead."""
    ranked = ranks_of(e for e in [*dead, *missing] if e.rank is not None and e.process_group)
    by_pid: dict[tuple[str, int | None], int | None] = {
        (host_key(e.host), e.pid): e.rank for e in missing if e.pid and e.rank is not None
    }
    from_dead = {
        by_pid[(host_key(e.host), e.pid)] for e in dead if (host_key(e.host), e.pid) in by_pid
    }
    if from_dead:
        return tuple(sorted(r for r in from_dead if r is not None))
    return ranked


_SHARED_GPU: tuple[Callable[[str], object], str] = (
    lambda text: "Duplicate GPU detected" in text or "same CUDA device" in text,
    setup.SAME_GPU,
)
"""Two ranks of one communicator given one GPU: NCCL's words and torch's, first of all."""
_COMMUNICATOR_CAUSES: tuple[tuple[Callable[[str], object], str], ...] = (
    (
        nccl.invalid_call,
        "NCCL refused the call's arguments or its use: most often two ranks given one GPU, "
        "a communicator used from another device than it was made on, or a feature this "
        "NCCL, driver or GPU does not support; NCCL_DEBUG=WARN prints which check failed",
    ),
    (
        cuda.names_setup,
        "CUDA refused a call as not fitting this machine, not a failing GPU: the driver, "
        "the CUDA/NCCL build and the GPUs disagree (a driver older than the build needs, "
        "NVLS without the fabric manager or /dev/nvidia-caps, an NCCL older than the GPU, "
        "peer access the GPUs cannot do); align the versions, or turn the feature off to "
        "confirm (NCCL_NVLS_ENABLE=0, NCCL_P2P_DISABLE=1, a custom all-reduce off)",
    ),
)
"""Communicator set-up failures whose cause the line itself names, with what to do, first
match wins."""
_JOB_CAUSES: tuple[tuple[Callable[[str], object], str], ...] = (
    (
        c10d.UNBUILT.search,
        "this torch was built without that backend (the Windows and macOS wheels have no "
        "NCCL): use the gloo backend there, or a Linux build of torch with CUDA",
    ),
    (
        c10d.UNLOADED.search,
        "a shared library the job needs did not load: it is missing from the library path, "
        "or was built against another version (torch, NCCL, CUDA, glibc); install matching "
        "builds (pip's torch brings its own NCCL: an LD_LIBRARY_PATH or LD_PRELOAD that puts "
        "another libnccl first is a common cause)",
    ),
    (
        c10d.overcounted,
        "the store counted more workers than the world has: a store left from an earlier "
        "run (an init_method='file://...' file reused, a port whose store a previous job "
        "still holds); give each run a fresh file or port",
    ),
    (
        c10d.MEMBER.search,
        "two processes joined as the same global rank: the launch started more processes "
        "than the Trainer's num_nodes x devices, or two nodes took one node rank; make the "
        "scheduler's nodes and tasks per node match the Trainer's (SLURM: --nodes, "
        "--ntasks-per-node, and srun)",
    ),
)
"""The job's set-up failures before any communicator (torch's build, the libraries, the
store, the launch), the same way; ``doctor.logs.setup``'s carry their own advice."""
_EXPLAINED = frozenset((*shm.EXPLAINED, verbs.LOCKED_MEMORY))
"""Events whose text already says the cause and what to do (the host's shared memory, its
locked-memory limit): quoted whole, with no advice after them."""
_COMMUNICATOR = "communicator creation failed"
_JOB = "the job's set-up failed"
_RETRYING = "the logs end with a connection still retried, and nothing says the ranks connected"
_REACH = (
    "check MASTER_ADDR/port reachability, NCCL_SOCKET_IFNAME and the host's interfaces and "
    "fabric (NVLS: fabric manager)"
)


def _bootstrap_cause(found: Sequence[LogEvent]) -> tuple[str, LogEvent | None, str]:
    """What failed, the line that names its cause and the advice for it; else a
    communicator that could not reach its peers, no line, and the advice for that."""
    if named := _first_named(found, (_SHARED_GPU,)):
        return _COMMUNICATOR, *named
    for e in found:  # setup's messages, and CUDA's set-up errors, carry their own advice
        if advice := setup.advice(e.text):
            return _JOB, e, advice
    if named := _first_named(found, _COMMUNICATOR_CAUSES):
        return _COMMUNICATOR, *named
    if named := _first_named(found, _JOB_CAUSES):
        return _JOB, *named
    if said := next((e for e in found if e.text in _EXPLAINED), None):
        return _JOB, said, ""
    return _COMMUNICATOR, None, _REACH


def _first_named(
    found: Sequence[LogEvent], causes: Sequence[tuple[Callable[[str], object], str]]
) -> tuple[LogEvent, str] | None:
    """The first of ``causes`` a line of ``found`` names: that line and the advice."""
    for names, advice in causes:
        if said := next((e for e in found if names(e.text)), None):
            return said, advice
    return None


_RETRIES = 22
"""Retry warnings alone (the store client's, NCCL's socket layer's): nothing else failed or
waited, and nothing says the ranks connected after them; below every other rule's finding,
which a retry, printed by healthy jobs while their peers start, does not outweigh."""


def bootstrap(view: LogView) -> list[Candidate]:
    found = view.of_kind(kinds.BOOTSTRAP)
    retries = not found
    if retries:  # only retry warnings: a failure only where nothing says they connected
        found = view.of_kind(kinds.CONNECT_RETRY)
        if not found or view.past_connecting(found[-1]) or view.of_kind(*kinds.FAULTS):
            return []
    late = view.ran_collectives()
    ranks = ranks_of(found)
    peers = sorted({e.peer for e in found if e.peer})
    # a retry names no cause: the host it retries may still be starting, or out of reach
    what, said, advice = (_RETRYING, None, _REACH) if retries else _bootstrap_cause(found)
    specific = [e for e in found if not nccl.bare_result(e.text)]
    head = f"{what}{' on ' + rank_prose(ranks) if ranks else ''}{where(found)}"
    if said is not None and not advice:  # its text says the cause and what to do
        summary = f"{head}: {said.text}"
    else:
        summary = (
            f"{head} ({quote(said or (specific or found)[0])})"
            + (f", reaching {', '.join(peers[:3])}" if peers else "")
            + f": {advice}"
        )
    return [
        Candidate(
            HangClass.BOOTSTRAP,
            ranks,
            Confidence.LOW if late or not specific or retries else Confidence.MEDIUM,
            summary,
            _RETRIES if retries else 40 if late else 76 if specific else 50,
            evidence=lines_of(found),
            rule="log_bootstrap",
        )
    ]


def iommu(view: LogView) -> list[Candidate]:
    """The IOMMU refused DMA: peer-to-peer writes between GPUs (or a NIC's RDMA) never land,
    the documented cause of NCCL hanging on hosts whose IOMMU or PCI ACS is on."""
    found = view.of_kind(kinds.IOMMU_FAULT)
    refused = [e for e in found if not nccl.IOMMU_NOT_PT.search(e.text)]
    if found and not refused:
        return [_iommu_not_passthrough(found)]
    found = refused
    if not found:
        return []
    ranks = ranks_of(found)
    devices = sorted({e.device for e in found if e.device})
    whose = (
        f"the GPUs of {rank_prose(ranks)}"
        if ranks
        else f"device{'s' if len(devices) > 1 else ''} {', '.join(devices[:4])}"
        if devices
        else "a device"
    )
    summary = (
        f"the IOMMU refused DMA from {whose}{where(found)} ({quote(found[0])}): peer-to-peer "
        "transfers never land and the collective waits for them; boot with iommu=pt (or the "
        "IOMMU off) and turn off PCI ACS, then confirm with NCCL_P2P_DISABLE=1, which runs"
    )
    return [
        Candidate(
            HangClass.NETWORK,
            ranks,
            Confidence.MEDIUM,
            summary,
            72,
            evidence=lines_of(found),
            rule="log_iommu",
        )
    ]


def _iommu_not_passthrough(warned: Sequence[LogEvent]) -> Candidate:
    """RCCL's warning alone: the IOMMU is on, which ROCm documents as the cause of hangs with
    the GPUs busy; every run on such a host prints it, so it decides only where nothing else
    in the logs does."""
    summary = (
        f"RCCL warned that the host's IOMMU is not in passthrough mode{where(warned)} "
        f"({quote(warned[0])}): ROCm documents it as the cause of jobs that hang with the GPUs "
        "busy; boot with iommu=pt, and read this only where nothing else in the logs explains "
        "the hang (runs that work print it too)"
    )
    return Candidate(
        HangClass.NETWORK,
        ranks_of(warned),
        Confidence.LOW,
        summary,
        25,
        evidence=lines_of(warned[:1]),
        rule="log_iommu",
    )


def network(view: LogView) -> list[Candidate]:
    errors = view.of_kind(kinds.NETWORK)
    gone = view.of_kind(kinds.PEER_GONE)
    if not errors and not gone:
        return []
    if not errors and any(
        c10d.PAIR_TIMEOUT in e.text for e in view.of_kind(kinds.WATCHDOG_TIMEOUT)
    ):
        return []  # the closes follow a timeout, which the timeouts' rules judge
    if not errors and len(view.after_own_timeout(gone)) == len(gone):
        return []  # each close followed its own rank's timeout: the abort's aftermath
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
        ("the logs report transport errors" if errors else "connections were closed by a peer")
        + (f" on {rank_prose(reporters)}" if reporters else "")
        + where(found)
        + (f" with {', '.join(peers[:3])}" if peers else "")
        + f" ({quote(found[0])}){meaning}: check the links and NICs between them"
        + ("" if errors else ", and whether the peer process died")
    )
    explained = own or view.of_kind(kinds.RAS_DEAD) or view.dead
    laggard = view.of_kind(kinds.DESYNC)
    setting_up = view.raised_in_set_up()
    if not errors and setting_up:
        return [_closed_in_set_up(gone, setting_up, peers), _link(gone, culprits, summary, 30)]
    if not errors and not explained and not laggard and _only_peer_closes(gone):
        return [_peer_exited(gone, tuple(sorted(named)), peers), _link(gone, culprits, summary, 30)]
    strength = 30 if explained or (laggard and not errors) else (70 if errors else 50)
    sure = Confidence.MEDIUM if errors and strength == 70 else Confidence.LOW
    return [_link(found, culprits, summary, strength, sure)]


def _link(
    found: Sequence[LogEvent],
    culprits: tuple[int, ...],
    summary: str,
    strength: int,
    sure: Confidence = Confidence.LOW,
) -> Candidate:
    return Candidate(
        HangClass.NETWORK,
        culprits,
        sure,
        summary,
        strength,
        evidence=lines_of(found),
        rule="log_network",
    )


def _closed_in_set_up(
    gone: Sequence[LogEvent], setting_up: Sequence[LogEvent], peers: list[str]
) -> Candidate:
    """A peer's connection ended while the rank was still setting up (its traceback runs
    through ``init_process_group``, the store's creation or DDP's constructor) and no
    collective had run: the peer or the store it reached never completed the set-up with it,
    which is the set-up's failure (an address or interface the peer cannot use, a firewall,
    ranks that disagree on the world size) far more often than a process that died there."""
    frame = setting_up[0].op
    summary = (
        f"a connection{' to ' + ', '.join(peers[:3]) if peers else ''} ended "
        f"({quote(gone[0])}) while {rank_prose(ranks_of(setting_up), none='a rank')} was "
        f"still setting up (in {frame}) and before any collective ran: check that every rank "
        "reaches MASTER_ADDR:MASTER_PORT and its peers on the interface NCCL and gloo use "
        "(NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME), firewalls, and that all ranks agree on "
        "the world size"
    )
    return Candidate(
        HangClass.BOOTSTRAP,
        ranks_of(setting_up),
        Confidence.LOW,
        summary,
        52,
        evidence=lines_of([*gone[:1], *setting_up[:1]]),
        rule="log_closed_in_set_up",
    )


def _peer_exited(gone: Sequence[LogEvent], ranks: tuple[int, ...], peers: list[str]) -> Candidate:
    """Only a peer's closes (end of file, reset, broken pipe) and no transport error: the
    kernel closes a process's sockets when it exits, while a failing link shows as an NCCL
    transport error or a timeout. So the peer's process most likely ended."""
    summary = (
        f"the peer {', '.join(peers[:3]) if peers else 'process'} closed its connections"
        f"{where(gone)} ({quote(gone[0])}) and NCCL reports no transport error: that process "
        "most likely exited (killed, crashed, out of memory) or its host restarted; its own log "
        "says why, and a link fault would show as a transport error or a timeout instead"
    )
    return _loss(ranks, Confidence.LOW, summary, 50, gone, "log_peer_exited")


def cuda_error(view: LogView) -> list[Candidate]:
    found = view.of_kind(kinds.CUDA_ERROR)
    if not found:
        return []
    ranks = ranks_of(found)
    summary = (
        f"a CUDA error stopped the GPU work of {rank_prose(ranks, none='a rank')}"
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


CATALOGUE_STRENGTH = 35
"""Below every specific rule's conclusion (a message the rules read themselves is judged by
them), above the stalled and healthy readings: a failure the sources print is a cause."""


def catalogued(view: LogView) -> list[Candidate]:
    """Failure messages only the sources' catalogue knows: the class of the place that
    prints them (the most of them, the first on a tie), low confidence."""
    found = view.of_kind(kinds.CATALOGUED)
    if not found:
        return []
    votes = Counter(e.hint_class for e in found)
    cls = max(votes, key=lambda c: (votes[c], -[e.hint_class for e in found].index(c)))
    chosen = [e for e in found if e.hint_class == cls]
    late = cls == HangClass.BOOTSTRAP.value and view.ran_collectives()
    ranks = ranks_of(chosen)
    source, _, at = chosen[0].hint_at.partition(" ")
    summary = (
        f"{_PRINTER.get(source, source)} printed {quote(chosen[0])}{where(chosen)}"
        + (f" on {rank_prose(ranks)}" if ranks else "")
        + f", a message its source raises at {at}: "
        + _catalogue_advice(cls, chosen[0].text)
    )
    return [
        Candidate(
            HangClass(cls),
            ranks,
            Confidence.LOW,
            summary,
            20 if late else CATALOGUE_STRENGTH,
            evidence=lines_of(chosen),
            rule="log_catalogue",
        )
    ]


_PRINTER = {
    "nccl": "NCCL",
    "rccl": "RCCL",
    "aws-ofi-nccl": "NCCL's OFI network plugin",
    "torch": "PyTorch",
}
"""Who prints a catalogued message, by its source's name (``data/messages.json``); a
framework's is its repository's (``NVIDIA/Megatron-LM``)."""


def _catalogue_advice(cls: str, text: str) -> str:
    """The class's advice, or a set-up failure's own where its line names the cause."""
    named = setup.advice(text) if cls == HangClass.BOOTSTRAP.value else None
    return named or _CATALOGUE_ADVICE[cls]


_CATALOGUE_ADVICE = {
    HangClass.BOOTSTRAP.value: "the job's set-up failed there (its process group or NCCL "
    "communicator, their rendezvous and store, the launcher's settings, the GPUs each rank "
    "was given); what the message names is what to fix, else check the interfaces, "
    "MASTER_ADDR/port and /dev/shm",
    HangClass.NETWORK.value: "a transport between connected ranks failed there; check the "
    "links, NICs and the fabric between the ranks",
    HangClass.RANK_LOSS.value: "a process of the job failed or left there; find why it "
    "ended (its own traceback, the OOM killer) before restarting",
    HangClass.COLLECTIVE_MISMATCH.value: "a check of the ranks against each other found them "
    "calling different collectives, sizes or steps; find the call site or data the ranks "
    "disagree on (NCCL_DEBUG_SUBSYS=COLL shows each rank's calls)",
    HangClass.CPU_STUCK.value: "a process of the job stopped progressing outside the "
    "collectives (a data loader, a file system); its stack (py-spy dump) says where",
    HangClass.GPU_HANG.value: "a health check found a GPU or its links failing; drain the "
    "node and have the GPU checked (nvidia-smi -q, dcgmi diag) before it runs again",
    HangClass.UNSUPPORTED_OP.value: "the backend or framework refused the call: an "
    "operation, data type or reduction it does not implement (a type newer than this NCCL, "
    "bfloat16 or FP8 on an old release, a collective gloo lacks); use one it supports, "
    "another backend, or a newer release",
}
