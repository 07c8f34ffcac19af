"""NVML's numeric codes and the names we report: shared by the reader and the fake NVML.

Both ``doctor.gpu.nvml`` (decodes what NVML answers) and ``doctor.gpu.nvml_fake``
(encodes a fleet described by names back into NVML's numbers) need them;
keeping them here keeps the two from importing each other.
"""

from __future__ import annotations

THROTTLE_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
"""NVML's clocks-event (throttle) reason bits and the names we report."""

RECOVERY_ACTIONS = {
    0: "none",
    1: "gpu_reset",
    2: "node_reboot",
    3: "drain_p2p",
    4: "drain_and_reset",
}
"""``NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`` values (``nvmlDeviceGpuRecoveryAction_t``)."""

NVLINK_REMOTE = {0: "gpu", 1: "ibmnpu", 2: "switch"}
