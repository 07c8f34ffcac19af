"""``stack.versions`` (info): the versions a bug report and a playbook need first."""

from __future__ import annotations

from doctor.checks.facts import Facts
from doctor.model import Finding, Severity

ORDER = ("torch", "nccl", "cuda", "driver", "python")


def run(facts: Facts) -> list[Finding]:
    v = facts.versions
    text = ", ".join(f"{name} {v.get(name, 'unknown')}" for name in ORDER)
    return [Finding("stack.versions", Severity.INFO, "versions", text + ".")]
