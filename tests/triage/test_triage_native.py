"""Native frames where the Python stack cannot show the wait: DDP's reducer, shared by twins."""

from __future__ import annotations

import time
from dataclasses import replace

from triage_helpers import recorded_stack

from doctor.evidence import Frame, RankStack, ThreadStack
from doctor.triage.sources.native import NativePlan, needs_native
from doctor.verdict.stacks import RankState, collective_op, rank_state, signature, top_frame


def test_a_ddp_rank_waiting_in_backward_needs_native_frames_to_be_seen_waiting() -> None:
    # GIVEN a DDP rank whose Python stack ends in the autograd engine, idle
    python_only = recorded_stack("backward-peer", 0)
    native = recorded_stack("backward-peer-native", 0)
    # THEN Python frames alone cannot say it waits; the native dump shows DDP's reducer
    assert rank_state(python_only) is RankState.USER_CODE and needs_native(python_only)
    assert rank_state(native) is RankState.IN_COLLECTIVE and not needs_native(native)
    assert collective_op(native) == "all_reduce"
    assert "c10d::Reducer" in top_frame(native)


def test_ddp_buffer_broadcast_in_forward_is_a_collective_in_python_frames() -> None:
    stack = recorded_stack("ddp-peer", 0)
    assert rank_state(stack) is RankState.IN_COLLECTIVE
    assert collective_op(stack) == "broadcast"


def test_unresolved_native_addresses_never_split_identical_stacks() -> None:
    # GIVEN the same native stack in two processes, whose libc addresses differ
    a = recorded_stack("backward-peer-native", 0)
    main = a.main
    assert main is not None and any(f.name.startswith("0x") for f in main.frames)
    moved = tuple(
        replace(f, name=hex(int(f.name, 16) + 0x1000)) if f.name.startswith("0x") else f
        for f in main.frames
    )
    b = replace(a, rank=1, threads=(replace(main, frames=moved),))
    # THEN their signatures are one, and hold no address
    assert signature(a) == signature(b)
    assert "0x" not in signature(a)


def test_one_native_dump_serves_every_rank_with_the_same_idle_python_stack() -> None:
    # GIVEN three ranks idle at the same Python frames and a native dump that takes a while
    peers = [replace(recorded_stack("backward-peer", 0), rank=r) for r in (0, 1, 3)]
    native = recorded_stack("backward-peer-native", 0)
    dumped: list[int] = []

    def dump(rank: int, pid: int, timeout: float):
        dumped.append(rank)
        return replace(native, rank=rank)

    plan = NativePlan(dump)
    # WHEN each offers its stack, then the plan resolves them
    for stack in peers:
        plan.offer(stack, 1000 + stack.rank, deadline=time.monotonic() + 2.0)
    plan.wait(5.0)
    resolved = [plan.resolve(s) for s in peers]
    # THEN one rank was dumped and the others carry its native frames, saying whose
    assert dumped == [0]
    assert [rank_state(s) for s in resolved] == [RankState.IN_COLLECTIVE] * 3
    assert [s.native_from for s in resolved] == [None, 0, 0]


def test_a_native_dump_of_a_rank_that_moved_on_explains_nothing() -> None:
    # GIVEN a rank idle in backward whose native dump caught it somewhere else
    peer = recorded_stack("backward-peer", 0)
    elsewhere = recorded_stack("ddp-fifo", 2)
    plan = NativePlan(lambda rank, pid, timeout: replace(elsewhere, rank=rank))
    plan.offer(peer, 1000, deadline=time.monotonic() + 2.0)
    plan.wait(5.0)
    # THEN the rank keeps its own Python stack
    assert plan.resolve(peer) is peer


