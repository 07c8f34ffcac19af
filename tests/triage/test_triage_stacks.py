"""Rank states, signatures and STAT-like classes from recorded stacks of real hung jobs."""

from __future__ import annotations

import pytest
from triage_helpers import FAULT_FIXTURES, recorded_stack

from doctor.evidence import Frame, RankStack, ThreadStack
from doctor.triage.sources.native import needs_native
from doctor.triage.sources.pyspy import parse_faulthandler
from doctor.verdict.stacks import (
    RankState,
    collective_op,
    group_by_signature,
    odd_ones_out,
    odd_ones_out_by_group,
    rank_state,
    signature,
    top_frame,
)

CULPRIT_STATE = {
    "dataloader": (RankState.DATA_LOADING, "load_batch"),
    "gil": (RankState.GIL_LOOP, "_tokenize_in_python"),
    "compile": (RankState.COMPILE, ""),
    "wrong-collective": (RankState.IN_COLLECTIVE, "all_gather"),
    "except-clause": (RankState.IN_COLLECTIVE, "barrier"),
    "subgroup-mismatch": (RankState.IN_COLLECTIVE, "all_gather"),
}


@pytest.mark.parametrize("fault", FAULT_FIXTURES)
def test_state_of_the_faulty_rank(fault: str) -> None:
    # GIVEN the recorded main-thread stack of rank 2, the faulty rank of a real hung job
    stack = recorded_stack(fault, 2)
    # WHEN its state is read
    state, frame = CULPRIT_STATE[fault]
    # THEN it is what the fault put it in, and the top frame names where
    assert rank_state(stack) is state
    assert frame in top_frame(stack)


def test_waiting_ranks_are_in_collective_with_the_op_they_called() -> None:
    stack = recorded_stack("dataloader", 0)
    assert rank_state(stack) is RankState.IN_COLLECTIVE
    assert collective_op(stack) == "all_reduce"
    assert top_frame(stack).startswith("all_reduce (torch/distributed/distributed_c10d.py:")


def test_signature_drops_frames_inside_the_collective_and_keeps_call_sites() -> None:
    # GIVEN one rank in all_reduce and one in barrier called from an except clause
    normal, except_clause = recorded_stack("except-clause", 0), recorded_stack("except-clause", 2)
    # THEN the signatures start with the op and name the caller line
    assert signature(normal).startswith("all_reduce < sync_gradients@job.py:")
    assert signature(except_clause).startswith("barrier < Job.step@job.py:")
    # AND a sample caught deeper inside c10d has the same signature
    main = normal.main
    assert main is not None
    deeper = RankStack(
        0,
        (
            ThreadStack(
                1,
                "MainThread",
                (
                    Frame("_WorldMeta.WORLD", "torch/distributed/distributed_c10d.py", 819),
                    *main.frames,
                ),
                is_main=True,
            ),
        ),
        "py-spy",
    )
    assert signature(deeper) == signature(normal)


def test_a_loop_sampled_at_two_lines_is_one_signature() -> None:
    stack = recorded_stack("gil", 2)
    main = stack.main
    assert main is not None
    moved = (
        Frame(main.frames[0].name, main.frames[0].filename, main.frames[0].line + 1),
        *main.frames[1:],
    )
    other = RankStack(2, (ThreadStack(1, "MainThread", moved, True, True, True),), "py-spy")
    assert signature(other) == signature(stack)


def test_classes_and_the_odd_one_out() -> None:
    # GIVEN the four ranks of the data-loader fault
    stacks = [recorded_stack("dataloader", r) for r in range(4)]
    # WHEN grouped by signature
    groups = group_by_signature(stacks)
    # THEN ranks 0, 1, 3 form the majority class and rank 2 is the odd one out
    assert [g.ranks for g in groups] == [(0, 1, 3), (2,)]
    assert odd_ones_out(groups).ranks == (2,)


