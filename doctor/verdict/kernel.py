"""What the kernel's view of a rank's main thread means: a wait that explains a hang.

Pure over ``RankProcess.status``, ``wchan`` and ``syscall`` (read by
``doctor.triage.sources.kernel``). A rank blocked opening a FIFO, reading a pipe
nobody writes, waiting on a network filesystem or in uninterruptible sleep will
not reach its next collective whatever its Python function is called.
"""

from __future__ import annotations

from doctor.evidence import RankProcess

BLOCKING_WCHANS = {
    "fifo_open": "opening a FIFO that no process has opened for writing",
    "wait_for_partner": "opening a FIFO that no process has opened for writing",
    "pipe_read": "reading a pipe or FIFO that nobody writes",
    "pipe_wait": "reading a pipe or FIFO that nobody writes",
    "pipe_wait_readable": "reading a pipe or FIFO that nobody writes",
    "rpc_wait_bit_killable": "waiting for a network filesystem (NFS RPC)",
    "nfs_wait_bit_killable": "waiting for a network filesystem",
    "request_wait_answer": "waiting for a FUSE filesystem to answer",
    "fuse_wait_answer": "waiting for a FUSE filesystem to answer",
}
"""Kernel wait functions that only another party (a writer, a server) can end."""
DISK_SLEEP = "disk-sleep"


def blocked_on(process: RankProcess) -> str:
    """What holds the rank's main thread in the kernel, for a person; '' when nothing does
    (running, or a futex/poll wait that any healthy rank also makes)."""
    meaning = BLOCKING_WCHANS.get(process.wchan)
    network = "network filesystem" in process.syscall
    if not meaning and "a FIFO" in process.syscall:
        meaning = "waiting on a FIFO that nobody opened or writes"
    if not (meaning or network or process.status == DISK_SLEEP):
        return ""
    what = f"blocked in {process.syscall}" if process.syscall else "blocked in the kernel"
    why = meaning or (
        "in uninterruptible sleep (state D)" if process.status == DISK_SLEEP else "on I/O"
    )
    wchan = f", kernel wchan {process.wchan}" if process.wchan else ""
    return f"{what}: {why}{wchan}"


def kernel_line(process: RankProcess) -> str:
    """The raw kernel view, for the evidence list: ``wchan X, syscall Y``; '' if unread."""
    parts = [f"wchan {process.wchan}" if process.wchan else "", process.syscall]
    return ", ".join(p for p in parts if p)
