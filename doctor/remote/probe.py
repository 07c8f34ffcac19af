"""Is a silent host cut off, or only slow? One TCP connect to the port its launcher uses.

A host that sent nothing by the deadline is either unreachable (no route, a
dead link, a dead node) or reachable but busy (its collect did not finish:
load, a process in D state). A connect to its sshd or slurmd port, with a short
timeout, tells the two apart within a second; the multi-host rule turns the
first into ``network`` and the second into ``unknown`` with the same culprits.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping, Sequence

from doctor.triage.fanout import Done, fanout
from doctor.trust.subproc import run

SSH_PORT = 22
SLURMD_PORT = 6818


def slurmd_port(env: Mapping[str, str], timeout: float = 3.0) -> int:
    """``SlurmdPort`` from ``scontrol show config`` (6818 where it cannot say in time)."""
    done = run(["scontrol", "show", "config"], timeout, env=env)
    for line in done.stdout.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "SlurmdPort" and value.strip().isdigit():
            return int(value.strip())
    return SLURMD_PORT


def _connect(host: str, port: int, timeout: float) -> str:
    """'' if ``host:port`` takes a connection, else why not."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return ""
    except TimeoutError:
        return f"cannot connect to {host}:{port} (timed out)"
    except socket.gaierror:
        return f"cannot resolve {host}"
    except OSError as exc:
        if exc.errno is not None and exc.strerror and "refused" in exc.strerror:
            return ""  # the host is up and answers; only that port is closed
        return f"cannot connect to {host}:{port} ({exc.strerror or exc})"


def unreachable(hosts: Sequence[str], port: int, timeout: float) -> dict[str, str]:
    """Per host: why it cannot be connected to ('' when it can), all within ``timeout``."""
    calls = {h: (lambda h=h: _connect(h, port, timeout)) for h in hosts}
    got = fanout(calls, time.monotonic() + timeout + 0.1)
    out = {}
    for h in hosts:
        outcome = got.get(h)
        out[h] = outcome.value if isinstance(outcome, Done) else f"cannot connect to {h}:{port}"
    return out
