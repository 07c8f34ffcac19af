"""Rules over live evidence (stacks, liveness, NVML, NCCL logs): issue 4 builds them."""

from __future__ import annotations

from doctor.evidence import Evidence
from doctor.verdict.candidate import Candidate


def candidates(evidence: Evidence) -> list[Candidate]:
    return []
