"""Native stacks where the Python stack cannot show the wait, within the time budget.

Under DDP a waiting rank's Python stack ends in the autograd engine
(``_engine_run_backward``); the wait itself (``c10d::Reducer``, a process
group's ``Work::wait``) is only in native frames. ``py-spy --native`` shows
them but costs about a second per process (it reads libtorch's symbols), so:

* a rank needs native frames when its main thread is idle in code that is
  not a known collective (``needs_native``);
* a rank whose Python samples show such a stack in at least half of the
  window gets a native dump, on its own thread, when the sampling window
  ends: a ``--native`` dump pauses the process for most of its second
  (measured: 0.7 s), which inside the window would stall a healthy job and
  look like a hang to the progress probes; only a rank already frozen at one
  idle stack for ``FROZEN_SAMPLES`` samples is dumped at once (time to
  verdict on a hung job);
* a main thread that py-spy sees *active* at one Python stack for
  ``FROZEN_SAMPLES`` samples is dumped too (at once, never at the window's end):
  a C call that spins keeps it there, and the commonest is CUDA's own wait,
  ``.item()`` or a copy to the host spinning in ``cudaStreamSynchronize`` (seen on
  the H200: py-spy reports that thread active at the Python line that called it);
* only one rank per Python signature is dumped: ranks whose Python stacks
  agree frame for frame and are idle wait in the same place, so the others
  are given that rank's native main-thread frames, marked ``native_from``
  (never across ranks that differ in whether another thread holds the GIL);
* a stopped process is never dumped natively (it cannot be suspended), and
  never inherits another rank's frames: its own state is the evidence.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace

from doctor.evidence import Evidence, ProgressSample, RankStack, ThreadStack
from doctor.verdict.stacks import (
    RankState,
    gil_holder,
    is_native,
    python_signature,
    rank_state,
    signature,
)

NEEDS_NATIVE = frozenset({RankState.USER_CODE, RankState.GIL_WAIT, RankState.IDLE})
RETRY_MIN_S = 0.5
MISSED = "the native dump did not finish in time: its main thread is read from Python frames only"
"""Said (as a skipped probe) of a rank whose booked native dump gave no stack: on a loaded
host a verdict read from Python frames alone may miss a wait in C++."""
SLOW_NATIVE = 4.0
"""How much longer a ``--once`` look waits for native dumps when one missed its budget: on
2 cores shared by 20 runnable processes a dump took 3-8 s instead of 1 (the bug zoo)."""
"""Time a native dump needs at least; no attempt starts with less left."""
FROZEN_SAMPLES = 3
"""Consecutive samples at one idle Python stack after which a native dump starts at once."""


def needs_native(stack: RankStack, *, spinning: bool = False) -> bool:
    """A main thread blocked in C under code that is not a known collective: the autograd
    engine, a backward hook, ``work.wait()``, a C call holding up the GIL; with
    ``spinning``, also one that py-spy sees active there (a C call that spins)."""
    main = stack.main
    if main is None or not main.frames or (main.active and not spinning):
        return False
    return rank_state(stack) in NEEDS_NATIVE and not any(is_native(f) for f in main.frames)


def native_key(stack: RankStack) -> str:
    """Which ranks share one native dump: equal Python stacks, and equal in whether another
    thread holds the GIL (a rank whose helper keeps the GIL is not where its twin is: it
    waits to re-take the GIL, its twin in a collective)."""
    return python_signature(stack) + ("|gil held elsewhere" if gil_holder(stack) else "")


def native_missed(evidence: Evidence) -> bool:
    """Whether a rank's booked native dump gave no stack in this collection."""
    return any(s.reason == MISSED for s in evidence.skipped)


@dataclass(frozen=True)
class _Resolved:
    rank: int
    stack: RankStack


