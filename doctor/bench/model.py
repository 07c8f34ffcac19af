"""The alpha-beta model of AllReduce: ring, tree and NVLS.

Ring (reduce-scatter then all-gather) takes ``2(n-1)`` steps and moves
``2(n-1)/n`` of the buffer over each rank's outgoing link:

    T_ring = base + 2(n-1)·alpha + 2(n-1)/n · S/B [+ (n-1)/n · S/R]

On CPUs the terms are measured per size instead: ``alpha + (S/n)/B`` is one
exchange step of ``S/n`` bytes and ``(S/n)/R`` one sum, both timed by the
probe beside the AllReduce of that size (see ``doctor.bench.probe``):

    T_ring = base + 2(n-1)·T_exchange(S/n) + (n-1)·T_sum(S/n)

where ``R`` is the reduction throughput when the reduction runs on the CPU
between transfers (gloo); on GPUs it overlaps the transfer and is left out.
Tree (NCCL's double binary tree) needs only ``2·ceil(log2 n)`` steps, so it
wins at small sizes, but its bandwidth is lower (NCCL's tuning tables cap the
per-channel tree bandwidth below the ring's); the crossover falls out of the
two formulas. NVLS lets the NVSwitch reduce and multicast: each GPU moves
``(1+1/n)·S`` through its NVLinks (NCCL maintainers' accounting), at the NVLS
effective bandwidth:

    T_nvls = base + lat_nvls + 2·alpha + (1+1/n) · S/B_nvls

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
    nvls_latency_us: float = 0.0
    """Extra fixed cost of an NVLS collective (multicast setup and switch round trip)."""
    tree: bool = False
    """Whether the backend has a tree algorithm (NCCL: yes; gloo: no)."""
    line_gbps: float | None = None
    """Line rate of the bottleneck link per direction, to explain a busbw above it."""
    source: str = ""
    """Where the parameters come from, in words."""
    measured_steps: bool = False
    """Predict the ring from the step measured beside each size (CPU) instead of alpha/B."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RingStep:
    """One ring step of a given size, measured beside the AllReduce of that size."""

    exchange_us: float
    """Send ``S/n`` bytes to the next rank while receiving ``S/n`` from the previous one."""
    reduce_us: float
    """Sum one received ``S/n`` chunk into the local one."""


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
    return (
        p.base_us
        + 2 * (n - 1) * p.alpha_us
        + _transfer_us(busbw_factor(n) * nbytes, p.link_gbps)
        + _reduce_us(p, nbytes)
    )


def ring_time_from_step(p: ModelParams, step: RingStep) -> float:
    """The ring is ``2(n-1)`` exchanges of ``S/n`` and ``n-1`` sums of ``S/n``."""
    n = p.nranks
    return p.base_us + 2 * (n - 1) * step.exchange_us + (n - 1) * step.reduce_us


def tree_time_us(p: ModelParams, nbytes: int) -> float:
    n = p.nranks
    steps = 2 * math.ceil(math.log2(n))
    bandwidth = TREE_BANDWIDTH_FRACTION * p.link_gbps
    return (
        p.base_us
        + steps * p.alpha_us
        + _transfer_us(busbw_factor(n) * nbytes, bandwidth)
        + _reduce_us(p, nbytes)
    )


def nvls_time_us(p: ModelParams, nbytes: int) -> float:
    assert p.nvls_gbps is not None
    return (
        p.base_us
        + p.nvls_latency_us
        + 2 * p.alpha_us
        + _transfer_us((1 + 1 / p.nranks) * nbytes, p.nvls_gbps)
    )


def candidates(p: ModelParams, nbytes: int, step: RingStep | None = None) -> dict[Algorithm, float]:
    """Predicted time of every algorithm the backend and topology offer."""
    ring = (
        ring_time_from_step(p, step)
        if step is not None and p.measured_steps
        else ring_time_us(p, nbytes)
    )
    times = {Algorithm.RING: ring}
    if p.tree and p.nranks > 2:
        times[Algorithm.TREE] = tree_time_us(p, nbytes)
    if p.nvls_gbps is not None:
        times[Algorithm.NVLS] = nvls_time_us(p, nbytes)
    return times


def predict(p: ModelParams, nbytes: int, step: RingStep | None = None) -> Prediction:
    """The fastest algorithm for ``nbytes`` and the bandwidths it would show in nccl-tests."""
    if p.nranks < 2:
        raise ValueError("an AllReduce model needs at least 2 ranks")
    times = candidates(p, nbytes, step)
    algorithm = min(times, key=times.__getitem__)
    time_us = times[algorithm]
    algbw = nbytes / (time_us * 1e3)
    return Prediction(algorithm, time_us, algbw, algbw * busbw_factor(p.nranks))


def peak(p: ModelParams) -> Prediction:
    """The asymptotic (very large message) prediction: the bandwidth ceiling."""
    return predict(p, 1 << 40)


def params_from_probe(probe: ProbeResult, nranks: int, tree: bool = False) -> ModelParams:
    """CPU (gloo) parameters: all measured by the probe, none assumed.

    The summary figures describe the host; each size is predicted from the ring
    step measured beside it (``measured_steps``).
    """
    return ModelParams(
        nranks=nranks,
        alpha_us=probe.alpha_us,
        link_gbps=probe.link_gbps,
        reduce_gbps=probe.reduce_gbps,
        tree=tree,
        measured_steps=True,
        source=(
            f"ring of 2(n-1) p2p steps measured beside each size; host probe: step "
            f"{probe.alpha_us:.1f} us, link {probe.link_gbps:.2f} GB/s, "
            f"reduce {probe.reduce_gbps:.2f} GB/s"
        ),
    )
