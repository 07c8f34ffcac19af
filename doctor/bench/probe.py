"""The point-to-point probe, run inside the ranks.

It measures what the CPU model needs in the traffic pattern the ring uses:
every rank sends to ``rank+1`` while it receives from ``rank-1`` (nccl-tests'
``sendrecv`` pattern), so the figures include what the ring suffers from (all
links busy at once, shared cores).

* Before the sweep, a summary: the step latency (a 4-byte step), the link
  bandwidth (4 and 16 MiB exchanges) and the reduction throughput. These
  describe the host and explain the table.
* Beside every size of the sweep, one ring step of that size, interleaved
  repetition by repetition with the AllReduce being timed: an exchange of
  ``S/n`` bytes and the sum of one received ``S/n`` chunk. A ring AllReduce
  *is* ``2(n-1)`` such exchanges and ``n-1`` such sums, so the model predicts
  it from them. Interleaving matters on a shared host, where the bandwidth
  drifts by a factor of two within seconds; the AllReduce times themselves
  never enter the prediction.

Each time is the fastest repetition on each rank, averaged over ranks, for
the AllReduce and its ring step alike. nccl-tests reports the mean of its
iterations; on a dedicated node the two agree closely, but on a host shared
with other work a repetition that waited for a core measures the scheduler,
and the mean (or even the median) follows those waits more than the links.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

Step = Callable[[], Any]
Sync = Callable[[], None]

LATENCY_REPS = 30
BANDWIDTH_SIZES: tuple[tuple[int, int], ...] = ((4 << 20, 6), (16 << 20, 4))
"""(message bytes, repetitions) of the exchanges the summary link bandwidth comes from."""
REDUCE_BYTES = 4 << 20


@dataclass(frozen=True)
class ProbeResult:
    alpha_us: float
    link_gbps: float
    reduce_gbps: float
    exchanges_us: tuple[tuple[int, float], ...] = ()
    """The measured exchange time per message size, the points behind ``link_gbps``."""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["exchanges_us"] = [list(pair) for pair in self.exchanges_us]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProbeResult:
        return cls(
            float(data["alpha_us"]),
            float(data["link_gbps"]),
            float(data["reduce_gbps"]),
            tuple((int(b), float(t)) for b, t in data.get("exchanges_us", ())),
        )


def link_bandwidth(points: tuple[tuple[int, float], ...]) -> float:
    """GB/s over the large exchanges: all their bytes over all their time."""
    return sum(b for b, _ in points) / sum(t for _, t in points) / 1e3


def timed_fastest(
    dist: Any, steps: Mapping[str, Step], warmup: int, reps: int, sync: Sync
) -> dict[str, float]:
    """Fastest seconds of each step, the steps interleaved repetition by repetition."""
    for _ in range(warmup):
        for step in steps.values():
            step()
    dist.barrier()
    samples: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(reps):
        for name, step in steps.items():
            sync()
            start = time.perf_counter()
            step()
            sync()
            samples[name].append(time.perf_counter() - start)
    return {name: min(values) for name, values in samples.items()}


def mean_over_ranks(
    dist: Any, torch: Any, values: dict[str, float], device: Any
) -> dict[str, float]:
    cells = torch.tensor(list(values.values()), dtype=torch.float64, device=device)
    dist.all_reduce(cells)
    return {
        name: float(v) / dist.get_world_size()
        for name, v in zip(values, cells.tolist(), strict=True)
    }


def exchange_step(dist: Any, send: Any, recv: Any) -> Step:
    """One ring exchange: send to the next rank while receiving from the previous one.

    One message each way. gloo's ring moves a chunk in segments of at most
    1 MiB, two in flight; cutting the probe's message the same way costs more
    here than it gains, because every ``isend``/``irecv`` from Python passes
    through the process group's worker threads, which gloo's own loop does not.
    """
    rank, world = dist.get_rank(), dist.get_world_size()
    nxt, prev = (rank + 1) % world, (rank - 1) % world

    def step() -> None:
        sending, receiving = dist.isend(send, nxt), dist.irecv(recv, prev)
        sending.wait()
        receiving.wait()

    return step


def _ping_step(dist: Any, send: Any, recv: Any) -> Step:
    """A tiny step around the ring in blocking send/recv order (even ranks send first).

    Blocking calls, not isend/irecv: with tiny messages the asynchronous path
    costs more hand-offs between threads than a step inside a collective does.
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

    return step


def run_probe(dist: Any, torch: Any, device: Any, sync: Sync) -> ProbeResult:
    """The summary probe: step latency, link bandwidth and reduction throughput."""
    tiny = torch.ones(1, dtype=torch.float32, device=device)
    ping = _ping_step(dist, tiny, torch.empty_like(tiny))
    seconds = {"alpha": timed_fastest(dist, {"ping": ping}, 2, LATENCY_REPS, sync)["ping"]}
    for nbytes, reps in BANDWIDTH_SIZES:
        send = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
        step = exchange_step(dist, send, torch.empty_like(send))
        seconds[str(nbytes)] = timed_fastest(dist, {"x": step}, 1, reps, sync)["x"]
    acc = torch.ones(REDUCE_BYTES // 4, dtype=torch.float32, device=device)
    other = torch.ones_like(acc)
    seconds["reduce"] = timed_fastest(dist, {"r": lambda: acc.add_(other)}, 1, 8, sync)["r"]
    mean = mean_over_ranks(dist, torch, seconds, device)
    points = tuple((nbytes, mean[str(nbytes)] * 1e6) for nbytes, _ in BANDWIDTH_SIZES)
    return ProbeResult(
        mean["alpha"] * 1e6, link_bandwidth(points), REDUCE_BYTES / mean["reduce"] / 1e9, points
    )
