"""The one analysis path: raw evidence in, the Flight Recorder alignment and one verdict out.

``analyse(evidence)`` is the only place that aligns Flight Recorder dumps
across ranks (``doctor.flight.align``) and judges: live triage, ``analyze``
of a bundle or of dumps, and the watch loop all reach their verdict through
it (``classify`` is its verdict). It asks the Flight Recorder rules
(``flight_rules``) and the live-evidence rules (``live``) for candidates and
combines them:

1. **Ordering.** Candidates sort by ``strength`` (how decisive the evidence
   is), then confidence (high > medium > low), then class precedence
   (``rank_loss`` > ``collective_mismatch`` > ``gpu_hang`` > ``cpu_stuck`` >
   ``compile_warmup`` > ``unsupported_op`` > ``bootstrap`` > ``network`` >
   ``straggler`` > ``unknown`` > ``healthy``), then rule id, so the result
   never depends on the order rules ran in.
2. **Refinement.** An ``unknown`` candidate (Flight Recorder sees who stopped,
   not why) is refined by the strongest specific candidate whose culprits
   overlap it: the specific class wins, both evidence lists are kept, and the
   refined one's missing evidence is dropped (it was found). A candidate weaker
   than ``REFINES`` decides only where nothing else does, and refines nothing.
3. **Agreement.** Candidates of the same class whose culprits overlap merge:
   culprits are the union, evidence concatenated, and confidence rises one
   step when two different rules agree.
4. **Conflict.** When the two best candidates name different specific hang
   classes with the same strength, the verdict keeps the first but its
   confidence drops to low and the summary names the alternative.
5. **Progress beats a snapshot.** When a live rule saw the job progress
   (``healthy`` or ``straggler`` at medium confidence or more, from sampling
   over time), Flight Recorder's "stopped" and "network" candidates are
   dropped: dumps taken at slightly different moments of a moving job always
   show someone a collective behind. The converse: when sampling proved the job
   did not move (``job_progress`` is False), a log's ``healthy`` is dropped: a
   log says how the job was when it was written (NCCL RAS sees a communicator
   whose collective never finishes as running, with no errors), the samples say
   how it is now.
6. **Tie.** Two ranks that disagree 1:1 with no other evidence stay a tie:
   both are named, confidence low (the rule says so; nothing here guesses).
7. No candidate at all is ``unknown`` with confidence low.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from doctor.evidence import Evidence
from doctor.flight.align import FlightAnalysis, align
from doctor.gcpause import collector_paused
from doctor.model import Confidence, HangClass, Verdict
from doctor.ranks import rank_prose
from doctor.verdict import flight_rules, hosts, live, log_rules
from doctor.verdict.candidate import Candidate
from doctor.verdict.view import job_progress

PRECEDENCE = (
    HangClass.RANK_LOSS,
    HangClass.COLLECTIVE_MISMATCH,
    HangClass.GPU_HANG,
    HangClass.CPU_STUCK,
    HangClass.COMPILE_WARMUP,
    HangClass.UNSUPPORTED_OP,
    HangClass.BOOTSTRAP,
    HangClass.NETWORK,
    HangClass.STRAGGLER,
    HangClass.UNKNOWN,
    HangClass.HEALTHY,
)
_CONF = {Confidence.HIGH: 2, Confidence.MEDIUM: 1, Confidence.LOW: 0}
_UP = {
    Confidence.LOW: Confidence.MEDIUM,
    Confidence.MEDIUM: Confidence.HIGH,
    Confidence.HIGH: Confidence.HIGH,
}


REFINES = 25
"""The weakest candidate that refines an ``unknown`` one. Weaker ones are readings that
decide only where nothing else is found (a set-up message printed before collectives
that ran, a lone retry, a healthy report): beside a stall they are history, not its cause."""
SNAPSHOT_RULES = ("fr.stopped", "fr.no-dump", "fr.network", "fr.alone-stuck")


@dataclass(frozen=True)
class Analysis:
    """What one snapshot of evidence means: renderers that draw the alignment (the TUI's
    Flight Recorder grid, the divergence table) take it from here, never align again."""

    verdict: Verdict
    flight: FlightAnalysis | None
    """Cross-rank Flight Recorder alignment; None when no dump was found."""


def align_evidence(evidence: Evidence) -> FlightAnalysis | None:
    """The alignment of the evidence's dumps (None without any dump file, readable or not)."""
    if not evidence.has_flight:
        return None
    world = evidence.world_size if evidence.world_size is not None else evidence.ranks_expected
    return align(evidence.dumps, evidence.unreadable_dumps, world_size=world)


