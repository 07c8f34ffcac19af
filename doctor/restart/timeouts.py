"""The runtime twin of preflight's timeout checks, on the process group the function created.

Preflight reads the config; here we read the timeout of the group that
``init_process_group`` really built, once per iteration, through the same
resolver and rule (``doctor.jobconfig.timeouts``), so the ids and severities match: a collective
timeout not longer than ``hard_timeout`` is a fail (the backend gives up, or its
watchdog kills the rank, before the wrapper can restart it). For a backend the
wrapper cannot interrupt, a blocked collective ends only at its own timeout, so
that timeout must be shorter than ``soft_timeout`` for an in-process restart.
"""

from __future__ import annotations

from collections.abc import Mapping

from doctor.jobconfig.config import Config, RestartConfig
from doctor.jobconfig.durations import format_duration
from doctor.jobconfig.timeouts import resolve_timeouts, watchdog_vs_hard
from doctor.model import Finding, Severity
from doctor.restart.abort import INTERRUPTIBLE_BACKENDS
from doctor.restart.options import RestartOptions


def judge(
    backend: str, timeout: float, options: RestartOptions, env: Mapping[str, str]
) -> list[Finding]:
    """Findings (not passes) for a ``backend`` group whose collective timeout is ``timeout``."""
    restart = RestartConfig(
        enabled=True,
        soft_timeout=options.soft_timeout,
        hard_timeout=options.hard_timeout,
        termination_grace_time=options.termination_grace_time,
        barrier_timeout=options.barrier_timeout,
    )
    chain = resolve_timeouts(Config(restart=restart), env, backend, pg_timeout=timeout)
    found = [f for f in (watchdog_vs_hard(chain),) if f.severity != Severity.PASS]
    if backend not in INTERRUPTIBLE_BACKENDS and timeout >= options.soft_timeout:
        found.append(
            Finding(
                "timeout.backend-uninterruptible",
                Severity.WARN,
                backend,
                f"backend {backend} cannot be interrupted: a blocked collective ends only at its "
                f"timeout {format_duration(timeout)}, not shorter than soft_timeout "
                f"{format_duration(options.soft_timeout)}; the rank will be killed at the hard "
                "timeout instead of restarting in-process.",
            )
        )
    return found


def probe_default_group() -> tuple[str, float] | None:
    """``(backend, seconds)`` of the default process group, or None when there is none."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None
    group = dist.group.WORLD
    if group is None:
        return None
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
