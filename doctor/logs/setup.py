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
verdict's summary. It says so too for the set-up failures other parsers read whose line names
the cause: CUDA's set-up errors (a GPU index the host lacks, the fabric manager, Exclusive
Process mode, a driver older than the build), the store's port taken, a host name that does
not resolve, an interface variable that names none, NCCL's ``/dev/shm`` segment, NCCL's
topology, the launcher, a process out of file descriptors.
"""

from __future__ import annotations

import re

from doctor.evidence import LogEvent
from doctor.logs import c10d, cuda, kinds, launcher, nccl, shm
from doctor.logs.lines import Line

SAME_GPU = (  # NCCL's "Duplicate GPU detected" too (doctor.verdict.log_faults)
    "two ranks of one communicator were given the same GPU; give each rank its own "
    "(torch.cuda.set_device(LOCAL_RANK) or init_process_group(device_id=...)) and "
    "check CUDA_VISIBLE_DEVICES"
)
DRIVER_MISMATCH = (
    "the loaded kernel driver and the NVIDIA user-space libraries differ (a driver "
    "upgraded without a reboot, an unattended upgrade, a container carrying another "
    "driver's libraries): reboot the node or reload the driver, and pin the driver's "
    "packages"
)
JAX_START = (
    "JAX's distributed runtime was started wrongly: call jax.distributed.initialize() once, "
    "first, with the coordinator's address (or under a launcher it reads it from: SLURM, "
    "Open MPI)"
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
        DRIVER_MISMATCH,
    ),
    ("API mismatch", re.compile(r"NVRM: API mismatch: the client"), DRIVER_MISMATCH),
    (
        "initiali",
        re.compile(
            r"jax\.distributed\.initialize\(\) must be called before any JAX calls|"
            r"RuntimeError: distributed\.initialize should only be called once"
        ),
        JAX_START,
    ),
    (
        "coordinator",
        re.compile(
            r"coordinator_address should be defined|Could not parse coordinator IP address from"
        ),
        JAX_START,
    ),
    (
        "OFI MTL",
        re.compile(r"The OFI MTL was not able to find endpoint information"),
        "Open MPI's libfabric transport found no endpoint of a peer: the peer failed to start "
        "its network, or the hosts use different providers (FI_PROVIDER, the NICs)",
    ),
    (
        "PMIx server",
        re.compile(r"No PMIx server was reachable, but a PMI1/2 was detected"),
        "Open MPI found no PMIx server to start from (srun run with --mpi=pmi2 or none), so "
        "each rank starts alone as a job of one: launch with srun --mpi=pmix, or with mpirun",
    ),
    (
        "during startup",
        re.compile(r"The current node timed out during startup|raylet failed to start"),
        "a Ray node did not start or could not register with the head (its raylet failed, or "
        "it chose an address the head cannot reach): check the address the node reports "
        "(--node-ip-address) and the ports between the nodes",
    ),
    (
        "connect to self",
        re.compile(r"gloo/transport/tcp/device\.cc:\d{1,6}\].{0,80}Cannot connect to self"),
        "gloo's TCP transport was given this host's own address for a peer: ranks share a "
        "host name or address, or it resolves to the wrong interface (GLOO_SOCKET_IFNAME)",
    ),
    (
        "oob",
        re.compile(r"TL_NCCL ERROR failed to start oob allgather"),
        "UCC's NCCL layer could not exchange its set-up among the ranks: the out-of-band "
        "channel (the process group it was given) failed first",
    ),
    (
        "UCX",
        re.compile(
            r"no active messages transport to|No transports selected to|"
            r"reached maximum number of connection retries|"
            r"connection establishment for socket fd \d{1,9} was unsuccessful|"
            r"asymmetric endpoint configuration is not supported"
        ),
        "UCX found no transport that reaches a peer, or could not connect one: check UCX_TLS "
        "and UCX_NET_DEVICES on every host, that the hosts reach each other on the interface "
        "it uses, and that every rank runs the same UCX with the same error handling",
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
_DEVICE_CAUSES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    (
        "",
        re.compile(cuda.NO_SUCH_DEVICE + r"|hipErrorInvalidDevice\b"),
        "a rank asked for a GPU this host does not have: more ranks on the node than GPUs "
        "visible to them (torchrun's --nproc-per-node, the scheduler's GPUs per task, "
        "CUDA_VISIBLE_DEVICES), or a device index taken from the global rank instead of "
        "LOCAL_RANK; start one rank per visible GPU",
    ),
    (
        "",
        re.compile(cuda.FABRIC_NOT_READY),
        "CUDA's error 802: on an NVSwitch system (HGX, DGX) the fabric manager is not running "
        "or failed to start (its version must match the driver's); start "
        "nvidia-fabricmanager and read its log",
    ),
    (
        "",
        re.compile(
            r"busy or unavailable|cudaErrorDevicesUnavailable|CUDA_ERROR_DEVICE_UNAVAILABLE"
        ),
        "the GPUs are in Exclusive Process compute mode and another process holds them (a "
        "parent that touched CUDA, a job still running, two ranks on one GPU), or a GPU is "
        "unavailable; nvidia-smi shows each GPU's compute mode and its processes",
    ),
    (
        "",
        re.compile(cuda.FABRIC_FAILED),
        "the fabric manager did not start: its version must match the driver's exactly; "
        "install the nvidia-fabricmanager package of the driver's version and restart it",
    ),
    (
        "",
        re.compile(cuda.DRIVER_TOO_OLD),
        "the driver is older than the CUDA runtime this build needs: update the driver, or "
        "install the build for this driver's CUDA (torch's +cuXXX wheels)",
    ),
    (
        "",
        re.compile(cuda.NO_DRIVER),
        "the process has no working CUDA: no driver in its container (run it with the NVIDIA "
        "container runtime, --gpus), CUDA_VISIBLE_DEVICES changed after CUDA started, a driver "
        "an update left half-loaded (reboot), or a torch built without CUDA",
    ),
)
"""CUDA's set-up errors (``doctor.logs.cuda`` reads them as set-up), what to do about each."""
_NAMED_ELSEWHERE: tuple[tuple[str, re.Pattern[str], str], ...] = (
    (
        "",
        re.compile(
            c10d.PORT_IN_USE + r"|failed to listen on any local network address|"
            r"errno: 98\b|code: -98\b"
        ),
        "the store's port is taken on this host: another job, or a run still alive, listens "
        "on MASTER_PORT; pick a free port (torchrun --master-port, or --standalone) or stop "
        "the old run",
    ),
    (
        "",
        re.compile(r"Could not resolve hostname|gai error|" + c10d.UNRESOLVED),
        "a host name does not resolve: MASTER_ADDR, the rendezvous endpoint or a hostfile "
        "names a host this node's DNS or /etc/hosts does not know (a container's own host "
        "name, a Kubernetes service not created yet); give an address, or fix the name's record",
    ),
    (
        "",
        re.compile(nccl.NO_INTERFACE + "|" + c10d.NO_ADDRESS),
        "NCCL_SOCKET_IFNAME or GLOO_SOCKET_IFNAME names no interface this host has, or its ^ "
        "list excludes them all: set it to the interface that carries the hosts' addresses "
        "(ip -br addr)",
    ),
    (
        "",
        re.compile(nccl.SHM_SEGMENT + "|ncclShmOpen"),
        "NCCL could not make its shared-memory segment in /dev/shm: full or too small (a "
        f"container's default is 64 MB), or not writable by the job; {shm.MORE_SHM}",
    ),
    (
        "",
        re.compile(nccl.SHM_REMOVED),
        "NCCL's /dev/shm segments were removed under it by another process: systemd-logind "
        "removes a user's segments when the user's last session ends (RemoveIPC=yes); set "
        "RemoveIPC=no in logind.conf",
    ),
    (
        "",
        re.compile(nccl.TOPOLOGY_WARN),
        "NCCL could not build this host's topology while creating the communicator: a device "
        "it read lacks what it needs (a NIC without a PCI bus id: a RoCE or virtual function, "
        "a container without the host's /sys; an NCCL_TOPO_FILE that does not match the "
        "host): limit NCCL_IB_HCA to the HCAs the job uses, or fix the topology file, and "
        "rerun with NCCL_DEBUG_SUBSYS=INIT,GRAPH to see the device",
    ),
    (
        "",
        re.compile(r"Too many open files"),
        "a process ran out of file descriptors: raise the job's open-files limit (ulimit -n, "
        "a container's nofile), large jobs open a socket to every peer",
    ),
    (
        "",
        launcher.LAUNCH_SETUP,
        "the launcher could not start the ranks, as its line says: a container that did not "
        "start (pyxis), too few slots in a hostfile (slots=), an MPI without the scheduler's "
        "PMI (srun --mpi=pmix, or mpirun); fix the launch first",
    ),
)
"""Set-up failures other parsers read whose line names the cause, what to do about each.
These two tables are asked only for a set-up event's advice (few lines), so they need no
needle."""


def advice(text: str) -> str | None:
    """What to do about the set-up failure ``text`` names, if it names one."""
    for needle, pattern, said in _CAUSES + _DEVICE_CAUSES + _NAMED_ELSEWHERE:
        if needle in text and pattern.search(text):
            return said
    return None


def events(line: Line) -> list[LogEvent]:
    if line.nccl:  # NCCL's own lines are doctor.logs.nccl's
        return []
    text = line.text
    named = any(needle in text and pattern.search(text) for needle, pattern, _ in _CAUSES)
    return [line.event(kinds.BOOTSTRAP)] if named else []  # CUDA's are doctor.logs.cuda's
