"""The kernel's words about GPUs and memory, from ``dmesg`` or ``journalctl``: NVIDIA's Xid
lines, the OOM killer, and the IOMMU refusing a device's DMA.

``NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.``
names the GPU by bus id, the error by number, the process by pid; the driver's
``NV_ERR_RESET_REQUIRED`` says the same of a GPU without an Xid, and ``Timeout waiting for
RPC from GSP!`` (the GPU's firmware stopped answering the driver) is Xid 119 without its
number. Some Xids are the
hardware's fault (ECC double-bit errors, a GPU off the bus, NVLink errors): the GPU
cannot finish any collective. Others are raised by what a program did (an illegal
address: 13, 31, 43), or are the driver cleaning up after a process that died (45):
those say which rank's GPU work stopped, not that the GPU is broken.
"""

from __future__ import annotations

import re

from doctor.evidence import LogEvent
from doctor.logs import kinds
from doctor.logs.block import Collecting
from doctor.logs.lines import Line

XID_MEANING: dict[int, str] = {
    13: "graphics engine exception (often a program's illegal address)",
    31: "GPU memory page fault (often a program's illegal address)",
    43: "GPU stopped processing (a program's fault)",
    45: "preemptive cleanup after a process ended (a consequence, not a cause)",
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapping failed",
    68: "video processor exception",
    69: "graphics engine class error",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    109: "context switch timeout",
    119: "GSP RPC timeout",
    120: "GSP error",
    121: "C2C link error",
    123: "SPI PMU RPC failure",
    140: "unrecovered ECC error",
    143: "GPU initialization failure",
    144: "NVLink SAW error",
    145: "NVLink RLW error",
    146: "NVLink TLW error",
    147: "NVLink TREX error",
    148: "NVLink NVLPW control error",
    149: "NVLink NETIR error",
    150: "NVLink MSE error",
    154: "GPU recovery action changed (reset or reboot needed)",
}
PROGRAM_XIDS = frozenset({13, 31, 43, 45, 68, 69})
"""Xids a program's own fault raises (or that follow a process's death): not hardware."""
RECORD_XIDS = frozenset({63, 92})
"""Xids that record, not fail: a row remapped or a page retired (63: it takes effect at the
next reset), a high rate of corrected single-bit errors (92). The GPU keeps running; NVIDIA's
catalogue asks for no immediate action."""

XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})?[^)]{0,40}\): (\d{1,18})"
    r"(?:, pid=(?:'?)(\d{1,18})?[^,]*)?"
)
"""The driver's Xid line: the GPU's bus id where the user did not cut it, the Xid, the pid
(``nvml`` reads the kernel log's Xids with it too)."""
_OFF_BUS = re.compile(
    r"NVRM: GPU (?:at PCI:)?([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})[^:]*:? "
    r".*?(?:fallen off the bus|GPU is lost)"
)
_RESET_REQUIRED = re.compile(r"NVRM: .*?(?:NV_ERR_RESET_REQUIRED|Reset required)")
"""The resource manager's status 0x62 (``nvstatuscodes.h``): the GPU must be reset before it
runs anything again; every later CUDA call on it fails (``cudaErrorDevicesUnavailable``)."""
_INIT_FAILED = re.compile(
    r"NVRM: (?:GPU (?:at PCI:)?([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})[^:]{0,8}: )?"
    r"(?:RmInitAdapter|rm_init_adapter) failed"
)
"""The driver could not bring a GPU up (``RmInitAdapter failed! (0x26:0x65:1497)``,
``rm_init_adapter failed for device bearing minor number 0``): it is gone to every process
until the node is serviced."""
_GPU_NAMED = re.compile(r"NVRM: The NVIDIA GPU ([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})")
_GPU_FAILED = re.compile(r"fallen off the bus|not responding to commands|probe routine failed")
_JOURNAL_HOST = re.compile(
    r"^(?:\w{3} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT[\d:.+-]+) ([\w.-]+) kernel:"
)
_DMAR = re.compile(
    r"DMAR: \[DMA (?:Write|Read)[^\]]{0,20}\] Request device \[(?:([0-9a-fA-F]{4}):)?"
    r"([0-9a-fA-F]{2}:[0-9a-fA-F]{2})\.\d\] fault"
)
"""Intel's IOMMU refusing a device's DMA: ``DMAR: [DMA Write] Request device [02:00.0] fault
addr cd139000 [fault reason 05] PTE Write access is not set`` (newer kernels add ``NO_PASID``
and 0x to the numbers)."""
_AMD_VI = re.compile(
    r"(?:([0-9a-fA-F]{4}):([0-9a-fA-F]{2}:[0-9a-fA-F]{2})\.\d: )?AMD-Vi: Event logged "
    r"\[IO_PAGE_FAULT(?: device=(?:([0-9a-fA-F]{4}):)?([0-9a-fA-F]{2}:[0-9a-fA-F]{2})\.\d)?"
)
"""AMD's: ``AMD-Vi: Event logged [IO_PAGE_FAULT device=41:00.0 domain=0x000e address=..]``,
or since Linux 5.x with the device first: ``pci 0000:41:00.0: AMD-Vi: Event logged
[IO_PAGE_FAULT domain=..]``."""
_OOM_KILL = re.compile(
    r"(?:Out of memory|Memory cgroup out of memory): Kill(?:ed)? process (\d{1,18})|"
    r"oom-kill:.*?,pid=(\d{1,18})"
)


