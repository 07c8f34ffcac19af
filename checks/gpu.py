"""GPU health through NVML: ``gpu.*`` and ``nvlink.*``.

Each rule is a pure function over a :class:`doctor.gpu.nvml.Fleet`; the fleet is
read once at the edge (``doctor.checks.gather``: the real NVML, or the fake one
named by ``NCCL_DOCTOR_FAKE_NVML`` in the job's environment). A host where NVML cannot
be read reports every rule as ``skip`` with the reason, never ``warn``. A rule
with nothing to say reports one ``pass`` for the whole host.
"""

from __future__ import annotations

from collections.abc import Callable

from doctor.checks.facts import Facts
from doctor.gpu.nvml import Fleet, GpuState
from doctor.model import Finding, Severity

XIDS: dict[int, tuple[Severity, str]] = {
    13: (Severity.WARN, "graphics engine exception (usually the application)"),
    31: (Severity.WARN, "GPU memory page fault (usually the application)"),
    43: (Severity.WARN, "GPU stopped processing (usually the application)"),
    45: (Severity.WARN, "preemptive cleanup after a killed context"),
    48: (Severity.FAIL, "double-bit ECC error"),
    61: (Severity.FAIL, "internal micro-controller breakpoint"),
    62: (Severity.FAIL, "internal micro-controller halt"),
    63: (Severity.WARN, "ECC page retirement or row remap recorded"),
    64: (Severity.FAIL, "ECC page retirement or row remap failed"),
    74: (Severity.FAIL, "NVLink error"),
    79: (Severity.FAIL, "GPU has fallen off the bus"),
    92: (Severity.WARN, "high single-bit ECC error rate"),
    94: (Severity.FAIL, "contained ECC error (the GPU needs a reset)"),
    95: (Severity.FAIL, "uncontained ECC error (the GPU needs a reset)"),
    119: (Severity.FAIL, "GSP RPC timeout"),
    120: (Severity.FAIL, "GSP error"),
}
"""XID codes that matter before a job, with the severity we give them."""

HW_THROTTLE = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
SW_THROTTLE = ("sw_thermal_slowdown", "sw_power_cap")
BUSY_PCT = 50.0
"""Utilisation above which low clocks or a downshifted PCIe link are not idle power saving."""
CLOCK_FRACTION = 0.85


def _gpu(g: GpuState) -> str:
    return f"GPU {g.index}" + (f" ({g.bus_id})" if g.bus_id else "")


def _worst(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: f.severity.rank)


def _ok(check: str, fleet: Fleet, what: str) -> list[Finding]:
    return [Finding(check, Severity.PASS, f"{len(fleet.gpus)} GPUs", f"{what}.")]


def _xid(code: int) -> tuple[Severity, str]:
    return XIDS.get(code, (Severity.WARN, "see NVIDIA's XID catalogue"))


def xid(fleet: Fleet) -> list[Finding]:
    """``gpu.xid``: XID events in NVML or the kernel log, and GPUs that fell off the bus."""
    found = []
    for g in fleet.gpus:
        if g.lost:
            found.append(
                Finding(
                    "gpu.xid",
                    Severity.FAIL,
                    _gpu(g),
                    f"GPU {g.index} does not answer NVML: it has fallen off the bus.",
                    "drain the node; reset or power-cycle the GPU, then check it",
                )
            )
        for code in sorted(set(g.xid_events)):
            severity, meaning = _xid(code)
            found.append(Finding("gpu.xid", severity, _gpu(g), f"XID {code}: {meaning}."))
    for bus, code in sorted(set(fleet.unmatched_xids)):
        severity, meaning = _xid(code)
        found.append(
            Finding(
                "gpu.xid",
                severity,
                f"PCI {bus}",
                f"XID {code} in the kernel log for a GPU NVML no longer lists: {meaning}.",
                "drain the node and reset or replace that GPU",
            )
        )
    return _worst(found) or _ok("gpu.xid", fleet, "no XID in NVML events or the kernel log")


