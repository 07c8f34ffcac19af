"""Who the job's ranks are now: from the launch registry (cheap, every half second) or from
triage's discovery (a walk of the process table, at the sampling rate, for jobs that
``launch`` did not start).

Every member carries the time its process must have started before (the registration for
launched ranks, the first sighting otherwise): a pid that was recycled since started later,
and is neither counted alive nor ever signalled.
"""

from __future__ import annotations

import os
import signal
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from doctor.errors import NoSuchJobError
from doctor.registry import RankRecord, read_ranks
from doctor.triage.target import RankTarget

REGISTRY_EVERY = 0.5


@dataclass(frozen=True)
class Member:
    """One live rank of the job as the watcher knows it."""

    target: RankTarget
    started_before: float
    """Wall-clock time the process started before (pid reuse check)."""

    @property
    def rank(self) -> int:
        return self.target.rank

    @property
    def wrapped(self) -> bool:
        return bool(self.target.record and self.target.record.wrapped)


def alive(pid: int, started_before: float) -> bool:
    """Whether ``pid`` runs, is not a zombie, and is the process that was registered."""
    import psutil

    try:
        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE and proc.create_time() <= started_before
    except psutil.Error:
        return False


class Roster(ABC):
    """The live ranks of one job."""

    refresh: float
    """Seconds between two looks."""

    @abstractmethod
    def members(self) -> list[Member]:
        """Every rank alive now, by rank."""

    def known(self) -> bool:
        """Whether the job has shown any rank yet (a job that never started is not over)."""
        return True


class RegistryRoster(Roster):
    """Ranks registered by ``nccl-doctor launch`` in the job directory."""

    refresh = REGISTRY_EVERY

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._seen = False

    def members(self) -> list[Member]:
        records = read_ranks(self.directory)
        self._seen = self._seen or bool(records)
        return [
            Member(_target(r, self.directory), r.started_at + 1.0)
            for r in records
            if alive(r.pid, r.started_at + 1.0)
        ]

    def known(self) -> bool:
        return self._seen


class DiscoveryRoster(Roster):
    """Ranks found by triage's discovery (``TORCHELASTIC_RUN_ID``, ``SLURM_JOB_ID``, registry)."""

    def __init__(self, job: str, env: Mapping[str, str], refresh: float) -> None:
        self.job, self.env, self.refresh = job, env, refresh
        self._first_seen: dict[int, float] = {}

    def members(self) -> list[Member]:
        from doctor.triage.discover import discover_job

        try:
            target = discover_job(self.job, self.env)
        except NoSuchJobError:
            return []
        found = []
        for rank in target.ranks:
            record = rank.record
            if record is not None and record.pid == rank.pid:
                before = record.started_at + 1.0
            else:
                before = self._first_seen.setdefault(rank.pid, time.time())
            if alive(rank.pid, before):
                found.append(Member(rank, before))
        return found


def _target(record: RankRecord, directory: Path) -> RankTarget:
    return RankTarget(
        record.rank,
        record.pid,
        record.host,
        record.local_rank,
        record.world_size,
        {},
        record,
        directory,
    )


def end_ranks(members: Sequence[Member], grace: float) -> list[int]:
    """Wait ``grace`` seconds for ``members`` to exit, then SIGTERM, then SIGKILL the ones
    left, each only while it is still the process it was; returns the ranks signalled."""
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(
        alive(m.target.pid, m.started_before) for m in members
    ):
        time.sleep(0.1)
    signalled = []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        left = [m for m in members if alive(m.target.pid, m.started_before)]
        for member in left:
            signalled.append(member.rank)
            try:
                os.kill(member.target.pid, sig)
            except OSError:
                continue
        end = time.monotonic() + 2.0
        while (
            left
            and time.monotonic() < end
            and any(alive(m.target.pid, m.started_before) for m in left)
        ):
            time.sleep(0.05)
    return sorted(set(signalled))
