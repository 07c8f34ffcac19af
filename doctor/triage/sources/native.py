"""Native stacks where the Python stack cannot show the wait, within the time budget.

Under DDP a waiting rank's Python stack ends in the autograd engine
(``_engine_run_backward``); the wait itself (``c10d::Reducer``, a process
group's ``Work::wait``) is only in native frames. ``py-spy --native`` shows
them but costs about a second per process (it reads libtorch's symbols), so:

* a rank needs native frames when its main thread is idle in code that is
  not a known collective (``needs_native``);
* the first sample that shows it starts the native dump at once, on its own
  thread, beside the remaining Python samples;
* only one rank per Python signature is dumped: ranks whose Python stacks
  agree frame for frame and are idle wait in the same place, so the others
  are given that rank's native main-thread frames, marked ``native_from``;
* a stopped process is never dumped natively (it cannot be suspended), and
  never inherits another rank's frames: its own state is the evidence.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

from doctor.evidence import ProgressSample, RankStack, ThreadStack
from doctor.verdict.stacks import RankState, is_native, python_signature, rank_state, signature

NEEDS_NATIVE = frozenset({RankState.USER_CODE, RankState.GIL_WAIT, RankState.IDLE})


def needs_native(stack: RankStack) -> bool:
    """A main thread blocked in C under code that is not a known collective: the autograd
    engine, a backward hook, ``work.wait()``, a C call holding up the GIL."""
    main = stack.main
    if main is None or not main.frames or main.active:
        return False
    return rank_state(stack) in NEEDS_NATIVE and not any(is_native(f) for f in main.frames)


@dataclass(frozen=True)
class _Resolved:
    rank: int
    stack: RankStack


class NativePlan:
    """One collection's native dumps: at most one per Python signature, started early."""

    def __init__(self, dump: Callable[[int, int, float], RankStack | None]) -> None:
        """``dump(rank, pid, timeout)`` returns a ``--native`` stack or None."""
        self._dump = dump
        self._lock = threading.Lock()
        self._claimed: dict[str, int] = {}
        self._done: dict[str, _Resolved] = {}
        self._threads: list[threading.Thread] = []

    def offer(self, stack: RankStack, pid: int, timeout: float) -> None:
        """Start a native dump of this rank if no rank with its Python stack has one."""
        if timeout <= 0.2 or not needs_native(stack):
            return
        key = python_signature(stack)
        with self._lock:
            if key in self._claimed:
                return
            self._claimed[key] = stack.rank
        thread = threading.Thread(
            target=self._run,
            args=(key, stack.rank, pid, timeout),
            daemon=True,
            name=f"nccl-doctor-native-{stack.rank}",
        )
        self._threads.append(thread)
        thread.start()

    def _run(self, key: str, rank: int, pid: int, timeout: float) -> None:
        native = self._dump(rank, pid, timeout)
        if native is None or native.main is None or python_signature(native) != key:
            return  # it moved on meanwhile: its native frames would explain another stack
        with self._lock:
            self._done[key] = _Resolved(rank, native)

    def wait(self, timeout: float) -> None:
        for thread in self._threads:
            thread.join(max(0.0, timeout))

    def resolve(self, stack: RankStack) -> RankStack:
        """``stack`` with native main-thread frames: its own dump, or its twin's."""
        with self._lock:
            found = self._done.get(python_signature(stack))
        if found is None or not needs_native(stack):
            return stack
        if found.rank == stack.rank:
            return found.stack
        main = stack.main
        twin = found.stack.main
        assert main is not None and twin is not None
        threads = tuple(
            ThreadStack(t.thread_id, t.name, twin.frames, t.holds_gil, t.active, t.is_main)
            if t is main
            else t
            for t in stack.threads
        )
        return replace(stack, threads=threads, native_from=found.rank)

    def resolve_sample(self, sample: ProgressSample, stack: RankStack) -> ProgressSample:
        """A sample's state as the native frames of its Python stack tell it."""
        resolved = self.resolve(stack)
        if resolved is stack:
            return sample
        return replace(
            sample, stack_signature=signature(resolved), state=rank_state(resolved).value
        )