def ecc(fleet: Fleet) -> list[Finding]:
    """``gpu.ecc``: uncorrectable ECC errors since the driver loaded (fail) or ever (warn)."""
    found = []
    for g in fleet.gpus:
        if g.ecc_volatile_uncorrected:
            found.append(
                Finding(
                    "gpu.ecc",
                    Severity.FAIL,
                    _gpu(g),
                    f"{g.ecc_volatile_uncorrected} uncorrectable ECC errors since the "
                    "driver loaded.",
                    "drain the node and reset the GPU",
                )
            )
        elif g.ecc_aggregate_uncorrected:
            found.append(
                Finding(
                    "gpu.ecc",
                    Severity.WARN,
                    _gpu(g),
                    f"{g.ecc_aggregate_uncorrected} uncorrectable ECC errors in the "
                    "GPU's lifetime, none since the driver loaded.",
                )
            )
        elif g.ecc_enabled is False:
            found.append(
                Finding(
                    "gpu.ecc",
                    Severity.WARN,
                    _gpu(g),
                    "ECC is off: memory errors would go unnoticed.",
                    f"nvidia-smi -i {g.index} -e 1 (takes effect after a reset)",
                )
            )
    return _worst(found) or _ok("gpu.ecc", fleet, "no uncorrectable ECC error")


def retired_pages(fleet: Fleet) -> list[Finding]:
    """``gpu.retired-pages``: retirements and row remaps pending or failed."""
    found = []
    for g in fleet.gpus:
        if g.remap_failure:
            found.append(
                Finding(
                    "gpu.retired-pages",
                    Severity.FAIL,
                    _gpu(g),
                    "a row remap failed: the memory cannot hide its bad rows.",
                    "drain the node; the GPU needs replacing",
                )
            )
        elif g.remap_pending or g.retired_pages_pending:
            found.append(
                Finding(
                    "gpu.retired-pages",
                    Severity.FAIL,
                    _gpu(g),
                    "a row remap (or page retirement) waits for a GPU reset; until "
                    "then the bad memory is still in use.",
                    f"nvidia-smi -i {g.index} -r (with no process on the GPU)",
                )
            )
    return _worst(found) or _ok("gpu.retired-pages", fleet, "no pending or failed row remap")


def throttle(fleet: Fleet) -> list[Finding]:
    """``gpu.throttle``: hardware or thermal slowdown makes one rank every step's straggler."""
    found = []
    for g in fleet.gpus:
        hw = [r for r in g.throttle_reasons if r in HW_THROTTLE]
        sw = [r for r in g.throttle_reasons if r in SW_THROTTLE]
        if hw or sw:
            temp = f", {g.temperature_c} C" if g.temperature_c is not None else ""
            found.append(
                Finding(
                    "gpu.throttle",
                    Severity.FAIL if hw else Severity.WARN,
                    _gpu(g),
                    f"clocks held down by {', '.join(hw + sw)}{temp}: this GPU will "
                    "make every collective wait for it.",
                )
            )
    return _worst(found) or _ok("gpu.throttle", fleet, "no thermal or power throttling")


def clocks(fleet: Fleet) -> list[Finding]:
    """``gpu.clocks``: a busy GPU far below its maximum SM clock."""
    found = []
    for g in fleet.gpus:
        if (g.utilization_pct or 0) < BUSY_PCT or not g.sm_clock_max_mhz or g.sm_clock_mhz is None:
            continue  # an idle GPU lowers its clocks on purpose
        if g.sm_clock_mhz < CLOCK_FRACTION * g.sm_clock_max_mhz:
            found.append(
                Finding(
                    "gpu.clocks",
                    Severity.WARN,
                    _gpu(g),
                    f"SM clock {g.sm_clock_mhz} of {g.sm_clock_max_mhz} MHz while "
                    f"{g.utilization_pct:.0f}% busy.",
                )
            )
    return found or _ok("gpu.clocks", fleet, "busy GPUs run near their maximum SM clock")


