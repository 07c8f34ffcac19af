"""The monitor process: one per rank, forked before any thread of ours, outliving its rank.

It watches the rank from outside the GIL, on its own clock:

* **death** — it holds the read end of a pipe whose only writer is the rank, so
  EOF arrives the instant the rank dies (SIGKILL, SIGTERM, a crash); it marks the
  rank terminated and records a fault so the others restart without it;
* **soft timeout** — progress older than ``soft_timeout`` while the function
  runs: it asks the rank's agent for its stacks (``doctor.jobdir.agent``: dumped under
  the GIL, or by SIGUSR2 when the GIL is held) and records a fault carrying them;
* **hard timeout** — progress older than ``hard_timeout`` (``barrier_timeout``
  while restarting): SIGCONT, SIGTERM, then SIGKILL after
  ``termination_grace_time``;
* **heartbeat** — a timestamp in the store, so a lost host is noticed;
* **the store** — on initial rank 0 without a launcher store, it hosts the
  TCPStore, so losing rank 0's process does not lose the job's rendezvous. It
  then serves until every rank has exited or is dead.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from doctor.jobdir.agent import STACK_SIGNAL, ask_for_stacks, forget_rank
from doctor.jobdir.thread_dump import parse_faulthandler
from doctor.restart.exceptions import StoreAbandoned
from doctor.restart.options import RestartOptions
from doctor.restart.store import RestartStore
from doctor.restart.watchdog import Phase, SharedProgress
from doctor.trust.process_identity import ProcessId

_DELIVERY = "restart/monitor_thread.py"
"""The monitor thread's module: its frame says where a restart's delivery stands."""
STACK_TIMEOUT = 1.0
"""Seconds for the stacks of a soft timeout: the agent's handoff, then the dump."""


@dataclass(frozen=True)
class MonitorSpec:
    """What the forked monitor needs; plain data, fixed before the fork."""

    initial_rank: int
    options: RestartOptions
    registry: Path | None = None
    """The job directory: its agent answers stack requests, and the rank's record and pid
    file go once it is dead. None = no stacks."""
    identity: ProcessId | None = None
    """The rank's process, as its record and pid file name it."""


class MonitorProcess:
    """Forks the monitor; the rank keeps the pipe's write end (closing it = exiting)."""

    def __init__(
        self,
        spec: MonitorSpec,
        progress: SharedProgress,
        connect: Callable[[Callable[[], bool]], RestartStore],
    ) -> None:
        read_fd, self._write_fd = os.pipe()
        target = os.getpid()
        self.pid = os.fork()
        if self.pid == 0:  # the monitor: never returns into the rank's code
            code = 0
            try:
                os.close(self._write_fd)
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                _Monitor(spec, progress, target, read_fd, connect).run()
            except StoreAbandoned:
                pass  # the rank exited before the store came up: nothing to watch or report
            except BaseException:  # noqa: BLE001 - the child must always reach os._exit
                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)
        os.close(read_fd)

    def close(self, wait: float) -> None:
        """The rank is exiting normally: close the pipe and reap the monitor if it ends in time."""
        try:
            os.close(self._write_fd)
        except OSError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if os.waitpid(self.pid, os.WNOHANG) != (0, 0):
                return
            time.sleep(0.01)


def _waits_in_collective(stack: str | None) -> bool:
    """Whether the main thread's innermost frame is in torch.distributed (a victim, not a cause)."""
    main = parse_faulthandler(stack or "", -1).main
    return (
        main is not None and bool(main.frames) and "torch/distributed/" in main.frames[0].filename
    )


def _where(stack: str | None, restarting: bool) -> str:
    """Where the rank stood, for the timeout's line: the main thread's innermost frame and,
    when a restart was under way that the rank did not take, the innermost frame of ours in
    its delivery (the monitor thread: a store wait, an abort)."""
    dump = parse_faulthandler(stack or "", -1)
    said = [("the main thread", dump.main.frames if dump.main else ())]
    if restarting:
        delivery = next(
            (t for t in dump.threads if any(_DELIVERY in f.filename for f in t.frames)), None
        )
        ours = tuple(f for f in delivery.frames if "/doctor/" in f.filename) if delivery else ()
        said.append(("the restart's delivery", ours))
    return "".join(f"; {who} is at {frames[0]}" for who, frames in said if frames)


