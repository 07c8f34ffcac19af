"""``Wrapper``: re-run a distributed function in-process after a fault (the decorator).

Contract (NVIDIA nvidia-resiliency-ext ``inprocess.Wrapper``): the wrapped
function is re-run in the same process on every healthy rank after a fault;
``soft_timeout`` aborts the process group and raises ``RestartRequested`` into
the main thread; ``hard_timeout`` makes the monitor process terminate the rank;
``atomic()`` sections are never interrupted. The function receives the
``CallWrapper`` as a parameter named ``call_wrapper`` or annotated
``CallWrapper`` (also ``doctor.restart.current_call()``), and must build its
process group from it::

    dist.init_process_group("gloo", store=call.store, rank=call.rank,
                            world_size=call.world_size, timeout=...)
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from doctor.jobconfig.config import Config, load_config
from doctor.restart.assignment import RankAssignment
from doctor.restart.call import CallWrapper
from doctor.restart.hooks import Hook
from doctor.restart.options import RestartOptions

T = TypeVar("T")
Duration = float | timedelta | str | None


class Wrapper:
    """Decorator that adds in-process restart to a distributed function."""

    def __init__(
        self,
        *,
        soft_timeout: Duration = None,
        hard_timeout: Duration = None,
        heartbeat_timeout: Duration = None,
        barrier_timeout: Duration = None,
        completion_timeout: Duration = None,
        last_call_wait: Duration = None,
        termination_grace_time: Duration = None,
        max_iterations: int | None = None,
        monitor_thread_interval: Duration = None,
        monitor_process_interval: Duration = None,
        heartbeat_interval: Duration = None,
        progress_watchdog_interval: Duration = None,
        initialize: Hook | None = None,
        finalize: Hook | None = None,
        health_check: Hook | None = None,
        rank_assignment: RankAssignment | None = None,
        config: Config | None = None,
        store_host: str | None = None,
        store_port: int | None = None,
        directory: Path | None = None,
        flight_recorder: bool | None = None,
        timeout_policy: str = "warn",
        enabled: bool = True,
    ) -> None:
        if timeout_policy not in ("warn", "refuse"):
            raise ValueError("timeout_policy must be 'warn' or 'refuse'")
        self.timeout_policy = timeout_policy
        config = config or load_config(env=os.environ)
        self.options = RestartOptions.build(
            config.restart,
            soft_timeout=soft_timeout,
            hard_timeout=hard_timeout,
            heartbeat_timeout=heartbeat_timeout,
            barrier_timeout=barrier_timeout,
            completion_timeout=completion_timeout,
            last_call_wait=last_call_wait,
            termination_grace_time=termination_grace_time,
            max_iterations=max_iterations,
            monitor_thread_interval=monitor_thread_interval,
            monitor_process_interval=monitor_process_interval,
            heartbeat_interval=heartbeat_interval,
            progress_watchdog_interval=progress_watchdog_interval,
        )
        self.initialize, self.finalize, self.health_check = initialize, finalize, health_check
        self.rank_assignment = rank_assignment or RankAssignment(spares=config.restart.spares)
        self.store_host, self.store_port = store_host, store_port
        self.directory, self.flight_recorder, self.enabled = directory, flight_recorder, enabled

    def __call__(self, fn: Callable[..., T]) -> Callable[..., T | None]:
        if not self.enabled:
            return fn

        def wrapped(*args: Any, **kwargs: Any) -> T | None:
            with CallWrapper(self) as call:
                return call.run(fn, args, kwargs)

        wrapped.__wrapped__ = fn  # type: ignore[attr-defined]
        wrapped.__name__ = getattr(fn, "__name__", "wrapped")
        return wrapped