class NativePlan:
    """One collection's native dumps: at most one per Python signature, started early."""

    def __init__(
        self, dump: Callable[[int, int, float], RankStack | None], not_before: float = 0.0
    ) -> None:
        """``dump(rank, pid, timeout)`` returns a ``--native`` stack or None; no dump starts
        before ``not_before`` (``time.monotonic()``)."""
        self._dump = dump
        self._not_before = not_before
        self._lock = threading.Lock()
        self._claimed: dict[str, int] = {}
        self._done: dict[str, _Resolved] = {}
        self._missed: dict[str, int] = {}
        self._moved: set[str] = set()
        self._threads: list[threading.Thread] = []
        self._running: set[int] = set()

    def offer(
        self,
        stack: RankStack,
        pid: int,
        deadline: float,
        now: bool = False,
        spinning: bool = False,
    ) -> None:
        """Book a native dump of this rank, to end by ``deadline``, if no rank with its
        Python stack has one; ``now`` starts it at once instead of at the window's end;
        ``spinning`` admits a main thread that is active (``offer_if_frozen``)."""
        start = time.monotonic() if now else max(self._not_before, time.monotonic())
        if not needs_native(stack, spinning=spinning):
            return
        key = native_key(stack)
        with self._lock:
            if deadline - start <= 0.2:  # the samples took the time (a loaded host)
                self._missed.setdefault(key, stack.rank)
                return
            if key in self._claimed:
                return
            self._claimed[key] = stack.rank
        thread = threading.Thread(
            target=self._run,
            args=(key, stack.rank, pid, start, deadline),
            daemon=True,
            name=f"nccl-doctor-native-{stack.rank}",
        )
        self._threads.append(thread)
        thread.start()

    def offer_if_frozen(self, stacks: list[RankStack], pid: int, deadline: float) -> None:
        """Start at once when the last ``FROZEN_SAMPLES`` samples show one idle Python stack
        that needs native frames: a rank that sits that long is most likely waiting, and
        pausing it costs a hung job nothing."""
        last = stacks[-FROZEN_SAMPLES:]
        if len(last) == FROZEN_SAMPLES and all(needs_native(s, spinning=True) for s in last):
            if len({native_key(s) for s in last}) == 1:
                self.offer(last[-1], pid, deadline, now=True, spinning=True)

    def offer_most_seen(self, stacks: list[RankStack], pid: int, deadline: float) -> None:
        """Offer the rank's most frequent Python stack that needs native frames, if it was
        seen in at least half of the samples: a rank that moves through the window (a
        healthy one) is not paused for a native dump it does not need."""
        wanting = [s for s in stacks if needs_native(s)]
        if not wanting:
            return
        counts = Counter(native_key(s) for s in wanting)
        key, seen = counts.most_common(1)[0]
        if 2 * seen >= len(stacks):
            self.offer(next(s for s in wanting if native_key(s) == key), pid, deadline)

    def busy(self, pid: int) -> bool:
        """Whether a native dump of ``pid`` runs now: a second py-spy must not attach to it
        (two tracers stall each other until the deadline); read it without pausing."""
        with self._lock:
            return pid in self._running

    def _run(self, key: str, rank: int, pid: int, start: float, deadline: float) -> None:
        """Dump until a dump catches the rank at the Python stack it was booked for (a
        rank of a moving job is there only part of the time), while time is left."""
        time.sleep(max(0.0, start - time.monotonic()))
        while deadline - time.monotonic() > RETRY_MIN_S:
            with self._lock:
                self._running.add(pid)
            try:
                native = self._dump(rank, pid, deadline - time.monotonic())
            finally:
                with self._lock:
                    self._running.discard(pid)
            if native is None or native.main is None:
                return
            if native_key(native) == key:
                with self._lock:
                    self._done[key] = _Resolved(rank, native)
                return
            with self._lock:
                self._moved.add(key)
            # it moved on meanwhile: these frames would explain another stack; try again

    def missed(self) -> list[int]:
        """The ranks whose native dump gave no stack by now (py-spy failed, timed out, or
        still runs: a dump that ends at the deadline ends after the collection) or found
        no time left to start; not a rank caught moving (a healthy one)."""
        with self._lock:
            booked = {**self._claimed, **self._missed}
            late = set(booked) - set(self._done) - self._moved
            return sorted({booked[key] for key in late})

    def wait(self, timeout: float) -> None:
        for thread in self._threads:
            thread.join(max(0.0, timeout))

    def resolve(self, stack: RankStack) -> RankStack:
        """``stack`` with native main-thread frames: its own dump, or its twin's."""
        with self._lock:
            found = self._done.get(native_key(stack))
        if found is None or not needs_native(stack, spinning=True):
            return stack  # a dump was booked for this key only if the rule admitted it
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
