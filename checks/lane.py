"""The lane (single- or multi-node) and the network tuning that must match it.

A single-node run inherits a multi-node shell's IB/net tuning all the time
(a login profile, a container default); NCCL still initialises its network at
communicator creation, so ``NCCL_NET=IB`` on a host without IB fails with
"Failed to initialize any NET plugin", and the rest changes paths nobody
meant to use. The opposite mistake, IB disabled on a multi-node run, sends
every inter-node byte over TCP sockets.

``leaked_multinode_vars(env)`` is the pure rule the launch prologue's env
sanitiser imports.
"""

from __future__ import annotations

from collections.abc import Mapping

from doctor.checks import fixes
from doctor.checks.facts import Facts
from doctor.checks.plugin import external_net_plugin
from doctor.checks.values import decimal, strtoll
from doctor.config import Config
from doctor.errors import UsageError
from doctor.model import Finding, Severity

SINGLE, MULTI = "single-node", "multi-node"
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


def check_leak(facts: Facts) -> list[Finding]:
    """``lane.ib-leak``: multi-node tuning on the single-node lane."""
    if facts.lane != SINGLE:
        return [
            Finding(
                "lane.ib-leak",
                Severity.PASS,
                "lane",
                f"multi-node lane ({facts.lane_source}): network tuning is expected.",
            )
        ]
    found = []
    for name in leaked_multinode_vars(facts.env):
        value = facts.env[name]
        no_ib = name == "NCCL_NET" and value.lower() == "ib" and not facts.ib_devices
        why = (
            "NCCL_NET=IB on a host with no RDMA device: communicator creation fails with "
            "'Failed to initialize any NET plugin'"
            if no_ib
            else f"{name}={value} is multi-node network tuning inherited by a single-node run; "
            "NCCL still initialises its network at communicator creation, so it can pick "
            "a path nobody meant or fail bootstrap"
        )
        where = f" (set in {facts.source(name)})" if facts.from_file(name) else ""
        found.append(
            Finding(
                "lane.ib-leak",
                Severity.FAIL if no_ib else Severity.WARN,
                name,
                f"{why}{where}.",
                fixes.unset(facts, name),
            )
        )
    return found or [
        Finding(
            "lane.ib-leak",
            Severity.PASS,
            "lane",
            f"single-node lane ({facts.lane_source}): no multi-node network tuning inherited.",
        )
    ]


def check_disabled(facts: Facts) -> list[Finding]:
    """``lane.ib-disabled-multinode``: only TCP sockets left between nodes."""
    if facts.lane != MULTI:
        return [
            Finding(
                "lane.ib-disabled-multinode",
                Severity.PASS,
                "lane",
                f"single-node lane ({facts.lane_source}): no inter-node transport.",
            )
        ]
    env = facts.env
    net = env.get("NCCL_NET", "")
    if net.lower() == "socket":
        return [
            Finding(
                "lane.ib-disabled-multinode",
                Severity.FAIL,
                "NCCL_NET",
                "NCCL_NET=Socket on the multi-node lane: every inter-node byte goes over "
                "TCP sockets, an order of magnitude slower than IB; large collectives "
                "then run into the watchdog timeout.",
                fixes.unset(facts, "NCCL_NET"),
            )
        ]
    disabled = strtoll(env.get("NCCL_IB_DISABLE", "")).value != 0
    plugin = external_net_plugin(facts)
    if disabled and not plugin:
        off = (
            "NCCL_NET_PLUGIN=none"
            if env.get("NCCL_NET_PLUGIN", "").lower() == "none"
            else "no external net plugin loads"
        )
        return [
            Finding(
                "lane.ib-disabled-multinode",
                Severity.FAIL,
                "NCCL_IB_DISABLE",
                f"NCCL_IB_DISABLE={env['NCCL_IB_DISABLE']} on the multi-node lane and "
                f"{off}: only TCP sockets remain between nodes.",
                fixes.unset(facts, "NCCL_IB_DISABLE"),
            )
        ]
    via = f"external net plugin {plugin}" if plugin else "NCCL's IB transport"
    return [
        Finding(
            "lane.ib-disabled-multinode",
            Severity.PASS,
            "lane",
            f"multi-node lane ({facts.lane_source}): inter-node traffic can use {via}.",
        )
    ]


def run(facts: Facts) -> list[Finding]:
    return [*check_leak(facts), *check_disabled(facts)]
