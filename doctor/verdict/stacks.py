"""What a rank is doing, read from its main thread's stack; ranks grouped as STAT does.

Pure functions over ``RankStack``. A rank's *state* comes from the frames of
its main thread, innermost first, by the first rule that matches:

1. ``in_collective`` - a ``torch.distributed`` collective, DDP's buffer
   broadcast, or (with native frames) c10d/gloo/NCCL wait code such as DDP's
   ``c10d::Reducer`` or a process group's ``c10d::Work::wait`` is on the stack;
2. ``gpu_wait`` - the main thread waits for its GPU (torch.cuda's ``synchronize``,
   or with native frames ``cudaStreamSynchronize`` and the like, ``.item()``): with
   NCCL, whose collectives return once queued, a waiter of a hung job is found here;
3. ``compile`` - torch.compile is tracing or inductor is compiling (running an
   already compiled graph is not compiling); a kernel build comes before ``gpu_wait``:
   Triton lowering a kernel or its autotuner timing configs (which waits for the GPU
   between runs), a JIT C++/CUDA extension build (``torch.utils.cpp_extension``) or
   its lock (``FileBaton.wait``);
4. ``data_loading`` - a ``torch.utils.data`` loader, ``__getitem__`` or a
   function named like a loader (a name only says *where*: the live rules
   decide the class from structure, never from it);
5. ``gil_wait`` - the main thread cannot run Python while another thread holds
   the GIL (a C call that keeps it, a native extension): the holder is the cause.
   This rule comes first when the holder is idle (py-spy: owns the GIL, not
   active) or the main thread's native frames show it taking the GIL: whatever
   collective is above, a thread that cannot return to Python is not in it;
6. ``gil_loop`` - the thread runs and holds the GIL in other code;
7. ``user_code`` - any other Python code (sleeping, I/O, a checkpoint);
8. ``idle`` - no Python frames, or the interpreter waiting to shut down.

``stopped`` (kernel state T/t: SIGSTOP or a debugger) and ``dead`` come from
the process, never from a stack; they override the stack's state.

A rank's *signature* is the call path that got it there: the top frame's
function (no line, so a loop sampled at two lines is one signature) and
every caller with its line (so the same collective called from an ``except``
clause differs). Frames inside a collective are dropped: where in c10d the
sampler caught a rank does not matter, which collective it is in does.
Native frames count by symbol only: an unresolved address (``0x7f..``) differs
from process to process and is left out, so it never splits a group.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from doctor.evidence import Frame, RankStack, ThreadStack


class RankState(StrEnum):
    IN_COLLECTIVE = "in_collective"
    GPU_WAIT = "gpu_wait"
    """The main thread waits for its GPU to finish the work queued before (a CUDA
    synchronize, a copy to the host): with NCCL that work holds the collectives, which
    return as soon as they are queued, so a rank of a hung NCCL job waits here."""
    COMPILE = "compile"
    DATA_LOADING = "data_loading"
    GIL_WAIT = "gil_wait"
    """The main thread waits for the GIL that another thread holds."""
    GIL_LOOP = "gil_loop"
    USER_CODE = "user_code"
    IDLE = "idle"
    UNKNOWN = "unknown"
    """No stack could be read."""
    DEAD = "dead"
    """The process is gone (set from liveness, never from a stack)."""
    STOPPED = "stopped"
    """The process is stopped (kernel state T or t: SIGSTOP, a debugger); from liveness."""


WAITING = frozenset({RankState.IN_COLLECTIVE, RankState.GPU_WAIT})
"""States of a rank that waits on something outside its CPU: frozen there, nothing moves."""
ELSEWHERE = frozenset(
    {
        RankState.COMPILE,
        RankState.DATA_LOADING,
        RankState.GIL_WAIT,
        RankState.GIL_LOOP,
        RankState.USER_CODE,
        RankState.IDLE,
        RankState.STOPPED,
    }
)
"""States of a live rank that is not in a collective: the ones that keep peers waiting."""

COLLECTIVES = frozenset(
    {
        "all_reduce",
        "all_reduce_coalesced",
        "all_gather",
        "all_gather_into_tensor",
        "all_gather_single",
        "all_gather_coalesced",
        "all_gather_object",
        "_all_gather_base",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "reduce_scatter_single",
        "_reduce_scatter_base",
        "all_to_all",
        "all_to_all_single",
        "broadcast",
        "broadcast_object_list",
        "reduce",
        "gather",
        "gather_object",
        "scatter",
        "scatter_object_list",
        "barrier",
        "monitored_barrier",
        "send",
        "recv",
        "isend",
        "irecv",
        "batch_isend_irecv",
        "send_object_list",
        "recv_object_list",
        "wait_tensor",
        "init_process_group",
        "new_group",
        "new_subgroups",
        "_store_based_barrier",
    }
)
BOOTSTRAP_OPS = frozenset(
    {"init_process_group", "new_group", "new_subgroups", "_store_based_barrier"}
)
_NATIVE_WAIT = re.compile(r"^(c10d::|gloo::|nccl|ncclComm|ProcessGroupNCCL)")
_PYTHON_WAITS = {
    "torch/nn/parallel/distributed.py": frozenset(
        {"_distributed_broadcast_coalesced", "_sync_params_and_buffers"}
    ),
}
"""Collectives that torch's own Python code calls into C directly (not through ``dist.*``)."""
_NATIVE_OPS = (
    ("c10d::Reducer::", "all_reduce"),
    ("::wait", "wait"),
    ("allreduce", "all_reduce"),
    ("allgather", "all_gather"),
    ("broadcast", "broadcast"),
    ("barrier", "barrier"),
)
"""The op a native wait is part of: DDP's reducer all-reduces gradient buckets."""
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]+$")
_COMPILE_FILES = re.compile(
    r"torch/_dynamo/(?!eval_frame|external_utils)|"
    r"torch/_inductor/(?!output_code|runtime/)|"
    r"torch/_functorch/(?!_aot_autograd/runtime_wrappers)|torch/fx/"
)
_BUILDING = re.compile(
    r"triton/backends/\w+/compiler\.py|torch/utils/cpp_extension\.py|torch/utils/file_baton\.py"
)
_BUILDING_CALLS = frozenset(
    {
        ("triton/compiler/compiler.py", "compile"),
        ("triton/runtime/autotuner.py", "_bench"),
        ("triton/runtime/autotuner.py", "benchmark"),
        ("triton/runtime/autotuner.py", "prune_configs"),
    }
)
"""Where a kernel is being built: Triton's backends compile (``make_ttir`` to ``make_cubin``),
``compile`` itself, the autotuner timing or pruning configs (its ``run`` is every launch, so
only these); torch's extension build (``load`` reaches ``_jit_compile`` only to build) and
the lock a build holds."""
_DATA_NAMES = re.compile(
    r"(?i)(^__getitem__$|^__next__$|data_?loader|load_batch|next_batch|"
    r"^fetch|prefetch|collate)"
)


