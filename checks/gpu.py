"""GPU health through NVML (``gpu.*``, ``nvlink.*``): placeholder until issue 6 lands."""

from __future__ import annotations

from checks.facts import Facts
from doctor.model import Finding, Severity


def run(facts: Facts) -> list[Finding]:
    return [Finding("gpu.health", Severity.SKIP, "nvml",
                    "GPU health checks are not built yet (issue 6).")]