class _Monitor:
    def __init__(
        self,
        spec: MonitorSpec,
        progress: SharedProgress,
        target: int,
        pipe: int,
        connect: Callable[[Callable[[], bool]], RestartStore],
    ) -> None:
        self.spec = spec
        self.opt = spec.options
        self.progress = progress
        self.target = target
        self.pipe = pipe
        self.pidfd = os.pidfd_open(target)
        if os.getppid() != target:  # the rank died before we pinned it: nothing to watch
            raise StoreAbandoned("the rank exited before its monitor started")
        self.store = connect(lambda: progress.read()[4] == Phase.EXITING)
        self.soft_fired = -1
        self.deferred_at: float | None = None
        self.stack: str | None = None
        self.last_beat = 0.0

    def _say(self, text: str) -> None:
        os.write(2, f"nccl-doctor monitor[{self.spec.initial_rank}]: {text}\n".encode())

    def run(self) -> None:
        killed = False
        while not killed:
            ready, _, _ = select.select([self.pipe], [], [], self.opt.monitor_process_interval)
            if ready and not os.read(self.pipe, 64):
                break  # EOF: the rank is gone
            now = time.monotonic()
            if now - self.last_beat >= self.opt.heartbeat_interval:
                self.store.heartbeat(self.spec.initial_rank)
                self.last_beat = now
            killed = self._check_timeouts(now)
        _, _, _, iteration, phase = self.progress.read()
        if self.spec.registry is not None:  # a killed rank cannot remove its own files
            forget_rank(self.spec.registry, self.spec.initial_rank, self.spec.identity)
        if not killed and phase != Phase.EXITING:
            self._record_death(iteration, "terminated", "the rank's process exited")
        elif not killed:  # the rank said so too, unless its store call failed on the way out
            self.store.mark_exited(self.spec.initial_rank)
        self._serve_until_all_exited()

    def _check_timeouts(self, now: float) -> bool:
        """Record a soft timeout, enforce a hard one; True once the rank was terminated."""
        auto, manual, _, iteration, phase = self.progress.read()
        if phase in (Phase.STARTING, Phase.EXITING):
            return False
        stale = now - min(auto, manual) if manual else now - auto
        soft = phase == Phase.RUNNING and stale > self.opt.soft_timeout
        if soft and self.soft_fired != iteration:
            self._soft_timeout(iteration, stale)
        hard = self.opt.hard_timeout if phase == Phase.RUNNING else self.opt.barrier_timeout
        if stale > hard:
            self._say(f"hard timeout: no progress for {stale:.1f}s; terminating pid {self.target}")
            self._record_death(iteration, "hard_timeout", f"no progress for {stale:.1f}s")
            self._terminate()
            return True
        return False

    def _soft_timeout(self, iteration: int, stale: float) -> None:
        """Record the timeout with the stack; a rank merely waiting in a collective defers
        for as long as the culprit's stacks may take (its GIL held: the signal fallback) and
        a little more, so the rank that stopped first is the one that starts the restart."""
        if self.deferred_at is None:
            self.stack = self._stack()
            if _waits_in_collective(self.stack):
                self.deferred_at = time.monotonic()
                return
        elif (
            time.monotonic() - self.deferred_at
            < STACK_TIMEOUT + 3 * self.opt.monitor_process_interval
        ):
            return
        self.soft_fired, self.deferred_at = iteration, None
        restarting = self.store.fault(iteration) is not None
        where = _where(self.stack, restarting)
        self._say(f"soft timeout: no progress for {stale:.1f}s{where}")
        self.store.record_fault(
            iteration,
            {
                "cause": "soft_timeout",
                "rank": self.spec.initial_rank,
                "time": time.time(),
                "exception": f"no progress for {stale:.1f}s",
                "stack": self.stack,
            },
        )

    def _stack(self) -> str | None:
        if self.spec.registry is None:
            return None
        return ask_for_stacks(
            self.spec.registry,
            self.spec.initial_rank,
            lambda: self._signal(STACK_SIGNAL),
            STACK_TIMEOUT,
        )

    def _record_death(self, iteration: int, cause: str, detail: str) -> None:
        """Dead for good; a fault only if it was a member of the iteration it was in (a death
        during an entry barrier just lets that barrier close without it)."""
        rank = self.spec.initial_rank
        self.store.mark_terminated(rank)
        if rank in (self.store.entry_result(iteration) or ()):
            self.store.record_fault(
                iteration, {"cause": cause, "rank": rank, "time": time.time(), "exception": detail}
            )
        for it in (iteration, iteration + 1):
            self.store.try_close(it)

    def _terminate(self) -> None:
        """SIGCONT + SIGTERM, then SIGKILL once the grace time is over; returns when it is dead."""
        for sig in (signal.SIGCONT, signal.SIGTERM):
            self._signal(sig)
        ready, _, _ = select.select([self.pipe], [], [], self.opt.termination_grace_time)
        while not (ready and not os.read(self.pipe, 64)):
            self._signal(signal.SIGKILL)
            ready, _, _ = select.select([self.pipe], [], [], 1.0)

    def _signal(self, sig: signal.Signals) -> bool:
        """Through the pidfd opened at fork: never a process that reused the rank's pid."""
        try:
            signal.pidfd_send_signal(self.pidfd, sig)
            return True
        except OSError:
            return False

    def _serve_until_all_exited(self) -> None:
        """Only the store host waits: the others' store clients still need it."""
        if not getattr(self.store, "hosting", False):
            return
        everyone = set(range(self.store.initial_world_size))
        since = time.time()
        deadline = time.monotonic() + self.opt.completion_timeout + self.opt.barrier_timeout
        while time.monotonic() < deadline:
            gone = self.store.exited() | self.store.terminated()
            # a rank whose monitor stopped beating has exited too, even without saying so
            stale = self.store.stale(everyone - gone, self.opt.heartbeat_timeout, since)
            if everyone <= gone | stale:
                return
            time.sleep(self.opt.monitor_process_interval)
        print("nccl-doctor monitor: store host gave up waiting for ranks to exit", file=sys.stderr)
