"""Set-up failures that torch, its CUDA runtime and NVML print in words that name the
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
_CAUSES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    (
        "expected, but not",
        re.compile(r"environment variable \w{1,40} expected, but not set"),
        "the process was started without the variables a launcher sets (RANK, WORLD_SIZE, "
        "MASTER_ADDR, MASTER_PORT): start it with torchrun, or export them for srun or "
        "mpirun, or give init_process_group an init_method that names them",
    ),
    (
        "re-initialize CUDA",
        re.compile(r"Cannot re-initialize CUDA in forked subprocess"),
        "CUDA was initialised in a process before it forked (the ranks, or a data loader's "
        "workers): start processes with spawn (torchrun, mp.spawn, "
        "set_start_method('spawn')) or make no CUDA call before the fork",
    ),
    (
        "without libuv",
        re.compile(r"use_libuv was requested but PyTorch was buil[dt] without libuv"),
        "this torch build (the Windows wheel) has no libuv TCPStore: set USE_LIBUV=0, or "
        "add use_libuv=0 to the init_method URL",
    ),
    (
        "NVML",
        re.compile(r"Failed to initialize NVML: Driver/library version mismatch"),
        "the loaded kernel driver and the NVIDIA user-space libraries differ (a driver "
        "upgraded without a reboot, an unattended upgrade, a container carrying another "
        "driver's libraries): reboot the node or reload the driver, and pin the driver's "
        "packages",
    ),
    (
        "same CUDA device",
        re.compile(r"same CUDA device for multiple distinct roles/ranks"),
        SAME_GPU,
    ),
    (
        "GPUs",
        re.compile(r"No CUDA GPUs are available|only supported with GPUs, no GPUs found"),
        "the process sees no GPU: CUDA_VISIBLE_DEVICES empty or wrong, a container started "
        "without GPUs (--gpus, the device plugin's resource request), or no driver loaded",
    ),
    (
        "has not been initialized",
        re.compile(r"Default process group has not been initialized"),
        "a torch.distributed call ran in a process that had not called init_process_group "
        "(or before it did): call it first in every rank, or guard the call with "
        "dist.is_initialized()",
    ),
)
"""Each message, as torch (``torch/distributed/rendezvous.py``, ``torch/cuda``, c10d's
TCPStore, ``distributed_c10d.py``) and NVML word it, what to do about it, and a piece of it
that a line must hold before the pattern is tried (most lines hold none)."""


def advice(text: str) -> str | None:
    """What to do about the set-up failure ``text`` names, if it names one."""
    for needle, pattern, said in _CAUSES:
        if needle in text and pattern.search(text):
            return said
    return None


def events(line: Line) -> list[LogEvent]:
    if line.nccl:  # NCCL's own lines are doctor.logs.nccl's
        return []
    return [line.event(kinds.BOOTSTRAP)] if advice(line.text) else []
