"""``CallWrapper``: one invocation of a wrapped function, and its restart loop.

One iteration, on the main thread: entry barrier -> reassign ranks -> hooks ->
function -> completion barrier. A fault anywhere (an exception here, a fault
record from another rank, the monitor process) ends the iteration through
``RestartRequested``; the rank then destroys its groups, runs ``finalize`` and
``health_check`` and meets the others at the next entry barrier.
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import os
import re
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from doctor.jobdir.agent import Agent, running_agent
from doctor.restart.abort import (
    clear_pending,
    close_held,
    destroy_process_groups,
    install_wake_handler,
    restore_wake_handler,
    socket_ids,
)
from doctor.restart.assignment import Assignment
from doctor.restart.events import report_in_background
from doctor.restart.exceptions import (
    KeyMismatch,
    RestartError,
    RestartLimitError,
    RestartRequested,
    StoppedByDoctor,
    StoreTampered,
)
from doctor.restart.handshake import Handshake
from doctor.restart.health import gpu_health_check
from doctor.restart.hooks import HookState, WrapperSettings
from doctor.restart.monitor_process import MonitorProcess, MonitorSpec
from doctor.restart.monitor_thread import Interruptible, IterationContext, MonitorThread, Ticker
from doctor.restart.session import (
    Session,
    connect_store,
    job_directory,
    join,
    meeting_client,
    rendezvous_job,
)
from doctor.restart.spare import SpareConnection, open_tracked
from doctor.restart.state import publish
from doctor.restart.store import RestartStore
from doctor.restart.watchdog import Phase, ProgressWatchdog, SharedProgress, progress_path
from doctor.trust.process_identity import this_process

PEER_GRACE = 0.3
_PEER_LOST = re.compile(
    r"Connection (closed|reset) by peer|Broken pipe|NCCL communicator was "
    r"aborted|remote process exited",
    re.IGNORECASE,
)
T = TypeVar("T")
_current: CallWrapper | None = None


def current_call() -> CallWrapper | None:
    """The ``CallWrapper`` of the function running now (for scripts run by ``launch --wrap``)."""
    return _current


class CallWrapper:
    """One invocation of a wrapped function: its store, monitor process and iterations."""

    def __init__(self, wrapper: WrapperSettings, env: dict[str, str] | None = None) -> None:
        env = dict(os.environ if env is None else env)
        self.wrapper, self.opt = wrapper, wrapper.options
        self.initial_rank = int(env.get("RANK", "0"))
        self.initial_world_size = int(env.get("WORLD_SIZE", "1"))
        self.job: str = (
            env.get("NCCL_DOCTOR_JOB")
            or env.get("TORCHELASTIC_RUN_ID")
            or env.get("SLURM_JOB_ID")
            or rendezvous_job(env)
        )
        self.directory = wrapper.directory or job_directory(self.job, env)
        fr_on = (
            int(env.get("TORCH_FR_BUFFER_SIZE") or env.get("TORCH_NCCL_TRACE_BUFFER_SIZE") or 0) > 0
        )
        self.flight_recorder = fr_on if wrapper.flight_recorder is None else wrapper.flight_recorder
        try:
            self.session, run, record = join(
                Session.from_env(
                    env, wrapper.store_host, wrapper.store_port, self.initial_rank, b""
                ),
                self.directory,
                env,
                self.initial_rank,
                self.opt,
            )
        except KeyMismatch as exc:
            print(f"nccl-doctor wrapper[{self.initial_rank}]: {exc}", file=sys.stderr, flush=True)
            raise
        self.progress = SharedProgress(progress_path(self.directory, self.initial_rank))
        self.identity = this_process()
        spec = MonitorSpec(self.initial_rank, self.opt, self.directory, self.identity)
        self.monitor = MonitorProcess(
            spec, self.progress, lambda gone: self._connect(host=self.session.hosting, abandon=gone)
        )
        existing = running_agent()
        self.agent: Agent | None = existing
        self._own_agent = existing is None
        try:
            if self.agent is None:
                self.agent = Agent(self.directory, self.initial_rank)
            if self.session.listener is not None:
                os.close(self.session.listener)  # the monitor process serves on it now
            self.rs = self._connect()
            meeting = self.rs.raw if self.session.rendezvous is None else None
            self.hello = Handshake(
                meeting or meeting_client(self.session, self.opt),
                self.session.attempt,
                self.initial_rank,
            )
            self.run_record = record or self.hello.open_run(self.session.key, run)
            self.watch = self._connect()
        except BaseException:  # no store: leave nothing behind
            self.progress.enter(0, Phase.EXITING)
            self.monitor.close(wait=0.2)
            self._release()
            raise
        self.watchdog = ProgressWatchdog(self.progress, self.opt.progress_watchdog_interval)
        self.watchdog.start()
        self.shared = Interruptible(threading.get_ident())
        self._previous_handler = install_wake_handler(self._on_wake)
        self.shared.by_signal = self._previous_handler is not None
        self.iteration, self.rank, self.world_size = 0, self.initial_rank, self.initial_world_size
        self.active = True
        self.store = self.rs.pg_store(0)
        self.spare = SpareConnection(lambda: self._connect().raw, self.session.port)
        """The store for this iteration's ``init_process_group`` (a fresh prefix each time)."""
        self.last_fault: dict[str, Any] | None = None
        self.pg_findings: list[str] = []
        self.pg_findings_checked = -1
        self._carry: dict[str, float] = {}
        self._ctx: IterationContext | None = None
        self.ticker = Ticker(self.rs, self.opt, lambda: self._ctx, lambda: publish(self, self._ctx))
        self.ticker.start()
        gc.freeze()  # what exists now outlives every iteration: a restart's collect skips it

    def _connect(
        self, host: bool = False, abandon: Callable[[], bool] = lambda: False
    ) -> RestartStore:
        return connect_store(self.session, self.initial_world_size, self.opt, host, abandon)

    # the public surface of the function's argument ------------------------------------
    @property
    def state(self) -> HookState:
        """What the hooks see of this rank now."""
        return HookState(
            self.iteration,
            self.rank,
            self.world_size,
            self.initial_rank,
            self.initial_world_size,
            self.active,
            self.last_fault,
        )

    def ping(self) -> None:
        """Report progress; from the first ping of an iteration, missing pings are a hang."""
        self.progress.ping()

    @contextlib.contextmanager
    def atomic(self) -> Iterator[None]:
        """A section that a restart never interrupts (it waits until the section ends)."""
        while not self.shared.lock.acquire(timeout=0.01):
            pass
        self.progress.open_atomic(+1)
        try:
            yield
        finally:
            self.progress.open_atomic(-1)
            self.shared.lock.release()

    # lifecycle ------------------------------------------------------------------------
    def __enter__(self) -> CallWrapper:
        global _current
        _current = self
        self._hook = sys.unraisablehook
        sys.unraisablehook = self._unraisable
        return self

    def __exit__(self, *exc: object) -> None:
        global _current
        _current = None
        sys.unraisablehook = self._hook
        restore_wake_handler(self._previous_handler)
        self.progress.enter(self.iteration, Phase.EXITING)
        gc.unfreeze()
        self.ticker.close()
        with contextlib.suppress(Exception):
            self.rs.mark_exited(self.initial_rank)  # lets the store host's monitor stop
        with contextlib.suppress(Exception):
            publish(self, None)  # the registry must not show a finished rank as running
        self.watchdog.close()
        self.spare.close(self.opt.barrier_timeout)
        self.monitor.close(wait=0.2)
        close_held(self.shared.held_sockets)
        self._release()

    def _release(self) -> None:
        """Close the agent this call started."""
        if self._own_agent and self.agent is not None:
            self.agent.close()

    def _on_wake(self) -> None:
        """The wake signal's handler, on the main thread: raise the pending restart."""
        if self.shared.pending and self.shared.armed and not self.shared.delivered.is_set():
            self.shared.pending = False
            raise RestartRequested

    def _unraisable(self, args: Any) -> None:
        """An exception lost in a callback is re-raised by the monitor thread; keep it quiet."""
        if not issubclass(args.exc_type, RestartRequested):
            self._hook(args)

    # the restart loop -----------------------------------------------------------------
    def run(self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T | None:
        kwargs = _with_call(fn, kwargs, self)
        iteration = 0
        while True:
            members = self._enter(iteration)
            close_held(self.shared.held_sockets)  # every member has released its own
            if self.opt.max_iterations is not None and iteration >= self.opt.max_iterations:
                raise RestartLimitError(
                    f"rank {self.initial_rank}: stopping after {iteration} iterations "
                    f"(max_iterations={self.opt.max_iterations}); last fault: "
                    f"{(self.last_fault or {}).get('exception')}"
                )
            mine = self.wrapper.rank_assignment.assign(members, self.initial_world_size)
            self._assign(iteration, mine[self.initial_rank])
            done, value = self._iterate(fn, args, kwargs, set(members))
            if done:
                return value
            fault = self.last_fault or {}
            if fault.get("cause") == "refused":
                raise RestartError(
                    f"rank {self.initial_rank}: refused to go on: {fault['exception']}"
                )
            self._obey_watcher()
            iteration += 1

    def _obey_watcher(self) -> None:
        """A restart the job's watcher asked for may stop the job or exclude this rank."""
        fault = self.last_fault or {}
        if fault.get("cause") != "watch":
            return
        action, line = fault.get("action"), str(fault.get("line") or fault.get("exception"))
        if action == "stop":
            raise StoppedByDoctor(line, int(fault.get("exit_code") or 1))
        if action == "exclude" and self.initial_rank in (fault.get("ranks") or ()):
            self.rs.mark_terminated(self.initial_rank)  # the watcher did too; idempotent
            raise StoppedByDoctor(line, 0)

    def _assign(self, iteration: int, place: Assignment) -> None:
        if place.world_size == 0:
            raise RestartError(f"rank {self.initial_rank}: too few live ranks to go on")
        self.iteration, self.active = iteration, place.rank is not None
        self.rank = place.rank if place.rank is not None else -1
        self.world_size = place.world_size
        if self.active:
            os.environ["RANK"], os.environ["WORLD_SIZE"] = str(self.rank), str(self.world_size)

    def _enter(self, iteration: int) -> list[int]:
        """The entry barrier: returns the frozen membership once every live rank reported."""
        self.progress.enter(iteration, Phase.RESTARTING)
        self.rs.arrive(iteration, self.initial_rank)
        try:
            members = self.rs.wait_entry(iteration, self.opt, self._guard)
            self._refused_by_peer(iteration)  # the barrier may close before the first guard
        except RestartError as exc:  # a key mismatch or a tampered store: said once, here
            print(f"nccl-doctor wrapper[{self.initial_rank}]: {exc}", file=sys.stderr, flush=True)
            if isinstance(exc, StoreTampered):
                self._leave_refusal(iteration, str(exc))
            raise
        if members is None:
            raise RestartError(
                f"rank {self.initial_rank}: entry barrier of iteration "
                f"{iteration} timed out after {self.opt.barrier_timeout:g}s"
            )
        if self.initial_rank not in members:
            raise RestartError(f"rank {self.initial_rank} was declared dead by its peers")
        self._carry["barrier"] = time.time()
        return members

    def _guard(self, iteration: int, missing: set[int]) -> None:
        """While waiting at an entry barrier: a rank that said hello with another key stops
        the job at once; so does a barrier or run key that another client deleted."""
        if iteration == 0:
            self.hello.check_peers(self.session.key, missing)
        self.rs.check_intact(iteration, self.initial_rank)
        self.hello.check_run(self.run_record)
        self._refused_by_peer(iteration)

    def _leave_refusal(self, iteration: int, text: str) -> None:
        """Record why this rank stops at the barrier as the iteration's ``refused`` fault: a
        rank that arrives after the others left (its collective released late) would
        otherwise find them stale, close the barrier over them and go on as a world of one."""
        with contextlib.suppress(Exception):  # the store may be gone: said on stderr already
            self.rs.record_fault(iteration, self._own_fault("refused", text))

    def _refused_by_peer(self, iteration: int) -> None:
        """Stop with the sentence of a peer that refused to go on from this barrier."""
        for fault in self.rs.all_faults(iteration):
            if fault["cause"] == "refused" and fault["rank"] != self.initial_rank:
                raise RestartError(
                    f"rank {self.initial_rank}: refused to go on: rank {fault['rank']} "
                    f"stopped: {fault['exception']}"
                )

    def _iterate(
        self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any], members: set[int]
    ) -> tuple[bool, T | None]:
        # this iteration's own connection is shut by an abort (what unblocks a rendezvous
        # stuck in store.get inside init_process_group), like every socket opened since
        connection, pg_sockets = self.spare.take() or open_tracked(
            lambda: self._connect().raw, self.session.port
        )
        self.store = self.rs.pg_store(self.iteration, connection)
        ctx = IterationContext(
            self.iteration, self.initial_rank, members, socket_ids() - pg_sockets, self._fr_file()
        )
        self.spare.prepare(ctx, self.shared)
        self._ctx = ctx
        self.shared.delivered.clear()
        self.shared.armed = True
        self.progress.enter(self.iteration, Phase.RUNNING)
        monitor = MonitorThread(ctx, self.watch, self.rs, self.shared)
        monitor.start()
        try:
            try:
                self._reentered(members)
                if self.wrapper.initialize is not None:
                    self.wrapper.initialize(self.state)
                value = fn(*args, **kwargs) if self.active else None
                self.progress.enter(self.iteration, Phase.RUNNING)  # no pings while waiting
                self._complete(members)
                self._disarm()
                return True, value
            except RestartRequested:
                raise
            except StoreTampered as exc:  # every rank stops with the sentence, none waits
                self._refuse(ctx, exc)
                self._await_restart()
            except (SystemExit, KeyboardInterrupt) as exc:
                self._leave(ctx, "exit", exc, monitor)
                raise
            except BaseException as exc:  # noqa: BLE001 - every fault of the function restarts
                self._fault(ctx, exc)
                self._await_restart()
        except RestartRequested:
            self._settle(monitor, ctx)
            return False, None
        finally:
            monitor.close()
        raise AssertionError("unreachable")  # pragma: no cover

    def _reentered(self, members: set[int]) -> None:
        if self.iteration == 0:
            return
        self._carry["reentry"] = time.time()
        self.rs.put_json(f"phases/{self.initial_rank}", self.iteration, self._carry)
        self._carry = {}
        if self.rank == 0:
            report_in_background(
                self.rs,
                self.job,
                self.directory,
                self.iteration,
                sorted(members),
                self.opt.barrier_timeout,
            )

    def _complete(self, members: set[int]) -> None:
        self.rs.mark_done(self.iteration, self.initial_rank)
        start = time.monotonic()
        while not self.rs.complete(self.iteration, members, self.initial_rank):
            self._nap(self.opt.monitor_thread_interval)
            if time.monotonic() - start > self.opt.completion_timeout:
                raise RestartError(
                    f"completion barrier timed out after {self.opt.completion_timeout:g}s"
                )

    def _fault(self, ctx: IterationContext, exc: BaseException) -> None:
        """Record the function's exception, unless it is the echo of a restart under way
        (a collective failing because a peer aborted)."""
        text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        grace = time.monotonic() + (PEER_GRACE if _PEER_LOST.search(text) else 0.0)
        try:
            while ctx.fault is None and self.rs.fault(ctx.iteration) is None:
                if time.monotonic() >= grace:
                    break
                self._nap(0.01)  # a peer's death: let its monitor process name the culprit
            else:
                return
        except SystemError:
            self._restart_landed()
            return  # the restart under way: the monitor thread raises it again
        self._record_fault(ctx, "exception", text, f"iteration {ctx.iteration} raised {text}")

    def _refuse(self, ctx: IterationContext, exc: StoreTampered) -> None:
        """A key this rank waits on was deleted: said here, and recorded as the iteration's
        fault with cause ``refused``, so every rank stops with the sentence (``run``)."""
        self._record_fault(ctx, "refused", str(exc), str(exc))

    def _record_fault(self, ctx: IterationContext, cause: str, text: str, said: str) -> None:
        """This rank's own fault: said on stderr, kept as ``last_fault``, and recorded in
        the store, which wakes every rank's monitor thread."""
        print(f"nccl-doctor wrapper[{self.initial_rank}]: {said}", file=sys.stderr, flush=True)
        self.last_fault = self._own_fault(cause, text)
        try:
            self.rs.record_fault(ctx.iteration, self.last_fault)
        except SystemError:  # the store has it: this rank's monitor saw it and raised
            self._restart_landed()  # before the call returned (a stress run lost a rank)

    def _own_fault(self, cause: str, text: str) -> dict[str, Any]:
        """A fault record of this rank, as the store keeps it."""
        return {"cause": cause, "rank": self.initial_rank, "time": time.time(), "exception": text}

    def _await_restart(self) -> None:
        """Wait, interruptible, for the monitor thread's ``RestartRequested``."""
        deadline = time.monotonic() + self.opt.barrier_timeout
        while time.monotonic() < deadline:
            self._nap(0.005)
        raise RestartError(f"rank {self.initial_rank}: no restart came after the fault")

    def _nap(self, seconds: float) -> None:
        """Sleep where the restart may land. CPython 3.11 sometimes turns an asynchronous
        exception that lands in ``time.sleep`` into "SystemError: error return without
        exception set"; the monitor thread re-raises until the main thread confirms, so
        that error is dropped while a restart is under way."""
        try:
            time.sleep(seconds)
        except SystemError:
            self._restart_landed()

    def _restart_landed(self) -> None:
        """Re-raise a ``SystemError`` unless a restart is under way. Its wake handler may run
        inside a C call that checks signals (``time.sleep``; a store call, when the signal
        arrived just before the call held it back), and CPython 3.11 turns the raise there
        into "error return without exception set". Seen in the srun benchmark: a rank died of
        it in the fault's grace loop, and its peers waited at the barrier for it."""
        if self._ctx is None or self._ctx.fault is None:
            raise  # noqa: PLE0704 - called from an except clause: the SystemError

    def _leave(
        self,
        ctx: IterationContext,
        cause: str,
        exc: BaseException,
        monitor: MonitorThread | None = None,
    ) -> None:
        """This rank stops for good (sys.exit, KeyboardInterrupt, failed health check).

        Its monitor thread stands down and the rank is disarmed before the fault is
        recorded: recorded first, the fault can wake this rank's own monitor thread, which
        then holds the atomic lock raising a restart nobody will take while ``_disarm``
        waits for that lock (a deadlock seen on a loaded 2-core machine)."""
        if monitor is not None:
            monitor.stop.set()
        while True:
            try:
                self._disarm()
                clear_pending(self.shared.main_thread)
                break
            except RestartRequested:
                continue
        self.rs.mark_terminated(self.initial_rank)
        self.rs.record_fault(
            ctx.iteration,
            {
                "cause": cause,
                "rank": self.initial_rank,
                "time": time.time(),
                "exception": repr(exc),
            },
        )

    def _disarm(self) -> None:
        while not self.shared.lock.acquire(timeout=0.01):
            pass
        try:
            self.shared.armed = False
        finally:
            self.shared.lock.release()

    def _settle(self, monitor: MonitorThread, ctx: IterationContext) -> None:
        """The exception arrived: stop the monitor, drop a duplicate, clean up, run hooks."""
        self._carry.update(ctx.phases, delivered=time.time())
        self.shared.delivered.set()
        while True:
            try:
                monitor.close()
                clear_pending(self.shared.main_thread)
                break
            except RestartRequested:
                continue
        self.shared.armed = False
        self.last_fault = ctx.fault or self.last_fault
        self.progress.enter(self.iteration, Phase.RESTARTING)
        destroy_process_groups()
        gc.collect()
        hooks = {
            "finalize": self.wrapper.finalize,
            "health_check": self.wrapper.health_check,
            "gpu_health_check": gpu_health_check,
        }
        for name, hook in hooks.items():
            try:
                if hook is not None:
                    hook(self.state)
            except Exception as exc:
                self._leave(ctx, name, exc)
                raise RestartError(
                    f"rank {self.initial_rank} leaves the job: {name} failed: {exc!r}"
                ) from exc

    def _fr_file(self) -> Path | None:
        if not self.flight_recorder:
            return None
        return self.directory / "fr" / f"restart-{self.iteration}" / f"rank_{self.initial_rank}"


def _with_call(fn: Callable[..., Any], kwargs: dict[str, Any], call: CallWrapper) -> dict[str, Any]:
    """Pass the CallWrapper to a parameter named ``call_wrapper`` or annotated ``CallWrapper``."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return kwargs
    for name, param in params.items():
        annotation = param.annotation
        if name == "call_wrapper" or annotation is CallWrapper or annotation == "CallWrapper":
            return {**kwargs, name: call}
    return kwargs
