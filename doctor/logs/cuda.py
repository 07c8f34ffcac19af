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

CUDA's other API errors say a call did not fit this machine, not that a GPU broke: an
invalid argument or resource handle, a symbol or kernel image the build lacks for this GPU,
an operation or peer access the driver or GPUs do not support, no device, a device busy in
exclusive mode, a stub driver, an operation the current state does not permit (CUDA's
runtime and driver APIs, ``cudaError_t``, ``CUresult``). Inside NCCL they are the
build, the driver and the hardware disagreeing (NVLS multicast on a driver or container
without it, an NCCL older than the GPU, P2P between GPUs that cannot do it): ``bootstrap``,
whatever stopped. CUDA's sticky errors (illegal address, launch failure, assert, ECC) stay
``cuda_error``/``gpu_fault``; ``unknown error`` (999) tells neither and stays with them.
CUDA's own error strings are read without a caller's prefix as well, and work refused
during a CUDA graph capture is a program asking for what a capture cannot hold
(``unsupported_op``). PyTorch's ROCm builds print HIP's errors in the same words, after
``HIP error:`` (``hipError*`` for the codes): they are read alike.
"""

from __future__ import annotations

import re

from doctor.evidence import LogEvent
from doctor.logs import kinds, nccl
from doctor.logs.lines import Line

_CUDA = re.compile(
    r"(?:CUDA|HIP) error: ?([^.\n]{3,120})|Cuda failure '([^']{3,120})'|Cuda failure (\d{1,18})|"
    r"CUDA driver error: ([^.\n]{3,120})|((?:cuda|hip)Error\w+)|CUDA_ERROR_(\w+)|"
    r"\b(?i:(?<!unhandled )cuda(?: runtime)? error)\b(?: (\d{1,4})\b)?"  # old torch, TensorRT-LLM,
    # vLLM's custom all-reduce, NCCL's NVLS messages (``CUDA error 401``); a number in
    # parentheses (old torch's ``cuda runtime error (59)``) is CUDA 9's numbering: not read
)
_SENTENCE = re.compile(
    r"an illegal memory access was encountered|unspecified launch failure|"
    r"misaligned address|device-side assert triggered|an illegal instruction was encountered|"
    r"the launch timed out and was terminated|invalid program counter|"
    r"uncorrectable ECC error encountered|"
    r"PTX was compiled with an unsupported toolchain|no kernel image is available for execution|"
    r"all CUDA-capable devices are busy or unavailable|no CUDA-capable device is detected|"
    r"forward compatibility was attempted on non supported HW|device kernel image is invalid|"
    r"peer access is not supported between these two devices|"
    r"Memory access fault by GPU node-\d{1,4}"
)
"""CUDA's own error strings (``cudaGetErrorString``), distinctive enough to read without the
``CUDA error:`` a caller puts before them: old torch's ``THCudaCheck FAIL ... : an illegal
memory access was encountered``, a C++ ``what(): Error at: ...: ...``, an FAQ that quotes
the string alone. ROCm's runtime says an illegal address its own way: ``Memory access fault
by GPU node-2 (Agent handle: ...) on address 0x.... Reason: Page not present``."""
_CAPTURE = re.compile(
    r"(?i)previous error during capture|not permitted when stream is capturing|"
    r"cudaErrorStreamCapture\w+|CUDA_ERROR_STREAM_CAPTURE_\w+|capture (?:was )?invalidated"
)
"""CUDA refusing work issued while a stream is captured into a CUDA graph (a collective
captured without the communicator set up for it, a synchronising call): the program asked
for something a capture cannot hold, which the next collective then reports."""
_HARDWARE = re.compile(
    r"(?i)uncorrectable ECC|ECC error|GPU is lost|fallen off the bus|"
    r"NVLINK_UNCORRECTABLE|HARDWARE_STACK_ERROR|ECC_UNCORRECTABLE|uncorrectable NVLink"
)
NO_SUCH_DEVICE = (
    r"invalid device ordinal|CUDA_ERROR_INVALID_DEVICE\b|device >= 0 && device < num_gpus"
)
"""A GPU index the machine does not have (error 101; torch's own check of the index, raised
lazily as ``DeferredCudaCallError``)."""
FABRIC_NOT_READY = r"system not yet initialized|cudaErrorSystemNotReady|CUDA_ERROR_SYSTEM_NOT_READY"
"""Error 802: an NVSwitch machine whose fabric manager is not running."""
DRIVER_TOO_OLD = (
    r"driver version is insufficient for CUDA runtime|cudaErrorInsufficientDriver|"
    r"NVIDIA driver on your system is too old"
)
"""Error 35, and torch's own warning: a driver older than the runtime the build needs."""
NO_DRIVER = (
    r"Found no NVIDIA driver on your system|CUDA initialization: CUDA unknown error|"
    r"Torch not compiled with CUDA enabled"
)
"""torch finding no usable driver (none installed, or none in the container), CUDA failing
to start (``CUDA_VISIBLE_DEVICES`` changed after CUDA started, a driver left broken by an
update), or a torch build without CUDA."""
_NO_SUCH_DEVICE = re.compile(NO_SUCH_DEVICE)
_NOT_READY = re.compile(FABRIC_NOT_READY + "|" + DRIVER_TOO_OLD + "|" + NO_DRIVER)
_SETUP_CODES = frozenset(
    {1, 3, 34, 46, 98, 100, 200, 209, 217, 218, 221, 222, 400, 401, 500, 801, 803, 804}
)
"""The numbers of those errors, the same in the runtime and driver APIs (``Cuda failure 1``)."""
_SETUP = re.compile(
    r"invalid argument|initialization error|invalid device function|no kernel image is available|"
    r"invalid resource handle|named symbol not found|operation not supported|"
    r"peer access is not supported|busy or unavailable|no CUDA-capable device|"
    r"forward compatibility was attempted|unsupported toolchain|PTX JIT compil|"
    r"device kernel image is invalid|stub library|unsupported display driver|illegal state|"
    r"(?:cuda|hip)Error(?:InvalidValue|InitializationError|InvalidDeviceFunction|NoKernelImageForDevice|"
    r"InvalidResourceHandle|SymbolNotFound|NotSupported|PeerAccessUnsupported|DevicesUnavailable|"
    r"NoDevice|CompatNotSupportedOnDevice|UnsupportedPtxVersion|InvalidPtx|InvalidKernelImage|"
    r"StubLibrary|SystemDriverMismatch|IllegalState|NoBinaryForGpu)\b|"
    r"CUDA_ERROR_(?:INVALID_VALUE|NOT_INITIALIZED|NO_BINARY_FOR_GPU|INVALID_HANDLE|NOT_FOUND|"
    r"NOT_SUPPORTED|PEER_ACCESS_UNSUPPORTED|DEVICE_UNAVAILABLE|NO_DEVICE|"
    r"COMPAT_NOT_SUPPORTED_ON_DEVICE|UNSUPPORTED_PTX_VERSION|INVALID_PTX|INVALID_IMAGE|"
    r"STUB_LIBRARY|SYSTEM_DRIVER_MISMATCH|ILLEGAL_STATE)\b"
)
FABRIC_FAILED = (
    r"nv-fabricmanager\b.{0,300}?status=\d{1,4}/FAILURE|"
    r"driver interface version \S{1,40} (?:don'?t|does not) match with driver version"
)
"""The fabric manager that did not start (systemd's status line, its own version check)."""
_FABRIC = re.compile(FABRIC_FAILED)
GPU_OOM = (
    r"cuda\.OutOfMemoryError|CUDA out of memory|CUDA error: out of memory|"
    r"RESOURCE_EXHAUSTED: Out of memory while trying to allocate|cuMemAllocAsync failed to allocate"
)
"""An allocator out of GPU memory, raised in the rank's own code: torch's, XLA's (JAX,
TensorFlow: its error status, and its asynchronous allocator's refusal). NCCL's own ``Cuda
failure 'out of memory'`` while it sets up is not; nor is XLA's BFC allocator's warning that it
``ran out of memory trying to allocate``, which says the caller copes."""
_COPES = "this is not a failure"
"""XLA's BFC allocator, out of memory for an allocation its caller can do without, says so."""
_OOM = re.compile(
    GPU_OOM + r"|torch\.OutOfMemoryError|out of memory|CUDA_ERROR_OUT_OF_MEMORY|"
    r"cudaErrorMemoryAllocation|Cuda failure 2\b"
)