def _host(text: str, fallback: str) -> str:
    """The host a ``journalctl`` line names before ``kernel:``, else ``fallback``."""
    return m.group(1) if (m := _JOURNAL_HOST.match(text)) else fallback


_LINK_DOWN = re.compile(
    r"\b([\w.-]{1,20}): (?:NIC )?Link (?:is )?[Dd]own\b|"
    r"Port module event: module \d{1,3}, Cable unplugged|\b([\w.-]{1,20}): Lost carrier\b|"
    r"NIC device ([\w.-]{1,20}): Port state changed from ACTIVE to DOWN"
)
"""A network interface's driver saying its link went down: ``ixgbe 0000:01:00.0 eth0: NIC Link
is Down`` (Intel's and Broadcom's drivers), ``mlx5_core 0000:3b:00.0 ens1f0: Link down``,
mlx5's module event for a cable pulled out, systemd-networkd's ``eth0: Lost carrier``, NVIDIA's
resiliency extension's health check of an InfiniBand port that went down."""


def events(line: Line) -> list[LogEvent]:
    text = line.text
    if "NVRM" not in text and "emory" not in text and "oom-kill" not in text and "GSP" not in text:
        return _iommu(line) or _link_down(line)
    host = _host(text, line.host)
    if "Timeout waiting for RPC from GSP" in text:
        return [line.event(kinds.GPU_FAULT, code=119, host=host)]
    if m := XID.search(text):
        xid = int(m.group(2))
        return [
            line.event(
                kinds.GPU_FAULT if xid not in PROGRAM_XIDS else kinds.CUDA_ERROR,
                code=xid,
                device=(m.group(1) or "").lower(),
                pid=int(m.group(3)) if m.group(3) else None,
                host=host,
            )
        ]
    if m := _OFF_BUS.search(text):
        return [line.event(kinds.GPU_FAULT, code=79, device=m.group(1).lower(), host=host)]
    if _RESET_REQUIRED.search(text):
        return [
            line.event(
                kinds.GPU_FAULT,
                host=host,
                text="NVRM: the GPU needs a reset (NV_ERR_RESET_REQUIRED)",
            )
        ]
    if m := _INIT_FAILED.search(text):
        device = (m.group(1) or "").lower()
        return [
            line.event(
                kinds.GPU_FAULT,
                device=device,
                host=host,
                text=f"NVRM: the GPU {device or 'of the node'} failed to start (RmInitAdapter)",
            )
        ]
    if "probe routine failed" in text:
        return [line.event(kinds.GPU_FAULT, host=host)]
    if m := _OOM_KILL.search(text):
        return [
            line.event(kinds.OOM, pid=int(m.group(1) or m.group(2)), host=host, code=kinds.KILLED)
        ]
    return []


def _link_down(line: Line) -> list[LogEvent]:
    """A NIC that lost its link: whatever ran over it stops (``network``)."""
    text = line.text
    if not any(word in text for word in ("own", "unplugged", "carrier", "DOWN")):
        return []
    if (m := _LINK_DOWN.search(text)) is None:
        return []
    nic = m.group(1) or m.group(2) or m.group(3) or ""
    said = f"the network interface {nic} lost its link" if nic else "a NIC's cable was unplugged"
    return [
        line.event(
            kinds.NETWORK,
            text=f"{said} ({text.strip()[:160]})",
            host=_host(text, line.host),
        )
    ]


def _iommu(line: Line) -> list[LogEvent]:
    text = line.text
    m = _DMAR.search(text) if "DMAR" in text else None
    m = m or (_AMD_VI.search(text) if "IO_PAGE_FAULT" in text else None)
    if m is None:
        return []
    domain, bus = (m.group(1), m.group(2)) if m.group(2) else (m.group(3), m.group(4))
    host = _host(text, line.host)
    device = f"{(domain or '0000').lower()}:{bus.lower()}" if bus else ""
    return [line.event(kinds.IOMMU_FAULT, device=device, host=host)]


class NvrmGpu(Collecting):
    """The driver's several-line notice: ``NVRM: The NVIDIA GPU 0000:b3:00.0`` / ``NVRM: (PCI ID:
    ..) installed in this system has`` / ``NVRM: fallen off the bus and is not responding``,
    or a GPU the driver could not bring up (``The NVIDIA probe routine failed``)."""

    LINES = 4

    @staticmethod
    def start(line: Line) -> bool:
        return "NVRM: The NVIDIA GPU" in line.text

    def __init__(self, line: Line) -> None:
        super().__init__()
        m = _GPU_NAMED.search(line.text)
        self._bus = m.group(1).lower() if m else ""
        self._first = line
        self._seen = 0

    def feed(self, line: Line) -> bool:
        self._seen += 1
        text = line.text
        if self._seen > self.LINES or not ("NVRM:" in text or text[:1].isspace()):
            return False
        if m := _GPU_FAILED.search(text):
            host = _host(self._first.text, line.host)
            self._out.append(
                self._first.event(
                    kinds.GPU_FAULT,
                    code=79 if "probe" not in m.group(0) else None,
                    device=self._bus,
                    host=host,
                    text=f"NVRM: the GPU {self._bus}: {m.group(0)}",
                )
            )
            self._seen = self.LINES
        return True
