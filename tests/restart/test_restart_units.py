"""The wrapper without a job: rank assignment, options, restart event, timeout rules, leaving."""

from __future__ import annotations

import faulthandler
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from doctor.jobconfig.config import RestartConfig
from doctor.jobdir.agent import MAIN_THREAD_LINE
from doctor.model import Severity
from doctor.restart import RankAssignment
from doctor.restart.abort import (
    close_connections,
    close_held,
    open_sockets,
    shutdown_sockets,
    socket_ids,
)
from doctor.restart.assignment import Assignment
from doctor.restart.call import CallWrapper
from doctor.restart.events import build_event
from doctor.restart.exceptions import RestartError, RestartRequested, StoreAbandoned
from doctor.restart.monitor_process import MonitorProcess, MonitorSpec, _where
from doctor.restart.monitor_thread import Interruptible, IterationContext, MonitorThread
from doctor.restart.options import RestartOptions
from doctor.restart.session import Session, await_listener, connect_store
from doctor.restart.spare import SpareConnection
from doctor.restart.timeouts import judge
from doctor.restart.watchdog import Phase, SharedProgress, read_progress_file
from doctor.trust.subproc import free_port


@pytest.mark.parametrize(
    ("policy", "live", "expected"),
    [
        (RankAssignment(), [0, 1, 2, 3], {0: (0, 4), 1: (1, 4), 2: (2, 4), 3: (3, 4)}),
        (RankAssignment(), [0, 2, 3], {0: (0, 3), 2: (1, 3), 3: (2, 3)}),
        (RankAssignment(spares=1), [0, 1, 2, 3], {0: (0, 3), 1: (1, 3), 2: (2, 3), 3: (None, 3)}),
        (RankAssignment(spares=1), [0, 2, 3], {0: (0, 3), 2: (1, 3), 3: (2, 3)}),
        (RankAssignment(spares=1), [0, 3], {0: (0, 2), 3: (1, 2)}),
        (RankAssignment(group_size=2), [0, 1, 3], {0: (0, 2), 1: (1, 2), 3: (None, 2)}),
    ],
)
def test_rank_assignment(
    policy: RankAssignment, live: list[int], expected: dict[int, tuple[int | None, int]]
) -> None:
    assert policy.assign(live, 4) == {r: Assignment(*v) for r, v in expected.items()}


def test_options_take_config_then_arguments_in_any_unit() -> None:
    config = RestartConfig(soft_timeout=20, hard_timeout=40, max_iterations=3)
    options = RestartOptions.build(config, hard_timeout=timedelta(seconds=45), barrier_timeout="2m")
    assert (options.soft_timeout, options.hard_timeout, options.barrier_timeout) == (20, 45, 120)
    assert options.max_iterations == 3


@pytest.mark.parametrize(
    "overrides",
    [{"soft_timeout": 90}, {"hard_timeout": 500}, {"max_iterations": 0}, {"soft_timeout": "soon"}],
)
def test_impossible_options_are_refused(overrides: dict) -> None:
    with pytest.raises(ValueError):
        RestartOptions.build(None, **overrides)


def test_event_phases_are_the_slowest_rank_after_the_fault() -> None:
    fault = {"cause": "exception", "rank": 1, "time": 100.0, "exception": "RuntimeError: x"}
    per_rank = {0: {"detect": 100.01, "reentry": 100.2}, 1: {"detect": 100.002, "reentry": 100.3}}
    event = build_event("j", 1, fault, [fault, {"rank": 3, "time": 100.1}], per_rank, 4, [])
    assert event["phases"] == {"detect": 0.01, "reentry": 0.3}
    assert event["rank"] == 1 and event["other_faulted_ranks"] == [3]
    assert event["per_rank"]["1"]["reentry"] == 0.3


def test_runtime_timeout_rules_match_preflight() -> None:
    options = RestartOptions.build(None, soft_timeout=60, hard_timeout=90)
    assert [f.check for f in judge("gloo", 90, options, {})] == ["timeout.watchdog-vs-hard"]
    assert judge("gloo", 91, options, {}) == []
    uninterruptible = judge("mpi", 120, options, {})
    assert [(f.check, f.severity) for f in uninterruptible] == [
        ("timeout.backend-uninterruptible", Severity.WARN)
    ]
    assert judge("mpi", 30, options, {})[0].check == "timeout.watchdog-vs-hard"


