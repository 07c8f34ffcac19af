"""Everything a preflight check may look at, gathered once at the edge.

Checks are pure functions ``Facts -> list[Finding]``; the CLI (and tests)
build ``Facts`` from the real host or from a table, so no check reads
``os.environ`` or the file system itself. ``checks.gather`` builds the real one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from doctor.config import Config


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
class Facts:
    env: Mapping[str, str]
    """The environment the job will run with (after NCCL config files are merged in)."""
    config: Config = field(default_factory=Config)
    lane: str = "single-node"
    """Resolved lane: ``single-node`` or ``multi-node``."""
    lane_source: str = "default"
    """Where the lane came from: ``--lane``, the config, or what ``auto`` detected."""
    run_bench: bool = False
    """``preflight --bench``: run the AllReduce benchmark check."""
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
        return self.source(name) != "environment"