def persistence(fleet: Fleet) -> list[Finding]:
    """``gpu.persistence``: without persistence mode the driver reloads between jobs."""
    off = [g for g in fleet.gpus if g.persistence_mode is False]
    if not off:
        return _ok("gpu.persistence", fleet, "persistence mode on")
    return [
        Finding(
            "gpu.persistence",
            Severity.WARN,
            ", ".join(f"GPU {g.index}" for g in off),
            "persistence mode is off: the driver tears down and re-initialises the GPU "
            "between jobs, slowing the first CUDA call of every rank.",
            "nvidia-smi -pm 1 (or run nvidia-persistenced)",
        )
    ]


def mig(fleet: Fleet) -> list[Finding]:
    """``gpu.mig``: MIG partitions change what NCCL can use."""
    found = [
        Finding(
            "gpu.mig",
            Severity.WARN,
            _gpu(g),
            "MIG mode is on: a MIG instance has no NVLink peer-to-peer, so NCCL falls "
            "back to slower paths.",
            f"nvidia-smi -i {g.index} -mig 0 (then reset)",
        )
        for g in fleet.gpus
        if g.mig_enabled
    ]
    return found or _ok("gpu.mig", fleet, "MIG off")


def pcie_link(fleet: Fleet) -> list[Finding]:
    """``gpu.pcie-link``: a busy GPU on a downshifted PCIe link."""
    found = []
    for g in fleet.gpus:
        if g.pcie_width and g.pcie_width_max and g.pcie_width < g.pcie_width_max:
            found.append(
                Finding(
                    "gpu.pcie-link",
                    Severity.WARN,
                    _gpu(g),
                    f"PCIe link at x{g.pcie_width} of x{g.pcie_width_max}: host and "
                    "NIC traffic of this GPU gets a fraction of its bandwidth.",
                    "reseat the GPU or riser; check the slot and BIOS settings",
                )
            )
        busy = (g.utilization_pct or 0) >= BUSY_PCT
        if busy and g.pcie_gen and g.pcie_gen_max and g.pcie_gen < g.pcie_gen_max:
            found.append(
                Finding(
                    "gpu.pcie-link",
                    Severity.WARN,
                    _gpu(g),
                    f"PCIe Gen{g.pcie_gen} of Gen{g.pcie_gen_max} while "
                    f"{g.utilization_pct:.0f}% busy (an idle GPU downshifts; a busy "
                    "one should not).",
                    "check the slot, riser and BIOS link speed",
                )
            )
    return found or _ok("gpu.pcie-link", fleet, "PCIe links at full width")


def recovery_action(fleet: Fleet) -> list[Finding]:
    """``gpu.recovery-action``: the driver asks for a reset or a reboot."""
    found = [
        Finding(
            "gpu.recovery-action",
            Severity.FAIL,
            _gpu(g),
            f"the driver asks for recovery action '{g.recovery_action}'.",
            {
                "gpu_reset": f"nvidia-smi -i {g.index} -r",
                "node_reboot": "reboot the node",
                "drain_p2p": "drain peer-to-peer traffic, then reset the GPU",
                "drain_and_reset": "drain the node, then reset the GPU",
            }.get(g.recovery_action or "", "follow NVIDIA's recovery guidance"),
        )
        for g in fleet.gpus
        if g.recovery_action not in (None, "none")
    ]
    return found or _ok("gpu.recovery-action", fleet, "no recovery action pending")


def processes(fleet: Fleet) -> list[Finding]:
    """``gpu.processes``: other processes already hold GPU memory."""
    found = []
    for g in fleet.gpus:
        if g.processes:
            held = ", ".join(
                f"pid {p.pid}" + (f" ({p.used_bytes / 2**30:.1f} GiB)" if p.used_bytes else "")
                for p in g.processes
            )
            found.append(
                Finding(
                    "gpu.processes",
                    Severity.WARN,
                    _gpu(g),
                    f"already in use by {held}: a leftover from an earlier job "
                    "takes memory and SM time from this one.",
                    f"kill {' '.join(str(p.pid) for p in g.processes)}",
                )
            )
    return found or _ok("gpu.processes", fleet, "no other process on the GPUs")


