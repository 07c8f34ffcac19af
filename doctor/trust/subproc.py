"""Every child process nccl-doctor starts goes through here: always a timeout, never a hang."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Completed:
    """What a bounded child run produced."""

    argv: tuple[str, ...]
    returncode: int | None
    """None when it was killed at the deadline or could not start."""
    stdout: str
    stderr: str
    timed_out: bool = False
    error: str = ""
    """Why it could not start (missing binary, permission)."""

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def run(
    argv: Sequence[str],
    timeout: float,
    env: Mapping[str, str] | None = None,
    input_text: str | None = None,
) -> Completed:
    """Run ``argv`` to completion or kill it after ``timeout`` seconds; never raises."""
    try:
        proc = subprocess.Popen(
            list(argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
            env=dict(env) if env is not None else None,
            text=True,
            start_new_session=True,
        )
    except OSError as exc:
        return Completed(tuple(argv), None, "", "", error=str(exc))
    try:
        out, err = proc.communicate(input_text, timeout=timeout)
        return Completed(tuple(argv), proc.returncode, out, err)
    except subprocess.TimeoutExpired:
        try:  # the whole session: a grandchild holding our pipes would block communicate()
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        try:
            out, err = proc.communicate(timeout=1.0)
        except subprocess.TimeoutExpired:
            out, err = "", ""
        return Completed(tuple(argv), None, out or "", err or "", timed_out=True)


def stop_all(procs: Sequence[subprocess.Popen[Any]], grace: float = 5.0) -> None:
    """Terminate every child, kill what outlives ``grace``, and always reap them. A child
    that leads its own session (``start_new_session=True``) is stopped with everything it
    started: its workers would otherwise outlive it, orphaned."""
    leaders = {proc.pid for proc in procs if proc.poll() is None and _leads_group(proc.pid)}
    for proc in procs:
        if proc.poll() is None:
            signal_child(proc, signal.SIGTERM, proc.pid in leaders)
    for proc in procs:
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=grace)
    for pid in leaders:  # the group outlives its reaped leader while a member lives
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass


def _leads_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except OSError:
        return False


def signal_child(proc: subprocess.Popen[Any], sig: int, group: bool) -> None:
    """Signal a child (``group``: the process group it leads); one already gone is no error."""
    try:
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
    except OSError:
        pass


def free_port() -> int:
    """A loopback port free now, for the ranks we start to rendezvous on.

    Chosen at random *below* the kernel's ephemeral range: a port from ``bind(0)`` is an
    ephemeral one, which any outgoing connection on the host (another user's job, a test
    run beside ours) may take before our server binds it."""
    low, _ = _ephemeral_range()
    for _ in range(64):
        port = random.randrange(max(low - 12000, 1024), low)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999
