"""The job registry: a private directory per job that launch writes and triage reads.

Layout (one directory per job, mode 0700; a shared filesystem path can be
given with ``NCCL_DOCTOR_JOB_DIR`` for multi-host jobs)::

    <root>/jobs/<job>/rank-<N>.json    RankRecord, written once by `launch`
    <root>/jobs/<job>/state-<N>.json   wrapper state, rewritten as it runs
    <root>/jobs/<job>/...              FR dumps, NCCL logs, agent replies

``<root>`` is ``$NCCL_DOCTOR_HOME``, else ``$XDG_RUNTIME_DIR/nccl-doctor``,
else ``/tmp/nccl-doctor-<uid>``. Files are replaced atomically, so a reader
never sees half a record.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

JOB_DIR_ENV = "NCCL_DOCTOR_JOB_DIR"
HOME_ENV = "NCCL_DOCTOR_HOME"
_SAFE_JOB = re.compile(r"[A-Za-z0-9._:-]{1,128}")


@dataclass(frozen=True)
class RankRecord:
    """What `launch` knows about one rank, for triage to find it."""

    job: str
    rank: int
    world_size: int
    local_rank: int
    host: str
    pid: int
    started_at: float
    agent: bool = False
    """Whether the in-rank agent (stack and FR dumps on request) is running."""
    wrapped: bool = False
    """Whether the entrypoint runs inside the restart wrapper."""
    files: dict[str, str] = field(default_factory=dict)
    """Named paths of this rank: ``nccl_debug_file``, ``fr_prefix``, ..."""


def registry_root(env: Mapping[str, str]) -> Path:
    if env.get(HOME_ENV):
        return Path(env[HOME_ENV])
    if env.get("XDG_RUNTIME_DIR"):
        return Path(env["XDG_RUNTIME_DIR"]) / "nccl-doctor"
    return Path(f"/tmp/nccl-doctor-{os.getuid()}")


def valid_job_id(job: str) -> bool:
    return bool(_SAFE_JOB.fullmatch(job)) and job not in (".", "..")


def job_dir(job: str, env: Mapping[str, str]) -> Path:
    """The directory of ``job``; ``NCCL_DOCTOR_JOB_DIR`` wins (set by launch for its ranks)."""
    if env.get(JOB_DIR_ENV):
        return Path(env[JOB_DIR_ENV])
    if not valid_job_id(job):
        raise ValueError(f"job id {job!r} may only hold letters, digits and . _ : -")
    return registry_root(env) / "jobs" / job


def ensure_private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)


def register_rank(record: RankRecord, directory: Path) -> Path:
    ensure_private_dir(directory)
    path = directory / f"rank-{record.rank}.json"
    write_json_atomic(path, asdict(record))
    return path


def read_ranks(directory: Path) -> list[RankRecord]:
    """Every readable rank record of a job, by rank; a corrupt file is skipped."""
    records = []
    for path in sorted(directory.glob("rank-*.json")):
        try:
            records.append(RankRecord(**json.loads(path.read_text())))
        except (OSError, ValueError, TypeError):
            continue
    return sorted(records, key=lambda r: r.rank)


def list_jobs(env: Mapping[str, str]) -> list[str]:
    jobs = registry_root(env) / "jobs"
    return sorted(p.name for p in jobs.iterdir() if p.is_dir()) if jobs.is_dir() else []


def write_state(directory: Path, rank: int, state: Mapping[str, Any]) -> None:
    """The restart wrapper's published state of one rank (iteration, fault, heartbeat)."""
    write_json_atomic(ensure_private_dir(directory) / f"state-{rank}.json", dict(state))


def read_states(directory: Path) -> dict[int, dict[str, Any]]:
    states = {}
    for path in directory.glob("state-*.json"):
        try:
            states[int(path.stem.split("-", 1)[1])] = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
    return states
