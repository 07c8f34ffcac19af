"""classify's combination rules, over candidates built by hand (pure functions)."""

from __future__ import annotations

from dataclasses import replace

from doctor.model import Confidence, HangClass
from doctor.verdict.candidate import Candidate
from doctor.verdict.classify import REFINES, combine, gather

FR_STOPPED = Candidate(
    HangClass.UNKNOWN,
    (3,),
    Confidence.LOW,
    "rank 3 stopped",
    60,
    missing_evidence=("py-spy stacks of rank 3",),
    rule="fr.stopped",
)


def test_specific_live_class_refines_flight_recorder_unknown() -> None:
    live = Candidate(
        HangClass.CPU_STUCK, (3,), Confidence.HIGH, "rank 3 in its loader", 80, rule="cpu_stuck"
    )
    best = combine(sorted([FR_STOPPED, live], key=lambda c: -c.strength))
    assert (best.hang_class, best.culprit_ranks, best.confidence) == (
        HangClass.CPU_STUCK,
        (3,),
        Confidence.HIGH,
    )
    assert best.missing_evidence == ()


def test_unknown_stays_unknown_when_live_evidence_names_other_ranks() -> None:
    live = Candidate(HangClass.CPU_STUCK, (1,), Confidence.HIGH, "rank 1", 50, rule="cpu_stuck")
    best = combine([FR_STOPPED, live])
    assert best.hang_class is HangClass.UNKNOWN and best.culprit_ranks == (3,)


def test_a_reading_that_decides_only_alone_refines_no_unknown() -> None:
    # GIVEN a set-up message printed before collectives that ran (weak: history), naming rank 3
    history = Candidate(
        HangClass.BOOTSTRAP, (3,), Confidence.LOW, "set-up", REFINES - 5, rule="log_catalogue"
    )
    # THEN rank 3's stop stays unknown; the same class at REFINES refines it
    assert combine([FR_STOPPED, history]).hang_class is HangClass.UNKNOWN
    refiner = replace(history, strength=REFINES)
    assert combine([FR_STOPPED, refiner]).hang_class is HangClass.BOOTSTRAP


def test_two_rules_agreeing_raise_confidence() -> None:
    fr = Candidate(
        HangClass.COLLECTIVE_MISMATCH, (2,), Confidence.MEDIUM, "fr", 90, rule="fr.mismatch"
    )
    st = Candidate(
        HangClass.COLLECTIVE_MISMATCH, (2,), Confidence.MEDIUM, "st", 70, rule="stack_op_mismatch"
    )
    assert combine([fr, st]).confidence is Confidence.HIGH


def test_equally_strong_different_classes_lower_confidence() -> None:
    a = Candidate(HangClass.GPU_HANG, (1,), Confidence.HIGH, "xid", 85, rule="gpu_hang")
    b = Candidate(HangClass.UNSUPPORTED_OP, (2,), Confidence.HIGH, "log", 85, rule="unsupported_op")
    best = combine([a, b])
    assert best.confidence is Confidence.LOW and "unsupported_op" in best.summary


def test_one_to_one_tie_is_reported_as_a_tie() -> None:
    tie = Candidate(
        HangClass.COLLECTIVE_MISMATCH, (2, 3), Confidence.LOW, "tie", 50, rule="fr.mismatch-tie"
    )
    best = combine([tie])
    assert best.culprit_ranks == (2, 3) and best.confidence is Confidence.LOW


def test_no_evidence_is_unknown() -> None:
    # GIVEN evidence with nothing in it (no dump, no stack, no process)
    from doctor.evidence import Evidence
    from doctor.verdict.classify import analyse

    ev = Evidence(job="j", ranks_expected=None)
    # WHEN it is judged
    analysis = analyse(ev)
    # THEN no rule fires, the verdict is unknown at low confidence and names what is missing
    assert gather(ev) == []
    assert analysis.flight is None
    verdict = analysis.verdict
    assert (verdict.hang_class, verdict.culprit_ranks, verdict.confidence) == (
        HangClass.UNKNOWN,
        (),
        Confidence.LOW,
    )
    assert verdict.missing_evidence == ("Flight Recorder dumps or live stacks of the ranks",)


def test_live_progress_drops_flight_recorder_snapshot_candidates(monkeypatch) -> None:
    # GIVEN FR dumps of a moving job (one rank a collective behind) and a live rule that
    # saw the job progress
    from doctor.evidence import Evidence
    from doctor.verdict import classify as module

    moving = Candidate(
        HangClass.HEALTHY, (), Confidence.MEDIUM, "progressing", 30, rule="progressing"
    )
    monkeypatch.setattr(module.flight_rules, "candidates", lambda fa: [FR_STOPPED])
    monkeypatch.setattr(module.live, "candidates", lambda ev, fa: [moving])
    # THEN the snapshot's "rank 3 stopped" does not win over observed progress
    assert module.classify(Evidence(job="j", ranks_expected=4)).hang_class is HangClass.HEALTHY
