"""GIL ownership before collective frames; roots and call paths before a tie (issue 23).

Stacks are built as py-spy reports them on the zoo's real jobs (``tests/zoo`` runs the
jobs themselves): frames innermost first, a helper thread that owns the GIL while idle.
"""

from __future__ import annotations

import json

from triage_helpers import hung_evidence

from doctor.evidence import Frame, RankStack, ThreadStack
from doctor.flight.align import FlightAnalysis, GroupAlignment, RankOp
from doctor.model import HangClass
from doctor.triage.sources.native import native_key
from doctor.triage.sources.pyspy import parse_dump
from doctor.verdict import stacktree
from doctor.verdict.classify import classify
from doctor.verdict.live import candidates
from doctor.verdict.stacks import RankState, collective_root, rank_state

C10D = "torch/distributed/distributed_c10d.py"
DDP = "torch/nn/parallel/distributed.py"


def py(name: str, line: int, file: str = "train.py", root: int | None = None) -> Frame:
    return Frame(name, file, line, root=root)


def so(name: str, lib: str = "libtorch_cpu.so") -> Frame:
    return Frame(name, lib, 0, native=True)


def rank(r: int, frames: list[Frame], helper: ThreadStack | None = None) -> RankStack:
    main = ThreadStack(100 + r, "MainThread", tuple(frames), False, False, True)
    return RankStack(r, (main,) + ((helper,) if helper else ()), "py-spy")


def holder(active: bool = False) -> ThreadStack:
    """A helper thread that owns the GIL in ``read`` (a ``ctypes.PyDLL`` call)."""
    frames = (so("read", "libc.so.6"), py("flush_when_asked", 31), py("Thread.run", 982))
    return ThreadStack(900, "telemetry", frames, holds_gil=True, active=active)


BARRIER = [py("barrier", 5349, C10D), py("on_train_batch_end", 50), py("main", 70)]
BACKWARD = [py("_engine_run_backward", 979, "torch/autograd/graph.py"), py("main", 25)]
REDUCER = [
    so("pthread_cond_wait", "libc.so.6"),
    so("std::condition_variable::wait", "libstdc++.so.6"),
    so("c10d::Reducer::finalize_backward"),
    so("THPEngine_run_backward", "libtorch_python.so"),
    *BACKWARD,
]
RETAKING = [
    so("pthread_cond_timedwait", "libc.so.6"),
    so("THPEngine_run_backward", "libtorch_python.so"),
    *BACKWARD,
]


def test_a_main_thread_under_an_idle_gil_holder_is_not_in_its_collective() -> None:
    # GIVEN rank 2 whose Python stack shows barrier while its telemetry thread owns the GIL
    # idle in read(), and the same stack with a helper that runs Python (active)
    stuck, moving = rank(2, BARRIER, holder()), rank(2, BARRIER, holder(active=True))
    # THEN the first cannot run Python: gil_wait, not in_collective; the second waits
    assert rank_state(stuck) is RankState.GIL_WAIT
    assert rank_state(moving) is RankState.IN_COLLECTIVE


def test_native_frames_re_taking_the_gil_decide_over_a_reducer_above() -> None:
    # GIVEN a main thread in pthread_cond_timedwait called from the extension that re-takes
    # the GIL, another thread (running) owning it; and a peer waiting in DDP's reducer
    retaking = rank(2, RETAKING, holder(active=True))
    reducer = rank(0, REDUCER, holder(active=True))
    # THEN the first waits for the GIL; the peer's condition_variable wait is the reducer's
    assert rank_state(retaking) is RankState.GIL_WAIT
    assert rank_state(reducer) is RankState.IN_COLLECTIVE


def test_a_gil_waiter_never_borrows_a_waiting_twins_native_frames() -> None:
    # GIVEN two ranks with the same Python stack, one of whose GIL a helper holds
    twin, stuck = rank(0, BACKWARD), rank(2, BACKWARD, holder())
    # THEN they do not share one native dump
    assert native_key(twin) != native_key(stuck)


def test_the_gil_holders_rank_is_cpu_stuck_and_the_verdict_names_the_thread() -> None:
    # GIVEN the Lightning case: rank 2 at barrier under an idle GIL holder, its peers
    # already waiting in the next step's all_reduce
    stacks = [rank(r, REDUCER) for r in (0, 1, 3)] + [rank(2, BARRIER, holder())]
    verdict = classify(hung_evidence(stacks))
    # THEN rank 2 is cpu_stuck (not a mismatch), and the summary names the holder and
    # what it does
    assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.CPU_STUCK, (2,))
    assert "thread telemetry holds the GIL at read" in verdict.summary
    assert "idle in a C call" in verdict.summary


STEP = py("main", 40)


