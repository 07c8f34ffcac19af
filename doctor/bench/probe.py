"""The point-to-point probe, run inside every rank before the sweep.

It measures the three numbers the CPU model needs, in the traffic pattern the
ring will use: every rank sends to ``rank+1`` and receives from ``rank-1`` at
the same time (nccl-tests' ``sendrecv`` pattern), so the figures include what
the ring will suffer from (all links busy at once, shared cores):

* ``alpha_us``: one 4-byte step around the ring;
* ``link_gbps``: large exchanges (4 and 16 MiB);
* ``reduce_gbps``: summing two buffers of the same size on every rank at once
  (gloo reduces on the CPU between transfers; on GPUs the reduction overlaps
  the transfer and is not used).

Each figure is the median repetition on each rank, averaged over ranks. The
sweep times AllReduce the same way (see :func:`median_seconds`), so the probe
and the sweep see the same kind of number on a shared host.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

LATENCY_REPS = 30
BANDWIDTH_SIZES: tuple[tuple[int, int], ...] = ((4 << 20, 6), (16 << 20, 4))
"""(message bytes, repetitions) of the exchanges the link bandwidth comes from."""
REDUCE_BYTES = 4 << 20


@dataclass(frozen=True)
class ProbeResult:
    alpha_us: float
    link_gbps: float
    reduce_gbps: float
    exchanges_us: tuple[tuple[int, float], ...] = ()
    """The measured exchange time per message size, the points behind alpha and link_gbps."""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["exchanges_us"] = [list(pair) for pair in self.exchanges_us]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProbeResult:
        return cls(float(data["alpha_us"]), float(data["link_gbps"]), float(data["reduce_gbps"]),
                   tuple((int(b), float(t)) for b, t in data.get("exchanges_us", ())))


def link_bandwidth(points: tuple[tuple[int, float], ...]) -> float:
    """GB/s over the large exchanges: all their bytes over all their time.

    Big messages only, so the step latency is a small share of each time and a
    slow repetition of one size does not tilt a fitted slope.
    """
    return sum(b for b, _ in points) / sum(t for _, t in points) / 1e3


def _mean_over_ranks(dist: Any, torch: Any, values: list[float], device: Any) -> list[float]:
    cells = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(cells)
    return [float(v) / dist.get_world_size() for v in cells.tolist()]


def sample_seconds(dist: Any, step: Callable[[], None], warmup: int, reps: int,
                   sync: Callable[[], None]) -> list[float]:
    """``reps`` timed calls of ``step`` after ``warmup`` untimed ones, started together."""
    for _ in range(warmup):
        step()
    dist.barrier()
    samples = []
    for _ in range(reps):
        sync()
        start = time.perf_counter()
        step()
        sync()
        samples.append(time.perf_counter() - start)
    return samples


def median_seconds(dist: Any, step: Callable[[], None], warmup: int, reps: int,
                   sync: Callable[[], None]) -> float:
    """The median repetition.

    nccl-tests reports the mean; on a host shared with other work one slow
    repetition would move the mean by more than the effect we measure.
    """
    return statistics.median(sample_seconds(dist, step, warmup, reps, sync))


def _exchange(dist: Any, send: Any, recv: Any, reps: int, sync: Callable[[], None]) -> float:
    """Seconds per ring exchange step: every rank sends to next and receives from previous."""
    rank, world = dist.get_rank(), dist.get_world_size()
    nxt, prev = (rank + 1) % world, (rank - 1) % world

    def step() -> None:
        sending, receiving = dist.isend(send, nxt), dist.irecv(recv, prev)
        sending.wait()
        receiving.wait()

    return median_seconds(dist, step, 1, reps, sync)


def _ping(dist: Any, send: Any, recv: Any, reps: int, sync: Callable[[], None]) -> float:
    """Seconds of one tiny step around the ring, in blocking send/recv order (even ranks first).

    Blocking calls, not isend/irecv: with tiny messages the asynchronous path
    costs more hand-offs between threads than a step inside a collective does.
    The fastest repetition, not the median: when ranks outnumber cores, the
    median tiny step measures the scheduler's time slice, not the link.
    """
    rank, world = dist.get_rank(), dist.get_world_size()
    nxt, prev = (rank + 1) % world, (rank - 1) % world

    def step() -> None:
        if rank % 2 == 0:
            dist.send(send, nxt)
            dist.recv(recv, prev)
        else:
            dist.recv(recv, prev)
            dist.send(send, nxt)

    return min(sample_seconds(dist, step, 2, reps, sync))


def run_probe(dist: Any, torch: Any, device: Any, sync: Callable[[], None]) -> ProbeResult:
    """Measure latency, link bandwidth and reduction throughput between the ranks."""
    tiny = torch.ones(1, dtype=torch.float32, device=device)
    seconds = [_ping(dist, tiny, torch.empty_like(tiny), LATENCY_REPS, sync)]
    for nbytes, reps in BANDWIDTH_SIZES:
        send = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
        seconds.append(_exchange(dist, send, torch.empty_like(send), reps, sync))
    acc = torch.ones(REDUCE_BYTES // 4, dtype=torch.float32, device=device)
    other = torch.ones_like(acc)
    seconds.append(median_seconds(dist, lambda: acc.add_(other), 1, 8, sync))
    alpha_s, *exchange_s, reduce_s = _mean_over_ranks(dist, torch, seconds, device)
    points = tuple((nbytes, s * 1e6) for (nbytes, _), s in zip(BANDWIDTH_SIZES, exchange_s,
                                                               strict=True))
    return ProbeResult(alpha_s * 1e6, link_bandwidth(points), REDUCE_BYTES / reduce_s / 1e9,
                       points)
