"""The job registry: a private directory per job that launch writes and triage reads.

Layout (one directory per job, mode 0700; a shared filesystem path can be
given with ``NCCL_DOCTOR_JOB_DIR`` for multi-host jobs)::

    <root>/jobs/<job>/rank-<N>.json    RankRecord, written by `launch`, removed at its exit
    <root>/jobs/<job>/state-<N>.json   wrapper state, rewritten as it runs
    <root>/jobs/<job>/...              FR dumps, NCCL logs, agent replies

``<root>`` is ``$NCCL_DOCTOR_HOME``, else ``$XDG_RUNTIME_DIR/nccl-doctor``,
else ``$TMPDIR/nccl-doctor-<uid>`` (``/tmp`` without ``TMPDIR``). In a shared
``/tmp`` another user may have created that name first: every directory on the
way is created 0700 or verified to be ours and closed to others (``safeio``),
and records are replaced atomically and read without following links, so a
reader never sees half a record nor a planted one. Records are untrusted input
all the same: ``RankRecord.from_json`` checks every field's type and bounds.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from doctor.ranks import MAX_WORLD_SIZE, bounded_rank_count
from doctor.trust.process_identity import ProcessId
from doctor.trust.safeio import UnsafePath, check_dir, private_dir, read_text, write_atomic

JOB_DIR_ENV = "NCCL_DOCTOR_JOB_DIR"
HOME_ENV = "NCCL_DOCTOR_HOME"
_SAFE_JOB = re.compile(r"[A-Za-z0-9._:-]{1,128}")
RECORD_BYTES = 64 * 1024
"""The bound on one rank record or state file (they hold a few hundred bytes)."""
MAX_FILES = 64
_MAX_PID = (1 << 31) - 1
_MAX_TEXT = 4096


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
    pid_start: int = 0
    """The process's start time (clock ticks after boot): with ``pid``, who it is."""

    @property
    def process(self) -> ProcessId:
        return ProcessId(self.pid, self.pid_start)

    @classmethod
    def from_json(cls, data: object) -> RankRecord:
        """A record from parsed JSON; ``ValueError`` naming the first bad field."""
        if not isinstance(data, dict):
            raise ValueError("a rank record must be a JSON object")
        unknown = set(data) - {f for f in cls.__dataclass_fields__}
        if unknown:
            raise ValueError(f"unknown field {sorted(unknown)[0]!r}")
        world = bounded_rank_count(data.get("world_size"))
        if world is None:
            raise ValueError(f"world_size must be an integer from 1 to {MAX_WORLD_SIZE}")
        for name in ("rank", "local_rank"):
            if not _int_in(data.get(name), 0, world - 1):
                raise ValueError(f"{name} must be an integer from 0 to world_size-1 ({world - 1})")
        if not _int_in(data.get("pid"), 1, _MAX_PID):
            raise ValueError("pid must be a positive integer")
        if not _int_in(data.get("pid_start", 0), 0, 1 << 63):
            raise ValueError("pid_start must be a non-negative integer")
        job = data.get("job")
        if not isinstance(job, str) or not valid_job_id(job):
            raise ValueError("job must be a job id (letters, digits and . _ : -)")
        host = data.get("host")
        if not isinstance(host, str) or not 0 < len(host) <= 255:
            raise ValueError("host must be a host name")
        started = data.get("started_at")
        if isinstance(started, bool) or not isinstance(started, int | float):
            raise ValueError("started_at must be a number")
        if not math.isfinite(started):
            raise ValueError("started_at must be finite")
        for name in ("agent", "wrapped"):
            if not isinstance(data.get(name, False), bool):
                raise ValueError(f"{name} must be true or false")
        files = data.get("files", {})
        if not isinstance(files, dict) or len(files) > 16:
            raise ValueError("files must be an object of at most 16 paths")
        for key, value in files.items():
            if not isinstance(value, str) or len(key) > 64 or len(value) > _MAX_TEXT:
                raise ValueError("files must map short names to paths")
        return cls(**{**data, "started_at": float(started)})