def test_shared_progress_arms_manual_pings_per_phase() -> None:
    progress = SharedProgress()
    progress.enter(2, Phase.RUNNING)
    assert progress.read()[1:] == (0.0, 0.0, 2, Phase.RUNNING)
    progress.ping()
    progress.ping()
    _, manual, step, _, _ = progress.read()
    assert manual > 0 and step > 0
    progress.enter(3, Phase.RESTARTING)
    assert progress.read()[1] == 0.0, "a new phase disarms the manual timeout"


class LoadedStore:
    """A restart store whose ``record_fault`` wakes the fault watch, then stalls as a store
    on a loaded machine does: until the rank's monitor thread has acted on the wake (it ends,
    or, were the rank still armed, it holds the atomic lock raising a restart)."""

    def __init__(self) -> None:
        self.recorded = threading.Event()
        self.faults: list[dict[str, Any]] = []
        self.terminated: list[int] = []

    def mark_terminated(self, rank: int) -> None:
        self.terminated.append(rank)

    def record_fault(self, iteration: int, fault: dict[str, Any]) -> None:
        self.faults.append(fault)
        self.recorded.set()
        monitor = next(t for t in threading.enumerate() if t.name == "nccl-doctor-monitor-2")
        monitor.join(1.0)  # at once when it stands down; the bound only ends the bad case

    def wait_wake(self, iteration: int, rank: int) -> None:
        self.recorded.wait()

    def fault(self, iteration: int) -> dict[str, Any] | None:
        return self.faults[0] if self.faults else None

    def wake(self, iteration: int, rank: int) -> None:
        self.recorded.set()


def test_a_leaving_rank_is_not_restarted_by_its_own_fault() -> None:
    # GIVEN a rank inside its function, its monitor thread watching for faults
    store = LoadedStore()
    call = CallWrapper.__new__(CallWrapper)
    call.rs, call.initial_rank = store, 2
    left = threading.Event()

    def leave() -> None:
        call.shared = Interruptible(threading.get_ident(), armed=True)
        ctx = IterationContext(0, 2, {0, 1, 2, 3}, socket_ids(), None)
        monitor = MonitorThread(ctx, store, store, call.shared)  # type: ignore[arg-type]
        monitor.start()
        # WHEN the function calls sys.exit and the rank records its fault on the way out
        call._leave(ctx, "exit", SystemExit(3), monitor)
        left.set()
        monitor.close()

    leaver = threading.Thread(target=leave, daemon=True)
    leaver.start()
    leaver.join(5)
    # THEN it leaves (no restart raised at it, no wait for the atomic lock) and says why
    assert left.is_set(), "the leaving rank deadlocked with its own monitor thread"
    assert store.terminated == [2]
    assert [f["cause"] for f in store.faults] == ["exit"]


def test_a_client_waits_for_a_late_store_and_gives_up_with_one_sentence() -> None:
    # GIVEN a port where the store starts listening 0.3 s from now
    port = free_port()
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listening = threading.Event()

    def listen() -> None:
        server.bind(("127.0.0.1", port))
        server.listen()
        listening.set()

    timer = threading.Timer(0.3, listen)
    timer.start()
    try:
        # WHEN a client waits for it THEN it returns once the port listens, not before
        await_listener("127.0.0.1", port, 10, lambda: False)
        assert listening.is_set()
    finally:
        timer.join()
        server.close()
    # AND where nothing ever listens, the wait ends at its timeout with one sentence
    with pytest.raises(RestartError, match=r"no store listened at 127\.0\.0\.1:\d+ within "):
        await_listener("127.0.0.1", free_port(), 0.2, lambda: False)
    with pytest.raises(StoreAbandoned):
        await_listener("127.0.0.1", free_port(), 10, lambda: True)


def test_a_monitor_process_does_not_outlive_a_rank_that_exited_before_the_store() -> None:
    # GIVEN a rank whose monitor process waits for a store that is not up (rank 0 is late)
    options = RestartOptions.build(RestartConfig())
    session = Session("127.0.0.1", free_port(), "p/", hosting=False)
    progress = SharedProgress()
    monitor = MonitorProcess(
        MonitorSpec(1, options),
        progress,
        lambda gone: connect_store(session, 2, options, False, gone),
    )
    # WHEN the rank exits
    progress.enter(0, Phase.EXITING)
    monitor.close(wait=0)
    # THEN its monitor ends quietly at once, not after barrier_timeout (120 s)
    deadline = time.monotonic() + 5
    try:
        while (status := os.waitpid(monitor.pid, os.WNOHANG)) == (0, 0):
            assert time.monotonic() < deadline, "the monitor process outlived its rank"
            time.sleep(0.05)
    except AssertionError:
        os.kill(monitor.pid, signal.SIGKILL)
        os.waitpid(monitor.pid, 0)
        raise
    assert os.waitstatus_to_exitcode(status[1]) == 0


