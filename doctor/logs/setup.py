"""Set-up failures that torch, its CUDA runtime, NVML and NCCL print in words that name the
cause: a process started without the variables a launcher sets, CUDA initialised before the
ranks were forked, a torch built without what the job asks of it, a node whose driver and
NVIDIA libraries differ, no GPU visible, two ranks given one GPU, a distributed call before
the process group exists.

    ValueError: Error initializing torch.distributed using env:// rendezvous: environment
        variable RANK expected, but not set
    RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with
        multiprocessing, you must use the 'spawn' start method
    Failed to initialize NVML: Driver/library version mismatch

Each is a ``bootstrap`` event; ``advice`` says what to do about the one a line holds, for the
verdict's summary.
"""

from __future__ import annotations

import re

from doctor.evidence import LogEvent
from doctor.logs import kinds
from doctor.logs.lines import Line

SAME_GPU = (  # NCCL's "Duplicate GPU detected" too (doctor.verdict.log_faults)
    "two ranks of one communicator were given the same GPU; give each rank its own "
    "(torch.cuda.set_device(LOCAL_RANK) or init_process_group(device_id=...)) and "
    "check CUDA_VISIBLE_DEVICES"
)
_CAUSES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"environment variable \w{1,40} expected, but not set"),
        "the process was started without the variables a launcher sets (RANK, WORLD_SIZE, "
        "MASTER_ADDR, MASTER_PORT): start it with torchrun, or export them for srun or "
        "mpirun, or give init_process_group an init_method that names them",
    ),
    (
        re.compile(r"Cannot re-initialize CUDA in forked subprocess"),
        "CUDA was initialised in a process before it forked (the ranks, or a data loader's "
        "workers): start processes with spawn (torchrun, mp.spawn, "
        "set_start_method('spawn')) or make no CUDA call before the fork",
    ),
    (
        re.compile(r"use_libuv was requested but PyTorch was buil[dt] without libuv"),
        "this torch build (the Windows wheel) has no libuv TCPStore: set USE_LIBUV=0, or "
        "add use_libuv=0 to the init_method URL",
    ),
    (
        re.compile(r"Failed to initialize NVML: Driver/library version mismatch"),
        "the loaded kernel driver and the NVIDIA user-space libraries differ (a driver "
        "upgraded without a reboot, an unattended upgrade, a container carrying another "
        "driver's libraries): reboot the node or reload the driver, and pin the driver's "
        "packages",
    ),
    (
        re.compile(r"Duplicate GPU detected|same CUDA device for multiple distinct roles/ranks"),
        SAME_GPU,
    ),
    (
        re.compile(r"No CUDA GPUs are available|only supported with GPUs, no GPUs found"),
        "the process sees no GPU: CUDA_VISIBLE_DEVICES empty or wrong, a container started "
        "without GPUs (--gpus, the device plugin's resource request), or no driver loaded",
    ),
    (
        re.compile(r"Default process group has not been initialized"),
        "a torch.distributed call ran in a process that had not called init_process_group "
        "(or before it did): call it first in every rank, or guard the call with "
        "dist.is_initialized()",
    ),
)
"""Each message, as torch (``torch/distributed/rendezvous.py``, ``torch/cuda``, c10d's
TCPStore, ``distributed_c10d.py``), NVML and NCCL word it, and what to do about it."""
_WORDS = ("expected, but not", "CUDA", "libuv", "NVML", "GPU", "process group has not")
"""One of these is in every line ``_CAUSES`` matches: most lines are spared the regexes."""


def advice(text: str) -> str | None:
    """What to do about the set-up failure ``text`` names, if it names one."""
    if not any(word in text for word in _WORDS):
        return None
    return next((said for pattern, said in _CAUSES if pattern.search(text)), None)


def events(line: Line) -> list[LogEvent]:
    if line.nccl:  # NCCL's own lines are doctor.logs.nccl's
        return []
    return [line.event(kinds.BOOTSTRAP)] if advice(line.text) else []
