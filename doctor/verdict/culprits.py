"""Rules for a live rank that keeps the others waiting: ``blocked`` and ``stuck``.

``blocked`` decides by structure alone (a stopped process, a main thread that
waits for a GIL another thread holds, a wait the kernel names); ``stuck`` by
the structure "peers wait in a collective, this rank is not". A function name
(data loader, checkpoint) only says where the culprit is; it never decides
the class (``doctor.verdict.live`` has the table).
"""

from __future__ import annotations

from collections.abc import Sequence

from doctor.evidence import RankStack
from doctor.model import Confidence, EvidenceLine, HangClass
from doctor.ranks import rank_does, rank_prose
from doctor.verdict.candidate import Candidate
from doctor.verdict.kernel import blocked_on, kernel_line
from doctor.verdict.stacks import ELSEWHERE, RankState, gil_holder, is_native, native_main
from doctor.verdict.view import LiveView, pyspy_line

_WHERE = {
    RankState.STOPPED: "stopped (kernel state T: SIGSTOP or a debugger)",
    RankState.GIL_WAIT: "waiting for the GIL, which another of its threads holds",
    RankState.DATA_LOADING: "in its data loader",
    RankState.GIL_LOOP: "in a Python loop holding the GIL",
    RankState.USER_CODE: "in its own code",
    RankState.IDLE: "idle (its main thread has no Python frames)",
    RankState.COMPILE: "compiling (torch.compile, a Triton kernel or a JIT extension)",
    RankState.GPU_WAIT: "waiting for its GPU to finish the work queued before it",
}


def stuck(view: LiveView) -> list[Candidate]:
    if view.progress:
        return []
    waiting = tuple(
        r
        for r in view.ranks_in(RankState.IN_COLLECTIVE)
        if r in view.frozen or r not in view.samples  # a waiter seen elsewhere is moving
    )
    blocked_ranks = _blocked_ranks(view)  # the ``blocked`` rule speaks for those
    elsewhere = tuple(
        r for r in view.ranks_in(*ELSEWHERE) if r not in blocked_ranks and view.mostly_elsewhere(r)
    )
    on_gpu = tuple(r for r in view.ranks_in(RankState.GPU_WAIT) if view.mostly_elsewhere(r))
    if not waiting or not (elsewhere or on_gpu):
        return []
    ref = view.waiting_ref(waiting)
    wait_line = pyspy_line(None, f"{rank_does(waiting, 'wait')} in {view.stack(waiting[0])}")
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
        (on_gpu, HangClass.GPU_HANG, "gpu_wait"),
    ):
        if not culprits:
            continue
        where = "; ".join(_where(view, r) for r in culprits)
        lines = (
            [
                pyspy_line(r, f"main thread {_WHERE[view.states[r]]}: {view.stack(r)}")
                for r in culprits
            ]
            + [wait_line]
            + _native_lines(view, waiting)
            + _cpu_lines(view, culprits)
        )
        summary = (
            f"{where}, while {rank_does(waiting, 'wait')} in {ref.op if ref else 'a collective'}"
        )
        out.append(
            Candidate(
                cls,
                culprits,
                Confidence.MEDIUM if cls is HangClass.GPU_HANG else sure,
                summary,
                80,
                collective=ref,
                evidence=tuple(lines),
                rule=rule,
            )
        )
    return out


def _holder_text(stack: RankStack | None) -> str:
    """``thread T holds the GIL at sleep (libc.so.6) < hold (x.py:9)``: the holder's innermost
    frame and, under native frames, its first Python frame."""
    holder = gil_holder(stack)
    if holder is None or not holder.frames:
        return ""
    frames = [f for f in holder.frames if not f.name.startswith("0x")]
    first = frames[0] if frames else holder.frames[0]
    python = next((f for f in frames if not is_native(f)), None)
    where = f"{first}" + (f" < {python}" if python is not None and python is not first else "")
    doing = (
        "running (spinning) while it keeps the GIL"
        if holder.active
        else "idle in a C call that keeps the GIL (a blocking system call)"
    )
    return f"thread {holder.name or holder.thread_id} holds the GIL at {where}, {doing}"