def test_two_against_two_is_a_tie_not_a_guess() -> None:
    stacks = [recorded_stack("subgroup-mismatch", r) for r in range(4)]
    outliers = odd_ones_out(group_by_signature(stacks))
    assert outliers.tie and outliers.majority is None
    # AND within the sub-group {2, 3} the two ranks disagree 1:1: a tie there too
    assert odd_ones_out_by_group(stacks, {"1": [2, 3]})["1"].tie


def test_no_stack_is_unknown_and_an_empty_main_thread_is_idle() -> None:
    assert rank_state(None) is RankState.UNKNOWN
    empty = RankStack(0, (ThreadStack(1, "MainThread", (), is_main=True),), "py-spy")
    assert rank_state(empty) is RankState.IDLE


SITE = "/usr/lib/python3.11/site-packages/"


def _main_thread(*frames: tuple[str, str]) -> RankStack:
    """A rank whose main thread is in ``frames`` (innermost first: name, file under SITE)."""
    stack = tuple(Frame(name, SITE + path, 10) for name, path in frames)
    return RankStack(0, (ThreadStack(1, "MainThread", stack, is_main=True),), "py-spy")


LAUNCH = (("run", "triton/runtime/autotuner.py"), ("forward", "fla/ops/gated_delta_rule.py"))


@pytest.mark.parametrize(
    ("frames", "state"),
    [
        # the autotuner timing its configs waits for the GPU between runs: still a build
        (
            (("synchronize", "torch/cuda/__init__.py"), ("do_bench", "triton/testing.py"))
            + (("_bench", "triton/runtime/autotuner.py"),)
            + LAUNCH,
            RankState.COMPILE,
        ),
        # Triton lowering a kernel, and torch's extension build behind its lock
        ((("make_cubin", "triton/backends/nvidia/compiler.py"),) + LAUNCH, RankState.COMPILE),
        ((("compile", "triton/compiler/compiler.py"),) + LAUNCH, RankState.COMPILE),
        (
            (
                ("wait", "torch/utils/file_baton.py"),
                ("_jit_compile", "torch/utils/cpp_extension.py"),
            ),
            RankState.COMPILE,
        ),
        # a launch through the autotuner's cache, then a wait for the GPU: no build
        ((("synchronize", "torch/cuda/__init__.py"),) + LAUNCH, RankState.GPU_WAIT),
    ],
)
def test_a_rank_building_a_kernel_is_compiling(
    frames: tuple[tuple[str, str], ...], state: RankState
) -> None:
    assert rank_state(_main_thread(*frames)) is state


FAULTHANDLER_TEXT = """\
Thread 0x00007f2a1c9fe640 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 331 in wait
  File "/work/doctor/agent.py", line 80 in _serve

Current thread 0x00007f2a2b4c1740 (most recent call first):
  File "/work/doctor/demo/job.py", line 177 in _tokenize_in_python
  File "/work/doctor/demo/job.py", line 164 in forward_backward
  File "/work/doctor/demo/job.py", line 267 in <module>
"""


def test_faulthandler_text_from_the_agent_parses_to_a_stack() -> None:
    stack = parse_faulthandler(FAULTHANDLER_TEXT, 2)
    assert stack.source == "agent" and len(stack.threads) == 2
    assert stack.main is not None and stack.main.frames[0].name == "_tokenize_in_python"
    # faulthandler says nothing about the GIL: the loop is user code, not a proven gil_loop
    assert rank_state(stack) is RankState.USER_CODE


def test_an_async_work_wait_needs_native_frames_to_be_seen() -> None:
    # GIVEN a rank blocked in work.wait() of an async all_reduce (recorded from a real job)
    python_only = recorded_stack("async-wait", 0)
    native = recorded_stack("async-wait-native", 0)
    # THEN Python frames alone show user code blocked in C, which asks for a native dump
    assert rank_state(python_only) is RankState.USER_CODE and needs_native(python_only)
    # AND the native dump shows the collective wait
    assert rank_state(native) is RankState.IN_COLLECTIVE and collective_op(native) == "wait"
    assert not needs_native(native)
