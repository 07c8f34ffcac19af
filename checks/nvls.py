"""``nvls.restart``: NVLink SHARP left on under the in-process restart wrapper.

NVLS communicators hold multicast objects that ``ncclCommAbort`` cannot
reliably release, so after an abort the re-created communicator can hang or
fail; nvidia-resiliency-ext's in-process restart requires ``NCCL_NVLS_ENABLE=0``.
NCCL's default (2) turns NVLS on wherever the NVSwitch supports it, so unset
is not off.
"""

from __future__ import annotations

from doctor.checks import fixes
from doctor.checks.facts import Facts
from doctor.checks.values import strtoll
from doctor.model import Finding, Severity

NVLS_DEFAULT = 2


def nvls_setting(value: str) -> int:
    """What NCCL reads from ``NCCL_NVLS_ENABLE`` (strtoll; empty or unset is the default)."""
    return strtoll(value).value if value.strip() else NVLS_DEFAULT


def run(facts: Facts) -> list[Finding]:
    value = facts.env.get("NCCL_NVLS_ENABLE", "")
    if not facts.config.restart.enabled:
        return [
            Finding(
                "nvls.restart",
                Severity.PASS,
                "NCCL_NVLS_ENABLE",
                "the restart wrapper is off ([restart] enabled = false).",
            )
        ]
    setting = nvls_setting(value)
    if setting == 0:
        return [
            Finding(
                "nvls.restart",
                Severity.PASS,
                "NCCL_NVLS_ENABLE",
                "NVLS is off (NCCL_NVLS_ENABLE=0), as the restart wrapper needs.",
            )
        ]
    shown = f"NCCL_NVLS_ENABLE={value}" if value else "NCCL_NVLS_ENABLE is unset (default 2, auto)"
    return [
        Finding(
            "nvls.restart",
            Severity.FAIL,
            "NCCL_NVLS_ENABLE",
            f"the restart wrapper is on but {shown}: NVLS communicators cannot be "
            "aborted cleanly, so an in-process restart can hang re-creating them.",
            fixes.export("NCCL_NVLS_ENABLE", "0"),
        )
    ]