def gather(evidence: Evidence, flight: FlightAnalysis | None = None) -> list[Candidate]:
    """Every rule's candidates, in the documented order (best first), less the Flight
    Recorder snapshot candidates that live progress contradicts (rule 5)."""
    live_found = live.candidates(evidence, flight)
    moving = any(
        c.hang_class in (HangClass.HEALTHY, HangClass.STRAGGLER)
        and c.confidence is not Confidence.LOW
        for c in live_found
    )
    logged = log_rules.candidates(evidence)
    # a pass over every rank, so only when a log says healthy (live.candidates did it too)
    stalled = any(c.hang_class is HangClass.HEALTHY for c in logged) and (
        job_progress(evidence) is False
    )
    found = (
        [c for c in flight_rules.candidates(flight) if not (moving and c.rule in SNAPSHOT_RULES)]
        + live_found
        + [c for c in logged if not (stalled and c.hang_class is HangClass.HEALTHY)]
        + hosts.host_candidates(evidence)
    )
    return sorted(found, key=_order)


def _order(c: Candidate) -> tuple[int, int, int, str]:
    return (-c.strength, -_CONF[c.confidence], PRECEDENCE.index(c.hang_class), c.rule)


def _overlap(a: Candidate, b: Candidate) -> bool:
    return bool(set(a.culprit_ranks) & set(b.culprit_ranks)) or not (
        a.culprit_ranks and b.culprit_ranks
    )


def _merge(into: Candidate, other: Candidate, *, refine: bool) -> Candidate:
    culprits = tuple(dict.fromkeys(into.culprit_ranks + other.culprit_ranks))
    conf = into.confidence if refine or into.rule == other.rule else _UP[into.confidence]
    return replace(
        into,
        culprit_ranks=culprits if not refine else into.culprit_ranks,
        confidence=conf,
        evidence=into.evidence + other.evidence,
        strength=max(into.strength, other.strength),
        collective=into.collective or other.collective,
        missing_evidence=into.missing_evidence
        if refine
        else tuple(dict.fromkeys(into.missing_evidence + other.missing_evidence)),
    )


def combine(cands: list[Candidate]) -> Candidate | None:
    """Rules 2-4 of the module docstring over candidates sorted best first."""
    if not cands:
        return None
    specific = [c for c in cands if c.hang_class is not HangClass.UNKNOWN]
    best = cands[0]
    if best.hang_class is HangClass.UNKNOWN:
        refiner = next(
            (
                c
                for c in specific
                if c.culprit_ranks and c.strength >= REFINES and _overlap(c, best)
            ),
            None,
        )
        if refiner is not None:
            best = _merge(refiner, best, refine=True)
    for other in cands:
        if (
            other is not best
            and other.hang_class is best.hang_class
            and _overlap(best, other)
            and other.rule != best.rule
        ):
            best = _merge(best, other, refine=False)
    rival = next(
        (
            c
            for c in specific
            if c.hang_class not in (best.hang_class, HangClass.HEALTHY)
            and c.strength == best.strength
        ),
        None,
    )
    if rival is not None and best.hang_class is not HangClass.UNKNOWN:
        best = replace(
            best,
            confidence=Confidence.LOW,
            summary=f"{best.summary} (Equally strong: {rival.hang_class.value}, "
            f"{rank_prose(rival.culprit_ranks)}.)",
        )
    return best


@collector_paused()
def analyse(evidence: Evidence) -> Analysis:
    """Align once, judge once: the verdict and the alignment it came from; pure."""
    flight = align_evidence(evidence)
    return Analysis(judge(evidence, flight), flight)


def classify(evidence: Evidence) -> Verdict:
    """The one verdict for ``evidence`` (``analyse(evidence).verdict``); pure."""
    return analyse(evidence).verdict


def judge(evidence: Evidence, flight: FlightAnalysis | None) -> Verdict:
    """The verdict from the evidence and its alignment (``analyse`` computes the latter)."""
    best = combine(gather(evidence, flight))
    if best is None:
        return Verdict(
            HangClass.UNKNOWN,
            (),
            Confidence.LOW,
            "No evidence to judge: no readable dump, stack or process state.",
            missing_evidence=("Flight Recorder dumps or live stacks of the ranks",),
        )
    return Verdict(
        best.hang_class,
        tuple(best.culprit_ranks),
        best.confidence,
        best.summary,
        best.collective,
        best.evidence,
        best.missing_evidence,
    )
