"""Rules for a job that moves, or that nothing proves moves: straggler, healthy, unknown.

``healthy`` needs proof of progress (``doctor.verdict.view.job_progress``); with
none, and no rank waiting in a known collective, the answer is ``unknown``
naming the evidence that would have told.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from doctor.evidence import ProgressSample
from doctor.model import Confidence, HangClass, Verdict
from doctor.ranks import rank_prose
from doctor.verdict.candidate import Candidate
from doctor.verdict.stacks import ELSEWHERE, RankState
from doctor.verdict.view import FR_HINT, LiveView, pyspy_line

NO_PROOF = (
    f"progress over the window: {FR_HINT} whose sequence ids advance",
    "read/write calls on every rank, or stacks that change between samples",
)

LONGER_LOOK = 3.0
"""How many times longer a second look is when the first proved neither a hang nor
progress: a loaded host's step can outlast a 1 s window (a peer then waits the whole
window with no call made), and a look three times as long caught the straggler of the
real-stack slow job in 7 of 7 looks where 1 s looks said ``unknown`` in 4 of 5. The second
look takes as many times more stack samples, at the first one's pace: a rank in a Python loop
of a few functions (a healthy job's long preprocessing) showed one call path in all 5 of a
look's samples on a quiet host."""


def needs_longer_look(verdict: Verdict) -> bool:
    """Whether the verdict is only "nothing proved the job moves": no hang in the
    structure, so a longer window, not another rule, is what can tell."""
    return verdict.hang_class is HangClass.UNKNOWN and set(NO_PROOF) <= set(
        verdict.missing_evidence
    )


def no_proof(view: LiveView) -> Candidate:
    """Nothing waits and nothing moves: never ``healthy`` without proof of progress."""
    still = sorted(r for r in view.states if r not in view.moving)
    unread = view.ranks_in(RankState.UNKNOWN)
    missing = NO_PROOF + tuple(f"stack of rank {r}" for r in unread)
    summary = (
        "no rank is stuck by what the stacks and processes show, but nothing proved that "
        "the job progresses: "
        f"{rank_prose(still)} made no read/write calls and no stack change in the window"
        if still
        else "no rank is stuck by what the stacks and processes show, but nothing proved "
        "that the job progresses"
    )
    return Candidate(
        HangClass.UNKNOWN,
        (),
        Confidence.LOW,
        summary + "; look again with a longer --interval, or turn on Flight Recorder",
        15,
        missing_evidence=missing,
        rule="no_proof",
    )


def straggler_counts(view: LiveView) -> Counter[int]:
    """Per rank: samples in which it was elsewhere while most of the others waited."""
    counts: Counter[int] = Counter()
    length = min((len(v) for v in view.samples.values()), default=0)
    for i in range(length):
        at = {r: RankState(v[i].state) for r, v in view.samples.items()}
        for rank, state in at.items():
            others = [s for r, s in at.items() if r != rank]
            if (
                state in ELSEWHERE
                and others
                and 2 * sum(s is RankState.IN_COLLECTIVE for s in others) >= len(others)
            ):
                counts[rank] += 1
    return counts


def _others_wait(view: LiveView, rank: int) -> bool:
    """Every other rank waits in a collective in most samples: they wait *for* ``rank``.

    In a healthy job that runs in lock step, whichever rank is last at a sample looks late
    while a changing majority of the others waits. On the demo job (4 ranks, 5 samples),
    "late in 2 or more samples" named a healthy rank in 3 of 30 triages, and "late in most
    samples" in 1 of 40; a real straggler's peers waited in 3 or more of 5 samples in all
    30 triages of the straggler job."""
    return all(
        2 * sum(RankState(s.state) is RankState.IN_COLLECTIVE for s in samples) > len(samples)
        for r, samples in view.samples.items()
        if r != rank
    )


SURE_SAMPLES = 5
"""A rank late in every one of at least this many samples is a straggler for sure."""


def _surely_late(view: LiveView, rank: int, late: int, samples: int) -> bool:
    """Late in every sample, with two peers or more waiting for it, caught at one place.

    One peer's wait is weak proof: of two ranks in lock step on a loaded host, one can be
    last in every sample (a healthy restarted 2-rank DDP job, 1 run in 3). Late in 4 of 5
    is no proof either: a healthy 4-rank Lightning job on a loaded 2-core host had one rank
    late in 4 of 5 samples (1 fresh-clone test run in 4), while the real straggler of the
    slow Lightning job (0.5 s of sleep a step) was late in 5 of 5 in 18 of 30 looks and in
    4 of 5 in 10: those stay stragglers, of medium confidence. Late in all 5 is no proof
    alone: a CI host left one rank of that healthy job behind in every sample (1 run). A rank
    that a scheduler leaves behind is caught wherever its step was (the 2 of 30 looks that
    named that job's lagging rank: 4 and 5 stacks in its 5 samples), while the slow job's
    straggler was in its sleep in 3 or more of 5 samples in all 30 looks."""
    return (
        late == samples >= SURE_SAMPLES
        and len(view.samples) > 2
        and _caught_at_one_place(view.samples[rank])
    )


def _caught_at_one_place(samples: Sequence[ProgressSample]) -> bool:
    """Most samples show one stack: the rank is slow at something, not merely behind."""
    places = Counter(s.stack_signature for s in samples if s.stack_signature)
    return bool(places) and 2 * places.most_common(1)[0][1] > len(samples)


def progressing(view: LiveView) -> list[Candidate]:
    if not view.progress:
        # the weakest answer: any rule that sees a hang in the structure wins over it
        return [no_proof(view)] if view.states and not view.dead else []
    counts = straggler_counts(view).most_common(2)
    total = min((len(v) for v in view.samples.values()), default=0)
    rank, n = counts[0] if counts else (-1, 0)
    runner_up = counts[1][1] if len(counts) > 1 else 0
    if 2 * n > total and n >= 2 * runner_up and _others_wait(view, rank):
        summary = (
            f"the job progresses, but {rank_prose([rank])} is in its own code while the others "
            f"wait in {n} of {total} samples: it is the straggler ({view.stack(rank)})"
        )
        sure = Confidence.HIGH if _surely_late(view, rank, n, total) else Confidence.MEDIUM
        lines = [
            pyspy_line(rank, f"sample {s.time_s:.2f}s: {s.state} {s.stack_signature}")
            for s in view.samples[rank]
        ]
        return [
            Candidate(
                HangClass.STRAGGLER,
                (rank,),
                sure,
                summary,
                60,
                evidence=tuple(lines),
                rule="stack_straggler",
            )
        ]
    return [
        Candidate(
            HangClass.HEALTHY,
            (),
            Confidence.MEDIUM,
            "every rank made progress during the window and none lags",
            30,
            rule="progressing",
        )
    ]
