"""``nvidia-smi`` output: the GPUs that report errors.

In its table a GPU's first row holds its index, bus id and the *Volatile Uncorr. ECC*
count; ``ERR!`` in any of its cells means NVML could not read it from a GPU in trouble.
Outside the table nvidia-smi says ``Unable to determine the device handle for GPU
0000:3B:00.0: Unknown Error`` or ``GPU is lost`` about a GPU that dropped off.
"""

from __future__ import annotations

import re

from doctor.evidence import LogEvent
from doctor.logs import kinds
from doctor.logs.block import Collecting
from doctor.logs.lines import Line

_BUS = r"(?:[0-9A-Fa-f]{4})?([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})\.\d"
# possessive (``\s++``): a row of spaces with no bus id must not be retried at every split
_ROW = re.compile(r"^\|\s++(\d{1,18})\s++.*?\|\s+" + _BUS + r"\s+\S+\s+\|\s+(\S+)\s+\|")
_LOST = re.compile(
    r"Unable to determine the device handle for GPU\s*" + _BUS + r"|"
    r"GPU " + _BUS + r": GPU is lost|" + _BUS + r".{0,40}fallen off the bus"
)


_NVML_LOST = re.compile(r"NVMLError_GpuIsLost|NVML_ERROR_GPU_IS_LOST")
"""NVML's own error for a GPU that dropped off, as ``pynvml`` raises it (a monitor, a
framework's device query) without a bus id."""


def events(line: Line) -> list[LogEvent]:
    """nvidia-smi's error lines about one GPU."""
    if "GPU" not in line.text:
        return []
    if _NVML_LOST.search(line.text):
        return [line.event(kinds.GPU_FAULT, text=line.text.strip()[:300])]
    if not (m := _LOST.search(line.text)):
        return []
    bus = next(g for g in m.groups() if g)
    return [line.event(kinds.GPU_FAULT, device=bus.lower())]


class SmiTable(Collecting):
    """The GPU table, from the ``NVIDIA-SMI`` banner to the last border."""

    @staticmethod
    def start(line: Line) -> bool:
        return "NVIDIA-SMI" in line.text and "Driver Version" in line.text

    def __init__(self, line: Line) -> None:
        super().__init__()
        self._gpu: tuple[str, str] | None = None
        """(index, bus id) of the GPU whose rows are being read."""
        self._reported = False

    def feed(self, line: Line) -> bool:
        text = line.text.strip()
        if not text.startswith(("|", "+")):
            return not text  # a blank line inside the output; anything else ends it
        if m := _ROW.match(text):
            self._gpu, self._reported = (m.group(1), m.group(2).lower()), False
            ecc = m.group(3)
            if ecc.isdecimal() and len(ecc) <= 18 and int(ecc) > 0:
                self._report(line, f"GPU {m.group(1)} ({m.group(2)}): {ecc} uncorrected ECC errors")
        elif text.startswith("+") or "=====" in text:
            self._gpu = None
        if self._gpu and "ERR!" in text:
            self._report(line, f"GPU {self._gpu[0]} ({self._gpu[1]}): nvidia-smi reads ERR!")
        return True

    def _report(self, line: Line, text: str) -> None:
        if self._gpu and not self._reported:
            self._reported = True
            self._out.append(line.event(kinds.GPU_FAULT, device=self._gpu[1], text=text))