_GPU_SYNC_NATIVE = re.compile(
    r"^(cuda|cu)(Stream|Device|Ctx|Event)Synchronize|^cudaMemcpy(?!Async)|_local_scalar_dense_cuda"
)
"""Native calls that block the CPU until the GPU's queued work is done (``.item()`` on a
GPU tensor reaches ``_local_scalar_dense_cuda``)."""


_REMEMBERED = 4096
"""Objects each remembering function keeps (then it starts again)."""
_A = TypeVar("_A")
_K = TypeVar("_K")
_R = TypeVar("_R")


def _remembered(key: Callable[[_A], _K]) -> Callable[[Callable[[_A], _R]], Callable[[_A], _R]]:
    """Remember ``fn(arg)`` by the identity of ``key(arg)``: merged multi-host evidence
    shares one thread (and one tuple of threads) across every rank of a stack class, so
    131,072 ranks in one collective cost one look, not one each."""

    def wrap(fn: Callable[[_A], _R]) -> Callable[[_A], _R]:
        seen: dict[int, tuple[_K, _R]] = {}

        @functools.wraps(fn)
        def remembered(arg: _A) -> _R:
            k = key(arg)
            hit = seen.get(id(k))
            if hit is not None and hit[0] is k:
                return hit[1]
            if len(seen) >= _REMEMBERED:
                seen.clear()
            found = fn(arg)
            seen[id(k)] = (k, found)  # the key is kept alive: its id is not reused
            return found

        return remembered

    return wrap


def _itself(thread: ThreadStack) -> ThreadStack:
    return thread


