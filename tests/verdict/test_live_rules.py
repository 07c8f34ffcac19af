"""Live rules over evidence built from recorded stacks: one candidate per fault, right culprits."""

from __future__ import annotations

from dataclasses import replace

import pytest
from triage_helpers import fault_evidence, hung_evidence, kill_rank, recorded_stack

from doctor.evidence import (
    Evidence,
    Frame,
    GpuSample,
    LogEvent,
    ProgressSample,
    RankStack,
    ThreadStack,
)
from doctor.flight.align import FlightAnalysis, GroupAlignment
from doctor.model import Confidence, HangClass, Skipped
from doctor.verdict.candidate import Candidate
from doctor.verdict.classify import classify, gather
from doctor.verdict.live import candidates
from doctor.verdict.progress import straggler_counts
from doctor.verdict.view import LiveView, job_progress


def best(evidence: Evidence) -> Candidate:
    found = sorted(candidates(evidence), key=lambda c: -c.strength)
    assert found, "no live rule fired"
    return found[0]


@pytest.mark.parametrize(
    ("fault", "cls", "culprits"),
    [
        ("dataloader", HangClass.CPU_STUCK, (2,)),
        ("gil", HangClass.CPU_STUCK, (2,)),
        ("compile", HangClass.COMPILE_WARMUP, (2,)),
        ("wrong-collective", HangClass.COLLECTIVE_MISMATCH, (2,)),
        ("except-clause", HangClass.COLLECTIVE_MISMATCH, (2,)),
        ("subgroup-mismatch", HangClass.COLLECTIVE_MISMATCH, (2,)),
    ],
)
def test_each_recorded_fault_names_its_class_and_culprit(fault, cls, culprits) -> None:
    # GIVEN the recorded stacks of a real hung job and no read/write calls in the window
    evidence = fault_evidence(fault)
    # WHEN the live rules and the classifier judge it
    candidate, verdict = best(evidence), classify(evidence)
    # THEN the class and the culprit are the fault's, the waiters are not blamed
    assert (candidate.hang_class, candidate.culprit_ranks) == (cls, culprits)
    assert (verdict.hang_class, verdict.culprit_ranks) == (cls, culprits)


def test_cpu_stuck_summary_says_where_the_culprit_is_and_what_the_others_wait_in() -> None:
    c = best(fault_evidence("dataloader"))
    assert "rank 2 is in its data loader at load_batch" in c.summary
    assert "ranks 0, 1 and 3 wait in all_reduce" in c.summary
    assert c.confidence is Confidence.HIGH and c.collective and c.collective.op == "all_reduce"


def test_a_dead_rank_is_rank_loss_whatever_the_others_do() -> None:
    evidence = kill_rank(fault_evidence("dataloader"), 2)
    c = best(evidence)
    assert (c.hang_class, c.culprit_ranks) == (HangClass.RANK_LOSS, (2,))
    assert "rank 2 is gone" in c.summary


def test_a_rank_that_aborted_after_losing_its_peer_is_not_the_one_killed() -> None:
    # GIVEN rank 2 killed (SIGKILL), rank 1 aborting on gloo's error (C++ terminate: SIGABRT),
    # ranks 0 and 3 exiting on their exception (seen in a real accelerate job, 1 run in 12)
    codes = {0: 1, 1: -6, 2: -9, 3: 1}
    evidence = fault_evidence("dataloader")
    for rank in codes:
        evidence = kill_rank(evidence, rank)
    procs = tuple(replace(p, exit_code=codes[p.rank]) for p in evidence.processes)
    c = best(replace(evidence, processes=procs))
    # THEN the killed rank is the culprit, not the one that aborted after it
    assert (c.hang_class, c.culprit_ranks) == (HangClass.RANK_LOSS, (2,))
    assert "rank 2 was killed (killed by SIGKILL)" in c.summary


def test_a_one_to_one_disagreement_is_a_low_confidence_tie() -> None:
    # GIVEN two ranks only, one in all_reduce and one in all_gather
    evidence = hung_evidence(
        [
            recorded_stack("wrong-collective", 0),
            replace(recorded_stack("wrong-collective", 2), rank=1),
        ],
        world=2,
    )
    c = best(evidence)
    assert c.hang_class is HangClass.COLLECTIVE_MISMATCH
    assert c.culprit_ranks == (0, 1) and c.confidence is Confidence.LOW and "tie" in c.summary


