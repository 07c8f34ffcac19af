"""What a rule proposes; ``doctor.verdict.classify`` turns the strongest into the verdict.

Rules are pure functions ``Evidence -> list[Candidate]``: Flight Recorder
rules (``doctor.verdict.flight_rules``) and live-evidence rules over stacks,
liveness, NVML and logs (``doctor.verdict.live``). Keeping each rule's
conclusion as data lets the classifier reason across them (a rank missing in
its data-parallel group explains the tensor-parallel peers waiting on it) and
lets tests assert on each rule alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.model import CollectiveRef, Confidence, EvidenceLine, HangClass

EVEN_BATCHES = (
    "give every rank the same number of batches (DistributedSampler, drop_last, the Join context)"
)
"""What to do where a rank left the loop before the others, its data run out: the advice of
the live reading of it (``live``) and the log reading (``log_waits``)."""


@dataclass(frozen=True)
class Candidate:
    """One rule's conclusion about the job."""

    hang_class: HangClass
    culprit_ranks: tuple[int, ...]
    confidence: Confidence
    summary: str
    strength: int
    """How decisive the evidence is (0-100); ``classify`` documents the ordering."""
    collective: CollectiveRef | None = None
    evidence: tuple[EvidenceLine, ...] = ()
    missing_evidence: tuple[str, ...] = ()
    rule: str = ""
    """The id of the rule that proposed it, for tests and --json debugging."""
