"""One bench run from request to result: the call behind ``bench`` and ``preflight --bench``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from doctor.bench.links import params_from_topology, topology_from_fleet
from doctor.bench.model import ModelParams, params_from_probe
from doctor.bench.result import BenchResult, Measured, build_result
from doctor.bench.runner import job_env, run_in_job, run_local
from doctor.bench.worker import Emit, WorkerSpec
from doctor.errors import UsageError
from doctor.gpu.nvml import read_fleet
from doctor.torchjob.torchdep import require_torch

DEFAULT_SIZES = {"gloo": "1K:64M:2", "nccl": "1K:1G:2"}


@dataclass(frozen=True)
class BenchRequest:
    backend: str
    sizes: tuple[int, ...]
    nproc: int | None = None
    """Local ranks to start; ignored (must be None) inside a torchrun/srun job."""
    timeout_s: float = 300.0


def model_params(measured: Measured, env: Mapping[str, str]) -> ModelParams:
    """CPU: all from the probe. GPU: links from the NVML topology, launch cost from the probe."""
    if measured.backend != "nccl":
        return params_from_probe(measured.probe, measured.nranks)
    fleet = read_fleet(env)
    if fleet.unavailable or not fleet.gpus:
        return params_from_probe(measured.probe, measured.nranks, tree=True)
    nvls = env.get("NCCL_NVLS_ENABLE", "1") != "0"
    topo = topology_from_fleet(fleet, measured.nranks, nvls_enabled=nvls)
    return params_from_topology(topo, base_us=measured.probe.alpha_us)


def _check_gpus(env: Mapping[str, str], nproc: int) -> None:
    """Refuse an NCCL run NVML says cannot work, before starting any rank."""
    fleet = read_fleet(env)
    if fleet.unavailable:
        raise UsageError(
            f"--backend nccl needs NVIDIA GPUs, and there are none here "
            f"({fleet.unavailable}); use --backend gloo"
        )
    if nproc > len(fleet.gpus):
        raise UsageError(f"--nproc {nproc} needs {nproc} GPUs; this host has {len(fleet.gpus)}")


MAX_LOCAL_RANKS = 64
"""The most ranks ``bench`` starts on one host (each is a Python interpreter with torch):
past it a typo, not a benchmark, would exhaust the host."""


def run_bench(request: BenchRequest, env: Mapping[str, str], emit: Emit) -> BenchResult | None:
    """Run the sweep; rank 0 (or the local launcher) gets the result, other job ranks ``None``."""
    require_torch("the AllReduce benchmark")
    spec = WorkerSpec(request.backend, request.sizes, timeout_s=request.timeout_s)
    if job_env(env) is not None:
        if request.nproc is not None:
            raise UsageError("--nproc cannot be used inside a torchrun or srun job")
        measured = run_in_job(spec, env, emit)
    else:
        nproc = request.nproc if request.nproc is not None else 2
        if not 2 <= nproc <= MAX_LOCAL_RANKS:
            raise UsageError(f"--nproc must be from 2 to {MAX_LOCAL_RANKS}, got {nproc}")
        if request.backend == "nccl":
            _check_gpus(env, nproc)
        measured = run_local(spec, nproc, env, emit, request.timeout_s)
    if measured is None:
        return None
    return build_result(measured, model_params(measured, env))
