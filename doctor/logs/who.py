"""Who is who across a job's logs: which rank a process, a GPU or an address belongs to.

A combined log names the same process several ways: NCCL's ``host:pid`` prefix, the
rank NCCL's communicator init states, the bus id of its GPU, the address its bootstrap
used (which other ranks' transport errors name), torchelastic's ``rank: R (pid: P)``.
``Directory.of(events)`` learns the ties from the events themselves, so the reader can
give a rank to a line that only says ``host:pid`` and the rules can turn "peer
10.0.0.2" or "GPU 0000:3b:00 on node-7" into ranks. Pure: events in, lookups out.

A process belongs to several communicators; its *global* rank is the one it has in the
largest (the world's), which is the one kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from doctor.evidence import LogEvent
from doctor.logs import kinds

_IP = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$|:")


def host_key(host: str) -> str:
    """``gpu-7.cluster.local`` -> ``gpu-7``; addresses stay whole; '' stays ''."""
    host = host.strip().lower().strip("[]")
    if not host or _IP.search(host):
        return host
    return host.split(".", 1)[0]


def address_key(peer: str) -> str:
    """``10.0.0.2<54201>`` or ``10.0.0.2:29500`` -> ``10.0.0.2``; a host name -> its key."""
    peer = peer.split("<", 1)[0].strip()
    if peer.count(":") == 1:
        peer = peer.split(":", 1)[0]
    return host_key(peer)


@dataclass
class Directory:
    """The ties between processes, ranks, GPUs, hosts and addresses that the logs state."""

    by_process: dict[tuple[str, int], int] = field(default_factory=dict)
    by_pid: dict[int, int | None] = field(default_factory=dict)
    """pid -> rank, None where two hosts' processes share the pid."""
    by_gpu: dict[tuple[str, str], int] = field(default_factory=dict)
    by_bus: dict[str, int | None] = field(default_factory=dict)
    host_of_rank: dict[int, str] = field(default_factory=dict)
    address_host: dict[str, str] = field(default_factory=dict)
    world: int | None = None
    """The job's size, where a communicator init, RAS or a store message states it."""

    @classmethod
    def of(cls, events: Iterable[LogEvent]) -> Directory:
        d = cls()
        sizes: dict[tuple[str, int | None], int] = {}
        for e in events:
            host = host_key(e.host)
            if e.kind == kinds.RANK_INFO and e.peer and host:
                d.address_host.setdefault(address_key(e.peer), host)
            if e.nranks and e.kind in (kinds.RANK_INFO, kinds.BOOTSTRAP, kinds.RAS_COUNT):
                d.world = max(d.world or 0, e.nranks)
            if e.rank is None or e.kind not in (kinds.RANK_INFO, kinds.EXIT):
                continue  # only lines that say who *their writer* is teach who is who
            size = e.nranks if e.kind == kinds.RANK_INFO and e.nranks else 0
            if e.pid is not None:
                if sizes.get((host, e.pid), -1) <= size:
                    sizes[(host, e.pid)] = size
                    d.by_process[(host, e.pid)] = e.rank
            if e.kind == kinds.RANK_INFO and e.device and size >= sizes.get((host, e.pid), 0):
                d.by_gpu[(host, e.device)] = e.rank
            if host and size >= sizes.get((host, e.pid), 0):
                d.host_of_rank[e.rank] = host
        for (_host, pid), rank in d.by_process.items():
            d.by_pid[pid] = rank if d.by_pid.get(pid, rank) == rank else None
        for (_host, bus), rank in d.by_gpu.items():
            d.by_bus[bus] = rank if d.by_bus.get(bus, rank) == rank else None
        return d

    def rank_of(self, e: LogEvent) -> int | None:
        """``e``'s rank, or the one its process or GPU has elsewhere in the logs."""
        if e.rank is not None and e.kind not in kinds.RAS_KINDS:
            return e.rank
        host = host_key(e.host)
        if e.pid is not None:
            if (host, e.pid) in self.by_process:
                return self.by_process[(host, e.pid)]
            if not host or host not in self.hosts():
                found = self.by_pid.get(e.pid)
                if found is not None:
                    return found
        if e.device and e.kind in (kinds.GPU_FAULT, kinds.CUDA_ERROR, kinds.IOMMU_FAULT):
            if (host, e.device) in self.by_gpu:
                return self.by_gpu[(host, e.device)]
            if not host:
                return self.by_bus.get(e.device)
        return e.rank

    def hosts(self) -> set[str]:
        return set(self.host_of_rank.values())

    def ranks_on(self, where: str) -> tuple[int, ...]:
        """The ranks on the host a peer string (address or name) names."""
        key = address_key(where)
        host = self.address_host.get(key, key)
        return tuple(sorted(r for r, h in self.host_of_rank.items() if h == host))
