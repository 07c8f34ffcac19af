"""One rank of a bench run: join the group, probe, sweep, report.

Run by the runner as ``python -m doctor.bench.worker SPEC_JSON`` with the
usual ``RANK``/``WORLD_SIZE``/``MASTER_ADDR``/``MASTER_PORT`` variables, or
called in-process by a rank of an existing torchrun/srun job. Rank 0 reports
each step as one JSON line (``probe``, ``size``, ``result``) through ``emit``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from doctor.bench.model import RingStep
from doctor.bench.probe import Sync, exchange_step, mean_over_ranks, run_probe, timed_fastest
from doctor.bench.result import TYPE_SIZE, Measured, Timing

Emit = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class WorkerSpec:
    backend: str
    sizes: tuple[int, ...]
    timeout_s: float = 120.0

    def to_argv(self) -> str:
        return json.dumps(
            {"backend": self.backend, "sizes": list(self.sizes), "timeout_s": self.timeout_s}
        )

    @classmethod
    def from_argv(cls, text: str) -> WorkerSpec:
        data = json.loads(text)
        return cls(data["backend"], tuple(data["sizes"]), float(data["timeout_s"]))


def iterations(nbytes: int) -> tuple[int, int]:
    """(warm-up, timed) iterations: fewer for big sizes, so a sweep stays within seconds."""
    timed = max(3, min(20, (64 << 20) // max(nbytes, 1)))
    return (2 if nbytes < (16 << 20) else 1), timed


def run_rank(spec: WorkerSpec, env: Mapping[str, str], emit: Emit) -> Measured | None:
    """Probe and sweep on this rank; rank 0 returns the measurements, the others ``None``.

    The time of a size is the fastest iteration on each rank, averaged over ranks
    (see ``doctor.bench.probe``); the ring step beside it is timed the same way,
    repetition by repetition.
    """
    import torch
    import torch.distributed as dist

    rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    if spec.backend == "nccl":
        device = torch.device("cuda", int(env.get("LOCAL_RANK", rank)))
        torch.cuda.set_device(device)
        sync: Sync = torch.cuda.synchronize
        name = torch.cuda.get_device_name(device)
    else:
        device, name = torch.device("cpu"), "cpu"

        def sync() -> None:
            return None

    owned = not dist.is_initialized()
    if owned:
        dist.init_process_group(
            spec.backend, rank=rank, world_size=world, timeout=timedelta(seconds=spec.timeout_s)
        )
    try:
        probe = run_probe(dist, torch, device, sync)
        if rank == 0:
            emit({"event": "probe", **probe.to_json()})
        timings: list[Timing] = []
        for done, nbytes in enumerate(spec.sizes, start=1):
            timing = _time_size(dist, torch, device, sync, nbytes)
            timings.append(timing)
            if rank == 0:
                emit(
                    {
                        "event": "size",
                        "done": done,
                        "total": len(spec.sizes),
                        "bytes": nbytes,
                        "time_us": timing.time_us,
                    }
                )
        dist.barrier()
    finally:
        if owned:
            dist.destroy_process_group()
    if rank != 0:
        return None
    return Measured(spec.backend, world, probe, tuple(timings), name)


def _time_size(dist: Any, torch: Any, device: Any, sync: Sync, nbytes: int) -> Timing:
    """AllReduce of ``nbytes``, interleaved with one ring step of ``nbytes/n``: the model input."""
    buf = torch.ones(nbytes // TYPE_SIZE, dtype=torch.float32, device=device)
    chunk = torch.ones(
        max(nbytes // TYPE_SIZE // dist.get_world_size(), 1), dtype=torch.float32, device=device
    )
    received = torch.empty_like(chunk)
    warm, timed = iterations(nbytes)
    seconds = timed_fastest(
        dist,
        {
            "allreduce": lambda: dist.all_reduce(buf),
            "exchange": exchange_step(dist, chunk, received),
            "reduce": lambda: chunk.add_(received),
        },
        warm,
        timed,
        sync,
    )
    mean = mean_over_ranks(dist, torch, seconds, device)
    return Timing(
        nbytes, mean["allreduce"] * 1e6, RingStep(mean["exchange"] * 1e6, mean["reduce"] * 1e6)
    )


def _print_line(event: dict[str, Any]) -> None:
    print(json.dumps(event), flush=True)


def main(argv: list[str]) -> int:
    spec = WorkerSpec.from_argv(argv[1])
    measured = run_rank(spec, os.environ, _print_line)
    if measured is not None:
        _print_line({"event": "result", **measured.to_json()})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
