"""The labelled corpus of real logs: no case crashes; class accuracy holds its measured floor.

Issue 13's target is 85%; the rules reach 85% (35 of 41). ``benchmarks/bench_logs.py``
reports against the target and fails when it is missed; this test guards the floor.
"""

from __future__ import annotations

from corpus import cases, score

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
