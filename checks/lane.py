"""The lane (single- or multi-node) and the network tuning that must match it.

A single-node run inherits a multi-node shell's IB/net tuning all the time
(a login profile, a container default); NCCL still initialises its network at
communicator creation, so ``NCCL_NET=IB`` on a host without IB fails with
"Failed to initialize any NET plugin", and the rest changes paths nobody
meant to use. The opposite mistake, IB disabled on a multi-node run, sends
every inter-node byte over TCP sockets.

The lane itself and the list of multi-node variables are ``doctor.jobconfig.lanes``'s,
shared with the launch prologue's env sanitiser.
"""

from __future__ import annotations

from doctor.checks import fixes
from doctor.checks.facts import Facts
from doctor.checks.plugin import external_net_plugin
from doctor.checks.values import strtoll
from doctor.jobconfig.lanes import MULTI, SINGLE, leaked_multinode_vars
from doctor.model import Finding, Severity


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
    """The ``lane.*`` findings."""
    return [*check_leak(facts), *check_disabled(facts)]
