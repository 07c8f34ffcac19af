"""One triage observation: what was collected and what it means, frozen together.

The collector produces these; the CLI renders one (``--once``), the TUI
shows the newest, a bundle stores one. Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.evidence import Evidence
from doctor.flight.align import FlightAnalysis
from doctor.model import Verdict
from doctor.verdict.classify import Analysis


@dataclass(frozen=True)
class TriageSnapshot:
    """The evidence of one look and its analysis, computed once: every pane reads these."""

    evidence: Evidence
    analysis: Analysis
    taken_at: float
    """Wall-clock time (``time.time()``) the collection finished."""
    host_documents: tuple[tuple[str, str], ...] = ()
    """Multi-host triage: (host, its ``nccl-doctor/host-evidence/v1`` JSON), as received;
    a bundle keeps them."""

    @property
    def verdict(self) -> Verdict:
        """The verdict of this look (``analysis.verdict``)."""
        return self.analysis.verdict

    @property
    def flight(self) -> FlightAnalysis | None:
        """The cross-rank Flight Recorder alignment the verdict was judged from."""
        return self.analysis.flight
