"""``net.socket-ifname``: ``NCCL_SOCKET_IFNAME`` against this host's interfaces.

NCCL's syntax: a comma list of name prefixes (``eth`` matches ``eth0``), a
leading ``^`` to exclude instead of select, then a leading ``=`` for exact
names; each entry may carry ``:port``. Only interfaces with an IP address
count. When nothing matches, bootstrap fails ("no socket interface found")
or, worse, waits; unset, NCCL prefers ``ib*``, then anything but
``docker*``/``lo``, then ``docker*``, then ``lo``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from doctor.checks import fixes
from doctor.checks.facts import Facts
from doctor.model import Finding, Severity

_DEFAULT_ORDER = ("ib", "^docker,lo", "docker", "lo")


def matching(spec: str, interfaces: Iterable[str]) -> list[str]:
    """The interfaces NCCL selects with ``NCCL_SOCKET_IFNAME=spec``, in the given order."""
    exclude = spec.startswith("^")
    body = spec[1:] if exclude else spec
    exact = body.startswith("=")
    body = body[1:] if exact else body
    names = [entry.split(":")[0] for entry in body.split(",") if entry]

    def listed(ifname: str) -> bool:
        if not names:
            return True
        return any(ifname == n if exact else ifname.startswith(n) for n in names)

    return [i for i in interfaces if listed(i) != exclude]


def default_choice(interfaces: Iterable[str]) -> list[str]:
    """What NCCL picks when ``NCCL_SOCKET_IFNAME`` is unset."""
    usable = list(interfaces)
    for spec in _DEFAULT_ORDER:
        chosen = matching(spec, usable)
        if chosen:
            return chosen
    return []


def _usable(interfaces: Mapping[str, bool]) -> list[str]:
    return sorted(name for name, has_address in interfaces.items() if has_address)


def run(facts: Facts) -> list[Finding]:
    if facts.interfaces is None:
        return [
            Finding(
                "net.socket-ifname",
                Severity.SKIP,
                "NCCL_SOCKET_IFNAME",
                "the network interfaces of this host could not be listed.",
            )
        ]
    usable = _usable(facts.interfaces)
    spec = facts.env.get("NCCL_SOCKET_IFNAME", "")
    if not spec:
        chosen = default_choice(usable)
        return [
            Finding(
                "net.socket-ifname",
                Severity.PASS,
                "NCCL_SOCKET_IFNAME",
                f"NCCL_SOCKET_IFNAME is unset: NCCL will bootstrap over "
                f"{', '.join(chosen) or 'no interface'} "
                f"(interfaces with an address: {', '.join(usable) or 'none'}).",
            )
        ]
    chosen = matching(spec, usable)
    if chosen:
        return [
            Finding(
                "net.socket-ifname",
                Severity.PASS,
                "NCCL_SOCKET_IFNAME",
                f"NCCL_SOCKET_IFNAME={spec} selects {', '.join(chosen)}.",
            )
        ]
    where = (
        f" (set in {facts.source('NCCL_SOCKET_IFNAME')})"
        if facts.from_file("NCCL_SOCKET_IFNAME")
        else ""
    )
    fallback = ", ".join(default_choice(usable)) or "no interface"
    return [
        Finding(
            "net.socket-ifname",
            Severity.FAIL,
            "NCCL_SOCKET_IFNAME",
            f"NCCL_SOCKET_IFNAME={spec} matches no interface with an address here "
            f"({', '.join(usable) or 'none'}){where}: NCCL bootstrap fails with "
            "'no socket interface found'. A prefix matches names that start with it, "
            f"'^' excludes, '=' means exact names; unset, NCCL would use {fallback}.",
            fixes.unset(facts, "NCCL_SOCKET_IFNAME"),
        )
    ]
