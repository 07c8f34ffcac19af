"""Rules over the signals that need no stack: NCCL/PyTorch log lines and NVML.

Strengths (see ``doctor.verdict.live`` for the whole table): unsupported_op
85, gpu_hang 85, bootstrap 75, network 60 (30 when a rank is dead: a lost
peer explains its survivors' transport errors). The ranks that logged the
line are the culprits, except for bootstrap and network errors, which name
the rank that *saw* the failure: the confidence says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from doctor.evidence import Evidence, LogEvent
from doctor.model import CollectiveRef, Confidence, EvidenceLine, HangClass
from doctor.verdict.candidate import Candidate


def names(ranks: Iterable[int]) -> str:
    """``[2]`` -> ``rank 2``; ``[0, 1, 3]`` -> ``ranks 0, 1 and 3``."""
    items = [str(r) for r in sorted(ranks)]
    if len(items) == 1:
        return f"rank {items[0]}"
    return f"ranks {', '.join(items[:-1])} and {items[-1]}" if items else "no rank"


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
            ranks=names(ranks) if ranks else "some rank",
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
        f"the GPU of {names(ranks)} reported "
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