def setup_error(text: str) -> bool:
    """Whether ``text`` holds a CUDA error that says the call does not fit this machine
    (its build, driver, GPUs), rather than a GPU that failed."""
    return _refused(text, _CUDA.search(text))


_NCCL_CUDA = re.compile(nccl.UNHANDLED_CUDA, re.IGNORECASE)


def names_setup(text: str) -> bool:
    """Whether ``text`` says a CUDA call did not fit this machine, for what to do about it:
    ``setup_error``'s, the same words without the ``CUDA error:`` a caller puts before them
    (``CUDART error: peer access is not supported``, an FAQ's ``provided PTX was compiled
    with an unsupported toolchain``), and NCCL's ``unhandled cuda error`` (a CUDA call inside
    NCCL failed, which at start-up is the set-up)."""
    if _HARDWARE.search(text):
        return False
    return setup_error(text) or bool(_SETUP.search(text) or _NCCL_CUDA.search(text))


def _refused(text: str, found: re.Match[str] | None) -> bool:
    if found is None or _HARDWARE.search(text):
        return False
    number = found.group(3) or found.group(7)
    return (number is not None and int(number) in _SETUP_CODES) or bool(_SETUP.search(text))


_BARE_WORDS = (
    "illegal",
    "launch",
    "misaligned",
    "assert",
    "program counter",
    "ECC",
    "PTX",
    "kernel image",
    "CUDA-capable",
    "compatibility",
    "peer access",
    "access fault",
)
"""Every string ``_SENTENCE`` reads holds one of these: most lines cost one search."""
_BARE = re.compile("|".join(map(re.escape, _BARE_WORDS)))


