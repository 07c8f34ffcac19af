"""The labelled corpus of real logs: no case crashes; class accuracy holds its measured floor.

Issue 13's target is 85%; the rules reach 85% (35 of 41). ``benchmarks/bench_logs.py``
reports against the target and fails when it is missed; this test guards the floor.
"""

from __future__ import annotations

import pytest
from corpus import HELDOUT, cases, score, split_of

FLOOR = 0.80
"""What the rules reach today less a margin: a change that loses cases fails here."""


def test_the_corpus_is_there_and_every_case_lists_its_files() -> None:
    found = cases()
    assert len(found) >= 40
    for case in found:
        assert case.files and all(f.is_file() for f in case.files), case.name


def test_no_case_crashes_and_accuracy_holds() -> None:
    # GIVEN every case of the corpus WHEN each is judged from its files alone
    result = score()
    # THEN none crashes, and accuracy does not fall below what the rules reach
    assert [o.case.name for o in result.outcomes if o.error] == []
    misses = [o.case.name for o in result.outcomes if not o.class_right]
    assert result.accuracy >= FLOOR, misses


# The held-out corpus (issue 23): split by source repository before its rules were written.
HELDOUT_TEST_FLOOR = 83 / 124
"""Measured on the test split: 83 of 124 right (67 %), the fourteenth look (stop s31), once,
after its four dev rules were frozen (commit 17b2e40: SLURM cancelling a step, the driver's
NV_ERR_RESET_REQUIRED, EFA's unresponsive receiver, UCX's reset wording) and 15 new cases
(9 of them test); the rules were written with bench_logs --dev-only, which never judges the
test split. The fifteenth look, the rules before this stop on the same cases: the same 83.
Earlier: 19 and 22 of 37, then 27/50, 27/52, 32/60, 32/60 (after the source message
catalogue), 38/63, 38/64, 45/66, 54/79, 60/86, 67/94, 75/105, 78/115 and 79/115. No rule was
written from a test case. The issue's target is 85 %, missed; this floor is the measured
value, not the target."""
HELDOUT_DEV_FLOOR = 91 / 96
"""Measured on the dev split: 91 of 96 (stop s31: the 90 old dev cases 85, as before; the 6
new dev cases 2 of 6 before its rules, 6 of 6 after)."""


def test_every_heldout_case_sits_in_the_split_its_repository_gives() -> None:
    # GIVEN the held-out cases WHEN each one's split is recomputed from its repository alone
    found = cases(HELDOUT)
    # THEN it is the split its case.toml records: no case was moved by hand
    assert len(found) >= 220
    assert {c.name: c.split for c in found} == {c.name: split_of(c.repository) for c in found}
    for case in found:
        assert case.files and all(f.is_file() for f in case.files), case.name


@pytest.mark.parametrize(
    ("split", "floor"), [("test", HELDOUT_TEST_FLOOR), ("dev", HELDOUT_DEV_FLOOR)]
)
def test_heldout_split_accuracy_holds_and_no_hang_is_called_healthy(
    split: str, floor: float
) -> None:
    # GIVEN one split of the held-out corpus WHEN each case is judged from its files alone
    result = score(HELDOUT, split)
    # THEN none crashes, none of these hangs is called healthy, and accuracy holds its floor
    assert [o.case.name for o in result.outcomes if o.error] == []
    healthy = [
        o.case.name
        for o in result.outcomes
        if o.verdict and o.verdict.hang_class.value == "healthy"
    ]
    assert healthy == []
    misses = [o.case.name for o in result.outcomes if not o.class_right]
    assert result.accuracy >= floor - 1e-9, misses
    # AND precision per class is computed for every class a verdict named
    assert all(row[2] for row in result.per_class() if row[2])