def test_a_restart_does_not_wait_for_a_spare_stalled_in_dns() -> None:
    # GIVEN an iteration whose spare store connection is stuck connecting (a reverse DNS
    # lookup whose query was dropped waits 5 s in glibc), and a fault that aborted it
    stalled, done = threading.Event(), threading.Event()

    def connect() -> object:
        stalled.wait(10)
        done.set()
        return object()

    spare = SpareConnection(connect, free_port())
    ctx = IterationContext(0, 0, {0}, set(), None)
    spare.prepare(ctx, Interruptible(threading.get_ident()))
    ctx.phases["abort"] = time.time()
    # WHEN the next iteration takes it
    began = time.monotonic()
    taken = spare.take()
    # THEN it is not waited for: the restart connects afresh
    assert taken is None and time.monotonic() - began < 1.0
    # AND the late connection, once it arrives, is dropped, and exit waits for it
    stalled.set()
    spare.close(5)
    assert done.is_set() and spare.take(0) is None


class InterruptedStore:
    """A store call that the wake signal interrupts: the monitor thread has just named the
    fault; CPython 3.11 reports the handler's raise inside the C call as a ``SystemError``."""

    def __init__(self, ctx: IterationContext | None) -> None:
        self.ctx = ctx

    def fault(self, iteration: int) -> dict[str, Any] | None:
        if self.ctx is not None:
            self.ctx.fault = {"cause": "exception", "rank": 1}
        raise SystemError("error return without exception set")


class InterruptedRecord(InterruptedStore):
    """No fault in the store yet; recording one is interrupted: the record reached the
    store and the rank's own monitor raised at it before the call returned."""

    def fault(self, iteration: int) -> dict[str, Any] | None:
        return None

    def record_fault(self, iteration: int, fault: dict[str, Any]) -> None:
        if self.ctx is not None:
            self.ctx.fault = fault
        raise SystemError("error return without exception set")


@pytest.mark.parametrize("restarting", [True, False])
@pytest.mark.parametrize(
    ("store", "exc", "recorded"),
    [
        # a rank whose collective failed because a peer aborted waits out the grace for the
        # peer's monitor to name the culprit, polling the store (the CI run on 2026-11-26:
        # rank 0 died of the SystemError, its peers went on as a world of 3)
        (InterruptedStore, RuntimeError("Connection closed by peer [127.0.0.1]:1234"), None),
        # a rank whose function raised records its fault; its own monitor saw the record
        # and raised before the call returned (a stress run of restarts lost a rank to it)
        (InterruptedRecord, RuntimeError("injected"), 2),
    ],
)
def test_a_wake_landing_in_a_store_call_is_the_restart_not_a_crash(
    restarting: bool, store: type[InterruptedStore], exc: Exception, recorded: int | None
) -> None:
    # GIVEN rank 2 handling its function's exception
    ctx = IterationContext(0, 2, {0, 1, 2, 3}, socket_ids(), None)
    call = CallWrapper.__new__(CallWrapper)
    call._ctx, call.initial_rank, call.last_fault = ctx, 2, None
    call.rs = store(ctx if restarting else None)  # type: ignore[assignment]
    # WHEN the restart's wake lands inside its store call
    if restarting:
        call._fault(ctx, exc)
        # THEN it is the restart under way: the monitor raises it again
        assert (call.last_fault or {}).get("rank") == recorded
    else:
        # THEN without a restart under way the error is a real one and is raised
        with pytest.raises(SystemError):
            call._fault(ctx, exc)


def _torn_reads(progress: SharedProgress, read: Callable[[], tuple[float, float]]) -> int:
    """Reads, while another process rewrites the record as fast as it can, that show a
    time no writer wrote: 0 or anything else before the host booted a second ago."""
    writer = os.fork()
    if writer == 0:
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            progress.enter(1, Phase.RUNNING)
            progress.ping()
            progress.beat()
        os._exit(0)
    torn = 0
    while os.waitpid(writer, os.WNOHANG) == (0, 0):
        auto, manual = read()
        torn += auto < 1.0 or 0.0 < manual < 1.0
    return torn