def _threads(stack: RankStack) -> tuple[ThreadStack, ...]:
    """What a rank's state, op and waits depend on: its threads, not its number."""
    return stack.threads


def _is_gpu_sync(frame: Frame) -> bool:
    """A frame where the CPU waits for its GPU: torch.cuda's ``synchronize`` (device,
    stream or event) or the CUDA call under it."""
    if is_native(frame):
        return bool(_GPU_SYNC_NATIVE.search(frame.name))
    return frame.name.rsplit(".", 1)[-1] == "synchronize" and "torch/cuda/" in frame.filename


def _building(frame: Frame) -> bool:
    filename = frame.filename
    if "triton/" not in filename and "torch/utils/" not in filename:
        return False
    short = frame.name.rsplit(".", 1)[-1]
    if _BUILDING.search(filename):
        return True
    return any(filename.endswith(f) and short == name for f, name in _BUILDING_CALLS)


def _python_wait(frame: Frame) -> bool:
    short = frame.name.rsplit(".", 1)[-1]
    if "torch/distributed/" in frame.filename and short in COLLECTIVES:
        return True
    return any(f in frame.filename and short in n for f, n in _PYTHON_WAITS.items())


def _is_collective(frame: Frame) -> bool:
    return _python_wait(frame) or bool(_NATIVE_WAIT.match(frame.name))


def is_native(frame: Frame) -> bool:
    """A frame of compiled code (py-spy ``--native``); for stacks saved before frames said
    so, a frame with no line in a shared object."""
    return frame.native or (frame.line == 0 and ".so" in frame.filename)


def _first_telling(frames: Sequence[Frame]) -> int:
    """The innermost Python frame (where the user's code is), else the innermost symbol."""
    python = next((i for i, f in enumerate(frames) if not is_native(f)), None)
    if python is not None:
        return python
    return next((i for i, f in enumerate(frames) if not _ADDRESS.match(f.name)), 0)


@_remembered(_itself)
def collective_index(thread: ThreadStack) -> int | None:
    """Index of the outermost collective frame (the call the user made), if any."""
    hits = [i for i, f in enumerate(thread.frames) if _is_collective(f)]
    python = [i for i in hits if _python_wait(thread.frames[i])]
    chosen = python or hits
    return chosen[-1] if chosen else None


def collective_op(stack: RankStack | None) -> str | None:
    """The collective a rank waits in (``all_reduce``; ``wait`` for a native ``Work::wait``;
    ``all_reduce`` for DDP's ``c10d::Reducer``, which all-reduces gradient buckets)."""
    return _collective_op(stack) if stack is not None else None


@_remembered(_threads)
def _collective_op(stack: RankStack) -> str | None:
    main = stack.main
    index = collective_index(main) if main else None
    if main is None or index is None:
        return None
    name = main.frames[index].name
    if _python_wait(main.frames[index]):
        short = name.rsplit(".", 1)[-1]
        return "broadcast" if "broadcast" in short else short
    return next((op for part, op in _NATIVE_OPS if part in name), name.rsplit("::", 1)[-1])


def collective_root(stack: RankStack | None) -> int | None:
    """The root a rank's rooted collective waits for (a broadcast's ``src``, DDP's
    ``authoritative_rank``), when its arguments were read; None otherwise."""
    main = stack.main if stack else None
    index = collective_index(main) if main else None
    if main is None or index is None:
        return None
    return next((f.root for f in main.frames[: index + 1] if f.root is not None), None)


def gil_holder(stack: RankStack | None) -> ThreadStack | None:
    """Another thread that holds the GIL while the main thread does not, if any."""
    main = stack.main if stack else None
    if stack is None or main is None or main.holds_gil:
        return None
    return next((t for t in stack.threads if t.holds_gil and t is not main), None)


def _explain(main: ThreadStack | None) -> tuple[RankState, int | None]:
    """The state of a main thread and the index of the frame that decided it."""
    return _explain_thread(main) if main is not None else (RankState.UNKNOWN, None)


@_remembered(_itself)
def _explain_thread(main: ThreadStack) -> tuple[RankState, int | None]:
    return _explain_frames(main)


