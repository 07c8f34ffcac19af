"""Rank lists as people read them: in the TUI, the verdict and collection notes."""

from __future__ import annotations

import pytest

from doctor.ranks import rank_ranges


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
