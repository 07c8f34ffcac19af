"""The monitor thread: one per iteration, it turns a fault anywhere into a restart here.

It blocks in a store wait on the iteration's fault key (a fault on any rank
wakes it at once; no polling, so no cost while healthy), and on a fault: takes the atomic
lock (so an ``atomic()`` section is never interrupted), dumps Flight Recorder
when asked, closes the iteration's connections and aborts the process groups,
then raises ``RestartRequested`` into the main thread until the main thread
says it has caught it (re-raising covers an exception swallowed by user code or
lost in a callback).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doctor.jobdir.agent import dump_flight_recorder
from doctor.restart.abort import (
    abort_process_groups,
    clear_pending,
    close_connections,
    raise_in_thread,
)
from doctor.restart.exceptions import RestartRequested, StoreTampered
from doctor.restart.options import RestartOptions
from doctor.restart.store import RestartStore

RERAISE_INTERVAL = 0.05
SIGNAL_AFTER = 0.2
"""Seconds of asynchronous exceptions before the wake signal: a main thread that has not
taken the exception by then sits in a system call (a sleep) that only a signal ends."""


@dataclass
class Interruptible:
    """What the main thread and its monitor thread share about delivering the exception."""

    main_thread: int
    by_signal: bool = False
    """Deliver through the wake signal's handler (main thread) instead of SetAsyncExc."""
    pending: bool = False
    """Set by the monitor before each signal; the handler raises only when it is set."""
    lock: threading.RLock = field(default_factory=threading.RLock)
    """Held by ``atomic()`` sections and by the monitor while it aborts and raises."""
    armed: bool = False
    """True while the main thread may be interrupted (in the function, or waiting on peers)."""
    delivered: threading.Event = field(default_factory=threading.Event)
    held_sockets: list[int] = field(default_factory=list)
    """Duplicates of the sockets the last release shut, closed at the next entry barrier."""


@dataclass
class IterationContext:
    """One iteration as its monitor thread sees it."""

    iteration: int
    initial_rank: int
    participants: set[int]
    """The iteration's frozen membership (initial ranks), spares included."""
    socket_baseline: set[int]
    """Inodes of the sockets open before the iteration (and of its spare): an abort
    leaves them alone."""
    fr_file: Path | None
    """Where to dump Flight Recorder before aborting; None = off."""
    phases: dict[str, float] = field(default_factory=dict)
    """Wall-clock times of ``detect`` and ``abort`` for the restart event."""
    fault: dict[str, Any] | None = None


class MonitorThread(threading.Thread):
    """Blocks on its wake key over its own connection ``watch``; ``close()`` wakes it."""

    def __init__(
        self,
        ctx: IterationContext,
        watch: RestartStore,
        control: RestartStore,
        shared: Interruptible,
    ) -> None:
        super().__init__(name=f"nccl-doctor-monitor-{ctx.initial_rank}", daemon=True)
        self.ctx = ctx
        self.watch = watch
        self.control = control
        self.shared = shared
        self.stop = threading.Event()

    def run(self) -> None:
        ctx = self.ctx
        try:
            self.watch.wait_wake(ctx.iteration, ctx.initial_rank)
            fault = self.watch.fault(ctx.iteration)
        except StoreTampered as exc:  # reported, and the rank refuses to go on
            print(f"nccl-doctor wrapper[{ctx.initial_rank}]: {exc}", file=sys.stderr, flush=True)
            fault = {"cause": "refused", "rank": None, "time": time.time(), "exception": str(exc)}
        except Exception as exc:  # the store is gone: the monitor process reports the rest
            print(f"nccl-doctor wrapper: fault watch failed: {exc}", file=sys.stderr)
            return
        if fault is None or self.stop.is_set():
            return
        if fault.get("rank") is not None and fault["rank"] not in ctx.participants:
            return  # a rank that already left; the entry barrier accounted for it
        ctx.fault = fault
        self._restart()

    def close(self) -> None:
        self.stop.set()
        if self.is_alive():
            self.control.wake(self.ctx.iteration, self.ctx.initial_rank)
        self.join(timeout=5)

    def _restart(self) -> None:
        ctx, shared = self.ctx, self.shared
        ctx.phases["detect"] = time.time()
        with shared.lock:
            try:
                if ctx.fr_file is not None:
                    dump_flight_recorder(ctx.fr_file)
                shared.held_sockets.extend(close_connections(ctx.socket_baseline))
                abort_process_groups()
            except Exception as exc:  # noqa: BLE001 - the delivery below must happen anyway
                print(
                    f"nccl-doctor wrapper[{ctx.initial_rank}]: releasing the process groups "
                    f"failed ({exc!r}); the restart goes on",
                    file=sys.stderr,
                    flush=True,
                )
            ctx.phases["abort"] = time.time()
            start = time.monotonic()
            while shared.armed and not shared.delivered.is_set() and not self.stop.is_set():
                by_signal = shared.by_signal and time.monotonic() - start > SIGNAL_AFTER
                if by_signal:
                    clear_pending(shared.main_thread)
                    shared.pending = True
                raise_in_thread(shared.main_thread, RestartRequested, by_signal)
                shared.delivered.wait(RERAISE_INTERVAL)


class Ticker(threading.Thread):
    """Every ``interval``: declare ranks with a stale heartbeat dead, publish state."""

    def __init__(
        self,
        store: RestartStore,
        options: RestartOptions,
        context: Callable[[], IterationContext | None],
        publish: Callable[[], None],
    ) -> None:
        super().__init__(name="nccl-doctor-ticker", daemon=True)
        self.store, self.opt = store, options
        self.context, self.publish = context, publish
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.opt.heartbeat_interval):
            ctx = self.context()
            try:
                if ctx is not None and ctx.fault is None:
                    self._check_siblings(ctx)
                self.publish()
            except Exception as exc:  # the store went away: the job is ending
                print(f"nccl-doctor wrapper: state update failed: {exc}", file=sys.stderr)
                return

    def _check_siblings(self, ctx: IterationContext) -> None:
        others = ctx.participants - {ctx.initial_rank} - self.store.terminated()
        for rank in sorted(self.store.stale(others, self.opt.heartbeat_timeout)):
            self.store.mark_terminated(rank)
            self.store.record_fault(
                ctx.iteration,
                {
                    "cause": "heartbeat",
                    "rank": rank,
                    "time": time.time(),
                    "exception": f"no heartbeat for {self.opt.heartbeat_timeout:g}s",
                },
            )

    def close(self) -> None:
        self.stop.set()
        self.join(timeout=self.opt.heartbeat_interval + 5)
