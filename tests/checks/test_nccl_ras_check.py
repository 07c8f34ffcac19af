"""`stack.nccl-ras`: NCCL versions whose RAS is known to crash, with the facts cited."""

from __future__ import annotations

import pytest

from doctor.checks.facts import Facts
from doctor.checks.stack import parse_version, ras, ras_crashes
from doctor.model import Severity


@pytest.mark.parametrize(
    ("nccl", "env", "severity", "cites"),
    [
        ("2.21.5", {}, Severity.PASS, ""),  # before RAS existed
        ("2.24.3", {}, Severity.WARN, "xgboost#11154"),  # unload crash and the init race
        ("2.26.5+cuda12.8", {}, Severity.WARN, "#1718"),
        ("2.26.5", {"NCCL_RAS_ENABLE": "0"}, Severity.PASS, ""),
        ("2.27.5", {}, Severity.PASS, ""),  # fixed, and nothing reported against it
        ("2.27.7", {}, Severity.WARN, "#1996"),
        ("2.29.7", {}, Severity.WARN, "#2346"),
        ("", {}, Severity.SKIP, ""),
    ],
)
def test_ras_crash_versions(nccl, env, severity, cites) -> None:
    # GIVEN an NCCL version and the job's environment WHEN the check runs
    finding = ras(Facts(env=env, versions={"nccl": nccl} if nccl else {}))
    # THEN it warns exactly for the versions with a known crash, citing where it is stated
    assert finding.severity is severity
    assert cites in finding.message
    if severity is Severity.WARN:
        assert finding.fix == "export NCCL_RAS_ENABLE=0"


def test_every_entry_cites_a_source_and_parses() -> None:
    crashes = ras_crashes()
    assert len(crashes) >= 4
    assert all(c.sources and c.what for c in crashes)
    assert parse_version("2.27.7-1") == (2, 27, 7) and parse_version("x") is None
