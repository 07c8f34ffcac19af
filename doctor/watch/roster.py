"""Who the job's ranks are now: from the launch registry (cheap, every half second) or from
triage's discovery (a walk of the process table, at the sampling rate, for jobs that
``launch`` did not start).

Every member is a ``ProcessId`` (pid and start time: the registry's for launched ranks,
the first sighting's otherwise): a pid recycled since is neither counted alive nor ever
signalled (``doctor.trust.process_identity.send_signal`` checks through a pidfd).
"""

from __future__ import annotations

import signal
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from doctor.errors import NoSuchJobError
from doctor.jobdir.registry import RankRecord, read_ranks
from doctor.triage.target import RankTarget
from doctor.trust.process_identity import ProcessId, is_alive, owner_uid, send_signal, start_time

REGISTRY_EVERY = 0.5


@dataclass(frozen=True)
class Member:
    """One live rank of the job as the watcher knows it."""

    target: RankTarget
    process: ProcessId

    @property
    def rank(self) -> int:
        return self.target.rank

    @property
    def wrapped(self) -> bool:
        return bool(self.target.record and self.target.record.wrapped)


def alive(process: ProcessId) -> bool:
    """Whether the process still runs (same start time) and has not exited (a zombie)."""
    if not is_alive(process):
        return False
    try:
        stat = Path(f"/proc/{process.pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :][:1] not in ("Z", "X")


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
        return [Member(_target(r, self.directory), r.process) for r in records if alive(r.process)]

    def known(self) -> bool:
        return self._seen


class DiscoveryRoster(Roster):
    """Ranks found by triage's discovery (``TORCHELASTIC_RUN_ID``, ``SLURM_JOB_ID``, registry)."""

    def __init__(self, job: str, env: Mapping[str, str], refresh: float) -> None:
        self.job, self.env, self.refresh = job, env, refresh
        self._first_seen: dict[int, ProcessId] = {}
        self.owner: int | None = None
        """Whose ranks the watcher started with: a process of another user that claims
        the job id later (ids are public) is a stranger, named once and never watched."""
        self._named: set[str] = set()

    def members(self) -> list[Member]:
        from doctor.triage.discover import discover_job

        try:
            target = discover_job(self.job, self.env, owner=self.owner)
        except NoSuchJobError:
            return []
        if self.owner is None and target.ranks:
            self.owner = owner_uid(target.ranks[0].pid)
        for skip in target.refused:
            if skip.reason not in self._named:
                self._named.add(skip.reason)
                print(f"nccl-doctor watch: {skip.reason}", file=sys.stderr, flush=True)
        found = []
        for rank in target.ranks:
            record = rank.record
            if record is not None and record.pid == rank.pid:
                process = record.process
            else:
                process = self._first_seen.setdefault(
                    rank.pid, ProcessId(rank.pid, start_time(rank.pid) or 0)
                )
            if alive(process):
                found.append(Member(rank, process))
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
    while time.monotonic() < deadline and any(alive(m.process) for m in members):
        time.sleep(0.1)
    signalled = []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        left = [m for m in members if alive(m.process)]
        signalled += [m.rank for m in left if send_signal(m.process, sig)]
        end = time.monotonic() + 2.0
        while left and time.monotonic() < end and any(alive(m.process) for m in left):
            time.sleep(0.05)
    return sorted(set(signalled))
