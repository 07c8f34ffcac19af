"""The alpha-beta model of AllReduce: ring, tree and NVLS.

Ring (reduce-scatter then all-gather) takes ``2(n-1)`` steps and moves
``2(n-1)/n`` of the buffer over each rank's outgoing link:

    T_ring = base + 2(n-1)·alpha + 2(n-1)/n · S/B [+ (n-1)/n · S/R]

where ``R`` is the reduction throughput when the reduction runs on the CPU
between transfers (gloo); on GPUs it overlaps the transfer and is left out.
Tree (NCCL's double binary tree) needs only ``2·ceil(log2 n)`` steps, so it
wins at small sizes, but its bandwidth is lower (NCCL's tuning tables cap the
per-channel tree bandwidth below the ring's); the crossover falls out of the
two formulas. NVLS lets the NVSwitch reduce and multicast: each GPU moves
``(1+1/n)·S`` through its NVLinks (NCCL maintainers' accounting), at the NVLS
effective bandwidth:

    T_nvls = base + 2·alpha + (1+1/n) · S/B_nvls

Bus bandwidth is nccl-tests' definition for AllReduce, ``algbw · 2(n-1)/n``,
whatever the algorithm: that is why NVLS shows a busbw above the line rate.
Units: bytes, microseconds, GB/s = 1e9 bytes/s (as nccl-tests prints them).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from doctor.bench.probe import ProbeResult

TREE_BANDWIDTH_FRACTION = 0.9
"""Tree bandwidth relative to ring on the same links (NCCL caps tree channels lower)."""


class Algorithm(StrEnum):
    RING = "ring"
    TREE = "tree"
    NVLS = "nvls"


@dataclass(frozen=True)
class ModelParams:
    """Everything the model needs; built from the probe (CPU) or the topology (GPU)."""

    nranks: int
    alpha_us: float
    """Latency of one point-to-point step between neighbouring ranks."""
    link_gbps: float
    """Effective bandwidth one rank pushes to its ring neighbour, per direction."""
    base_us: float = 0.0
    """Fixed cost of launching one collective."""
    reduce_gbps: float | None = None
    """Reduction throughput when the reduction runs on the CPU (gloo); None on GPUs."""
    nvls_gbps: float | None = None
    """Effective NVLink bandwidth under NVLS; None where there is no NVSwitch SHARP."""
    tree: bool = False
    """Whether the backend has a tree algorithm (NCCL: yes; gloo: no)."""
    line_gbps: float | None = None
    """Line rate of the bottleneck link per direction, to explain a busbw above it."""
    source: str = ""
    """Where the parameters come from, in words."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Prediction:
    algorithm: Algorithm
    time_us: float
    algbw_gbps: float
    busbw_gbps: float


def busbw_factor(nranks: int) -> float:
    """nccl-tests' AllReduce bus-bandwidth factor, ``2(n-1)/n``."""
    return 2 * (nranks - 1) / nranks


def _transfer_us(nbytes: float, gbps: float) -> float:
    return nbytes / (gbps * 1e3)


def _reduce_us(p: ModelParams, nbytes: int) -> float:
    if p.reduce_gbps is None:
        return 0.0
    return _transfer_us((p.nranks - 1) / p.nranks * nbytes, p.reduce_gbps)


def ring_time_us(p: ModelParams, nbytes: int) -> float:
    n = p.nranks
    return (p.base_us + 2 * (n - 1) * p.alpha_us
            + _transfer_us(busbw_factor(n) * nbytes, p.link_gbps) + _reduce_us(p, nbytes))


def tree_time_us(p: ModelParams, nbytes: int) -> float:
    n = p.nranks
    steps = 2 * math.ceil(math.log2(n))
    bandwidth = TREE_BANDWIDTH_FRACTION * p.link_gbps
    return (p.base_us + steps * p.alpha_us
            + _transfer_us(busbw_factor(n) * nbytes, bandwidth) + _reduce_us(p, nbytes))


def nvls_time_us(p: ModelParams, nbytes: int) -> float:
    assert p.nvls_gbps is not None
    return p.base_us + 2 * p.alpha_us + _transfer_us((1 + 1 / p.nranks) * nbytes, p.nvls_gbps)


def candidates(p: ModelParams, nbytes: int) -> dict[Algorithm, float]:
    """Predicted time of every algorithm the backend and topology offer."""
    times = {Algorithm.RING: ring_time_us(p, nbytes)}
    if p.tree and p.nranks > 2:
        times[Algorithm.TREE] = tree_time_us(p, nbytes)
    if p.nvls_gbps is not None:
        times[Algorithm.NVLS] = nvls_time_us(p, nbytes)
    return times


def predict(p: ModelParams, nbytes: int) -> Prediction:
    """The fastest algorithm for ``nbytes`` and the bandwidths it would show in nccl-tests."""
    if p.nranks < 2:
        raise ValueError("an AllReduce model needs at least 2 ranks")
    times = candidates(p, nbytes)
    algorithm = min(times, key=times.__getitem__)
    time_us = times[algorithm]
    algbw = nbytes / (time_us * 1e3)
    return Prediction(algorithm, time_us, algbw, algbw * busbw_factor(p.nranks))


def peak(p: ModelParams) -> Prediction:
    """The asymptotic (very large message) prediction: the bandwidth ceiling."""
    return predict(p, 1 << 40)


def params_from_probe(probe: ProbeResult, nranks: int, tree: bool = False) -> ModelParams:
    """CPU (gloo) parameters: all three measured by the probe, none assumed."""
    return ModelParams(
        nranks=nranks, alpha_us=probe.alpha_us, link_gbps=probe.link_gbps,
        reduce_gbps=probe.reduce_gbps, tree=tree,
        source=(f"p2p probe: step {probe.alpha_us:.1f} us, link {probe.link_gbps:.2f} GB/s, "
                f"reduce {probe.reduce_gbps:.2f} GB/s"))