def test_three_positions_the_rank_that_left_the_step_is_the_culprit() -> None:
    # GIVEN uneven inputs: ranks 0 and 2 in the step's backward all-reduce, rank 1 in its
    # buffer broadcast (root unread), rank 3 after the loop in barrier
    step = [py("train_step", 25), STEP]
    stacks = [
        rank(0, REDUCER[:3] + [so("THPEngine_run_backward")] + BACKWARD[:1] + step),
        rank(1, [py("_distributed_broadcast_coalesced", 2363, DDP), py("forward", 9)] + step),
        rank(2, REDUCER[:3] + [so("THPEngine_run_backward")] + BACKWARD[:1] + step),
        rank(3, [py("barrier", 5356, C10D), py("main", 42)]),
    ]
    # WHEN judged (2/1/1 by op: no majority)
    verdict = classify(hung_evidence(stacks))
    # THEN the rank whose path left the common one is the culprit, not a four-rank tie
    assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.COLLECTIVE_MISMATCH, (3,))
    assert stacktree.leavers(stacktree.build(stacks)) == (3,)


def test_a_broadcast_waiting_for_a_root_elsewhere_is_a_victim_not_a_culprit() -> None:
    # GIVEN ranks 0 and 1 in all_reduce from sync_stats, rank 2 in all_reduce from
    # log_eval_loss, rank 3 in DDP's broadcast whose root (rank 0) is in the all_reduce
    def reduce_from(caller: str, line: int) -> list[Frame]:
        return [py("all_reduce", 3252, C10D), py(caller, line), py("main", 44)]

    stacks = [
        rank(0, reduce_from("sync_stats", 20)),
        rank(1, reduce_from("sync_stats", 20)),
        rank(2, reduce_from("log_eval_loss", 24)),
        rank(3, [py("_distributed_broadcast_coalesced", 2363, DDP, root=0), py("main", 37)]),
    ]
    verdict = classify(hung_evidence(stacks))
    # THEN rank 2 (the other call site) is the culprit; rank 3 is named as a victim
    assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.COLLECTIVE_MISMATCH, (2,))
    assert "rank 3 waits in broadcast for rank 0" in verdict.summary


def test_two_against_two_is_still_a_tie() -> None:
    # GIVEN two ranks in all_reduce and two in barrier, from one loop
    stacks = [rank(r, [py("all_reduce", 3252, C10D), STEP]) for r in (0, 1)] + [
        rank(r, [py("barrier", 5356, C10D), STEP]) for r in (2, 3)
    ]
    verdict = classify(hung_evidence(stacks))
    # THEN nothing breaks the tie: every rank is named, confidence low
    assert verdict.culprit_ranks == (0, 1, 2, 3)
    assert verdict.confidence.value == "low"


def test_a_broadcasts_root_is_read_from_its_locals_and_only_from_torchs_frames() -> None:
    # GIVEN py-spy --locals output: DDP's broadcast with authoritative_rank=0, under a
    # user's function whose own local is named src
    def frame(name: str, file: str, local: str, value: str) -> dict:
        return {
            "name": name,
            "filename": file,
            "short_filename": file,
            "line": 7,
            "locals": [{"name": local, "addr": 1, "arg": True, "repr": value}],
        }

    answer = [
        {
            "thread_name": "MainThread",
            "os_thread_id": 5,
            "pid": 5,
            "owns_gil": False,
            "active": False,
            "frames": [
                frame("_distributed_broadcast_coalesced", DDP, "authoritative_rank", "0"),
                frame("copy_shard", "train.py", "src", "3"),
            ],
        }
    ]
    stack = parse_dump(json.dumps(answer), 3)
    # THEN the root is DDP's; the user's frame carries none (its locals vary per rank)
    assert collective_root(stack) == 0
    assert stack.main is not None and stack.main.frames[1].root is None


def test_flight_recorders_groups_put_the_process_group_into_the_position() -> None:
    # GIVEN every rank in all_reduce by its stack, from one call site, and Flight Recorder
    # saying ranks 0 and 1 wait in group 1 (ranks 0-2) while rank 2 waits in the world
    # group 0 and rank 3 in group 0's broadcast
    stacks = [rank(r, [py("all_reduce", 3252, C10D), STEP]) for r in range(3)] + [
        rank(3, [py("broadcast", 2800, C10D), STEP])
    ]
    groups = (
        GroupAlignment("0", "default_pg", (0, 1, 2, 3), (), (), None),
        GroupAlignment("1", "stats", (0, 1, 2), (), (), None),
    )
    pending = (
        RankOp(0, "1", 4, "allreduce", "scheduled", ()),
        RankOp(1, "1", 4, "allreduce", "scheduled", ()),
        RankOp(2, "0", 30, "allreduce", "scheduled", ()),
        RankOp(3, "0", 30, "broadcast", "scheduled", ()),
    )
    flight = FlightAnalysis((0, 1, 2, 3), 4, "gloo", ("2.13",), groups, pending, (), (), False)
    found = [c for c in candidates(hung_evidence(stacks), flight) if c.rule.startswith("stack")]
    # THEN rank 2, pending in the world group while group 1 waits for it, is the culprit
    assert [(c.rule, c.culprit_ranks) for c in found] == [("stack_group_mismatch", (2,))]
    assert "process group 1" in found[0].summary
