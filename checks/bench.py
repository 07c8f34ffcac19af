"""``bench.allreduce``: placeholder until issue 6 lands."""

from __future__ import annotations

from checks.facts import Facts
from doctor.model import Finding, Severity


def run(facts: Facts) -> list[Finding]:
    return [Finding("bench.allreduce", Severity.SKIP, "allreduce",
                    "the AllReduce benchmark is not built yet (issue 6).")]
