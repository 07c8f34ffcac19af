"""CUDA errors a rank reports, from any line (PyTorch's ``CUDA error: ...``, NCCL's
``Cuda failure '...'``), and memory that ran out.

The error string says whose fault it is: ``uncorrectable ECC error encountered`` and a
GPU that is lost or fell off the bus are the hardware's (``gpu_fault``); an illegal memory
access, a launch failure, a device-side assert stop the rank's GPU work whatever caused
them (``cuda_error``); ``out of memory`` is memory (``oom``). ``invalid device ordinal`` is
none of these: the rank asked for a GPU index the machine does not have (more ranks launched
than GPUs visible), a launch that failed at set-up (``bootstrap``); so is CUDA's error 802,
``system not yet initialized``: an NVSwitch machine whose fabric manager is not running;
so is error 35, ``CUDA driver version is insufficient for CUDA runtime version`` (torch's
own warning: ``The NVIDIA driver on your system is too old``): the runtime the job was
built with needs a newer driver than the host has, which no GPU fault explains. The fabric
manager failing to start (its service exiting with a failure, or its refusal of a driver
whose version differs from its own) is the same set-up fault seen from the host.
"""

from __future__ import annotations

import re

from doctor.evidence import LogEvent
from doctor.logs import kinds
from doctor.logs.lines import Line

_CUDA = re.compile(
    r"CUDA error: ?([^.\n]{3,120})|Cuda failure '([^']{3,120})'|Cuda failure (\d{1,18})|"
    r"CUDA driver error: ([^.\n]{3,120})|(cudaError\w+)|CUDA_ERROR_(\w+)"
)
_HARDWARE = re.compile(
    r"(?i)uncorrectable ECC|ECC error|GPU is lost|fallen off the bus|"
    r"NVLINK_UNCORRECTABLE|HARDWARE_STACK_ERROR|ECC_UNCORRECTABLE|uncorrectable NVLink"
)
_NO_SUCH_DEVICE = re.compile(r"invalid device ordinal|CUDA_ERROR_INVALID_DEVICE\b")
_NOT_READY = re.compile(
    r"system not yet initialized|cudaErrorSystemNotReady|CUDA_ERROR_SYSTEM_NOT_READY|"
    r"driver version is insufficient for CUDA runtime|cudaErrorInsufficientDriver|"
    r"NVIDIA driver on your system is too old"
)
_FABRIC = re.compile(
    r"nv-fabricmanager\b.*?status=\d+/FAILURE|"
    r"driver interface version \S+ (?:don'?t|does not) match with driver version"
)
_OOM = re.compile(
    r"CUDA out of memory|OutOfMemoryError|out of memory|CUDA_ERROR_OUT_OF_MEMORY|"
    r"cudaErrorMemoryAllocation|Cuda failure 2\b|OOMKilled"
)


def events(line: Line) -> list[LogEvent]:
    text = line.text
    if ("fabricmanager" in text or "interface version" in text) and _FABRIC.search(text):
        return [line.event(kinds.BOOTSTRAP)]
    if "CUDA" not in text and "Cuda" not in text and "cuda" not in text and "memory" not in text:
        return []
    if _OOM.search(text):
        return [line.event(kinds.OOM)]
    if _NO_SUCH_DEVICE.search(text) or _NOT_READY.search(text):
        return [line.event(kinds.BOOTSTRAP)]
    if _CUDA.search(text):
        return [line.event(kinds.GPU_FAULT if _HARDWARE.search(text) else kinds.CUDA_ERROR)]
    return []