def test_progress_comes_from_io_calls_moving_stacks_or_flight_recorder_sequence_ids() -> None:
    hung = fault_evidence("dataloader")
    assert job_progress(hung) is False
    busy = replace(hung, processes=tuple(replace(p, io_calls_delta=40) for p in hung.processes))
    assert job_progress(busy) is True
    moved = tuple(
        replace(s, stack_signature=f"{s.stack_signature}#{s.time_s}") for s in hung.progress
    )
    assert job_progress(replace(hung, progress=moved)) is True
    no_io = replace(hung, processes=tuple(replace(p, io_calls_delta=None) for p in hung.processes))
    assert job_progress(no_io) is None
    moving = no_io.progress + (
        ProgressSample(0, 0.0, last_enqueued_seq=10),
        ProgressSample(0, 1.0, last_enqueued_seq=14),
    )
    assert job_progress(replace(no_io, progress=moving)) is True


def _straggler_job(
    samples: int, late_in: int, peers: tuple[int, ...] = (0, 1, 3), places: int = 1
) -> Evidence:
    """Rank 2 is in its loader while the others wait in ``late_in`` of ``samples``, caught at
    ``places`` stacks in turn; io moves."""
    waiting = [recorded_stack("dataloader", r) for r in peers]
    late = recorded_stack("dataloader", 2)
    progress = []
    for i in range(samples):
        for s in waiting:
            progress.append(ProgressSample(s.rank, i * 0.25, state="in_collective"))
        progress.append(
            ProgressSample(
                2,
                i * 0.25,
                stack_signature=f"read_shard#{i % places} < next_batch",
                state="data_loading" if i < late_in else "in_collective",
            )
        )
    base = hung_evidence(waiting + [late], io=35)
    alive = {2, *peers}
    processes = tuple(p for p in base.processes if p.rank in alive)
    return replace(base, progress=tuple(progress), processes=processes, ranks_expected=len(alive))


@pytest.mark.parametrize(("late_in", "sure"), [(5, Confidence.HIGH), (4, Confidence.MEDIUM)])
def test_a_progressing_job_with_one_rank_mostly_late_is_a_straggler(
    late_in: int, sure: Confidence
) -> None:
    # GIVEN rank 2 in its loader while its three peers wait, in late_in of 5 samples
    evidence = _straggler_job(samples=5, late_in=late_in)
    assert straggler_counts(LiveView.of(evidence))[2] == late_in
    # THEN it is the straggler; only late in every sample is it one for sure (a healthy job
    # on a loaded host had a rank late in 4 of 5)
    c = best(evidence)
    assert (c.hang_class, c.culprit_ranks, c.confidence) == (HangClass.STRAGGLER, (2,), sure)
    assert classify(evidence).hang_class is HangClass.STRAGGLER


@pytest.mark.parametrize(("places", "sure"), [(2, Confidence.HIGH), (3, Confidence.MEDIUM)])
def test_a_rank_late_in_every_sample_is_surely_the_straggler_only_when_slow_at_one_place(
    places: int, sure: Confidence
) -> None:
    # GIVEN rank 2 late in all 5 samples while its three peers wait, caught at 2 stacks in
    # turn (one in 3 samples of 5) or at 3 (none in most samples: a rank a loaded host's
    # scheduler leaves behind is caught wherever its step was)
    evidence = _straggler_job(samples=5, late_in=5, places=places)
    # THEN it is the straggler; for sure only when most samples show where it is slow
    c = best(evidence)
    assert (c.hang_class, c.culprit_ranks, c.confidence) == (HangClass.STRAGGLER, (2,), sure)


def test_with_one_peer_a_late_rank_is_a_straggler_of_medium_confidence_only() -> None:
    # GIVEN a 2-rank job whose rank 2 is late in every sample while its one peer waits (on a
    # loaded host one of two ranks in lock step can be last every time without a fault)
    evidence = _straggler_job(samples=5, late_in=5, peers=(0,))
    # THEN it is named, but one peer's wait is not proof enough for high confidence
    c = best(evidence)
    assert (c.hang_class, c.culprit_ranks, c.confidence) == (
        HangClass.STRAGGLER,
        (2,),
        Confidence.MEDIUM,
    )