def _int_in(value: object, low: int, high: int) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and low <= value <= high


def registry_root(env: Mapping[str, str]) -> Path:
    if env.get(HOME_ENV):
        return Path(env[HOME_ENV])
    if env.get("XDG_RUNTIME_DIR"):
        return Path(env["XDG_RUNTIME_DIR"]) / "nccl-doctor"
    return Path(env.get("TMPDIR") or "/tmp") / f"nccl-doctor-{os.getuid()}"


def valid_job_id(job: str) -> bool:
    return bool(_SAFE_JOB.fullmatch(job)) and job not in (".", "..")


def job_dir(job: str, env: Mapping[str, str]) -> Path:
    """The directory of ``job``; ``NCCL_DOCTOR_JOB_DIR`` wins (set by launch for its ranks)."""
    if env.get(JOB_DIR_ENV):
        return Path(env[JOB_DIR_ENV])
    if not valid_job_id(job):
        raise ValueError(f"job id {job!r} may only hold letters, digits and . _ : -")
    return registry_root(env) / "jobs" / job


def _record_path(directory: Path, rank: int) -> Path:
    return directory / f"rank-{rank}.json"


def register_rank(record: RankRecord, directory: Path) -> Path:
    path = _record_path(private_dir(directory), record.rank)
    write_atomic(path, json.dumps(asdict(record), indent=1, sort_keys=True))
    return path


def unregister_rank(directory: Path, rank: int, process: ProcessId) -> None:
    """Remove the rank's record if it still names ``process`` (a relaunch may own it now)."""
    path = _record_path(directory, rank)
    try:
        current = RankRecord.from_json(json.loads(read_text(path, RECORD_BYTES)))
    except (OSError, ValueError, UnsafePath):
        return
    if current.process == process:
        path.unlink(missing_ok=True)


def _json_files(directory: Path, pattern: str, owner: int | None) -> list[tuple[Path, Any]]:
    """Parsed JSON of the files matching ``pattern`` in a verified directory; the
    unreadable, oversized, planted (links, other owners) and malformed ones are skipped."""
    try:
        check_dir(directory, os.getuid() if owner is None else owner)
    except UnsafePath:
        return []
    out = []
    for path in sorted(directory.glob(pattern))[: MAX_WORLD_SIZE + MAX_FILES]:
        try:
            out.append((path, json.loads(read_text(path, RECORD_BYTES, owner))))
        except (OSError, ValueError, UnsafePath):
            continue
    return out


def read_ranks(directory: Path, owner: int | None = None) -> list[RankRecord]:
    """Every valid rank record of a job (files of ``owner``, default this user), by rank."""
    records = []
    for _, data in _json_files(directory, "rank-*.json", owner):
        try:
            records.append(RankRecord.from_json(data))
        except ValueError:
            continue
    return sorted(records, key=lambda r: r.rank)


def list_jobs(env: Mapping[str, str]) -> list[str]:
    jobs = registry_root(env) / "jobs"
    try:
        check_dir(jobs, os.getuid())
    except UnsafePath:
        return []
    return sorted(p.name for p in jobs.iterdir() if p.is_dir() and not p.is_symlink())[:MAX_FILES]


def write_state(directory: Path, rank: int, state: Mapping[str, Any]) -> None:
    """The restart wrapper's published state of one rank (iteration, fault, heartbeat)."""
    write_atomic(
        private_dir(directory) / f"state-{rank}.json", json.dumps(dict(state), sort_keys=True)
    )


def read_states(directory: Path, owner: int | None = None) -> dict[int, dict[str, Any]]:
    """The wrapper states of a job by initial rank; files that are not objects are skipped
    (each reader checks the fields it uses)."""
    states = {}
    for path, data in _json_files(directory, "state-*.json", owner):
        number = path.stem.split("-", 1)[1]
        if isinstance(data, dict) and number.isdigit() and len(number) <= 7:
            states[int(number)] = data
    return states