def _explain_frames(main: ThreadStack) -> tuple[RankState, int | None]:
    frames = main.frames
    if not frames or (frames[-1].name == "_shutdown" and "threading" in frames[-1].filename):
        return RankState.IDLE, None
    index = collective_index(main)
    if index is not None:
        return RankState.IN_COLLECTIVE, index
    building = [i for i, f in enumerate(frames) if _building(f)]
    if building:
        return RankState.COMPILE, building[-1]
    sync = [i for i, f in enumerate(frames) if _is_gpu_sync(f)]
    if sync:
        return RankState.GPU_WAIT, sync[-1]
    tests: tuple[tuple[RankState, Callable[[Frame], bool]], ...] = (
        (RankState.COMPILE, lambda f: bool(_COMPILE_FILES.search(f.filename))),
        (
            RankState.DATA_LOADING,
            lambda f: "torch/utils/data/" in f.filename or bool(_DATA_NAMES.search(f.name)),
        ),
    )
    for state, test in tests:
        hits = [i for i, f in enumerate(frames) if test(f)]
        if hits:
            return state, hits[-1]  # the outermost: where the user's code entered it
    if main.holds_gil and main.active:
        return RankState.GIL_LOOP, _first_telling(frames)
    return RankState.USER_CODE, _first_telling(frames)


_GIL_TAKE = re.compile(
    r"^(take_gil|PyEval_RestoreThread|PyEval_AcquireThread|PyEval_AcquireLock|"
    r"PyGILState_Ensure|pthread_cond_timedwait)$|gil_scoped_acquire|~gil_scoped_release"
)
"""Native frames of a thread taking the GIL. py-spy folds the interpreter's own frames
(``take_gil``, ``PyEval_RestoreThread``) away, so under them CPython's wait shows as
``pthread_cond_timedwait`` called straight from the extension that re-takes the GIL
(``THPEngine_run_backward``, pybind11's ``~gil_scoped_release``)."""
_SYNC_CALLER = re.compile(r"^std::|condition_variable|::wait|Wait|^__")
"""Callers of a timed wait that are a C++ wait of their own (gloo's ``wait_for``), not
CPython's GIL loop."""


def taking_gil(thread: ThreadStack) -> bool:
    """Whether the thread's innermost native frames are CPython taking the GIL."""
    named = [f for f in thread.frames if not _ADDRESS.match(f.name)]
    if not named or not is_native(named[0]) or not _GIL_TAKE.search(named[0].name):
        return False
    if named[0].name != "pthread_cond_timedwait":
        return True
    caller = named[1] if len(named) > 1 else None
    return caller is not None and not _SYNC_CALLER.search(caller.name)


def gil_blocked(stack: RankStack | None) -> bool:
    """The main thread cannot run Python: another thread holds the GIL and the main thread
    is outside a collective, or waits to take the GIL (its native frames say so), or the
    holder sits idle in a C call that keeps it (py-spy: owns the GIL, not active). A main
    thread in a collective under such a holder is not evidence of where the rank is: it
    cannot return to Python."""
    holder = gil_holder(stack)
    if stack is None or holder is None or stack.main is None:
        return False
    state = _explain(stack.main)[0]
    return (
        state in (RankState.USER_CODE, RankState.IDLE)
        or not holder.active
        or taking_gil(stack.main)
    )


def rank_state(stack: RankStack | None) -> RankState:
    """The state of a rank's main thread; rules and their order in the module docstring."""
    return _rank_state(stack) if stack is not None else RankState.UNKNOWN


@_remembered(_threads)
def _rank_state(stack: RankStack) -> RankState:
    if gil_blocked(stack):
        return RankState.GIL_WAIT
    return _explain(stack.main)[0]


@_remembered(_threads)
def native_main(stack: RankStack) -> bool:
    """Whether the main thread shows native frames (py-spy ``--native``)."""
    main = stack.main
    return main is not None and any(is_native(f) for f in main.frames)


def _short(frame: Frame) -> str:
    return frame.filename.rsplit("/", 1)[-1]


def signature(stack: RankStack | None) -> str:
    """The call path of a rank's main thread (see the module docstring); '' with no stack."""
    main = stack.main if stack else None
    if main is None or not main.frames:
        return ""
    frames = main.frames
    index = collective_index(main)
    top = frames[index] if index is not None else frames[0]
    callers = frames[(index if index is not None else 0) + 1 :]
    parts = [top.name.rsplit(".", 1)[-1] if index is not None else top.name]
    parts += [
        f.name if is_native(f) else f"{f.name}@{_short(f)}:{f.line}"
        for f in callers
        if not _ADDRESS.match(f.name)
        and (not f.name.endswith("wrapper") or "torch/distributed" not in f.filename)
    ]
    return " < ".join(parts)