def test_a_rank_frozen_for_three_samples_is_dumped_at_once_others_wait_for_the_window() -> None:
    # GIVEN a plan whose window ends in an hour, and a rank idle at one stack 3 times
    peer = recorded_stack("backward-peer", 0)
    dumped: list[int] = []
    plan = NativePlan(
        lambda rank, pid, timeout: dumped.append(rank) or peer, not_before=time.monotonic() + 3600
    )
    # WHEN it has been seen twice, nothing starts; the third time, the dump starts now
    plan.offer_if_frozen([peer, peer], 1000, time.monotonic() + 5)
    plan.wait(0.2)
    assert dumped == []
    plan.offer_if_frozen([peer, peer, peer], 1000, time.monotonic() + 5)
    plan.wait(5.0)
    assert dumped == [0]


def test_a_rank_spinning_in_cuda_s_wait_is_dumped_and_read_as_waiting_on_its_gpu() -> None:
    """The H200 recording of ``.item()`` behind a hung NCCL all_reduce: py-spy sees the main
    thread active at the Python line that called it; only native frames show the wait."""
    line = (Frame("main", "job.py", 60), Frame("<module>", "job.py", 67))
    python = RankStack(0, (ThreadStack(645, "MainThread", line, is_main=True),), "py-spy")
    native_frames = (
        Frame("cuStreamSynchronize", "libcuda.so.580.159.04", 0, native=True),
        Frame("cudaStreamSynchronize", "libcudart.so.13", 0, native=True),
        Frame("at::native::_local_scalar_dense_cuda", "libtorch_cuda.so", 0, native=True),
        Frame("torch::autograd::THPVariable_item", "libtorch_python.so", 0, native=True),
        *line,
    )
    native = RankStack(0, (ThreadStack(645, "MainThread", native_frames, is_main=True),), "py-spy")
    assert rank_state(python) is RankState.USER_CODE
    assert not needs_native(python), "an active thread is not dumped at the window's end"
    dumped: list[int] = []
    plan = NativePlan(lambda rank, pid, timeout: dumped.append(rank) or native)
    # WHEN it is seen active at that one line three times
    plan.offer_if_frozen([python] * 3, 645, time.monotonic() + 5)
    plan.wait(5.0)
    # THEN it is dumped at once, and its native frames say it waits for its GPU
    assert dumped == [0]
    assert rank_state(plan.resolve(python)) is RankState.GPU_WAIT


def test_a_booked_native_dump_that_gives_no_stack_is_reported_as_missed() -> None:
    # GIVEN two ranks idle in backward at different Python lines; one rank's native dump
    # times out (py-spy gives no stack), the other's answers
    peer = recorded_stack("backward-peer", 0)
    other = recorded_stack("ddp-fifo", 2)
    native = recorded_stack("backward-peer-native", 0)
    plan = NativePlan(lambda rank, pid, timeout: native if rank == 0 else None)
    plan.offer(peer, 1000, deadline=time.monotonic() + 2.0)
    plan.offer(other, 1002, deadline=time.monotonic() + 2.0, now=True, spinning=True)
    plan.wait(5.0)
    # THEN the plan names the rank whose frames stay Python only, and only that one
    assert plan.missed() == [2]


def test_a_native_dump_with_no_time_left_to_start_is_reported_as_missed() -> None:
    # GIVEN a rank idle in backward offered when its collection's deadline has come
    peer = recorded_stack("backward-peer", 0)
    dumped: list[int] = []
    plan = NativePlan(lambda rank, pid, timeout: dumped.append(rank) or peer)
    plan.offer(peer, 1000, deadline=time.monotonic() + 0.1)
    plan.wait(1.0)
    # THEN nothing was dumped, and the plan says the rank's frames stay Python only
    assert dumped == []
    assert plan.missed() == [0]


def test_a_native_dump_still_running_when_the_collection_ends_is_reported_as_missed() -> None:
    # GIVEN a rank idle in backward whose native dump outlasts the collection (a loaded host)
    peer = recorded_stack("backward-peer", 0)
    plan = NativePlan(lambda rank, pid, timeout: time.sleep(1.0) or peer)
    plan.offer(peer, 1000, deadline=time.monotonic() + 2.0, now=True)
    # WHEN the collection stops waiting for it
    plan.wait(0.1)
    # THEN the rank is named: its frames are Python only in this look
    assert plan.missed() == [0]
