"""Rules over the signals that need no stack: NVML (gpu_hang, strength 85).

Log lines are judged by ``doctor.verdict.log_rules``; every rule writes ranks with
``doctor.ranks.rank_prose``.
"""

from __future__ import annotations

from collections.abc import Sequence

from doctor.evidence import Evidence
from doctor.model import Confidence, EvidenceLine, HangClass
from doctor.ranks import rank_prose
from doctor.verdict.candidate import Candidate


def gpu_candidates(evidence: Evidence) -> list[Candidate]:
    bad = [g for g in evidence.gpus if g.rank is not None and (g.xid_events or g.ecc_uncorrected)]
    if not bad:
        return []
    ranks = tuple(sorted({g.rank for g in bad if g.rank is not None}))
    lines = tuple(
        EvidenceLine(
            "nvml",
            g.rank,
            f"GPU {g.index}: XID {list(g.xid_events)}, "
            f"uncorrected ECC {g.ecc_uncorrected or 0}, "
            f"utilization {g.utilization_pct}%",
        )
        for g in bad
    )
    xids = sorted({x for g in bad for x in g.xid_events})
    summary = (
        f"the GPU of {rank_prose(ranks)} reported "
        + (f"XID {', '.join(map(str, xids))}" if xids else "uncorrected ECC errors")
        + ": the collective cannot finish there; drain the node and reset the GPU"
    )
    return [
        Candidate(
            HangClass.GPU_HANG,
            ranks,
            Confidence.HIGH,
            summary,
            85,
            evidence=lines,
            rule="nvml_gpu_fault",
        )
    ]


def signal_candidates(evidence: Evidence, dead: Sequence[int]) -> list[Candidate]:
    """NVML's word; log lines are judged by ``doctor.verdict.log_rules``."""
    return gpu_candidates(evidence)
