"""Verdicts on recorded stacks of a real DDP job: structure decides, names only enrich."""

from __future__ import annotations

from dataclasses import replace

from triage_helpers import hung_evidence, recorded_stack

from doctor.evidence import Evidence, Frame, RankStack, ThreadStack
from doctor.model import Confidence, HangClass
from doctor.verdict.classify import classify

FIFO_CALL = 'openat("/data/train_2.bin", a FIFO)'


def peers(native: bool = True) -> list[RankStack]:
    name = "backward-peer-native" if native else "backward-peer"
    return [replace(recorded_stack(name, 0), rank=r) for r in (0, 1, 3)]


def with_process(evidence: Evidence, rank: int, **fields: object) -> Evidence:
    procs = tuple(replace(p, **fields) if p.rank == rank else p for p in evidence.processes)
    return replace(evidence, processes=procs)


def test_a_stopped_rank_is_the_culprit_whatever_its_stack_says() -> None:
    # GIVEN peers waiting in DDP's reducer, and rank 2 stopped inside a collective itself
    stopped_in_wait = replace(recorded_stack("ddp-peer", 0), rank=2)
    evidence = with_process(hung_evidence(peers() + [stopped_in_wait]), 2, status="stopped")
    # WHEN it is judged
    verdict = classify(evidence)
    # THEN the stopped rank is named, and how it was stopped
    assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.CPU_STUCK, (2,))
    assert "rank 2 is stopped" in verdict.summary and "SIGSTOP or a debugger" in verdict.summary
    assert verdict.confidence is Confidence.HIGH


def test_a_main_thread_waiting_for_a_gil_another_thread_holds_is_the_culprit() -> None:
    evidence = hung_evidence(peers() + [recorded_stack("ddp-gil", 2)])
    verdict = classify(evidence)
    assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.CPU_STUCK, (2,))
    assert "thread metrics-uploader holds the GIL at hold_gil_in_c" in verdict.summary


def test_a_rank_blocked_on_a_fifo_is_found_by_the_kernel_not_by_its_function_name() -> None:
    # GIVEN peers whose native frames were not taken (Python stacks only: idle in backward)
    # AND rank 2 in `get_batch`, which no loader-name rule knows, blocked opening a FIFO
    evidence = hung_evidence(peers(native=False) + [recorded_stack("ddp-fifo", 2)])
    evidence = with_process(evidence, 2, wchan="wait_for_partner", syscall=FIFO_CALL)
    # WHEN it is judged
    verdict = classify(evidence)
    # THEN structure (the kernel wait) names rank 2, and the summary says what it waits for
    assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.CPU_STUCK, (2,))
    assert "opening a FIFO" in verdict.summary and "train_2.bin" in verdict.summary


def test_nothing_waits_and_nothing_moves_is_unknown_never_healthy() -> None:
    # GIVEN four ranks idle in backward (no native frames), no I/O, no Flight Recorder
    evidence = hung_evidence(peers(native=False) + [replace(peers(False)[0], rank=2)])
    # WHEN it is judged
    verdict = classify(evidence)
    # THEN it is unknown, saying which proof of progress is missing
    assert verdict.hang_class is HangClass.UNKNOWN and verdict.hang_class.is_hang
    assert any("progress" in m for m in verdict.missing_evidence)


def test_healthy_needs_every_rank_to_prove_progress() -> None:
    # GIVEN a job whose every rank made read/write calls in the window
    stacks = peers(native=False) + [replace(peers(False)[0], rank=2)]
    busy = hung_evidence(stacks, io=40)
    assert classify(busy).hang_class is HangClass.HEALTHY
    # WHEN rank 2's calls all came from a Python thread other than its main thread (a
    # metrics uploader), while its main thread sat at one call path
    uploader = ThreadStack(77, "metrics-uploader", (Frame("upload", "wandb/sdk.py", 9),))
    rank2 = replace(stacks[-1], threads=(*stacks[-1].threads, uploader))
    quiet = with_process(
        replace(busy, stacks=(*busy.stacks[:3], rank2)), 2, io_calls_by_thread=((77, 40),)
    )
    # THEN the job is not called healthy
    assert classify(quiet).hang_class is not HangClass.HEALTHY


def test_the_rank_killed_by_a_signal_is_blamed_not_the_peers_that_exited_after_it() -> None:
    # GIVEN rank 2 killed by SIGKILL and ranks 1 and 3 gone with exit code 1 after it
    evidence = hung_evidence(peers())
    for rank, code in ((2, -9), (1, 1), (3, 1)):
        evidence = with_process(evidence, rank, alive=False, status="zombie", exit_code=code)
    evidence = replace(evidence, stacks=tuple(s for s in evidence.stacks if s.rank == 0))
    verdict = classify(evidence)
    assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.RANK_LOSS, (2,))
    assert "killed by SIGKILL" in verdict.summary


def test_a_rank_that_ended_its_program_cleanly_left_early_and_did_not_die() -> None:
    # GIVEN ranks 0, 1 and 3 waiting in DDP's reducer, and rank 2's process ended with exit
    # code 0 (its loop over, its data run out before the others')
    base = hung_evidence(peers())
    evidence = with_process(base, 2, alive=False, status="zombie", exit_code=0)
    evidence = replace(evidence, stacks=tuple(s for s in evidence.stacks if s.rank != 2))
    # THEN it is no lost rank: it left the loop before the others, a mismatch of steps
    verdict = classify(evidence)
    assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.COLLECTIVE_MISMATCH, (2,))
    assert "exit code 0" in verdict.summary and "left the loop" in verdict.summary
    # AND the same rank killed is still the lost rank
    killed = with_process(evidence, 2, exit_code=-9)
    assert classify(killed).hang_class is HangClass.RANK_LOSS
    # AND a job whose every rank ended with exit code 0 finished: nothing hangs
    ended = base
    for rank in (0, 1, 2, 3):
        ended = with_process(ended, rank, alive=False, status="zombie", exit_code=0)
    ended = replace(ended, stacks=())
    assert classify(ended).hang_class is HangClass.HEALTHY
