"""``gpu.*`` and ``nvlink.*`` rules over the fake fleets, pure: fleet in, findings out."""

from __future__ import annotations

from dataclasses import replace

import pytest

from doctor.checks import gpu
from doctor.gpu.nvml import Fleet, NvLink, read_fleet
from doctor.model import Finding, Severity

IDS = [check for check, _, _ in gpu.CHECKS]


def fleet(name: str) -> Fleet:
    return read_fleet({"NCCL_DOCTOR_FAKE_NVML": name})


def fired(findings: list[Finding]) -> set[tuple[str, str, str]]:
    """(check, severity, subject prefix) of every finding that is not a pass."""
    return {
        (f.check, f.severity.value, f.subject.split(" (")[0])
        for f in findings
        if f.severity is not Severity.PASS
    }


# (fleet, every non-pass finding it must give: check, severity, subject)
EXPECTED = [
    ("healthy-8xh100", set()),
    ("healthy-8xa100", set()),
    ("pcie-degraded", {("gpu.pcie-link", "warn", "GPU 3"), ("gpu.pcie-link", "warn", "GPU 5")}),
    (
        "xid79",
        {
            ("gpu.xid", "fail", "GPU 5"),
            ("gpu.xid", "fail", "PCI 0000:ab:00"),
            ("gpu.xid", "warn", "GPU 1"),
        },
    ),
    (
        "throttled",
        {
            ("gpu.throttle", "fail", "GPU 2"),
            ("gpu.throttle", "warn", "GPU 6"),
            ("gpu.clocks", "warn", "GPU 2"),
        },
    ),
    (
        "ecc-nvlink",
        {
            ("gpu.ecc", "fail", "GPU 1"),
            ("gpu.retired-pages", "fail", "GPU 1"),
            ("gpu.recovery-action", "fail", "GPU 1"),
            ("gpu.persistence", "warn", "GPU 0, GPU 1, GPU 2, GPU 3, GPU 4, GPU 5, GPU 6, GPU 7"),
            ("gpu.mig", "warn", "GPU 7"),
            ("gpu.processes", "warn", "GPU 0"),
            ("nvlink.down", "fail", "GPU 4"),
            ("nvlink.errors", "warn", "GPU 6"),
        },
    ),
]


@pytest.mark.parametrize(("name", "expected"), EXPECTED, ids=[e[0] for e in EXPECTED])
def test_each_fleet_fires_exactly_its_faults(
    name: str, expected: set[tuple[str, str, str]]
) -> None:
    findings = gpu.evaluate(fleet(name))
    assert fired(findings) == expected
    assert {f.check for f in findings} == set(IDS), "every rule reports on every fleet"


def test_every_rule_fires_on_some_fleet() -> None:
    hit = {check for _, expected in EXPECTED for check, _, _ in expected}
    assert hit == set(IDS)


def test_no_gpu_is_skip_for_every_rule_never_warn() -> None:
    findings = gpu.evaluate(Fleet(unavailable="NVML cannot start: NVML Shared Library Not Found"))
    assert [f.check for f in findings] == IDS
    assert {f.severity for f in findings} == {Severity.SKIP}
    assert "Shared Library Not Found" in findings[0].message


def test_this_host_without_a_gpu_skips_through_run() -> None:
    # GIVEN the facts gathered on this host (no GPU, no NVML)
    from doctor.checks.gather import gather
    from doctor.jobconfig.config import Config

    facts = gather({}, Config(), "single-node")
    # WHEN the GPU family judges them THEN every rule skips with NVML's reason
    findings = gpu.run(facts)
    assert {f.severity for f in findings} == {Severity.SKIP}
    assert len(findings) == len(IDS)
    assert facts.fleet.unavailable in findings[0].message


def test_the_gpu_family_judges_the_gathered_fleet_and_reads_nothing(monkeypatch) -> None:
    # GIVEN facts whose fleet was gathered through the fake NVML (an XID 79 GPU)
    from doctor.checks.gather import gather
    from doctor.jobconfig.config import Config

    facts = gather({"NCCL_DOCTOR_FAKE_NVML": "xid79"}, Config(), "single-node")
    # WHEN NVML can no longer be read at all
    monkeypatch.setattr("doctor.gpu.nvml.read_fleet", lambda *a, **k: 1 / 0)
    # THEN the checks still judge the facts: they read nothing themselves
    assert ("gpu.xid", "fail", "GPU 5") in fired(gpu.run(facts))


def test_idle_downshift_and_idle_clocks_are_not_faults() -> None:
    g = fleet("healthy-8xh100").gpus[0]
    assert (g.pcie_gen, g.pcie_gen_max, g.sm_clock_mhz, g.utilization_pct) == (1, 5, 345, 0.0)
    assert "gpu_idle" in g.throttle_reasons
    assert fired(gpu.pcie_link(fleet("healthy-8xh100"))) == set()


def one_gpu(name: str = "healthy-8xh100", **changes: object) -> Fleet:
    base = fleet(name)
    return replace(base, gpus=(replace(base.gpus[0], **changes),))


@pytest.mark.parametrize(
    ("rule", "changes", "severity", "words"),
    [
        (gpu.ecc, {"ecc_aggregate_uncorrected": 3}, "warn", "in the GPU's lifetime"),
        (gpu.ecc, {"ecc_enabled": False}, "warn", "ECC is off"),
        (gpu.retired_pages, {"remap_failure": True}, "fail", "row remap failed"),
        (gpu.retired_pages, {"retired_pages_pending": True}, "fail", "waits for a GPU reset"),
        (gpu.throttle, {"throttle_reasons": ("hw_power_brake_slowdown",)}, "fail", "power_brake"),
        (gpu.xid, {"xid_events": (48,)}, "fail", "double-bit ECC"),
        (gpu.xid, {"xid_events": (999,)}, "warn", "XID catalogue"),
        (gpu.recovery_action, {"recovery_action": "node_reboot"}, "fail", "node_reboot"),
        (gpu.nvlink_errors, {"nvlinks": (NvLink(0, True, replay_errors=5),)}, "warn", "5 replay"),
    ],
)
def test_rule_details(
    rule: gpu.Rule, changes: dict[str, object], severity: str, words: str
) -> None:
    [finding] = rule(one_gpu(**changes))
    assert finding.severity.value == severity
    assert words in finding.message


def test_recovery_fix_names_the_command() -> None:
    [finding] = gpu.recovery_action(one_gpu(recovery_action="gpu_reset"))
    assert finding.fix == "nvidia-smi -i 0 -r"


def test_gpus_without_nvlink_skip_the_nvlink_rules() -> None:
    no_links = one_gpu(nvlinks=())
    assert [f.severity for f in gpu.nvlink_down(no_links)] == [Severity.SKIP]
    assert [f.severity for f in gpu.nvlink_errors(no_links)] == [Severity.SKIP]
