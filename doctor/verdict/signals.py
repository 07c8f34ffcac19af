"""Rules over the signals that need no stack: NVML (gpu_hang, strength 85; 40, low, when its
only XIDs are a program's fault or a record).

Log lines are judged by ``doctor.verdict.log_rules``; every rule writes ranks with
``doctor.ranks.rank_prose``.
"""

from __future__ import annotations

from collections.abc import Sequence

from doctor.evidence import Evidence, GpuSample
from doctor.logs.kernel import PROGRAM_XIDS, RECORD_XIDS
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
    failed = any(g.ecc_uncorrected or set(g.xid_events) - _NOT_FAILURES for g in bad)
    summary = (
        f"the GPU of {rank_prose(ranks)} reported "
        + (f"XID {', '.join(map(str, xids))}" if xids else "uncorrected ECC errors")
        + (
            ": the collective cannot finish there; drain the node and reset the GPU"
            if failed
            else ": an XID a program's own fault raises, or one that only records (the GPU "
            "kept running): a suspect, not a failure; its rank's stack and error say more"
        )
    )
    return [
        Candidate(
            HangClass.GPU_HANG,
            ranks,
            Confidence.HIGH if failed else Confidence.LOW,
            summary,
            85 if failed else 40,
            evidence=lines,
            rule="nvml_gpu_fault",
        )
    ]


_NOT_FAILURES = PROGRAM_XIDS | RECORD_XIDS
"""XIDs that are no GPU failure: a program's fault (13, 31, 43, 45...) or a record (63, 92);
the preflight check warns of them, it does not fail (``checks/gpu.py``)."""


GPU_BUSY_PCT = 90.0
"""NVML utilisation at or above which a GPU ran a kernel through the whole sample period:
a kernel that spins (NCCL's wait for a peer spins too), not an idle queue."""


def gpus_of(evidence: Evidence, ranks: Sequence[int]) -> dict[int, GpuSample]:
    """The NVML sample of each of ``ranks`` that has one."""
    wanted = set(ranks)
    return {g.rank: g for g in evidence.gpus if g.rank in wanted}


def gpu_line(gpu: GpuSample) -> EvidenceLine:
    """What NVML read of a rank's GPU, in a line."""
    read = [
        f"{gpu.utilization_pct:g}% busy" if gpu.utilization_pct is not None else "",
        f"{gpu.power_w:.0f} W" if gpu.power_w is not None else "",
        f"SM clock {gpu.sm_clock_mhz} MHz" if gpu.sm_clock_mhz is not None else "",
    ]
    return EvidenceLine("nvml", gpu.rank, f"GPU {gpu.index}: " + ", ".join(filter(None, read)))


def is_busy(gpu: GpuSample) -> bool:
    return gpu.utilization_pct is not None and gpu.utilization_pct >= GPU_BUSY_PCT


def signal_candidates(evidence: Evidence, dead: Sequence[int]) -> list[Candidate]:
    """NVML's word; log lines are judged by ``doctor.verdict.log_rules``."""
    return gpu_candidates(evidence)
