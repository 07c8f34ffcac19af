"""Where the wrapper's TCPStore is, and who hosts it.

Under torchrun (``TORCHELASTIC_USE_AGENT_STORE=True``) the elastic agent
already hosts a TCPStore at ``MASTER_ADDR:MASTER_PORT`` that outlives every
rank: every rank is a client. Otherwise initial rank 0's *monitor process*
hosts it, so a SIGKILLed rank 0 does not take the rendezvous with it. Keys are
prefixed with the torchrun restart count, so a whole-group restart starts clean.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from doctor.registry import job_dir
from doctor.restart.options import RestartOptions
from doctor.restart.store import RestartStore


@dataclass(frozen=True)
class Session:
    host: str
    port: int
    prefix: str
    hosting: bool
    """True in initial rank 0 when no launcher store exists: its monitor process serves."""

    @classmethod
    def from_env(cls, env: Mapping[str, str], host: str | None, port: int | None,
                 initial_rank: int) -> Session:
        agent_store = env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
        chosen_port = port or int(env.get("NCCL_DOCTOR_STORE_PORT") or env.get("MASTER_PORT")
                                  or 29500)
        return cls(host or env.get("MASTER_ADDR", "127.0.0.1"), chosen_port,
                   f"doctor/{env.get('TORCHELASTIC_RESTART_COUNT', '0')}/",
                   hosting=not agent_store and initial_rank == 0)


def connect_store(session: Session, initial_world_size: int, options: RestartOptions,
                  host: bool) -> RestartStore:
    """A TCPStore server (``host``) or client, wrapped with the wrapper's keys."""
    import torch.distributed as dist

    base = dist.TCPStore(session.host, session.port, None, host,
                         timedelta(seconds=options.barrier_timeout), wait_for_workers=False)
    return RestartStore(base, session.prefix, initial_world_size, hosting=host)


def job_directory(job: str | None, env: Mapping[str, str]) -> Path:
    """The registry directory of the job (launch's, or the launcher's id); else a private temp."""
    if env.get("NCCL_DOCTOR_JOB_DIR") or job:
        return job_dir(job or "", env)
    return Path(tempfile.mkdtemp(prefix="nccl-doctor-wrapper-"))
