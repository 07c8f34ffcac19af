"""One triage observation: what was collected and what it means, frozen together.

The collector produces these; the CLI renders one (``--once``), the TUI
shows the newest, a bundle stores one. Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.evidence import Evidence
from doctor.model import Verdict


@dataclass(frozen=True)
class TriageSnapshot:
    evidence: Evidence
    verdict: Verdict
    taken_at: float
    """Wall-clock time (``time.time()``) the collection finished."""
    host_documents: tuple[tuple[str, str], ...] = ()
    """Multi-host triage: (host, its ``nccl-doctor/host-evidence/v1`` JSON), as received;
    a bundle keeps them."""