def test_the_monitor_and_the_watcher_never_read_a_time_half_written(tmp_path: Path) -> None:
    # GIVEN a rank's progress record, rewritten by the rank while other processes read it
    # (a fresh-clone run once read a zero there mid-write, and the monitor killed a healthy
    # rank for "no progress for 37871.2s": the host's uptime)
    path = tmp_path / "progress" / "rank-0"
    progress = SharedProgress(path)
    progress.enter(0, Phase.RUNNING)

    def from_file() -> tuple[float, float]:
        record = read_progress_file(path)
        assert record is not None
        return record.auto, record.manual

    # WHEN the monitor (the mapping) and the watcher (the file) read it meanwhile
    # THEN neither ever sees a time the rank did not write
    assert _torn_reads(progress, lambda: progress.read()[:2]) == 0
    assert _torn_reads(progress, from_file) == 0


def test_the_release_ends_reads_and_holds_the_connection_until_peers_released() -> None:
    # GIVEN a connected TCP socket, as gloo holds one per peer, and a listening one
    listener = socket.create_server(("127.0.0.1", 0))
    ours = socket.create_connection(listener.getsockname())
    peer, _ = listener.accept()
    peer.settimeout(1)
    try:
        # WHEN the release shuts them down
        listed = open_sockets()
        held = shutdown_sockets({fd: listed[fd] for fd in (ours.fileno(), listener.fileno())})
        # THEN a read ends at once (what fails every gloo operation pending on it)
        ours.settimeout(1)
        assert ours.recv(1) == b""
        # AND a send still goes out: gloo's asynchronous mode queues a send that meets
        # EPIPE without failing it, and that send then waited out the group's timeout
        ours.sendall(b"x")
        assert peer.recv(1) == b"x"
        # AND when gloo closes its socket, the peer sees nothing and its sends still go
        ours.close()
        peer.sendall(b"y" * 1000)
        with pytest.raises(TimeoutError):
            peer.recv(1)
        # AND the listener is left alone, and the connection ends once the duplicate is
        # closed (at the next entry barrier, when every peer has released)
        assert len(held) == 1 and listener.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
        close_held(held)
        assert held == [] and _ended(peer)
    finally:
        for sock in (ours, peer, listener):
            sock.close()


def test_a_socket_on_a_reused_descriptor_is_not_mistaken_for_an_old_one() -> None:
    # GIVEN a connection open when the iteration began, closed since (gloo closes its own)
    listener = socket.create_server(("127.0.0.1", 0))
    old = socket.create_connection(listener.getsockname())
    baseline = socket_ids()
    number = old.fileno()
    old.close()
    # AND a connection of the iteration that got the same descriptor number
    reused = socket.create_connection(listener.getsockname())
    if reused.fileno() != number:  # the kernel gave another number: move it there
        os.dup2(reused.fileno(), number)
        reused.close()
        reused = socket.socket(fileno=number)
    reused.settimeout(1)
    held: list[int] = []
    try:
        # WHEN the release shuts what the iteration opened
        held = close_connections(baseline)
        # THEN the new socket is shut though its number was in use at the start
        assert reused.recv(1) == b""
    finally:
        close_held(held)
        for sock in (reused, listener):
            sock.close()


def test_a_descriptor_reused_after_the_listing_is_left_alone() -> None:
    # GIVEN a connection of the iteration, listed for the release
    listener = socket.create_server(("127.0.0.1", 0))
    listed_one = socket.create_connection(listener.getsockname())
    listed_peer, _ = listener.accept()
    number = listed_one.fileno()
    listing = {number: open_sockets()[number]}
    # AND closed after the listing, its number taken by another connection (the store's)
    listed_one.close()
    other = socket.create_connection(listener.getsockname())
    peer, _ = listener.accept()
    if other.fileno() != number:
        os.dup2(other.fileno(), number)
        other.close()
        other = socket.socket(fileno=number)
    other.settimeout(0.5)
    try:
        # WHEN the release shuts what it listed
        held = shutdown_sockets(listing)
        # THEN the other connection is not shut: nothing held, and it still reads
        assert held == []
        peer.sendall(b"z")
        assert other.recv(1) == b"z"
    finally:
        for sock in (other, peer, listed_peer, listener):
            sock.close()


