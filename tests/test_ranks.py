"""Rank lists as people read them: in the TUI, the verdict and collection notes."""

from __future__ import annotations

import pytest

from doctor.ranks import rank_does, rank_prose, rank_ranges


@pytest.mark.parametrize(
    ("ranks", "expected"),
    [
        ([], ""),
        ([3], "3"),
        ([0, 1, 2, 4, 5, 6, 7], "0-2,4-7"),
        ([7, 1, 0, 1], "0-1,7"),
        (list(range(32)), "0-31"),
        ([0, 1, 2, 3, 4, 10], "0-4,10"),  # never one span across a gap
    ],
)
def test_rank_ranges_compacts_consecutive_ranks(ranks: list[int], expected: str) -> None:
    assert rank_ranges(ranks) == expected


@pytest.mark.parametrize(
    ("ranks", "expected"),
    [
        ([], "no rank"),
        ([2], "rank 2"),
        ([2, 2], "rank 2"),
        ([3, 2], "ranks 2 and 3"),
        ([0, 1, 3], "ranks 0, 1 and 3"),
        ([0, 1, 2, 4], "ranks 0-2 and 4"),
        ([*range(128), 130], "ranks 0-127 and 130"),
        ([5, *range(10, 4106), 9000], "ranks 5, 10-4105 and 9000"),
    ],
)
def test_rank_prose_reads_as_one_sentence_and_folds_runs(ranks: list[int], expected: str) -> None:
    assert rank_prose(ranks) == expected


def test_no_rank_reads_as_the_caller_says_and_any_rank_as_itself() -> None:
    # GIVEN logs that say something happened but not to whom: "a rank", never "no rank"
    assert rank_prose([], none="a rank") == "a rank"
    assert rank_prose([4], none="a rank") == "rank 4"


def test_a_sentence_can_start_with_it() -> None:
    assert rank_prose([10, 15]).capitalize() == "Ranks 10 and 15"


def test_the_verb_agrees_with_how_many_ranks() -> None:
    assert rank_does([1], "wait") == "rank 1 waits"
    assert rank_does([0, 2, 2], "wait") == "ranks 0 and 2 wait"
