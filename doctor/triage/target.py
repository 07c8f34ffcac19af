"""What triage looks at: the ranks of one job on this host, as discovery found them.

Plain frozen data, built by ``doctor.triage.discover`` and read by every
source. A source never goes back to the process table for identity: the
rank's environment (the variables that say where its logs and Flight
Recorder dumps are) travels here, so sources stay testable with a fake target.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from doctor.jobdir.registry import RankRecord
from doctor.model import Skipped

ENV_KEYS = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT",
    "SLURM_JOB_ID",
    "TORCHELASTIC_ERROR_FILE",
    "NCCL_DEBUG_FILE",
    "NCCL_DEBUG",
    "NCCL_RAS_ADDR",
    "NCCL_RAS_ENABLE",
    "TORCH_NCCL_DEBUG_INFO_PIPE_FILE",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
    "TORCH_FR_DUMP_TEMP_FILE",
    "TORCH_NCCL_TRACE_BUFFER_SIZE",
    "TORCH_FR_BUFFER_SIZE",
    "CUDA_VISIBLE_DEVICES",
    "NCCL_DOCTOR_JOB_DIR",
    "NCCL_DOCTOR_JOB",
)
"""The variables of a rank's environment that triage uses; the rest is never kept."""


@dataclass(frozen=True)
class RankTarget:
    """One live rank process to collect from."""

    rank: int
    pid: int
    host: str
    local_rank: int | None = None
    world_size: int | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    """The rank's own values of ``ENV_KEYS`` (from ``/proc/PID/environ``)."""
    record: RankRecord | None = None
    """The launch registry's record, when the job was started by ``nccl-doctor launch``."""
    job_dir: Path | None = None
    """The job's registry directory, where the in-rank agent answers."""

    @property
    def has_agent(self) -> bool:
        return bool(self.record and self.record.agent)


@dataclass(frozen=True)
class LostRank:
    """A rank expected from ``WORLD_SIZE`` or the registry but not found alive."""

    rank: int
    pid: int | None = None
    status: str = "missing"
    """``missing`` (no process), ``zombie`` (exited, not reaped) or ``dead``."""
    exit_code: int | None = None
    error: str = ""
    """The first line of the launcher's error file for this rank, if it wrote one."""


@dataclass(frozen=True)
class Launcher:
    """The process that started the ranks (torchrun's agent, srun, a shell)."""

    pid: int
    cmdline: str


@dataclass(frozen=True)
class Target:
    """A job's ranks on this host, live and lost."""

    job: str
    host: str
    ranks: tuple[RankTarget, ...]
    world_size: int | None
    lost: tuple[LostRank, ...] = ()
    remote: tuple[int, ...] = ()
    """Ranks the job has on other hosts (not collected here)."""
    launcher: Launcher | None = None
    job_dir: Path | None = None
    """The launch registry directory of the job, when there is one."""
    refused: tuple[Skipped, ...] = ()
    """Paths the ranks' environment named that were not used, each with why (another
    owner, a link, a folder others can write): reported in the evidence."""

    @property
    def ranks_expected(self) -> int | None:
        if self.world_size is None:
            return None
        return self.world_size - len(self.remote)