def _ended(sock: socket.socket) -> bool:
    """The peer closed: end-of-file, or a reset (a socket closed with unread data)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_every_process_group_is_aborted_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a rank in four process groups whose abort takes 0.3 s each (a real NCCL
    # communicator's took about 1 s on an H200, and 8 of them one after another 4.5 s)
    import torch.distributed as dist

    from doctor.restart.abort import abort_process_groups

    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        for _ in range(3):
            dist.new_group([0])
        aborted: list[str] = []

        def slow_abort(group: object) -> None:
            aborted.append(threading.current_thread().name)
            time.sleep(0.3)

        monkeypatch.setattr(dist.ProcessGroup, "abort", slow_abort)
        # WHEN the restart aborts them
        start = time.monotonic()
        names = abort_process_groups()
        took = time.monotonic() - start
    finally:
        monkeypatch.undo()
        dist.destroy_process_group()
    # THEN each was aborted in its own thread, all at once, and every backend is named
    assert names == ["gloo"] * 4 and aborted == ["nccl-doctor-abort"] * 4
    assert took < 0.9, f"{took:.2f}s: one after another would take 1.2 s"


def test_a_soft_timeout_says_where_the_rank_and_an_untaken_restart_stand(tmp_path: Path) -> None:
    # GIVEN a monitor thread whose fault watch is stuck (a restart it never delivers), and
    # the rank's stacks dumped as its agent answers (faulthandler, the main thread named)
    store = LoadedStore()
    ctx = IterationContext(0, 2, {0, 1, 2, 3}, socket_ids(), None)
    monitor = MonitorThread(ctx, store, store, Interruptible(threading.get_ident()))  # type: ignore[arg-type]
    monitor.start()
    with (tmp_path / "stacks").open("w+") as dump:
        dump.write(f"{MAIN_THREAD_LINE}0x{threading.main_thread().ident or 0:016x}\n")
        dump.flush()
        faulthandler.dump_traceback(dump, all_threads=True)
        dump.seek(0)
        stacks = dump.read()
    store.recorded.set()
    monitor.join(5)
    # THEN the line names the main thread's innermost frame (this test, dumping)
    said = _where(stacks, restarting=False)
    assert said.startswith("; the main thread is at test_a_soft_timeout_says_where"), said
    assert "delivery" not in said
    # AND, with a restart under way, our innermost frame in its delivery (the fault watch)
    assert "; the restart's delivery is at run (" in _where(stacks, restarting=True)
    assert "monitor_thread.py" in _where(stacks, restarting=True)
    # AND no dump says nothing
    assert _where(None, restarting=True) == ""


def test_a_group_whose_abort_never_returns_does_not_hold_the_restart(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a rank in two process groups, one whose abort blocks (a communicator that
    # never lets go)
    import torch.distributed as dist

    from doctor.restart.abort import abort_process_groups

    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    released = threading.Event()
    try:
        stuck = dist.new_group([0])
        monkeypatch.setattr(
            dist.ProcessGroup, "abort", lambda group: released.wait(10) if group is stuck else None
        )
        # WHEN the restart aborts them, waiting at most 0.5 s
        start = time.monotonic()
        names = abort_process_groups(wait=0.5)
        took = time.monotonic() - start
    finally:
        released.set()
        monkeypatch.undo()
        dist.destroy_process_group()
    # THEN it goes on after the wait, and says which abort had not returned
    assert names == ["gloo", "gloo"] and 0.5 <= took < 2.0, took
    assert "the abort of 1 of 2 process groups had not returned" in capsys.readouterr().err


def test_a_release_that_fails_still_delivers_the_restart(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a rank inside its function whose connections cannot be closed (the release
    # raises), and a fault recorded by another rank
    import doctor.restart.monitor_thread as monitor_thread

    def broken(baseline: set[int]) -> int:
        raise OSError("no /proc/self/fd in this container")

    monkeypatch.setattr(monitor_thread, "close_connections", broken)
    store = LoadedStore()
    store.faults.append({"cause": "exception", "rank": 1, "time": time.time(), "exception": "x"})
    took: list[str] = []

    def function() -> None:
        shared = Interruptible(threading.get_ident(), armed=True)
        ctx = IterationContext(0, 2, {0, 1, 2, 3}, socket_ids(), None)
        monitor = MonitorThread(ctx, store, store, shared)  # type: ignore[arg-type]
        try:
            monitor.start()
            store.recorded.set()  # WHEN the fault wakes its monitor thread
            for _ in range(500):
                time.sleep(0.01)
        except RestartRequested:
            took.append("restart")
            shared.delivered.set()
        monitor.stop.set()
        monitor.join(5)

    rank = threading.Thread(target=function, daemon=True)
    rank.start()
    rank.join(10)
    # THEN the restart still reaches the function, and the failure is said
    assert took == ["restart"]
    assert "releasing the process groups failed" in capsys.readouterr().err
