"""Everything a preflight check may look at, gathered once at the edge.

Checks are pure functions ``Facts -> list[Finding]``; the CLI (and tests)
build ``Facts`` from the real host or from a table, so no check reads
``os.environ``, the file system, NVML or a benchmark itself. ``checks.gather``
builds the real one. The timeout chain is derived once, here, from the config
and the environment (``Facts.timeouts``): the checks and the report share it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from doctor.bench.result import BenchResult
from doctor.gpu.nvml import Fleet
from doctor.jobconfig.config import Config
from doctor.jobconfig.timeouts import TimeoutChain, resolve_timeouts

NOT_READ = Fleet(unavailable="NVML was not read")


@dataclass(frozen=True)
class PtraceFacts:
    """Whether this host lets a diagnostic tool read another process's stacks."""

    scope: int | None
    """``/proc/sys/kernel/yama/ptrace_scope``; None when Yama is absent (classic rules)."""
    cap_sys_ptrace: bool
    """CAP_SYS_PTRACE in this process's effective set (``CapEff``)."""
    attach_error: str | None
    """Result of attaching to a non-child process we started: None = it worked."""
    pyspy: str | None
    """Path of the py-spy binary; None when not installed."""
    probe_error: str | None = None
    """Why the attach could not even be tried (then ``attach_error`` is None)."""


@dataclass(frozen=True)
class BenchFacts:
    """What ``preflight --bench`` measured: gathered, because the sweep takes seconds."""

    result: BenchResult | None
    """None when rank 0 of this job reports it (or when it could not run: ``error``)."""
    error: str = ""
    """Why the benchmark could not run; empty when it ran."""


@dataclass(frozen=True)
class Facts:
    """Everything the checks judge, read once at the edge."""

    env: Mapping[str, str]
    """The environment the job will run with (after NCCL config files are merged in)."""
    config: Config = field(default_factory=Config)
    lane: str = "single-node"
    """Resolved lane: ``single-node`` or ``multi-node``."""
    lane_source: str = "default"
    """Where the lane came from: ``--lane``, the config, or what ``auto`` detected."""
    bench: BenchFacts | None = None
    """The AllReduce benchmark's outcome under ``preflight --bench``; None when not asked."""
    fleet: Fleet = NOT_READ
    """NVML's view of this host's GPUs (``doctor.gpu.nvml.read_fleet``)."""
    env_sources: Mapping[str, str] = field(default_factory=dict)
    """Variable -> ``environment`` or ``FILE:LINE`` of the NCCL config file that set it."""
    conf_files: tuple[str, ...] = ()
    """NCCL config files that exist and were merged into ``env``."""
    interfaces: Mapping[str, bool] | None = None
    """Network interface -> has an IP address NCCL could use; None = not probed."""
    ib_devices: tuple[str, ...] = ()
    """``/sys/class/infiniband`` entries (RDMA devices NCCL's IB transport can open)."""
    libraries: Mapping[str, str | None] = field(default_factory=dict)
    """Plugin library name -> the path the dynamic loader would open, or None."""
    ptrace: PtraceFacts | None = None
    versions: Mapping[str, str] = field(default_factory=dict)
    """``torch``, ``nccl``, ``cuda``, ``driver``, ``python`` -> version text."""
    timeouts: TimeoutChain = field(init=False)
    """The timeout chain of ``config``, ``env`` and ``backend``, resolved once (not an argument)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "timeouts", resolve_timeouts(self.config, self.env, self.backend))

    @property
    def backend(self) -> str:
        """The backend a job here gets: ``gloo`` when the versions say there is no
        NCCL-capable torch or no NVIDIA driver, else ``nccl`` (also when not probed)."""
        without = [k for k in ("nccl", "driver") if self.versions.get(k, "").startswith("none")]
        return "gloo" if without else "nccl"

    def source(self, name: str) -> str:
        """Where ``name`` got its value, for messages."""
        return self.env_sources.get(name, "environment")

    def from_file(self, name: str) -> bool:
        """Whether ``name`` came from an NCCL config file (then ``unset`` does not remove it)."""
        return self.source(name) != "environment"
