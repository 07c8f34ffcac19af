"""1:1 disagreements: settled by sibling groups when they exist, a tie when nothing else says."""

from __future__ import annotations

import shutil
from pathlib import Path

from doctor.analyze.load import load_evidence
from doctor.model import Confidence, HangClass
from doctor.verdict.classify import classify

SUBGROUP = Path(__file__).resolve().parent.parent / "fixtures" / "fr" / "gloo-subgroup-mismatch"


def test_sibling_group_settles_a_one_to_one_mismatch() -> None:
    # GIVEN a real job where rank 2 issued all_gather in its 2-rank sub-group [2, 3]
    # while rank 3 all-reduced, and the sibling sub-group [0, 1] all-reduced too
    verdict = classify(load_evidence([SUBGROUP]))
    # THEN rank 2 is the culprit (3 votes to 1 across the sibling groups), and the world
    # group's missing ranks 2 and 3 are explained by it, not blamed
    assert verdict.hang_class is HangClass.COLLECTIVE_MISMATCH
    assert verdict.culprit_ranks == (2,)
    assert verdict.confidence is Confidence.MEDIUM


def test_one_to_one_with_nothing_else_is_a_tie(tmp_path: Path) -> None:
    # GIVEN only the two dumps of the sub-group: no sibling group to ask
    for r in (2, 3):
        shutil.copy(SUBGROUP / f"rank_{r}", tmp_path / f"rank_{r}")
    verdict = classify(load_evidence([tmp_path]))
    # THEN both ranks are named, with low confidence, and the summary says it is a tie
    assert verdict.hang_class is HangClass.COLLECTIVE_MISMATCH
    assert verdict.culprit_ranks == (2, 3)
    assert verdict.confidence is Confidence.LOW
    assert "1:1" in verdict.summary
