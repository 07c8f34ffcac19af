"""A preflight run: what the renderers and the CLI's exit code are made from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from doctor.jobconfig.timeouts import TimeoutChain
from doctor.model import Finding, Severity

SCHEMA = "nccl-doctor/preflight/v1"


@dataclass(frozen=True)
class Report:
    """The lane judged and every finding in check order, with what is shown beside them."""

    lane: str
    findings: tuple[Finding, ...]
    lane_source: str = ""
    """Where the lane came from: ``--lane``, the config, or what ``auto`` detected."""
    conf_files: tuple[str, ...] = ()
    """NCCL config files merged into the environment that was judged."""
    timeouts: TimeoutChain | None = None
    """The resolved timeout chain (the ``timeout.*`` checks judged this one)."""

    def count(self, severity: Severity) -> int:
        """How many findings have ``severity``."""
        return sum(1 for f in self.findings if f.severity is severity)

    def to_json(self) -> dict[str, Any]:
        """The ``nccl-doctor/preflight/v1`` document of DESIGN.md (plus ``timeouts``)."""
        doc: dict[str, Any] = {
            "schema": SCHEMA,
            "lane": self.lane,
            "findings": [f.to_json() for f in self.findings],
            "summary": {s.value: self.count(s) for s in Severity},
        }
        if self.timeouts is not None:
            doc["timeouts"] = self.timeouts.to_json()
        return doc
