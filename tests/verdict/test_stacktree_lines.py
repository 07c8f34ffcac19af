"""The divergence lines of the stack tree, as the CLI and the TUI print them."""

from __future__ import annotations

from doctor.evidence import Frame, RankStack, ThreadStack
from doctor.verdict.stacktree import branch_lines, build

MAIN = Frame("main", "train.py", 10)
STEP = Frame("step", "train.py", 20)
LOAD = Frame("load_batch", "train.py", 30)


def _rank(rank: int, *inner: Frame) -> RankStack:
    frames = (*inner, MAIN)  # innermost first, as py-spy gives them
    return RankStack(rank, (ThreadStack(1, "MainThread", frames, is_main=True),), "py-spy")


def test_one_rank_is_named_singular_and_many_as_ranges() -> None:
    # GIVEN ranks 0, 1 and 3 in step, rank 2 in its loader, rank 4 still in main
    stacks = [_rank(r, STEP) for r in (0, 1, 3)] + [_rank(2, LOAD), _rank(4)]
    # WHEN the divergence is written for people
    lines = branch_lines(build(stacks))
    # THEN each branch names its ranks, "rank" for one, compact ranges for several
    assert lines == [
        "ranks diverge at main (train.py:10):",
        "  ranks 0-1,3 -> step (train.py:20)",
        "  rank 2 -> load_batch (train.py:30)",
        "  rank 4 stop there",
    ]


def test_native_frames_never_split_ranks_whose_python_stacks_agree() -> None:
    # GIVEN ranks 0-2 in one Python call path; ranks 1 and 2 were dumped with native frames
    # (a resolved symbol, and libc's entry point unresolved, at another address in each)
    def native(rank: int) -> RankStack:
        frames = (
            Frame("c10d::Reducer::wait", "libtorch.so", 0, native=True),
            STEP,
            MAIN,
            Frame(f"0x7f{rank}c8de4524a", "libc.so.6", 0, native=True),
        )
        return RankStack(rank, (ThreadStack(1, "MainThread", frames, is_main=True),), "py-spy")

    stacks = [_rank(0, STEP), native(1), native(2), _rank(3, LOAD)]
    # WHEN the tree is built THEN the only split is the real one, at main
    assert branch_lines(build(stacks)) == [
        "ranks diverge at main (train.py:10):",
        "  ranks 0-2 -> step (train.py:20)",
        "  rank 3 -> load_batch (train.py:30)",
    ]
