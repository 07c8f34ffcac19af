"""Liveness and resource use of every rank (psutil), measured over the second half of the window.

Two readings, at the window's middle and its end: a job that hung just as
triage started still did work in the first half, so only the second half
counts. CPU time and read/write system calls over that span tell a rank
that works (a gloo rank in a running job makes socket calls every step)
from one that waits (a rank blocked in a collective makes none).
At the second reading, the kernel's view of each main thread (``wchan``,
``syscall``: ``doctor.triage.sources.kernel``) says what a rank is blocked on
whatever its Python function is called. Lost ranks from discovery are
reported here too, so every expected rank has one ``RankProcess``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

import psutil

from doctor.evidence import RankProcess
from doctor.model import Skipped
from doctor.triage.sources.interface import Collected, Source
from doctor.triage.sources.kernel import read_wait, stopped
from doctor.triage.target import RankTarget, Target


@dataclass(frozen=True)
class _Reading:
    status: str
    cpu: float
    io_calls: int | None
    threads: int
    rss: int
    thread_calls: dict[int, int]
    """Read/write calls so far per thread id (``/proc/PID/task/TID/io``)."""


def _thread_calls(pid: int) -> dict[int, int]:
    """Read/write system calls so far of each thread of ``pid``; {} where unreadable."""
    calls = {}
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return {}
    for task in tasks:
        try:
            fields = dict(line.split(": ", 1) for line in (task / "io").read_text().splitlines())
            calls[int(task.name)] = int(fields["syscr"]) + int(fields["syscw"])
        except (OSError, ValueError, KeyError):
            continue
    return calls


def _read(pid: int) -> _Reading | str:
    """One reading, or why there is none (``dead``, ``zombie``, ``access denied``)."""
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            status = proc.status()
            if status == psutil.STATUS_ZOMBIE:
                return "zombie"
            times = proc.cpu_times()
            try:
                io = proc.io_counters()
                calls: int | None = io.read_count + io.write_count
            except (psutil.AccessDenied, AttributeError):
                calls = None
            return _Reading(
                status,
                times.user + times.system,
                calls,
                proc.num_threads(),
                proc.memory_info().rss,
                _thread_calls(pid),
            )
    except psutil.ZombieProcess:
        return "zombie"
    except psutil.NoSuchProcess:
        return "dead"
    except psutil.AccessDenied:
        return "access denied"


class ProcSource(Source):
    name = "process"

    def __init__(self, window: float = 1.0) -> None:
        self.window = window

    def collect(self, target: Target, deadline: float) -> Collected:
        start = time.monotonic()
        end = min(start + self.window, deadline - 0.05)
        time.sleep(max(0.0, (start + end) / 2 - time.monotonic()))
        first = {r.rank: _read(r.pid) for r in target.ranks}
        time.sleep(max(0.0, end - time.monotonic()))
        second = {r.rank: _read(r.pid) for r in target.ranks}
        processes, skipped = [], []
        for rank in target.ranks:
            process, problem = self._judge(target, rank, first[rank.rank], second[rank.rank])
            processes.append(process)
            if problem:
                skipped.append(Skipped(rank.rank, self.name, problem))
        for lost in target.lost:
            processes.append(
                RankProcess(
                    lost.rank,
                    lost.pid,
                    target.host,
                    alive=False,
                    status=lost.status,
                    exit_code=lost.exit_code,
                    error=lost.error,
                )
            )
        return Collected(
            processes=tuple(sorted(processes, key=lambda p: p.rank)), skipped=tuple(skipped)
        )

    def _judge(
        self, target: Target, rank: RankTarget, a: _Reading | str, b: _Reading | str
    ) -> tuple[RankProcess, str]:
        base = RankProcess(
            rank.rank,
            rank.pid,
            target.host,
            alive=True,
            local_rank=rank.local_rank,
            world_size=rank.world_size,
        )
        if isinstance(b, str):
            if b == "access denied":
                return replace(base, status="unknown"), "psutil: access denied"
            return (
                replace(base, alive=False, status=b),
                f"the process exited during collection ({b})",
            )
        cpu = calls = None
        by_thread: tuple[tuple[int, int], ...] = ()
        if isinstance(a, _Reading):
            cpu = round(b.cpu - a.cpu, 3)
            if a.io_calls is not None and b.io_calls is not None:
                calls = b.io_calls - a.io_calls
            by_thread = tuple(
                (tid, n - a.thread_calls[tid])
                for tid, n in sorted(b.thread_calls.items())
                if tid in a.thread_calls and n > a.thread_calls[tid]
            )
        wait = read_wait(rank.pid)
        status = b.status
        if status == psutil.STATUS_TRACING_STOP and not stopped(rank.pid):
            # py-spy pausing it for a sample (ours, or a person's): not a stopped rank
            earlier = a.status if isinstance(a, _Reading) else ""
            traced = (psutil.STATUS_TRACING_STOP, "")
            status = psutil.STATUS_SLEEPING if earlier in traced else earlier
        return replace(
            base,
            status=status,
            wchan=wait.wchan,
            syscall=wait.syscall,
            cpu_seconds_delta=cpu,
            num_threads=b.threads,
            rss_bytes=b.rss,
            io_calls_delta=calls,
            io_calls_by_thread=by_thread,
        ), ""
