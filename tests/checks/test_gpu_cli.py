"""GPU health through the real CLI: ``preflight --json`` with the fake NVML named in the env."""

from __future__ import annotations

import json

import pytest
from clitools import clean_env, run_cli
from test_gpu_checks import EXPECTED, IDS


def gpu_findings(fleet: str | None) -> list[dict[str, str]]:
    env = clean_env({"NCCL_DOCTOR_FAKE_NVML": fleet} if fleet else None)
    done = run_cli("preflight", "--json", env=env, timeout=60)
    assert done.returncode in (0, 1), done.stderr
    return [
        f
        for f in json.loads(done.stdout)["findings"]
        if f["check"].split(".")[0] in ("gpu", "nvlink")
    ]


@pytest.mark.parametrize(("name", "expected"), EXPECTED, ids=[e[0] for e in EXPECTED])
def test_fake_fleets_through_preflight(name: str, expected: set[tuple[str, str, str]]) -> None:
    findings = gpu_findings(name)
    got = {
        (f["check"], f["severity"], f["subject"].split(" (")[0])
        for f in findings
        if f["severity"] != "pass"
    }
    assert got == expected
    assert {f["check"] for f in findings} == set(IDS)


def test_exit_code_follows_the_worst_gpu_finding() -> None:
    env = clean_env({"NCCL_DOCTOR_FAKE_NVML": "xid79"})
    assert run_cli("preflight", env=env, timeout=60).returncode == 1


def test_a_host_without_gpu_reports_skip_never_warn() -> None:
    findings = gpu_findings(None)
    assert [f["check"] for f in findings] == IDS
    assert {f["severity"] for f in findings} == {"skip"}
