"""What GPU health monitors print when a GPU or its fabric failed, in their own words rather
than the driver's: DCGM's health checks and diagnostics (``dcgmlib/dcgm_errors.h``: ``Detected
2 volatile double-bit ECC error(s) in GPU 5.``), Kubernetes' NVIDIA device plugin
(``XidCriticalError: Xid=79 on Device=GPU-...; marking device as unhealthy``), NVIDIA's
resiliency extension (``GPU 4: Requires a reset to recover.``), the NVSwitch driver's fatal
SXids, and ROCm's runtime (``HW Exception by GPU node-2 (Agent handle: 0x...) reason :GPU
Hang``). Each is a ``gpu_fault`` as the kernel's Xid line is; an Xid a program's own fault
raises stays a CUDA error (``kernel.PROGRAM_XIDS``). Warnings that record and go on (DCGM's
nonfatal NvSwitch errors, a pending row remap, a single-bit ECC count) are not read.
"""

from __future__ import annotations

import re

from doctor.evidence import LogEvent
from doctor.logs import kinds
from doctor.logs.kernel import PROGRAM_XIDS
from doctor.logs.lines import Line

_DCGM_SAYS = (
    r"Detected \d{1,9} volatile double-bit ECC error",
    r"had uncorrectable memory errors and (?:row remapping failed|\d{1,9} rows were remapped)",
    r"exceeded uncorrectable row remap limit",
    r"GPU had an uncontained error",
    r"Pending page retirements together with a DBE",
    r"CUDA APIs have indicated that a double-bit ECC error",
    r"retired pages due to DBEs have been detected",
    r"Detected fatal (?:errors on NvSwitch|NvSwitch SXID)",
    r"(?:GPU \d{1,4}'s NvLink link|NVSwitch \d{1,4}'s NvLink) \d{1,4} is (?:currently )?down",
    r"Detected \d{1,18} \S{1,60} NvLink errors on GPU \d{1,4}'s NVLink \(should be 0\)",
    r"GPU -?\d{1,4} has fallen off the bus",
)
_DCGM = re.compile("|".join(_DCGM_SAYS))
"""DCGM's failure reports of a GPU's memory, NVLink or NVSwitch, or of a GPU gone."""
_DCGM_XID = re.compile(r"Detected XID (\d{1,9}) for GPU \d{1,4}")
_PLUGIN_XID = re.compile(r"XidCriticalError: Xid=(\d{1,9}) on Device=")
_RESILIENCY = re.compile(r"GPU \d{1,4}: Requires a (?:reset|node reboot) to recover")
"""NVIDIA's resiliency extension reading NVML's recovery action (the driver's Xid 154)."""
_SXID = re.compile(r"nvswitch\d{0,3}: SXid \([^)]{0,40}\): \d{1,9}, Fatal\b")
"""The NVSwitch driver's fatal SXid (its non-fatal ones are corrected errors)."""
_ROCM = re.compile(r"HW Exception by GPU node-\d{1,6} \(Agent handle: [^)]{1,40}\) reason :")
_WORDS = ("GPU", "Detected", "Xid", "NvLink", "NVLink", "SXid", "HW Exception")


def events(line: Line) -> list[LogEvent]:
    text = line.text
    if not any(word in text for word in _WORDS):
        return []
    for pattern in (_DCGM_XID, _PLUGIN_XID):
        if m := pattern.search(text):
            xid = int(m.group(1))
            kind = kinds.CUDA_ERROR if xid in PROGRAM_XIDS else kinds.GPU_FAULT
            return [line.event(kind, code=xid)]
    if any(p.search(text) for p in (_DCGM, _RESILIENCY, _SXID, _ROCM)):
        return [line.event(kinds.GPU_FAULT)]
    return []
