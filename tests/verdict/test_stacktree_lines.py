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
