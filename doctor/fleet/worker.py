"""The fleet benchmark on the hosts: one gloo job over every host, the search run by rank 0.

Every host runs ``nccl-doctor fleet-host --bench HOSTS`` once (one srun step, or ssh):
it joins one process group of all the hosts (rank = its place in ``HOSTS``, rendezvous
on the first host), so torch is imported once per host, not once per round. Rank 0
runs the search (``doctor.fleet.bisect.isolate``); its oracle broadcasts each round's
groups, every host makes a subgroup for each (all hosts create all of them, in order,
as gloo wants), the members of a group measure within it, and rank 0 gathers what
each host measured:

* its ring exchange with its group neighbours at ``PROBE_BYTES`` and at 4 bytes (the
  step latency), and its reduction throughput;
* the fastest of ``REPS`` AllReduces of the round's size within its group.

Each host's figures stay its own (not averaged), so rank 0 can find outliers.
Rank 0 prints the ``nccl-doctor/fleet-bench/v1`` document; the others print a short
one. The hosts talk only to each other, as the job will.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from doctor.bench.result import TYPE_SIZE
from doctor.fleet.benchjudge import FleetBench, bench_json
from doctor.fleet.bisect import Hosts, Measure, isolate
from doctor.fleet.rounds import Reference, group_measure, reference

SCHEMA = "nccl-doctor/fleet-bench/v1"
PROBE_BYTES = 4 << 20
"""Long enough that a host's share of a busy CPU does not decide its link figure."""
REPS = 4


def _fastest(dist: Any, pg: Any, step: Callable[[], Any], reps: int) -> float:
    step()  # warm-up
    best = float("inf")
    for _ in range(reps):
        dist.barrier(group=pg)
        start = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - start)
    return best


def measure(dist: Any, torch: Any, pg: Any, ranks: Sequence[int], nbytes: int) -> dict[str, float]:
    """This host's figures within its group ``pg`` (global ``ranks``, in ring order)."""
    me = ranks.index(dist.get_rank())
    nxt, prev = ranks[(me + 1) % len(ranks)], ranks[(me - 1) % len(ranks)]

    def exchange(send: Any, recv: Any) -> Callable[[], None]:
        def step() -> None:
            sending = dist.isend(send, nxt, group=pg)
            receiving = dist.irecv(recv, prev, group=pg)
            sending.wait()
            receiving.wait()

        return step

    tiny = torch.ones(1, dtype=torch.float32)
    send = torch.ones(PROBE_BYTES // TYPE_SIZE, dtype=torch.float32)
    acc, buf = torch.ones_like(send), torch.ones(nbytes // TYPE_SIZE, dtype=torch.float32)
    alpha = _fastest(dist, pg, exchange(tiny, torch.empty_like(tiny)), REPS * 2)
    link = _fastest(dist, pg, exchange(send, torch.empty_like(send)), REPS * 2)
    reduce = _fastest(dist, pg, lambda: acc.add_(send), REPS)
    allreduce = _fastest(dist, pg, lambda: dist.all_reduce(buf, group=pg), REPS)
    return {
        "alpha_us": alpha * 1e6,
        "link_gbps": PROBE_BYTES / link / 1e9,
        "reduce_gbps": PROBE_BYTES / reduce / 1e9,
        "allreduce_us": allreduce * 1e6,
    }


def play_round(
    dist: Any, torch: Any, groups: Sequence[Sequence[str]], hosts: Sequence[str], nbytes: int
) -> list[dict[str, float] | None]:
    """Every host's figures of one round (None for hosts in no group), on every rank."""
    me = hosts[dist.get_rank()]
    pgs = [dist.new_group([hosts.index(h) for h in g]) for g in groups]
    mine = next((i for i, g in enumerate(groups) if me in g), None)
    result = None
    if mine is not None:
        ranks = [hosts.index(h) for h in groups[mine]]
        result = measure(dist, torch, pgs[mine], ranks, nbytes)
    gathered: list[dict[str, float] | None] = [None] * len(hosts)
    dist.all_gather_object(gathered, result)
    for pg in pgs:
        dist.destroy_process_group(pg)
    return gathered


class _Oracle:
    """Rank 0's oracle: broadcast the groups, play the round, judge each group."""

    def __init__(self, dist: Any, torch: Any, hosts: Sequence[str], nbytes: int) -> None:
        self.dist, self.torch, self.hosts, self.nbytes = dist, torch, hosts, nbytes
        self.ref: Reference | None = None
        self.per_host: dict[str, dict[str, float]] = {}
        self.seconds: list[float] = []

    def __call__(self, groups: Sequence[Hosts]) -> dict[Hosts, Measure]:
        start = time.monotonic()
        self.dist.broadcast_object_list([list(map(list, groups))], src=0)
        gathered = play_round(self.dist, self.torch, groups, self.hosts, self.nbytes)
        docs = {h: d for h, d in zip(self.hosts, gathered, strict=True) if d is not None}
        if self.ref is None:
            self.ref = reference(docs)
            self.per_host = {h: dict(d) for h, d in docs.items()}
        self.seconds.append(round(time.monotonic() - start, 2))
        return {g: group_measure(g, docs, self.ref, self.nbytes, {}) for g in groups}


def serve(
    hosts: Sequence[str], host: str, port: int, nbytes: int, timeout: float
) -> dict[str, Any]:
    """This host's part of the benchmark; rank 0's document carries the search's outcome."""
    if host not in hosts:
        return {"schema": SCHEMA, "host": host, "error": f"{host} is not one of the hosts"}
    import torch
    import torch.distributed as dist

    rank = hosts.index(host)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://{hosts[0]}:{port}",
        rank=rank,
        world_size=len(hosts),
        timeout=timedelta(seconds=timeout),
    )
    try:
        if rank == 0:
            oracle = _Oracle(dist, torch, hosts, nbytes)
            isolation = isolate(hosts, oracle)
            dist.broadcast_object_list([None], src=0)
            found = FleetBench(isolation, nbytes, tuple(oracle.seconds), oracle.per_host)
            return {"schema": SCHEMA, "host": host, "bench": bench_json(found)}
        while True:
            box: list[Any] = [None]
            dist.broadcast_object_list(box, src=0)
            if box[0] is None:
                return {"schema": SCHEMA, "host": host}
            play_round(dist, torch, [tuple(g) for g in box[0]], hosts, nbytes)
    finally:
        dist.destroy_process_group()
