"""The runtime twin of preflight's timeout checks, on the process group the function created.

Preflight reads the config; here we read the timeout of the group that
``init_process_group`` really built, once per iteration. Same check ids and
severities as preflight: a collective timeout not longer than ``hard_timeout``
is a fail (the backend gives up, or its watchdog kills the rank, before the
wrapper can restart it). For a backend the wrapper cannot interrupt, a blocked
collective ends only at its own timeout, so that timeout must be shorter than
``soft_timeout`` for the restart to happen in-process at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.config import format_duration
from doctor.model import Severity
from doctor.restart.abort import INTERRUPTIBLE_BACKENDS
from doctor.restart.options import RestartOptions


@dataclass(frozen=True)
class TimeoutFinding:
    check: str
    severity: Severity
    message: str


def judge(backend: str, timeout: float, options: RestartOptions) -> list[TimeoutFinding]:
    """Findings for a process group of ``backend`` whose collective timeout is ``timeout``."""
    found = []
    pg, hard = format_duration(timeout), format_duration(options.hard_timeout)
    if backend not in INTERRUPTIBLE_BACKENDS:
        if timeout >= options.soft_timeout:
            found.append(TimeoutFinding(
                "timeout.backend-uninterruptible", Severity.WARN,
                f"backend {backend} cannot be interrupted: a blocked collective ends only at its "
                f"timeout {pg}, not shorter than soft_timeout "
                f"{format_duration(options.soft_timeout)}; the rank will be killed at the hard "
                "timeout instead of restarting in-process."))
    elif timeout <= options.hard_timeout:
        found.append(TimeoutFinding(
            "timeout.watchdog-vs-hard", Severity.FAIL,
            f"the {backend} process group's collective timeout {pg} is not longer than the "
            f"wrapper's hard_timeout {hard}: the collective fails (NCCL's watchdog kills the "
            "rank) before the wrapper can restart it; pass a longer timeout to "
            "init_process_group."))
    return found


def probe_default_group() -> tuple[str, float] | None:
    """``(backend, seconds)`` of the default process group, or None when there is none."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None
    group = dist.group.WORLD
    backend = str(dist.get_backend(group))
    for device in ("cpu", "cuda"):
        try:
            options = group._get_backend(torch.device(device)).options
        except Exception:  # no backend for this device type
            continue
        timeout = getattr(options, "_timeout", None)
        if timeout is not None:
            return backend, timeout.total_seconds()
    return None
