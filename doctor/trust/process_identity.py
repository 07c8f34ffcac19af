"""A process named by pid *and* start time, so a signal never reaches a reused pid.

A pid read from a file (a pid file, a rank record) may name a process that has
exited; the kernel then hands the number to the next process started, which may
belong to anyone. ``send_signal`` opens a pidfd first (it pins that one process),
then checks its start time and owner against what was recorded, and signals
through the pidfd: the check and the signal reach the same process.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
MAX_PID = 1 << 22
"""The kernel's largest ``pid_max`` (PID_MAX_LIMIT on 64-bit)."""


@dataclass(frozen=True)
class ProcessId:
    """A process as it was when recorded: pid plus start time (clock ticks after boot)."""

    pid: int
    start: int

    def to_text(self) -> str:
        return f"{self.pid} {self.start}"

    @classmethod
    def from_text(cls, text: str) -> ProcessId | None:
        """``"PID START"``; None for anything else (an old or planted file)."""
        parts = text.split()
        if len(parts) != 2 or not all(p.isdigit() and len(p) <= 20 for p in parts):
            return None
        pid, start = int(parts[0]), int(parts[1])
        return cls(pid, start) if 0 < pid <= MAX_PID else None


def start_time(pid: int, proc: Path = PROC) -> int | None:
    """Field 22 of ``/proc/PID/stat``; None when the process is gone."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
        return int(stat[stat.rfind(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def started_at(pid: int, proc: Path = PROC) -> float | None:
    """When the process started, in wall-clock seconds, to the clock tick; None when gone.

    Not ``psutil``'s ``create_time``: that adds the boot time from ``/proc/stat``, whole
    seconds truncated, so it can read up to a second early, and a file written by the
    attempt before a restart then looks written since this process started. The start
    field counts ticks on the boot clock, so ``now - (boot clock now - start)`` is exact.
    """
    ticks = start_time(pid, proc)
    if ticks is None:
        return None
    since_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
    return time.time() - (since_boot - ticks / os.sysconf("SC_CLK_TCK"))


def owner_uid(pid: int, proc: Path = PROC) -> int | None:
    """The (effective) uid owning ``/proc/PID``; None when the process is gone."""
    try:
        return (proc / str(pid)).stat().st_uid
    except OSError:
        return None


def may_inspect(owner: int | None) -> bool:
    """Whether this user may look at a process of ``owner``: its own, or any as root.

    The trust rule of nccl-doctor: the invoking user, and for root the job's owner."""
    return owner is not None and (os.geteuid() == 0 or owner == os.geteuid())


def this_process() -> ProcessId:
    start = start_time(os.getpid())
    return ProcessId(os.getpid(), start if start is not None else 0)


def is_alive(ident: ProcessId, owner: int | None = None) -> bool:
    """Whether the recorded process still runs (same start time, and ``owner`` if given)."""
    if start_time(ident.pid) != ident.start:
        return False
    return owner is None or owner_uid(ident.pid) == owner


def send_signal(ident: ProcessId, sig: int, owner: int | None = None) -> bool:
    """Signal the recorded process if it is still that process (and ``owner``'s); False
    when it is gone, was replaced by another process, or belongs to someone else."""
    try:
        fd = os.pidfd_open(ident.pid)
    except OSError:
        return False
    try:
        if not is_alive(ident, owner):
            return False
        signal.pidfd_send_signal(fd, sig)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
