"""The GPU of every rank through NVML (``doctor.gpu.nvml``), or one ``Skipped`` where there is none.

A rank's GPU is the one NVML lists its pid on; failing that, its
``LOCAL_RANK``-th visible device (``CUDA_VISIBLE_DEVICES`` order), which is
what torchrun jobs use. The fake fleet layer (``NCCL_DOCTOR_FAKE_NVML``) is
selected by the environment given here, so GPU faults test on a CPU host.
"""

from __future__ import annotations

from collections.abc import Mapping

from doctor.model import Skipped
from doctor.triage.sources.interface import Collected, Source
from doctor.triage.target import RankTarget, Target


def _visible_index(rank: RankTarget) -> int | None:
    if rank.local_rank is None:
        return None
    visible = [d.strip() for d in rank.env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if not visible:
        return rank.local_rank
    chosen = visible[rank.local_rank % len(visible)]
    return int(chosen) if chosen.isdigit() else None


class NvmlSource(Source):
    name = "nvml"

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env

    def collect(self, target: Target, deadline: float) -> Collected:
        from doctor.gpu.nvml import read_fleet, to_gpu_sample

        fleet = read_fleet(self.env)
        if fleet.unavailable or not fleet.gpus:
            why = fleet.unavailable or "NVML sees no GPU on this host"
            return Collected(skipped=(Skipped(None, self.name, why),))
        by_index = {gpu.index: gpu for gpu in fleet.gpus}
        samples = []
        for rank in target.ranks:
            gpu = fleet.gpu_of_pid(rank.pid)
            index = _visible_index(rank)
            if gpu is None and index is not None:
                gpu = by_index.get(index)
            if gpu is not None:
                samples.append(to_gpu_sample(gpu, rank.rank))
        skipped = tuple(Skipped(None, self.name, note) for note in fleet.notes)
        return Collected(gpus=tuple(samples), skipped=skipped)