def python_frames(frames: Sequence[Frame]) -> tuple[Frame, ...]:
    """The Python frames alone: native frames are taken for some ranks and not others
    (one native dump per Python stack), and unresolved ones differ by address per process."""
    return tuple(f for f in frames if not is_native(f) and not _ADDRESS.match(f.name))


def python_signature(stack: RankStack | None) -> str:
    """The signature of the main thread's Python frames alone: two ranks whose Python
    stacks agree frame for frame, one dumped with native frames and one without, match."""
    main = stack.main if stack else None
    if stack is None or main is None:
        return ""
    only = ThreadStack(
        main.thread_id, main.name, python_frames(main.frames), main.holds_gil, main.active, True
    )
    return signature(RankStack(stack.rank, (only,), stack.source))


def decisive_index(stack: RankStack | None) -> int | None:
    """Where in the main thread's frames the frame that decided the rank's state is."""
    return _explain(stack.main if stack else None)[1]


def top_frame(stack: RankStack | None) -> str:
    """The frame a person should read first: the one that decided the rank's state."""
    return _top_frame(stack) if stack is not None else ""


@_remembered(_threads)
def _top_frame(stack: RankStack) -> str:
    main = stack.main
    index = decisive_index(stack)
    return str(main.frames[index]) if main is not None and index is not None else ""


@dataclass(frozen=True)
class SignatureGroup:
    """Ranks whose main threads share one call path (an equivalence class, as in STAT)."""

    signature: str
    state: RankState
    ranks: tuple[int, ...]
    top_frame: str


def group_by_signature(stacks: Iterable[RankStack]) -> list[SignatureGroup]:
    """Equivalence classes of ranks by signature, largest first, ties by lowest rank."""
    classes: dict[str, list[RankStack]] = {}
    for stack in stacks:
        classes.setdefault(signature(stack), []).append(stack)
    groups = [
        SignatureGroup(
            sig,
            rank_state(members[0]),
            tuple(sorted(s.rank for s in members)),
            top_frame(members[0]),
        )
        for sig, members in classes.items()
    ]
    return sorted(groups, key=lambda g: (-len(g.ranks), g.ranks))


@dataclass(frozen=True)
class Outliers:
    """The ranks outside the majority class, or a tie when no class is a majority."""

    ranks: tuple[int, ...]
    majority: SignatureGroup | None
    tie: bool = False


def odd_ones_out(groups: Sequence[SignatureGroup]) -> Outliers:
    """Ranks outside the largest class when it holds more than half of the ranks.

    With no strict majority (2 against 2) nothing separates culprit from
    victim by stacks alone: that is a tie, reported as such, never guessed.
    """
    total = sum(len(g.ranks) for g in groups)
    if not groups or len(groups) == 1:
        return Outliers((), groups[0] if groups else None)
    biggest = groups[0]
    others = tuple(sorted(r for g in groups[1:] for r in g.ranks))
    if 2 * len(biggest.ranks) > total:
        return Outliers(others, biggest)
    return Outliers(tuple(sorted(r for g in groups for r in g.ranks)), None, tie=True)


def odd_ones_out_by_group(
    stacks: Sequence[RankStack], members: Mapping[str, Sequence[int]]
) -> dict[str, Outliers]:
    """``odd_ones_out`` within each process group (group name -> its global ranks)."""
    by_rank = {s.rank: s for s in stacks}
    return {
        name: odd_ones_out(group_by_signature(by_rank[r] for r in ranks if r in by_rank))
        for name, ranks in members.items()
    }


STOPPED_STATUSES = frozenset({"stopped", "tracing-stop"})
"""psutil's names of kernel states T and t."""


def row_state(alive: bool, status: str, stack: RankStack | None) -> str:
    """A rank's ``state`` in the triage JSON and the TUI: its stack's state while it lives
    (``in_collective``...), ``stopped`` when the kernel stopped it, else what became of its
    process (``zombie``, ``missing``, ``dead``)."""
    if not alive:
        return status or RankState.DEAD.value
    if status in STOPPED_STATUSES:
        return RankState.STOPPED.value
    return rank_state(stack).value
