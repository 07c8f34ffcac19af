"""Build the real ``Facts`` of this host: the only place preflight touches the outside world.

That includes NVML (the GPU fleet) and, under ``preflight --bench``, the
AllReduce benchmark: the checks only judge what was gathered here.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from pathlib import Path

from doctor.checks import host, ncclconf, plugin
from doctor.checks.bench import PREFLIGHT_SIZES
from doctor.checks.facts import BenchFacts, Facts
from doctor.errors import DoctorError
from doctor.gpu.nvml import Fleet, read_fleet
from doctor.jobconfig.config import Config
from doctor.jobconfig.lanes import resolve_lane


def home_dir() -> str | None:
    """The passwd home directory, as NCCL finds ``~/.nccl.conf`` (not ``$HOME``)."""
    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        return None


def gather(
    env: Mapping[str, str],
    config: Config,
    lane_flag: str | None = None,
    run_bench: bool = False,
    cwd: Path | None = None,
    home: str | None = None,
) -> Facts:
    """Merge NCCL's config files into ``env``, resolve the lane, probe the host and its GPUs,
    and run the benchmark when asked (``run_bench``)."""
    merged = ncclconf.merge(
        env,
        ncclconf.read_conf_files(
            ncclconf.conf_paths(env, home if home is not None else home_dir())
        ),
    )
    lane, lane_source = resolve_lane(lane_flag, config, merged.env)
    libraries = host.resolve_libraries(
        sorted(plugin.library_names(merged.env)), merged.env, cwd or Path.cwd()
    )
    fleet = read_fleet(merged.env)
    return Facts(
        env=merged.env,
        config=config,
        lane=lane,
        lane_source=lane_source,
        bench=measure_bench(merged.env, fleet) if run_bench else None,
        fleet=fleet,
        env_sources=merged.sources,
        conf_files=merged.files_read,
        interfaces=host.interfaces(),
        ib_devices=host.ib_devices(),
        libraries=libraries,
        ptrace=host.probe_ptrace(),
        versions=host.versions(),
    )


def measure_bench(env: Mapping[str, str], fleet: Fleet) -> BenchFacts:
    """A short AllReduce sweep: NCCL across this host's GPUs, else gloo on two CPU ranks (or
    the ranks of the job preflight runs in)."""
    from doctor.bench.session import BenchRequest, run_bench
    from doctor.bench.sizes import parse_sweep

    gpus = len(fleet.gpus) if not fleet.unavailable else 0
    request = BenchRequest(
        "nccl" if gpus >= 2 else "gloo",
        tuple(parse_sweep(PREFLIGHT_SIZES)),
        None if "RANK" in env else (gpus if gpus >= 2 else 2),
        120.0,
    )
    try:
        return BenchFacts(run_bench(request, env, lambda event: None))
    except DoctorError as exc:
        return BenchFacts(None, str(exc))
