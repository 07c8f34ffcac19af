"""Per-link figures and the topology they add up to: the GPU side of the model.

Line rates are per direction, in GB/s (1e9 bytes/s), the unit nccl-tests
prints. ``efficiency`` is the fraction of the line rate NCCL's ring reaches:
NVLink moves 128-byte payloads from the SMs, about 20 GB/s of a 25 GB/s link
(NCCL maintainers, nccl-tests issues #149 and #212), and IB sits closer to
line rate. NVLS runs NVLink at a lower efficiency of its own: 8xH100 reach
algbw ~275 GB/s with ``(1+1/n)`` of the buffer on each link, i.e. ~0.69 of
the 450 GB/s line rate (NCCL issues #1374, #2140).

Step latencies are of the order of NCCL's own tuning tables (``hwLat``,
``baseLat`` in ``src/graph/tuning.cc``); the sweep measures them better, and
the probe replaces them where it runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.bench.model import ModelParams
from doctor.gpu.nvml import Fleet


@dataclass(frozen=True)
class Link:
    name: str
    line_gbps: float
    """Line rate of one link (or one x16 slot, one NIC port), per direction."""
    efficiency: float
    step_latency_us: float


LINKS: dict[str, Link] = {
    # NVLink3: 4 pairs x 50 Gb/s = 25 GB/s per link and direction; A100 has 12 (300 GB/s).
    "nvlink3": Link("NVLink3", 25.0, 0.80, 0.7),
    # NVLink4: 2 pairs x 100 Gb/s PAM4 = 25 GB/s per link; H100/H200 have 18 (450 GB/s).
    "nvlink4": Link("NVLink4", 25.0, 0.80, 0.6),
    # NVLink5: 2 pairs x 200 Gb/s = 50 GB/s per link; B200 has 18 (900 GB/s).
    "nvlink5": Link("NVLink5", 50.0, 0.80, 0.6),
    # PCIe Gen4 x16: 16 GT/s x 16 lanes x 128/130 / 8 = 31.5 GB/s; Gen5 doubles it.
    "pcie4": Link("PCIe Gen4 x16", 31.5, 0.80, 1.5),
    "pcie5": Link("PCIe Gen5 x16", 63.0, 0.80, 1.5),
    # InfiniBand HDR 200 Gb/s and NDR 400 Gb/s per port.
    "ib-hdr": Link("InfiniBand HDR", 25.0, 0.92, 4.0),
    "ib-ndr": Link("InfiniBand NDR", 50.0, 0.92, 4.0),
}

NVLS_EFFICIENCY = 0.69
"""Fraction of the NVLink line rate NVLS moves (see the module docstring)."""
BASE_LATENCY_US = 8.0
"""Fixed cost of one NCCL collective launch (order of NCCL's ``baseLat``)."""
NVLS_LATENCY_US = 10.0
"""Extra fixed cost of NVLS, so tree/ring keep the small sizes as NCCL's tuner does."""


@dataclass(frozen=True)
class GpuSpec:
    nvlink: str
    nvlinks: int
    pcie: str
    nvls: bool
    """NVLink SHARP on an NVSwitch system (NVSwitch gen3, Hopper and later)."""


GPUS: dict[str, GpuSpec] = {
    "A100": GpuSpec("nvlink3", 12, "pcie4", nvls=False),
    "H100": GpuSpec("nvlink4", 18, "pcie5", nvls=True),
    "H200": GpuSpec("nvlink4", 18, "pcie5", nvls=True),
    "B200": GpuSpec("nvlink5", 18, "pcie5", nvls=True),
}

_NVML_NVLINK_VERSION = {4: "nvlink3", 5: "nvlink3", 6: "nvlink4", 7: "nvlink5"}
"""``nvmlNvlinkVersion_t`` codes -> our link names (NVML counts 1.0, 2.0, 2.2, 3.0 ...)."""


@dataclass(frozen=True)
class Topology:
    """What the model needs to know about the GPUs of one job."""

    gpu: str
    """``A100``, ``H100``, ``H200``, ``B200``, or the NVML name when unknown."""
    nranks: int
    nvlinks: int = 0
    """Active NVLinks of the worst GPU (the ring runs at the pace of its slowest hop)."""
    nvlink: str = ""
    nvswitch: bool = False
    pcie: str = "pcie5"
    pcie_width: int = 16
    nodes: int = 1
    nic: str = "ib-ndr"
    nics_per_node: int = 8
    nvls_enabled: bool = True
    """False when ``NCCL_NVLS_ENABLE=0`` (the restart wrapper needs it off)."""
    numa_nodes: tuple[int, ...] = ()
    """NUMA nodes the GPUs hang off; on PCIe-only systems a ring across them crosses sockets."""


def gpu_family(name: str) -> str:
    """``NVIDIA H100 80GB HBM3`` -> ``H100``; the NVML name itself when not in the table."""
    return next((family for family in GPUS if family in name.upper()), name)


def topology_from_fleet(fleet: Fleet, nranks: int, nvls_enabled: bool = True) -> Topology:
    """The topology of the first ``nranks`` GPUs NVML reports."""
    gpus = [g for g in fleet.gpus if not g.lost][:nranks]
    if not gpus:
        raise ValueError("no readable GPU to build a topology from")
    family = gpu_family(gpus[0].name)
    spec = GPUS.get(family)
    versions = [link.version for g in gpus for link in g.nvlinks if link.active and link.version]
    nvlink = spec.nvlink if spec else _NVML_NVLINK_VERSION.get(min(versions, default=0), "")
    gens = [g.pcie_gen_max for g in gpus if g.pcie_gen_max]
    widths = [g.pcie_width for g in gpus if g.pcie_width]
    return Topology(
        gpu=family,
        nranks=nranks,
        nvlinks=min(g.active_nvlinks for g in gpus),
        nvlink=nvlink,
        nvswitch=any(link.remote == "switch" for g in gpus for link in g.nvlinks),
        pcie=f"pcie{min(max(min(gens, default=5), 4), 5)}",
        pcie_width=min(widths, default=16),
        nvls_enabled=nvls_enabled,
        numa_nodes=tuple(sorted({g.numa_node for g in gpus if g.numa_node is not None})),
    )


def params_from_topology(topo: Topology, base_us: float | None = None) -> ModelParams:
    """Model parameters of a GPU job: the bottleneck hop of the ring decides the bandwidth.

    ``base_us`` is the launch cost the probe measured (one step of a tiny exchange);
    without it, the order of NCCL's own ``baseLat`` is used.
    """
    hops: list[tuple[str, float, float, float]] = []  # (what, line, effective, latency)
    if topo.nvlinks and topo.nvlink:
        link = LINKS[topo.nvlink]
        line = link.line_gbps * topo.nvlinks
        hops.append(
            (f"{topo.nvlinks}x {link.name}", line, line * link.efficiency, link.step_latency_us)
        )
    else:
        link = LINKS[topo.pcie]
        line = link.line_gbps * topo.pcie_width / 16
        hops.append(
            (
                f"{link.name.split(' x')[0]} x{topo.pcie_width}",
                line,
                line * link.efficiency,
                link.step_latency_us,
            )
        )
    if topo.nodes > 1:
        nic = LINKS[topo.nic]
        per_gpu = topo.nics_per_node / max(topo.nranks // topo.nodes, 1)
        line = nic.line_gbps * per_gpu
        hops.append(
            (
                f"{nic.name} ({per_gpu:g} NIC per GPU)",
                line,
                line * nic.efficiency,
                nic.step_latency_us,
            )
        )
    what, line, effective, latency = min(hops, key=lambda hop: hop[2])
    nvls = None
    spec = GPUS.get(topo.gpu)
    if (
        spec
        and spec.nvls
        and topo.nvswitch
        and topo.nvls_enabled
        and topo.nodes == 1
        and topo.nvlinks
    ):
        nvls = LINKS[topo.nvlink].line_gbps * topo.nvlinks * NVLS_EFFICIENCY
    switch = ", NVSwitch" if topo.nvswitch else ""
    if len(topo.numa_nodes) > 1:
        switch += f", NUMA nodes {','.join(map(str, topo.numa_nodes))}"
    return ModelParams(
        nranks=topo.nranks,
        alpha_us=latency,
        link_gbps=effective,
        base_us=base_us if base_us is not None else BASE_LATENCY_US,
        nvls_gbps=nvls,
        tree=True,
        nvls_latency_us=NVLS_LATENCY_US if nvls else 0.0,
        line_gbps=line,
        source=f"topology: {topo.nranks}x {topo.gpu}, {what}{switch}"
        + (f", {topo.nodes} nodes" if topo.nodes > 1 else ""),
    )
