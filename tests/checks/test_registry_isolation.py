"""A crash in one check family must not take the report down."""

from __future__ import annotations

from doctor.checks.facts import Facts
from doctor.checks.registry import run_family
from doctor.model import Severity


def test_a_crashing_family_becomes_one_fail_finding() -> None:
    # GIVEN a family whose check raises
    def broken(facts: Facts) -> list:
        raise KeyError("boom")

    # WHEN it runs through the registry THEN it yields one fail finding naming the family
    (finding,) = run_family("gpu", broken, Facts(env={}))
    assert finding.check == "gpu.internal-error"
    assert finding.severity is Severity.FAIL
    assert "KeyError" in finding.message


def test_a_healthy_family_passes_through_unchanged() -> None:
    assert run_family("x", lambda facts: [], Facts(env={})) == []