def _fault(text: str) -> str:
    return kinds.GPU_FAULT if _HARDWARE.search(text) else kinds.CUDA_ERROR


def _bare(line: Line) -> list[LogEvent]:
    """CUDA's own error string without a caller's prefix, by whose fault."""
    text = line.text
    if not _BARE.search(text) or not _SENTENCE.search(text):
        return []
    setup = _SETUP.search(text) and not _HARDWARE.search(text)
    return [line.event(kinds.BOOTSTRAP if setup else _fault(text))]


def events(line: Line) -> list[LogEvent]:
    text = line.text
    if ("fabricmanager" in text or "interface version" in text) and _FABRIC.search(text):
        return [line.event(kinds.BOOTSTRAP)]
    if not any(
        word in text
        for word in (
            "CUDA",
            "Cuda",
            "cuda",
            "memory",
            "HIP",
            "hipError",
            "NVIDIA driver",
            "cuMemAlloc",
        )
    ):
        return _bare(line)
    if _OOM.search(text) and _COPES not in text:
        return [line.event(kinds.OOM)]
    found = _CUDA.search(text)
    if found and _CAPTURE.search(text):
        return [line.event(kinds.UNSUPPORTED_OP, op="work inside a CUDA graph capture")]
    if _NO_SUCH_DEVICE.search(text) or _NOT_READY.search(text) or _refused(text, found):
        return [line.event(kinds.BOOTSTRAP)]
    if found:
        return [line.event(_fault(text))]
    return _bare(line)
