"""The jobs that run on this host, as the process table shows them: for a missing or absent --job.

A rank is a process with ``RANK`` and a job id in its environment
(``TORCHELASTIC_RUN_ID``, ``SLURM_JOB_ID``, ``NCCL_DOCTOR_JOB``). ``torchrun
--standalone`` replaces any ``--rdzv-id`` with a random run id, so a user who
passed ``--rdzv-id train-7`` finds the ranks under another id: the id they
gave is still on torchrun's command line, which ``standalone_alias`` reads.
``triage`` without ``--job`` picks the only job here, and an unknown id is
answered with the jobs that exist (id, launcher, ranks, age).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from doctor.errors import NoSuchJobError, UsageError
from doctor.triage.discover import (
    JOB_KEYS,
    PROC,
    ProcInfo,
    discover_job,
    pick_rank_processes,
    read_proc,
)
from doctor.triage.ended import ended_torchrun_job
from doctor.triage.target import Target

_RDZV_ID = re.compile(r"--rdzv[-_]id(?:=|\s+)(\S+)")
_TICKS = 100.0
"""Clock ticks per second of ``/proc/PID/stat`` start times (USER_HZ, 100 on Linux)."""


@dataclass(frozen=True)
class HostJob:
    """One job with ranks on this host."""

    job: str
    key: str
    """The variable that names it: ``TORCHELASTIC_RUN_ID``, ``SLURM_JOB_ID``..."""
    launcher: str
    """The command that started the ranks (``torchrun``, ``srun``, ``python``...)."""
    ranks: int
    age_s: float
    alias: str = ""
    """The ``--rdzv-id`` the user gave torchrun, when ``--standalone`` replaced it."""

    def describe(self) -> str:
        alias = f" (--rdzv-id {self.alias} under --standalone)" if self.alias else ""
        return (
            f"{self.job}{alias}: {self.launcher}, {self.ranks} "
            f"rank{'s' if self.ranks != 1 else ''}, up {_age(self.age_s)}"
        )


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    return f"{seconds / 60:.0f}m" if seconds < 7200 else f"{seconds / 3600:.1f}h"


def _cmdline(pid: int, proc: Path) -> str:
    try:
        return (proc / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except (OSError, UnicodeDecodeError):
        return ""


def _launcher_name(cmdline: str) -> str:
    words = cmdline.split()
    if not words:
        return "unknown"
    if "torch.distributed.run" in words or any(w.endswith("torchrun") for w in words[:2]):
        return "torchrun --standalone" if "--standalone" in words else "torchrun"
    if "torch.distributed.launch" in words:
        return "torch.distributed.launch"
    return Path(words[0]).name


def _uptime(proc: Path) -> float:
    try:
        return float((proc / "uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0


def _started_ago(pid: int, proc: Path, uptime: float) -> float:
    try:
        stat = (proc / str(pid) / "stat").read_text()
        ticks = int(stat[stat.rfind(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return 0.0
    return max(0.0, uptime - ticks / _TICKS)


def rank_processes(proc: Path = PROC) -> list[ProcInfo]:
    """Every live process with ``RANK`` and a job id in its environment."""
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "environ").read_bytes()
        except OSError:
            continue
        if b"RANK=" not in raw:
            continue
        info = read_proc(int(entry.name), proc)
        if info and info.state != "Z" and "RANK" in info.env and _job_of(info):
            found.append(info)
    return found


def _job_of(info: ProcInfo) -> tuple[str, str] | None:
    return next(((k, info.env[k]) for k in JOB_KEYS if info.env.get(k)), None)


def host_jobs(proc: Path = PROC, processes: Sequence[ProcInfo] | None = None) -> list[HostJob]:
    """The jobs with ranks on this host, oldest first."""
    procs = list(processes) if processes is not None else rank_processes(proc)
    grouped: dict[tuple[str, str], list[ProcInfo]] = {}
    for info in procs:
        found = _job_of(info)
        if found is not None:
            grouped.setdefault(found, []).append(info)
    uptime = _uptime(proc)
    jobs = []
    for (key, job), members in grouped.items():
        ranks = pick_rank_processes(members)
        parents = {p.ppid for p in ranks.values()}
        parent = min(parents) if parents else 0
        command = _cmdline(parent, proc) if parent > 1 else ""
        launcher = _launcher_name(command) if command else "unknown"
        if launcher == "python" or launcher.startswith("python"):
            launcher = "one process per rank"
        alias = ""
        if "--standalone" in command.split() and (match := _RDZV_ID.search(command)):
            alias = match.group(1) if match.group(1) != job else ""
        age = max((_started_ago(p.pid, proc, uptime) for p in ranks.values()), default=0.0)
        jobs.append(HostJob(job, key, launcher, len(ranks), age, alias))
    return sorted(jobs, key=lambda j: (-j.age_s, j.job))


def standalone_alias(job: str, jobs: Sequence[HostJob]) -> HostJob | None:
    """The job whose torchrun was given ``--rdzv-id job`` but ran ``--standalone``."""
    return next((j for j in jobs if j.alias == job), None)


def jobs_text(jobs: Sequence[HostJob]) -> str:
    return "; ".join(j.describe() for j in jobs)


def _ended(job: str, env: Mapping[str, str]) -> Target | None:
    """An ended torchrun job's folder, unless SLURM knows the id: a SLURM job that still
    holds nodes is asked on its nodes, and an ended one counts only with its owner's
    folder (a folder in ``/tmp`` is anyone's to plant, a SLURM job id anyone's to name)."""
    from doctor.remote.slurm import job_nodes

    slurm = job_nodes(job, env)
    if slurm is None:
        return ended_torchrun_job(job)
    if slurm.nodes or slurm.user is None:
        return None
    return ended_torchrun_job(job, owner=slurm.user)


def find_job(job: str | None, env: Mapping[str, str], proc: Path = PROC) -> Target:
    """``--job`` resolved: the named job, the job torchrun ``--standalone`` renamed, an
    ended torchrun job's last attempt (``doctor.triage.ended``), or (no ``--job``) the
    only job here; else an error that names the jobs that exist."""
    if job is None:
        jobs = host_jobs(proc)
        if len(jobs) == 1:
            return discover_job(jobs[0].job, env, proc)
        if not jobs:
            raise NoSuchJobError(
                "no job runs on this host (no process has RANK and TORCHELASTIC_RUN_ID, "
                "SLURM_JOB_ID or NCCL_DOCTOR_JOB); name one with --job ID or --pids P,P"
            )
        raise UsageError(
            f"{len(jobs)} jobs run on this host, name one with --job: {jobs_text(jobs)}"
        )
    try:
        return discover_job(job, env, proc)
    except NoSuchJobError as exc:
        jobs = host_jobs(proc)
        renamed = standalone_alias(job, jobs)
        if renamed is not None:
            return discover_job(renamed.job, env, proc)
        ended = _ended(job, env)
        if ended is not None:
            return ended
        if not jobs:
            raise
        raise NoSuchJobError(f"{exc}; jobs on this host: {jobs_text(jobs)}") from None
