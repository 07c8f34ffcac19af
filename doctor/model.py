"""The values every part of nccl-doctor passes around.

Frozen dataclasses with no I/O: sources build them, pure functions read them,
renderers print them. Preflight speaks in ``Finding`` (its ``Report`` is
``doctor.checks.report``'s); triage and analyze speak in ``Evidence`` (see
``doctor.evidence``) and ``Verdict``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


@dataclass(frozen=True)
class Frame:
    """One Python (or native) frame: py-spy stacks and Flight Recorder entries both carry them."""

    name: str
    filename: str
    line: int
    native: bool = False
    """A frame of compiled code (py-spy ``--native``: C, C++, Cython), not of Python."""
    root: int | None = None
    """The rank a rooted collective (a broadcast) waits for, read from its arguments
    (py-spy ``--locals``: ``src``, DDP's ``authoritative_rank``); None when unknown."""

    def __str__(self) -> str:
        return f"{self.name} ({self.filename}:{self.line})"


class Severity(StrEnum):
    """How bad a finding is; ``skip`` means the check cannot run here."""

    FAIL = "fail"
    WARN = "warn"
    INFO = "info"
    PASS = "pass"
    SKIP = "skip"

    @property
    def rank(self) -> int:
        """Worst first (fail 0 ... skip 4): the order the members are declared in."""
        return _SEVERITY_RANK[self]


_SEVERITY_RANK = {severity: i for i, severity in enumerate(Severity)}


@dataclass(frozen=True)
class Finding:
    """One result of one preflight check."""

    check: str
    """Stable check id from DESIGN.md, e.g. ``env.unknown``."""
    severity: Severity
    subject: str
    """What the finding is about: a variable name, a device, a timeout layer."""
    message: str
    """One or two sentences a person can act on."""
    fix: str = ""
    """The exact ``export``/``unset`` lines or config change that makes it pass."""

    def to_json(self) -> dict[str, Any]:
        """The ``findings[]`` object of preflight's JSON."""
        return {
            "check": self.check,
            "severity": self.severity.value,
            "subject": self.subject,
            "message": self.message,
            "fix": self.fix,
        }


class HangClass(StrEnum):
    """The hang classes of DESIGN.md (``verdict.hang_class``)."""

    COLLECTIVE_MISMATCH = "collective_mismatch"
    CPU_STUCK = "cpu_stuck"
    RANK_LOSS = "rank_loss"
    GPU_HANG = "gpu_hang"
    NETWORK = "network"
    STRAGGLER = "straggler"
    BOOTSTRAP = "bootstrap"
    COMPILE_WARMUP = "compile_warmup"
    UNSUPPORTED_OP = "unsupported_op"
    HEALTHY = "healthy"
    UNKNOWN = "unknown"

    @property
    def is_hang(self) -> bool:
        """Whether ``--once`` exits 1 for this class."""
        return self not in (HangClass.HEALTHY, HangClass.STRAGGLER)


class Confidence(StrEnum):
    """How sure a verdict is; ``low`` also marks a tie the evidence cannot break."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


@dataclass(frozen=True)
class CollectiveRef:
    """The collective a verdict points at."""

    process_group: str
    seq: int | None
    op: str

    def to_json(self) -> dict[str, Any]:
        """The ``verdict.collective`` object of the triage JSON."""
        return {"process_group": self.process_group, "seq": self.seq, "op": self.op}


@dataclass(frozen=True)
class EvidenceLine:
    """One line of evidence behind a verdict, attributed to its source."""

    source: str
    """``flight-recorder``, ``py-spy``, ``process``, ``nvml``, ``nccl-log``, ``agent``..."""
    rank: int | None
    text: str

    def to_json(self) -> dict[str, Any]:
        """One ``evidence[]`` object of the triage JSON."""
        return {"source": self.source, "rank": self.rank, "text": self.text}


@dataclass(frozen=True)
class Verdict:
    """The one answer of triage and analyze."""

    hang_class: HangClass
    culprit_ranks: tuple[int, ...]
    confidence: Confidence
    summary: str
    collective: CollectiveRef | None = None
    evidence: tuple[EvidenceLine, ...] = ()
    missing_evidence: tuple[str, ...] = ()
    """What would have separated classes we could not tell apart."""

    @property
    def playbook(self) -> str:
        """The playbook to follow: one per hang class (``nccl-doctor playbook``)."""
        return self.hang_class.value

    def to_json(self) -> dict[str, Any]:
        """The ``verdict`` object of the triage JSON (DESIGN.md)."""
        return {
            "hang_class": self.hang_class.value,
            "culprit_ranks": list(self.culprit_ranks),
            "confidence": self.confidence.value,
            "summary": self.summary,
            "collective": self.collective.to_json() if self.collective else None,
            "playbook": self.playbook,
            "missing_evidence": list(self.missing_evidence),
        }


@dataclass(frozen=True)
class Skipped:
    """A probe that could not run: evidence of absence, never an exception."""

    rank: int | None
    probe: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        """One ``skipped[]`` object of the triage JSON."""
        return {"rank": self.rank, "probe": self.probe, "reason": self.reason}