@pytest.mark.parametrize("late_in", [1, 2])
def test_a_progressing_job_without_a_mostly_late_rank_is_healthy(late_in: int) -> None:
    # GIVEN rank 2 late in 1 or 2 of 5 samples (a healthy job's noise: someone is always last)
    evidence = _straggler_job(samples=5, late_in=late_in)
    verdict = classify(evidence)
    # THEN it is not called a straggler
    assert verdict.hang_class is HangClass.HEALTHY and not verdict.hang_class.is_hang


def test_a_late_rank_whose_peers_take_turns_waiting_is_not_a_straggler() -> None:
    # GIVEN rank 2 in its own code in 3 of 5 samples while two of the other three wait,
    # a different two each time (a healthy job in lock step: someone is always last)
    table = ["WWUU", "WUUW", "UWUW", "UUUU", "UUUU"]  # per sample: ranks 0..3, Wait/User
    progress = tuple(
        ProgressSample(rank, i * 0.25, state="in_collective" if c == "W" else "user_code")
        for i, row in enumerate(table)
        for rank, c in enumerate(row)
    )
    evidence = replace(_straggler_job(samples=5, late_in=3), progress=progress)
    assert straggler_counts(LiveView.of(evidence))[2] == 3
    # THEN no rank is a straggler: no peer waited in most samples
    assert classify(evidence).hang_class is HangClass.HEALTHY


def test_an_unreadable_rank_while_the_rest_wait_is_named_with_what_is_missing() -> None:
    # GIVEN ranks 0, 1, 3 waiting in all_reduce and rank 2 unreadable (ptrace denied)
    evidence = fault_evidence("dataloader")
    evidence = replace(
        evidence,
        stacks=tuple(s for s in evidence.stacks if s.rank != 2),
        skipped=(Skipped(2, "py-spy", "ptrace denied"),),
    )
    c = best(evidence)
    assert c.culprit_ranks == (2,) and c.confidence is Confidence.LOW
    assert "rank 2 could not be read" in c.summary and "stack of rank 2" in c.missing_evidence


def test_every_rank_in_the_same_collective_says_what_evidence_would_decide() -> None:
    evidence = hung_evidence(
        [recorded_stack("dataloader", r) for r in (0, 1, 3)]
        + [replace(recorded_stack("dataloader", 3), rank=2)]
    )
    c = best(evidence)
    assert c.hang_class is HangClass.UNKNOWN and c.missing_evidence


def test_log_and_nvml_signals_become_candidates() -> None:
    evidence = Evidence(
        "job",
        4,
        logs=(
            LogEvent(
                2,
                "unsupported_op",
                "Backend gloo does not support allgather_into_tensor_coalesced",
                op="allgather_into_tensor_coalesced",
            ),
        ),
        gpus=(GpuSample(3, 3, xid_events=(79,)),),
    )
    # (log lines are judged by doctor.verdict.log_rules, beside the live rules)
    found = {c.hang_class: c for c in gather(evidence)}
    assert found[HangClass.UNSUPPORTED_OP].culprit_ranks == (2,)
    assert found[HangClass.GPU_HANG].culprit_ranks == (3,)
    assert "XID 79" in found[HangClass.GPU_HANG].summary


def test_an_xid_of_a_programs_fault_or_a_record_is_no_gpu_failure() -> None:
    # GIVEN NVML's XIDs on rank 3's GPU: a page fault a program caused, a row remap recorded,
    # and a GPU off the bus
    def judged(*xids: int):
        evidence = Evidence("job", 4, gpus=(GpuSample(3, 3, xid_events=xids),))
        return next(c for c in gather(evidence) if c.hang_class is HangClass.GPU_HANG)

    # THEN the first two make the GPU a suspect, low and weak; the fall off the bus, a failure
    for xids in ((31,), (63,), (31, 63)):
        suspect = judged(*xids)
        assert (suspect.confidence, suspect.strength) == (Confidence.LOW, 40), xids
        assert "a suspect, not a failure" in suspect.summary
    failed = judged(31, 79)
    assert (failed.confidence, failed.strength) == (Confidence.HIGH, 85)
    assert "drain the node" in failed.summary


