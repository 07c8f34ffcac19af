"""What every transport (srun, ssh) returns, and the command it runs on each host.

The remote command is this very installation: the interpreter that runs nccl-doctor
here (``sys.executable``), as on clusters whose software lives on a shared filesystem.
A host without it answers ``MISSING`` and exit 127, which becomes that host's reason.
"""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MISSING = "nccl-doctor-missing"
MAX_HOST_BYTES = 4 * 1024 * 1024
"""The most one host may send back; a host document is tens of KiB, bounded at 512 KiB."""


@dataclass(frozen=True)
class HostAnswer:
    """What one host sent back, or why nothing usable came."""

    host: str
    text: str | None
    """The host document (compact JSON); None when the host did not deliver one."""
    seconds: float | None
    """From the start of the round to the complete document; None if it never came."""
    reason: str = ""


def silent_reason(waited: float, timeout: float) -> str:
    """A silent host's reason: the transport's whole ``timeout``, or the ``waited`` seconds
    of a round that ended early (every other host answered or was proven unreachable)."""
    if waited >= timeout:
        return f"no answer within {timeout:g}s"
    return f"no answer when the round ended, after {waited:.1f}s"


def collect_argv(
    job: str,
    interval: float,
    budget: float,
    env: Mapping[str, str] | None = None,
    python: str | None = None,
) -> list[str]:
    """``sh -c`` that checks the interpreter exists there, then runs ``collect`` on the host.

    ``budget``: seconds the remote collection may take in all, so the host answers
    before the caller's deadline; ``--until`` is the same deadline as a wall-clock time,
    so a host whose interpreter was slow to start (a loaded node) shortens its sampling
    instead of answering late. ``env``: variables the host needs (the shared job
    directory of a launched job), passed on the command line because neither srun's
    nor ssh's environment forwarding can be relied on.
    """
    argv = ["collect", "--job", job, "--json", "--frames"]
    until = time.time() + budget  # hosts of a cluster share a clock (NTP) to the millisecond
    argv += ["--interval", f"{interval:g}", "--budget", f"{budget:.2f}", "--until", f"{until:.2f}"]
    return host_argv(argv, env, python)


def host_argv(
    args: Sequence[str], env: Mapping[str, str] | None = None, python: str | None = None
) -> list[str]:
    """``nccl-doctor ARGS`` on a host, behind the check that this interpreter exists there
    (``MISSING`` and exit 127 when it does not); ``env`` set on the command line."""
    py = python or sys.executable
    assignments = [f"{k}={v}" for k, v in sorted((env or {}).items())]
    here = '"${SLURMD_NODENAME:-$(hostname)}"'
    check = f'test -x "$1" || {{ echo {MISSING} {here} "$1"; exit 127; }}; shift; exec env "$@"'
    return ["/bin/sh", "-c", check, "sh", py, *assignments, py, "-m", "doctor", *args]


def remote_shell(argv: Sequence[str]) -> str:
    """``argv`` as one command line for a remote login shell (ssh runs a string)."""
    return shlex.join(argv)