def nvlink_down(fleet: Fleet) -> list[Finding]:
    """``nvlink.down``: fewer active NVLinks than the GPU has."""
    most = max((g.active_nvlinks for g in fleet.gpus), default=0)
    found = []
    for g in fleet.gpus:
        down = [link.link for link in g.nvlinks if not link.active]
        if g.nvlinks and down:
            found.append(
                Finding(
                    "nvlink.down",
                    Severity.FAIL,
                    _gpu(g),
                    f"NVLinks {', '.join(map(str, down))} down: {g.active_nvlinks} "
                    f"of {len(g.nvlinks)} active (peers have {most}); every ring "
                    "through this GPU runs at its reduced bandwidth.",
                    "drain the node; reset the GPU or have the NVLink/NVSwitch checked",
                )
            )
    if not any(g.nvlinks for g in fleet.gpus):
        return [Finding("nvlink.down", Severity.SKIP, "all GPUs", "these GPUs have no NVLink.")]
    return found or _ok("nvlink.down", fleet, f"all {most} NVLinks per GPU active")


def nvlink_errors(fleet: Fleet) -> list[Finding]:
    """``nvlink.errors``: replay, recovery or CRC errors on a link."""
    found = []
    for g in fleet.gpus:
        bad = [
            link
            for link in g.nvlinks
            if link.recovery_errors or link.crc_errors or link.replay_errors
        ]
        if bad:
            detail = "; ".join(
                f"link {x.link}: {x.replay_errors} replay, {x.recovery_errors} "
                f"recovery, {x.crc_errors} CRC"
                for x in bad
            )
            found.append(
                Finding(
                    "nvlink.errors",
                    Severity.WARN,
                    _gpu(g),
                    f"NVLink error counters since the driver loaded: {detail}.",
                    f"nvidia-smi nvlink -e -i {g.index}; if they grow, have the link checked",
                )
            )
    if not any(g.nvlinks for g in fleet.gpus):
        return [Finding("nvlink.errors", Severity.SKIP, "all GPUs", "these GPUs have no NVLink.")]
    return found or _ok("nvlink.errors", fleet, "no NVLink error counted")


Rule = Callable[[Fleet], list[Finding]]
CHECKS: tuple[tuple[str, str, Rule], ...] = (
    ("gpu.xid", "XID errors in NVML events or the kernel log", xid),
    ("gpu.ecc", "uncorrectable ECC errors, volatile and aggregate", ecc),
    ("gpu.retired-pages", "retired pages and remapped rows pending or failed", retired_pages),
    ("gpu.throttle", "thermal or power throttling", throttle),
    ("gpu.clocks", "SM clock against its maximum on a busy GPU", clocks),
    ("gpu.persistence", "persistence mode", persistence),
    ("gpu.mig", "MIG mode", mig),
    ("gpu.pcie-link", "PCIe link width and generation against their maximum", pcie_link),
    ("gpu.recovery-action", "recovery action the driver asks for", recovery_action),
    ("gpu.processes", "processes already holding a GPU", processes),
    ("nvlink.down", "NVLinks down", nvlink_down),
    ("nvlink.errors", "NVLink replay, recovery and CRC error counters", nvlink_errors),
)
"""Every ``gpu.*``/``nvlink.*`` rule, in report order."""


def evaluate(fleet: Fleet) -> list[Finding]:
    """All rules over one fleet; every rule ``skip`` when NVML could not be read."""
    if fleet.unavailable or not fleet.gpus:
        reason = fleet.unavailable or "no GPU"
        return [
            Finding(check, Severity.SKIP, "nvml", f"no GPU health check here: {reason}.")
            for check, _, _ in CHECKS
        ]
    return [finding for _, _, rule in CHECKS for finding in rule(fleet)]


def run(facts: Facts) -> list[Finding]:
    """Every GPU rule over the fleet the facts hold."""
    return evaluate(facts.fleet)
