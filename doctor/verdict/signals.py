"""Rules over the signals that need no stack: NCCL/PyTorch log lines and NVML.

Strengths (see ``doctor.verdict.live`` for the whole table): unsupported_op
85, gpu_hang 85, bootstrap 75, network 60 (30 when a rank is dead: a lost
peer explains its survivors' transport errors). The ranks that logged the
line are the culprits, except for bootstrap and network errors, which name
the rank that *saw* the failure: the confidence says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from doctor.evidence import Evidence, LogEvent
from doctor.model import CollectiveRef, Confidence, EvidenceLine, HangClass
from doctor.ranks import rank_prose
from doctor.verdict.candidate import Candidate

_LOG_RULES = (
    (
        "unsupported_op",
        HangClass.UNSUPPORTED_OP,
        85,
        Confidence.HIGH,
        "the backend rejected {op} on {ranks}: the job crashed in a way that looks like a hang; "
        "use an op the backend supports (or another backend)",
    ),
    (
        "bootstrap",
        HangClass.BOOTSTRAP,
        75,
        Confidence.MEDIUM,
        "communicator creation failed on {ranks} ({text}): check MASTER_ADDR/port reachability "
        "and NCCL_SOCKET_IFNAME",
    ),
    (
        "network",
        HangClass.NETWORK,
        60,
        Confidence.LOW,
        "transport errors on {ranks} ({text}): check the links and NICs between them",
    ),
)


def _rank_list(events: Sequence[LogEvent]) -> tuple[int, ...]:
    return tuple(sorted({e.rank for e in events if e.rank is not None}))


def log_candidates(evidence: Evidence, dead: Sequence[int]) -> list[Candidate]:
    out = []
    for kind, cls, strength, sure, template in _LOG_RULES:
        events = [e for e in evidence.logs if e.kind == kind]
        if not events:
            continue
        ranks = _rank_list(events)
        first = events[0]
        summary = template.format(
            op=first.op or "an op",
            ranks=rank_prose(ranks) if ranks else "some rank",
            text=first.text[:120],
        )
        lines = tuple(EvidenceLine("nccl-log", e.rank, e.text) for e in events[:8])
        ref = (
            CollectiveRef(first.process_group or "unknown", first.seq, first.op)
            if kind == "unsupported_op" and first.op
            else None
        )
        weaker = kind == "network" and bool(dead)
        out.append(
            Candidate(
                cls,
                ranks,
                Confidence.LOW if weaker else sure,
                summary,
                30 if weaker else strength,
                collective=ref,
                evidence=lines,
                rule=f"log_{kind}",
            )
        )
    return out


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
    return log_candidates(evidence, dead) + gpu_candidates(evidence)