def test_sub_groups_named_by_flight_recorder_get_their_own_odd_ones_out() -> None:
    # GIVEN the sub-group mismatch, and Flight Recorder saying group 1 holds ranks 2 and 3
    group = GroupAlignment("1", "half", (2, 3), (), (), None)
    flight = FlightAnalysis((0, 1, 2, 3), 4, "gloo", ("2.10",), (group,), (), (), (), False)
    evidence = fault_evidence("subgroup-mismatch")
    # WHEN the live rules judge it
    c = next(c for c in candidates(evidence, flight) if c.rule == "stack_op_mismatch")
    # THEN the culprit is the rank in the odd op, and the sub-group's 1:1 split is shown
    assert c.culprit_ranks == (2,)
    assert any("process group 1 (ranks 2 and 3): split evenly" in e.text for e in c.evidence)


def _in(op: str, rank: int) -> RankStack:
    frames = (
        Frame(op, "torch/distributed/distributed_c10d.py", 100),
        Frame("setup", "train.py", 12),
        Frame("<module>", "train.py", 40),
    )
    return RankStack(rank, (ThreadStack(rank, "MainThread", frames, is_main=True),), "py-spy")


def test_ranks_stuck_creating_a_group_are_a_bootstrap_hang() -> None:
    # GIVEN three ranks waiting in new_group and one that went on to all_reduce
    evidence = hung_evidence([_in("new_group", r) for r in range(3)] + [_in("all_reduce", 3)])
    c = best(evidence)
    assert (c.hang_class, c.culprit_ranks) == (HangClass.BOOTSTRAP, (3,))
    assert "wait in new_group while rank 3 went on" in c.summary


def test_another_thread_holding_the_gil_is_shown() -> None:
    # GIVEN rank 2 whose main thread waits for the GIL that a logging thread holds
    main = ThreadStack(1, "MainThread", (Frame("write_checkpoint", "train.py", 80),), is_main=True)
    spinner = ThreadStack(
        2, "metrics-logger", (Frame("_flush", "metrics.py", 33),), holds_gil=True, active=True
    )
    stacks = [recorded_stack("gil", r) for r in (0, 1, 3)] + [
        RankStack(2, (main, spinner), "py-spy")
    ]
    c = best(hung_evidence(stacks))
    assert (c.hang_class, c.culprit_ranks) == (HangClass.CPU_STUCK, (2,))
    assert any("thread metrics-logger holds the GIL at _flush" in e.text for e in c.evidence)


def _gil_rank_caught(first_holds: bool, sampled: tuple[str, ...]) -> Evidence:
    """The recorded GIL job, rank 2's dump taken when its main thread did (not) hold the GIL,
    and its samples in the window in the states given."""
    evidence = fault_evidence("gil")
    stacks = tuple(
        replace(s, threads=(replace(s.threads[0], holds_gil=first_holds), *s.threads[1:]))
        if s.rank == 2
        else s
        for s in evidence.stacks
    )
    progress = tuple(p for p in evidence.progress if p.rank != 2) + tuple(
        ProgressSample(2, i * 0.25, stack_signature="loop", state=state)
        for i, state in enumerate(sampled)
    )
    return replace(evidence, stacks=stacks, progress=progress)


def test_whether_a_looping_rank_holds_the_gil_is_what_most_of_its_samples_show() -> None:
    # GIVEN a rank spinning in Python whose one dump caught it between GIL turns (a file
    # read, another thread's turn: 3 of 60 dumps of such a loop on a loaded host)
    caught = _gil_rank_caught(False, ("user_code", "gil_loop", "gil_loop", "gil_loop"))
    # AND a rank in its own code that held the GIL in only one sample
    loose = _gil_rank_caught(True, ("gil_loop", "user_code", "user_code", "user_code"))
    # THEN the first holds the GIL, the second is only in its own code
    assert LiveView.of(caught).states[2].value == "gil_loop"
    assert "holding the GIL" in classify(caught).summary
    assert LiveView.of(loose).states[2].value == "user_code"
    assert "GIL" not in classify(loose).summary
    assert classify(loose).culprit_ranks == classify(caught).culprit_ranks == (2,)
