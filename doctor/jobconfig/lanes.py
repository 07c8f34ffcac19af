"""The lane (single- or multi-node): how it is resolved, and the tuning only many nodes use.

Below preflight (``doctor.checks.lane`` judges the tuning against the lane)
and the launch prologue (``doctor.launch.policy`` unsets what a single-node
run must not inherit), so neither imports the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import TYPE_CHECKING

from doctor.errors import UsageError
from doctor.torchjob.torchenv import decimal

if TYPE_CHECKING:
    from doctor.jobconfig.config import Config


class Lane(StrEnum):
    """Where a job runs: one node, or several (``--lane`` of preflight and launch)."""

    AUTO = "auto"
    SINGLE = "single-node"
    MULTI = "multi-node"


SINGLE, MULTI = Lane.SINGLE.value, Lane.MULTI.value
MULTINODE_PREFIXES = (
    "NCCL_IB_",
    "NCCL_IBEXT_",
    "NCCL_NET_",
    "NCCL_NETDEVS_",
    "NCCL_COLLNET_",
    "NCCL_SHARP_",
    "NCCL_UCX_",
    "NCCL_OOB_NET_",
    "NCCL_GIN_",
)
MULTINODE_NAMES = frozenset(
    {
        "NCCL_NET",
        "NCCL_CROSS_NIC",
        "NCCL_NCHANNELS_PER_NET_PEER",
        "NCCL_P2P_NET_CHUNKSIZE",
        "NCCL_PXN_DISABLE",
        "NCCL_P2P_PXN_LEVEL",
        "NCCL_PLUGIN_P2P",
        "NCCL_GDRCOPY_FLUSH_ENABLE",
    }
)
NEUTRAL = {
    "NCCL_IB_DISABLE": None,
    "NCCL_NET_PLUGIN": "none",
    "NCCL_COLLNET_ENABLE": "0",
    "NCCL_NET": "socket",
}
"""Not leaks: IB off is harmless on one node, and so are sockets, or a plugin or CollNet off."""


def leaked_multinode_vars(env: Mapping[str, str]) -> list[str]:
    """Multi-node network/IB tuning variables in ``env`` that a single-node run must not inherit.

    Sorted; variables set to empty or to a neutral value (``NCCL_NET_PLUGIN=none``,
    ``NCCL_COLLNET_ENABLE=0``, any ``NCCL_IB_DISABLE``) are not leaks.
    """
    leaked = []
    for name, value in env.items():
        if not value or not (name in MULTINODE_NAMES or name.startswith(MULTINODE_PREFIXES)):
            continue
        if name in NEUTRAL and (NEUTRAL[name] is None or value.lower() == NEUTRAL[name]):
            continue
        leaked.append(name)
    return sorted(leaked)


def _int(env: Mapping[str, str], name: str) -> int | None:
    value = decimal(env.get(name, ""))
    return value if value is not None and value >= 0 else None


def detect_lane(env: Mapping[str, str]) -> tuple[str, str]:
    """``auto``: SLURM node count, torchrun group/world sizes, Open MPI sizes, ``PET_NNODES``."""
    for name in ("SLURM_JOB_NUM_NODES", "SLURM_NNODES", "GROUP_WORLD_SIZE"):
        count = _int(env, name)
        if count is not None:
            return (MULTI if count > 1 else SINGLE), f"auto: {name}={count}"
    for world, local in (
        ("WORLD_SIZE", "LOCAL_WORLD_SIZE"),
        ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ):
        size, per_node = _int(env, world), _int(env, local)
        if size is not None and per_node:
            lane = MULTI if size > per_node else SINGLE
            return lane, f"auto: {world}={size}, {local}={per_node}"
    nnodes = env.get("PET_NNODES", "")
    if nnodes:
        top = nnodes.split(":")[-1]
        if top.isdigit():
            return (MULTI if int(top) > 1 else SINGLE), f"auto: PET_NNODES={nnodes}"
    return SINGLE, "auto: no multi-node launcher variables (SLURM, torchrun, Open MPI)"


def resolve_lane(flag: str | None, config: Config, env: Mapping[str, str]) -> tuple[str, str]:
    """``--lane`` wins, then ``[lane] kind``, then detection; returns ``(lane, source)``."""
    if flag not in (None, "auto", SINGLE, MULTI):
        raise UsageError(f"--lane must be auto, {SINGLE} or {MULTI}, not {flag!r}")
    if flag in (SINGLE, MULTI):
        return flag, "--lane"
    if flag is None and config.lane.kind in (SINGLE, MULTI):
        return config.lane.kind, f"[lane] kind in {config.source}"
    return detect_lane(env)