def _where(view: LiveView, rank: int) -> str:
    """Where a culprit is, by structure first (stopped, GIL, kernel wait), then by name."""
    state = view.states[rank]
    text = f"{rank_prose([rank])} is {_WHERE[state]}"
    stack = view.rank_stack(rank)
    if state is RankState.GIL_WAIT and (holder := _holder_text(stack)):
        text += f" ({holder}; its main thread is at {view.stack(rank)})"
    elif view.stack(rank):
        text += f" at {view.stack(rank)}"
    process = view.process(rank)
    kernel = blocked_on(process) if process is not None else ""
    return f"{text}, {kernel}" if kernel else text


def _cpu_lines(view: LiveView, ranks: Sequence[int]) -> list[EvidenceLine]:
    """CPU, I/O and kernel wait of the culprits, and any other thread that holds their GIL."""
    lines = []
    for p in view.evidence.processes:
        if p.rank in ranks and p.cpu_seconds_delta is not None:
            lines.append(
                EvidenceLine(
                    "process",
                    p.rank,
                    f"state {p.status}, used {p.cpu_seconds_delta:.2f}s CPU "
                    f"and {p.io_calls_delta} read/write calls in the window",
                )
            )
        if p.rank in ranks and (kernel := kernel_line(p)):
            lines.append(EvidenceLine("process", p.rank, f"main thread in the kernel: {kernel}"))
    for stack in view.evidence.stacks:
        if stack.rank in ranks and (holder := _holder_text(stack)):
            lines.append(pyspy_line(stack.rank, holder))
    return lines


def _native_lines(view: LiveView, waiting: Sequence[int]) -> list[EvidenceLine]:
    """Where native frames showed the waiters' wait (DDP's reducer, a ``Work::wait``)."""
    lines, waiters = [], set(waiting)
    for stack in view.evidence.stacks:
        if stack.rank not in waiters or not native_main(stack):
            continue
        source = (
            f" (native frames of rank {stack.native_from}, whose Python stack is the same)"
            if stack.native_from is not None
            else ""
        )
        lines.append(pyspy_line(stack.rank, f"native wait: {view.stack(stack.rank)}{source}"))
    return lines


BLOCKED = (RankState.STOPPED, RankState.GIL_WAIT)


def _blocked_ranks(view: LiveView) -> tuple[int, ...]:
    """Live ranks that cannot move by themselves, by structure (see the module table);
    ``blocked`` and ``stuck`` both ask, so worked out once a view."""
    found = view.shared.get("blocked")
    if found is None:
        found = view.shared["blocked"] = _blocked(view)
    return found


def _blocked(view: LiveView) -> tuple[int, ...]:
    out = []
    for rank, state in sorted(view.states.items()):
        process = view.process(rank)
        if state is RankState.GIL_WAIT:
            seen = [RankState(s.state) for s in view.samples.get(rank, [])]
            if seen and 2 * seen.count(RankState.GIL_WAIT) <= len(seen):
                continue  # a moment's wait for the GIL is how threads share it
        if state in BLOCKED or (  # a kernel wait the stack moved past
            process is not None
            and process.alive
            and blocked_on(process)
            and len({s.stack_signature for s in view.samples.get(rank, [])}) <= 1
        ):
            out.append(rank)  # was a moment's I/O, not a block
    return tuple(out)


def blocked(view: LiveView) -> list[Candidate]:
    """A live rank that cannot move by itself, with nothing proving the job moves."""
    if view.progress:
        return []
    culprits = _blocked_ranks(view)
    if not culprits:
        return []
    waiting = view.ranks_in(RankState.IN_COLLECTIVE)
    others = [r for r in view.states if r not in culprits and view.states[r] is not RankState.DEAD]
    ref = view.waiting_ref(waiting)
    peers = (
        f", while {rank_does(waiting, 'wait')} in {ref.op if ref else 'a collective'}"
        if waiting
        else (f"; {rank_prose(others)} cannot finish a collective without it" if others else "")
    )
    summary = "; ".join(_where(view, r) for r in culprits) + peers
    lines = (
        [pyspy_line(None, f"{rank_does(waiting, 'wait')} in {view.stack(waiting[0])}")]
        if waiting
        else []
    )
    return [
        Candidate(
            HangClass.CPU_STUCK,
            culprits,
            Confidence.HIGH if view.progress is False or waiting else Confidence.MEDIUM,
            summary,
            82,
            collective=ref,
            evidence=tuple(lines + _native_lines(view, waiting) + _cpu_lines(view, culprits)),
            rule="blocked",
        )
    ]
